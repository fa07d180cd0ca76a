import Foundation
import Redis
import RelayCore
import Support
import Transport

/// Every upstream's `KeyPool`, shared by all the loops of the process, and what is shared with other replicas
/// through Redis (`state.backend: redis`): a cooled-down or disabled key is a key with a TTL
/// (`<keyPrefix>keys:<upstream>:<label>`), read before a request that has a choice picks its key. Redis not
/// answering leaves this process's own knowledge: a request is never refused or cut for that.
///
/// Thread-safe: the pools and counters are under one lock each; Redis replies arrive on the asking loop.
package final class UpstreamPools: Sendable {
    private let pools: Locked<[String: KeyPool]>
    private let attempts = Locked<[[String]: UInt64]>([:])
    let redis: RedisAdmissionStore?
    private let redisPrefix: String
    package let logger: Logger
    private let clock: any Clock
    private let wallClock: @Sendable () -> Double

    package init(upstreams: [String: RelayConfiguration.Upstream], redis: RedisAdmissionStore?, logger: Logger,
                clock: any Clock, wallClock: @escaping @Sendable () -> Double) {
        var pools: [String: KeyPool] = [:]
        for (name, upstream) in upstreams {
            pools[name] = KeyPool(labels: upstream.pool.map(\.label), weights: upstream.pool.map(\.weight))
        }
        self.pools = Locked(pools)
        self.redis = redis
        redisPrefix = (redis?.settings.keyPrefix ?? "") + "keys:"
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
    }

    /// Runs `body` on the pools of `names` (in that order) under the lock: a plan's decision sees and leaves
    /// them consistent.
    package func withPools<T>(_ names: [String], _ body: (inout [KeyPool]) -> T) -> T {
        pools.withLock { all in
            var selected = names.map { all[$0] ?? KeyPool(labels: [], weights: []) }
            let result = body(&selected)
            for (name, pool) in zip(names, selected) where all[name] != nil { all[name] = pool }
            return result
        }
    }

    package func pool(_ name: String) -> KeyPool? { pools.withLock { $0[name] } }

    /// Counts one call's result (`sse_relay_upstream_attempts_total`).
    package func countAttempt(upstream: String, key: String, result: String) {
        attempts.withLock { $0[[upstream, key, result], default: 0] += 1 }
    }

    // MARK: Sharing through Redis

    /// Tells every replica that `label` of `upstream` may not be used for `seconds`. A longer unavailability
    /// already there is kept. Fire and forget.
    package func share(upstream: String, label: String, seconds: Double, disabled: Bool, on loop: any LoopScheduler) {
        guard let redis else { return }
        let ms = String(max(1, Int64(seconds * 1000)))
        redis.client(for: loop).send(["EVAL", Self.shareScript, "1", redisPrefix + upstream + ":" + label,
                                      disabled ? "disabled" : "cooling_down", ms]) { [logger] result in
            if case .failure(let error) = result { logger.debug("key cooldown not shared", [("error", .string("\(error)"))]) }
        }
    }

    /// Reads what other replicas saw of `names`' keys into the pools, then calls `done` on `loop` (at once
    /// without Redis; after Redis answered, or failed, with it).
    package func refresh(_ names: [String], on loop: any LoopScheduler, _ done: @escaping @Sendable () -> Void) {
        guard let redis else { return done() }
        let labels = names.map { name in (name, pools.withLock { $0[name]?.keys.map(\.label) ?? [] }) }
        let keys = labels.flatMap { name, labels in labels.map { redisPrefix + name + ":" + $0 } }
        guard !keys.isEmpty else { return done() }
        redis.client(for: loop).send(["EVAL", Self.readScript, String(keys.count)] + keys) { [self] result in
            defer { done() }
            guard case .success(let value) = result, let items = value.array, items.count == keys.count * 2 else {
                if case .failure(let error) = result { logger.debug("key cooldowns not read", [("error", .string("\(error)"))]) }
                return
            }
            let now = clock.now()
            pools.withLock { all in
                var i = 0
                for (name, labels) in labels {
                    for index in labels.indices {
                        defer { i += 2 }
                        guard let ms = items[i].integer, ms > 0 else { continue }
                        all[name]?.markUnavailable(index, until: now.advanced(bySeconds: Double(ms) / 1000),
                                                   disabled: items[i + 1].string == "disabled", now: now)
                    }
                }
            }
        }
    }

    /// Sets the key unless a longer unavailability is already recorded.
    static let shareScript = """
        local left = redis.call('PTTL', KEYS[1])
        if left < tonumber(ARGV[2]) then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
        return 1
        """

    /// Per key: milliseconds left (or a negative number) and the state.
    static let readScript = """
        local out = {}
        for i, key in ipairs(KEYS) do
          out[2 * i - 1] = redis.call('PTTL', key)
          out[2 * i] = redis.call('GET', key) or ''
        end
        return out
        """

    // MARK: What ops see

    /// `sse_relay_upstream_attempts_total` and `sse_relay_upstream_key_available`, in the Prometheus text format.
    package func renderMetrics() -> String {
        let now = clock.now()
        let counts = attempts.withLock { $0 }
        let all = pools.withLock { $0 }
        var out = "# HELP sse_relay_upstream_attempts_total Provider calls, by upstream, key label and result (a status, unreachable, error).\n"
        out += "# TYPE sse_relay_upstream_attempts_total counter\n"
        for key in counts.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            out += "sse_relay_upstream_attempts_total{upstream=\(Self.quote(key[0])),key=\(Self.quote(key[1])),result=\(Self.quote(key[2]))} \(counts[key]!)\n"
        }
        out += "# HELP sse_relay_upstream_key_available Whether a key may be used now (1) or is cooling down or disabled (0).\n"
        out += "# TYPE sse_relay_upstream_key_available gauge\n"
        for name in all.keys.sorted() {
            let pool = all[name]!
            for (i, key) in pool.keys.enumerated() {
                out += "sse_relay_upstream_key_available{upstream=\(Self.quote(name)),key=\(Self.quote(key.label))} \(pool.isAvailable(i, now: now) ? 1 : 0)\n"
            }
        }
        return out
    }

    /// `GET /upstreams`: each key's label, weight, state and, when unavailable, when it comes back (Unix seconds
    /// and seconds from now). Never a key.
    package func report() -> [UInt8] {
        let now = clock.now(), wall = wallClock()
        let all = pools.withLock { $0 }
        let upstreams: [[String: Any]] = all.keys.sorted().map { name in
            let pool = all[name]!
            let keys: [[String: Any]] = pool.keys.enumerated().map { i, key in
                var entry: [String: Any] = ["label": key.label, "weight": key.weight, "state": pool.state(of: i, now: now).rawValue]
                if let until = key.until, until > now {
                    let left = until.seconds(since: now)
                    entry["cooldownEndsInSeconds"] = (left * 1000).rounded() / 1000
                    entry["cooldownEndsAt"] = Int64((wall + left).rounded(.up))
                }
                return entry
            }
            return ["name": name, "keys": keys]
        }
        let data = (try? JSONSerialization.data(withJSONObject: ["upstreams": upstreams], options: [.sortedKeys])) ?? Data("{}".utf8)
        return Array(data) + [0x0A]
    }

    static func quote(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
