import Support

/// The attempts of one request over its route's upstreams and their keys, as a value: outcomes in, the next
/// step out. The exchange only carries the steps out (`RelayExchange+Failover`).
///
/// What may be tried again (README, "Key pools and failover"): only a COMPLETE provider answer that no byte of
/// reached the client (the exchange holds a non-2xx answer back until its end), or a call that never reached
/// the provider (DNS, connect or TLS failure: nothing was sent). A 429 cools its key down for its `Retry-After`
/// and the next key is tried; a 401 has the next key tried, and disables its key for `keyDisabledSeconds` once
/// another key got past authentication for the same request (`headReceived`); a 503 or 529 (overloaded:
/// the request was not taken on), or an unreachable provider, moves to the next upstream, as does a pool whose
/// keys all cooled down. A 500, 502 or 504 moves on only for a replayable request (`UpstreamRequest.isReplayable`):
/// a gateway's complete 5xx does not say the backend did nothing, and a POST sent again may be paid twice.
/// Everything else (a 2xx, a 403, any other status, a reset or timeout after the request was written) is never
/// offered to the plan: it goes to the client as it is.
///
/// Why a 401 is not enough to disable a key, and a 403 never is: the client chooses the request, and whatever it
/// can make the provider answer must not take keys down for everyone (for `keyDisabledSeconds`, on every replica).
/// A 403 is the provider refusing this request (OpenAI's "Project does not have access to model …", Gemini's
/// PERMISSION_DENIED on another project's file), whatever the key: every key would get it. A 401 usually means a
/// revoked key, but a request can provoke it too (an endpoint outside a restricted key's scopes); only when
/// another key then gets past authentication (any answer below 500 but a 401) is the request shown to be fine
/// and the refused keys bad. A request every key refuses disables none.
package struct FailoverPlan: Sendable {
    package struct Settings: Sendable, Equatable {
        /// The route's upstreams, in order.
        package var upstreams: [String]
        /// Per upstream, how long a key the provider rejected stays disabled.
        package var keyDisabledSeconds: [Double]
        /// Calls per request, the first included.
        package var maxAttempts: Int
        /// No new call starts at or after this instant (the first-byte limit covers every attempt).
        package var deadline: Instant
        /// The request may be sent again after the provider may have processed it (`UpstreamRequest.isReplayable`).
        package var replayable: Bool

        package init(upstreams: [String], keyDisabledSeconds: [Double], maxAttempts: Int, deadline: Instant, replayable: Bool) {
            self.upstreams = upstreams
            self.keyDisabledSeconds = keyDisabledSeconds
            self.maxAttempts = maxAttempts
            self.deadline = deadline
            self.replayable = replayable
        }
    }

    /// How an attempt ended, as far as the plan is told.
    package enum Outcome: Sendable, Equatable {
        /// A complete answer with this status, none of it sent to the client.
        case answered(status: Int, retryAfterSeconds: Double?)
        /// The provider could not be reached: nothing was sent.
        case unreachable
    }

    package enum Step: Sendable, Equatable {
        /// Call upstream `upstream` (index into `Settings.upstreams`) with key `key` (nil: the upstream has no key).
        case call(upstream: Int, key: Int?)
        /// No more attempts: the last outcome goes to the client.
        case give
        /// No key of any upstream may be used now; the soonest comes back in `retryAfterSeconds`.
        case noKeyAvailable(retryAfterSeconds: Double?, anyCoolingDown: Bool)
    }

    /// A key a 401 refused, disabled once another key was accepted for the same request. `isNews`: it was in use
    /// until then (logged once, at error level); shared with the other replicas either way.
    package struct Rejection: Sendable, Equatable {
        package var upstream: Int
        package var key: Int
        package var isNews: Bool
        package init(upstream: Int, key: Int, isNews: Bool = true) {
            self.upstream = upstream
            self.key = key
            self.isNews = isNews
        }
    }

    package static let defaultCooldownSeconds = 5.0
    package static let maxCooldownSeconds = 300.0
    /// The provider is overloaded and did not take the request on (503, Anthropic's 529): any request moves on.
    package static let overloadedStatuses: Set<Int> = [503, 529]
    /// The request may have been processed behind the gateway that answered: only a replayable one moves on.
    package static let serverErrorStatuses: Set<Int> = [500, 502, 504]

    package let settings: Settings
    package private(set) var attempts = 0
    /// The call under way (or the last one made).
    package private(set) var current: (upstream: Int, key: Int?)?
    /// The reasons of every retried or given-up attempt, for the log (`429>503`).
    package private(set) var reasons: [String] = []
    /// The largest `Retry-After` of the answers, in seconds: what the client is told when all attempts fail.
    package private(set) var largestRetryAfterSeconds: Double?
    private var tried: [Int: Set<Int>] = [:]
    /// Keys that answered 401 to this request, not disabled until another key is accepted (`headReceived`).
    private var refused: [(upstream: Int, key: Int)] = []

    package init(settings: Settings) {
        self.settings = settings
    }

    /// Whether an answer with `status` is one the plan might retry: the exchange holds it back until its end.
    package static func mayRetry(status: Int, replayable: Bool) -> Bool {
        status == 429 || status == 401 || overloadedStatuses.contains(status)
            || (replayable && serverErrorStatuses.contains(status))
    }

    /// The failover reasons as the log shows them, or nil when the first call answered.
    package var failoverField: String? { reasons.isEmpty ? nil : reasons.joined(separator: ">") }

    /// The first call.
    package mutating func start(pools: inout [KeyPool], now: Instant) -> Step {
        nextCall(from: 0, pools: &pools, now: now)
    }

    /// What the head of the current call's answer says about the keys that answered 401 before it: any status below
    /// 500 but a 401 means this call's key got past authentication, so the request is fine and those keys are not.
    /// They are disabled for `keyDisabledSeconds` and returned (for the other replicas and the log). Called for
    /// every head, held back or passed through; a 5xx proves nothing (a gateway may answer before authenticating).
    package mutating func headReceived(status: Int, pools: inout [KeyPool], now: Instant) -> [Rejection] {
        guard status != 401, status < 500, !refused.isEmpty else { return [] }
        defer { refused = [] }
        return refused.map { upstream, key in
            let until = now.advanced(bySeconds: settings.keyDisabledSeconds[upstream])
            let isNews = pools[upstream].markUnavailable(key, until: until, disabled: true, now: now)
            return Rejection(upstream: upstream, key: key, isNews: isNews)
        }
    }

    /// What follows `outcome` of the current call.
    package mutating func next(after outcome: Outcome, pools: inout [KeyPool], now: Instant) -> Step {
        guard let (upstream, key) = current else { return .give }
        var sameUpstream = false
        switch outcome {
        case .unreachable:
            reasons.append("unreachable")
        case .answered(let status, let retryAfter):
            if let retryAfter { largestRetryAfterSeconds = max(largestRetryAfterSeconds ?? 0, retryAfter) }
            guard Self.mayRetry(status: status, replayable: settings.replayable) else { return .give }
            reasons.append(String(status))
            if status == 429, let key {
                let seconds = min(Self.maxCooldownSeconds, max(0, retryAfter ?? Self.defaultCooldownSeconds))
                pools[upstream].markUnavailable(key, until: now.advanced(bySeconds: seconds), disabled: false, now: now)
                sameUpstream = true
            } else if status == 401, let key {
                refused.append((upstream, key))
                sameUpstream = true
            }
        }
        guard attempts < settings.maxAttempts, now < settings.deadline else { return .give }
        let step = nextCall(from: sameUpstream ? upstream : upstream + 1, pools: &pools, now: now)
        if case .noKeyAvailable = step { return .give }
        return step
    }

    /// The first upstream from `first` on with a usable key (one this request has not tried), and that key.
    private mutating func nextCall(from first: Int, pools: inout [KeyPool], now: Instant) -> Step {
        var index = first
        while index < settings.upstreams.count {
            if pools[index].keys.isEmpty {
                if tried[index] == nil { return call(index, nil) }
            } else if let key = pools[index].pick(now: now, excluding: tried[index] ?? []) {
                return call(index, key)
            }
            index += 1
        }
        let returns = pools.compactMap { $0.soonestReturn(now: now) }
        let cooling = pools.contains { pool in pool.keys.indices.contains { pool.state(of: $0, now: now) == .coolingDown } }
        return .noKeyAvailable(retryAfterSeconds: returns.min().map { max(0, $0.seconds(since: now)) }, anyCoolingDown: cooling)
    }

    private mutating func call(_ upstream: Int, _ key: Int?) -> Step {
        attempts += 1
        current = (upstream, key)
        tried[upstream, default: []].insert(key ?? -1)
        return .call(upstream: upstream, key: key)
    }
}
