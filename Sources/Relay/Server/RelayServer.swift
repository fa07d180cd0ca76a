import Dispatch
import Foundation
import HTTP1
import HTTPServer
import Redis
import RelayCore
import RelayState
import Support
import Transport
import Upstream
import Usage
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The composition root: what `main.swift` and the integration tests both build. Owns the event loops, one curl
/// driver per loop, the listeners, the metrics, and the bookkeeping of live connections and exchanges.
package final class RelayServer: @unchecked Sendable {
    // Invariant for `@unchecked Sendable`: the two listeners and the JWKS refresher live in `lifecycle` and are
    // touched under its lock only: set in `start()`, the public listener taken out in `beginDrain()`, all taken out
    // in `shutdown()`. `draining`, `openConnections` and `drainWait` are locked values; per-loop state lives in
    // `LoopState`, touched on its loop's queue only; the other stored properties are constants.
    package let configuration: RelayConfiguration
    package let logger: Logger
    package let metrics = RelayMetrics()
    let authenticator: ClientAuthenticator
    /// Buckets, stream caps and budgets (`state`): this process's memory, or Redis shared by every replica.
    package let store: any AdmissionStore
    /// Prices (`pricing`, or `pricingFile` re-read on SIGHUP).
    package let prices: PriceBook
    /// App Attest and App Check (`attestation`); nil when neither is configured.
    let attestation: AttestationService?
    /// Every upstream's key pool, shared with other replicas through Redis (`Failover/UpstreamPools`).
    package let pools: UpstreamPools
    /// Failed authentications per client address; see `RelayConfiguration.RateLimitSettings.authFailuresPerAddress`.
    let authFailureLimiter: RateLimiter
    /// Proven resumes per stream id; see `RelayConfiguration.RateLimitSettings.resumesPerStream`.
    let resumeLimiter: RateLimiter
    /// Rejection log lines, throttled per reason.
    let rejectionLog: RejectionLog
    /// Wall-clock seconds since 1970, for JWT `exp`/`nbf`/`iat` (tests inject a fixed one).
    let wallClock: @Sendable () -> Double
    /// Resumable streams (`routes[].resume`); nil when no route has them.
    let streams: ResumableStreams?
    let group: EventLoopGroup
    let loopStates: [LoopState]
    /// What `start()` makes and `shutdown()` stops, under one lock.
    private struct Lifecycle {
        var listener: Listener?
        var admin: Listener?
        var jwksRefresher: JWKSRefresher?
    }
    private let lifecycle = Locked(Lifecycle())
    /// `limits.maxConnectionsPerAddress`; nil when there is none.
    private let connectionsPerAddress: ConnectionsPerAddress?
    private let draining = Locked(false)
    private let openConnections = Locked(0)

    /// What building an admission store may use: the wall clock (budget windows), the event loops (a Redis
    /// store keeps one connection per loop) and the logger.
    package struct StoreEnvironment: Sendable {
        package var wallClock: @Sendable () -> Double
        package var loops: [EventLoop]
        package var logger: Logger
        /// Where a store counts what the relay's metrics show (`sse_relay_settles_dropped_total`).
        package var metrics: RelayMetrics
    }

    /// `makeStore` builds the admission store; by default `RelayServer.defaultStore` (`state.backend`).
    /// `streamCopyLagSeconds`: `ResumableStreams.copyLagSeconds` (tests set it long or short).
    package init(configuration: RelayConfiguration, logger: Logger, clock: any Clock = MonotonicClock(),
                wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
                streamCopyLagSeconds: Double = ResumableStreams.defaultCopyLagSeconds,
                makeStore: ((RelayConfiguration, StoreEnvironment) throws -> any AdmissionStore)? = nil) throws {
        Syscall.ignoreSIGPIPE()
        self.configuration = configuration
        prices = PriceBook(table: configuration.pricing.table, file: configuration.pricing.file, readFile: ConfigurationSources.readBytes)
        self.logger = logger
        self.wallClock = wallClock
        authenticator = try ClientAuthenticator(configuration: configuration.clients)
        authFailureLimiter = RateLimiter(limits: configuration.rateLimits.authFailuresPerAddress)
        resumeLimiter = RateLimiter(limits: configuration.rateLimits.resumesPerStream)
        connectionsPerAddress = configuration.limits.maxConnectionsPerAddress > 0
            ? ConnectionsPerAddress(limit: configuration.limits.maxConnectionsPerAddress,
                                    trusted: ClientAddressResolver(trustedProxies: configuration.trustedProxies)) : nil
        rejectionLog = RejectionLog(logger: logger, clock: clock)
        let workers = configuration.workers > 0 ? configuration.workers : max(1, System.coreCount)
        group = EventLoopGroup(count: workers, clock: clock)
        store = try (makeStore ?? { try RelayServer.defaultStore($0, environment: $1) })(configuration,
                                                             StoreEnvironment(wallClock: wallClock, loops: group.loops, logger: logger,
                                                                              metrics: metrics))
        attestation = try AttestationService.make(configuration, admissionStore: store, metrics: metrics, logger: logger,
                                                  rejectionLog: rejectionLog, wallClock: wallClock)
        // After everything that can throw: a driver is freed only once `shutdown` has run (`CurlShard`).
        loopStates = group.loops.map { LoopState(loop: $0, driver: CurlDriver(loop: $0)) }
        pools = UpstreamPools(upstreams: configuration.upstreams, redis: store as? RedisAdmissionStore, logger: logger,
                              clock: clock, wallClock: wallClock)
        streams = ResumableStreams.make(configuration, redis: store as? RedisAdmissionStore, loop: group.loops[0], logger: logger,
                                        copyLagSeconds: streamCopyLagSeconds)
    }

    /// The store `state.backend` names: this process's memory, or Redis shared by every replica (with a
    /// `MemoryAdmissionStore` as its fallback when `onUnavailable` is `local`). `resolver` finds Redis by name.
    package static func defaultStore(_ configuration: RelayConfiguration, environment: StoreEnvironment,
                                     resolver: any HostResolver = SystemHostResolver()) throws -> any AdmissionStore {
        switch configuration.state.backend {
        case .memory:
            return MemoryAdmissionStore(configuration: configuration, wallClock: environment.wallClock)
        case .redis(let redis):
            let budgets = configuration.budgets ?? BudgetConfiguration()
            var settings = RedisAdmissionStore.Settings(
                redis: RedisClient.Configuration(host: redis.host, port: redis.port, database: redis.database,
                                                 password: redis.password, timeoutMs: redis.timeoutMilliseconds),
                keyPrefix: redis.keyPrefix, onUnavailable: redis.onUnavailable, leaseTTLSeconds: Double(redis.leaseTTLSeconds),
                perIdentity: configuration.rateLimits.perIdentity, perAddress: configuration.rateLimits.perAddress,
                budgets: RedisAdmissionStore.BudgetLimits(
                    identityTokensPerDay: budgets.perIdentity.tokensPerDay, identityTokensPerMonth: budgets.perIdentity.tokensPerMonth,
                    totalTokensPerDay: budgets.total.tokensPerDay, totalTokensPerMonth: budgets.total.tokensPerMonth,
                    nanoUSD: [budgets.perIdentity.nanoUSDPerDay, budgets.perIdentity.nanoUSDPerMonth,
                              budgets.total.nanoUSDPerDay, budgets.total.nanoUSDPerMonth]))
            settings.resolver = resolver
            let fallback = redis.onUnavailable == .local
                ? MemoryAdmissionStore(configuration: configuration, wallClock: environment.wallClock) : nil
            return RedisAdmissionStore(settings: settings, loops: environment.loops, fallback: fallback, logger: environment.logger,
                                       metrics: environment.metrics)
        }
    }

    package var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// Binds and starts accepting (and the admin listener, if configured). Throws if an address cannot be bound.
    package func start() throws {
        let publicMode: RelayHandler.Mode = configuration.publicListenerServesMetrics ? .everything : .publicWithoutMetrics
        let listener = try makeListener(configuration.listen, handler: RelayHandler(server: self, admin: publicMode))
        var admin: Listener?
        if let adminListen = configuration.admin {
            admin = try makeListener(adminListen, handler: RelayHandler(server: self, admin: .adminOnly))
        }
        var refresher: JWKSRefresher?
        if let jwt = configuration.clients.jwt, let url = jwt.jwksURL {
            refresher = JWKSRefresher(url: url, refreshSeconds: jwt.jwksRefreshSeconds, loop: group.loops[0],
                                      driver: loopStates[0].driver, authenticator: authenticator, fileKeys: jwt.keys, logger: logger)
        }
        lifecycle.withLock { $0 = Lifecycle(listener: listener, admin: admin, jwksRefresher: refresher) }
        refresher?.start()
        attestation?.start(loop: group.loops[0], driver: loopStates[0].driver)
        // A route that requires a proof of the genuine app is not open to anyone, though its auth is "none".
        for (i, route) in configuration.routes.enumerated() where route.auth == .none && route.attestation != .required {
            logger.warning("route \(route.prefix) has auth \"none\": anyone who can reach this port spends the provider key",
                           [("route", .string(route.prefix)), ("index", .int(i))])
        }
        if configuration.budgets != nil {
            for route in configuration.routes where route.reachesUnmeteredEndpoints {
                if route.unmetered {
                    logger.warning("route \(route.prefix) has budgets and \"unmetered\": true: requests to endpoints whose usage the relay cannot count (embeddings, images, audio, batches, files…) pass uncharged",
                                   [("route", .string(route.prefix))])
                } else {
                    logger.warning("route \(route.prefix) has budgets and reaches endpoints whose usage the relay cannot count: they get 403 endpoint_not_metered (set \"unmetered\": true to let them pass uncharged)",
                                   [("route", .string(route.prefix))])
                }
            }
        }
        for name in configuration.upstreamsSendingKeysInClearText {
            logger.warning("upstream \(name) is http:// to another host: its key crosses the network in clear text (use https:// unless that path is private)",
                           [("upstream", .string(name))])
        }
        for block in configuration.trustedProxies where block.prefixLength == 0 {
            logger.warning("trustedProxies has \(block): any client can choose its address with X-Forwarded-For",
                           [("block", .string(block.description))])
        }
        listener.start()
        admin?.start()
        var fields: [(String, LogValue)] = [("host", .string(configuration.listen.host)), ("port", .int(listener.port)),
                                            ("workers", .int(group.loops.count)), ("trusted_proxies", .int(configuration.trustedProxies.count))]
        if configuration.listen.proxyProtocol { fields.append(("proxy_protocol", .bool(true))) }
        if let admin { fields.append(("admin_port", .int(admin.port))) }
        logger.info("relay listening", fields)
        if admin == nil && !configuration.publicListenerServesMetrics {
            let why = configuration.listen.isLoopback ? "the public listener is behind trusted proxies" : "the public listener is not loopback"
            logger.info("/metrics is not served: \(why) and no admin listener is configured",
                        [("host", .string(configuration.listen.host))])
        }
    }

    private func makeListener(_ listen: RelayConfiguration.Listen, handler: RelayHandler) throws -> Listener {
        let t = configuration.timeouts
        let settings = ServerSettings(
            limits: configuration.limits.request,
            timeouts: ConnectionDeadlines.Settings(headerReadSeconds: t.headerReadSeconds, bodyReadSeconds: t.bodyReadSeconds,
                                                   keepAliveIdleSeconds: t.keepAliveIdleSeconds,
                                                   clientWriteStallSeconds: t.clientWriteStallSeconds),
            highWaterBytes: configuration.buffers.highWaterBytes, lowWaterBytes: configuration.buffers.lowWaterBytes,
            clientAddresses: ClientAddressResolver(trustedProxies: configuration.trustedProxies),
            proxyProtocol: listen.proxyProtocol)
        let states = loopStates
        let maxConnections = configuration.limits.maxConnections
        let perAddress = connectionsPerAddress
        return try serve(host: listen.host, port: listen.port, group: group, settings: settings, handler: handler, logger: logger,
                         admit: { [self] peer, _ in
            guard openConnections.wrappingAdd(1, ordering: .relaxed).newValue > maxConnections else {
                guard perAddress?.open(peer) ?? true else {
                    openConnections.wrappingSubtract(1, ordering: .relaxed)
                    metrics.rejected(reason: "too_many_connections_per_address")
                    return .refuse(RelayError.tooManyConnectionsFromAddress.response)
                }
                return .accept
            }
            // Over the limit: a short answer, then close. Existing streams are not touched.
            openConnections.wrappingSubtract(1, ordering: .relaxed)
            metrics.rejected(reason: "too_many_connections")
            return .refuse(RelayError.tooManyConnections.response)
        }, onOpen: { [self] server in
            metrics.activeConnections.wrappingAdd(1, ordering: .relaxed)
            if isDraining { server.drain(closeIfIdle: false) }
            states[server.loop.index].connections[ObjectIdentifier(server)] = server
        }, onClose: { [self] closed in
            states[closed.loop.index].connections[ObjectIdentifier(closed)] = nil
            perAddress?.closed(closed.connection.peerAddress)   // the socket's peer, as at accept (not a PROXY header's source)
            openConnections.wrappingSubtract(1, ordering: .relaxed)
            metrics.activeConnections.wrappingSubtract(1, ordering: .relaxed)
            if isDraining { drainEvent() }
        })
    }

    /// Bookkeeping of live exchanges, on their loop: counted while they run, logged and measured when they end.
    func exchangeStarted(_ exchange: RelayExchange, on state: LoopState) {
        metrics.activeStreams.wrappingAdd(1, ordering: .relaxed)
        state.exchanges[ObjectIdentifier(exchange)] = exchange
    }

    func exchangeEnded(_ exchange: RelayExchange, on state: LoopState) {
        state.exchanges[ObjectIdentifier(exchange)] = nil
        metrics.activeStreams.wrappingSubtract(1, ordering: .relaxed)
        let r = exchange.record
        metrics.exchangeEnded(route: r.route, status: r.status ?? 0, outcome: r.outcome,
                              firstByteSeconds: r.firstBodyAt.map { $0.seconds(since: r.startedAt) },
                              durationSeconds: (r.endedAt ?? r.startedAt).seconds(since: r.startedAt))
        if let usage = r.usage, usage.source != .none {
            metrics.tokens(route: r.route, model: r.modelLabel, source: usage.source.rawValue,
                           prompt: usage.prompt, completion: usage.completion)
        }
        if let cost = r.cost { costEnded(cost, record: r) }
        logger.log(.info, "exchange", fields: r)
        if isDraining { drainEvent() }
    }

    /// The bound port (useful with port 0).
    package var port: Int { lifecycle.withLock { $0.listener?.port ?? 0 } }
    package var adminPort: Int? { lifecycle.withLock { $0.admin?.port } }

    /// Graceful shutdown, phase one: stop accepting on the public port, turn /readyz to 503, close idle
    /// keep-alive connections and make every in-flight response its connection's last. Exchanges in flight run
    /// on. `onDrained` runs (on a private queue) when none is left, or after `deadline` seconds, when the rest
    /// are aborted.
    package func beginDrain(deadline seconds: Double, onDrained: @escaping @Sendable (_ aborted: Int) -> Void) {
        guard !draining.exchange(true, ordering: .relaxed) else { return }
        let listener = lifecycle.withLock { state -> Listener? in
            let l = state.listener
            state.listener = nil
            return l
        }
        listener?.stop()
        for state in loopStates {
            state.loop.execute {
                for server in state.connections.values {
                    server.drain()
                }
            }
        }
        logger.info("draining", [("deadline_seconds", .double(seconds)), ("in_flight", .int(liveCounts().exchanges))])
        let wait = DrainWait(queue: DispatchQueue(label: "sse-relay.drain"), onDrained: onDrained)
        drainWait.withLock { $0 = wait }
        // The first look, then one after each exchange end and connection close (`drainEvent`), and the deadline.
        wait.queue.async { self.drainCheck(wait) }
        wait.queue.asyncAfter(deadline: .now() + seconds) { self.drainDeadline(wait) }
    }

    /// A drain in progress: the queue its checks run on and what it calls once. Its state is touched on `queue`
    /// only, but for `checkQueued`, a locked flag that folds a burst of events into one check.
    private final class DrainWait: @unchecked Sendable {
        // @unchecked Sendable: `finished` and `checks` are touched on `queue` only; the rest are constants or locked.
        let queue: DispatchQueue
        let onDrained: @Sendable (Int) -> Void
        let checkQueued = Locked(false)
        var finished = false
        var checks = 0
        init(queue: DispatchQueue, onDrained: @escaping @Sendable (Int) -> Void) {
            self.queue = queue
            self.onDrained = onDrained
        }
    }
    private let drainWait = Locked<DrainWait?>(nil)

    /// An exchange ended or a connection closed: what a drain waits for. Called on a loop queue; the check runs on
    /// the drain's queue (it visits every loop), at most one queued at a time.
    private func drainEvent() {
        guard let wait = drainWait.load(ordering: .relaxed), !wait.checkQueued.exchange(true, ordering: .relaxed) else { return }
        wait.queue.async { self.drainCheck(wait) }
    }

    /// How many times the drain looked at what is left (tests: it follows events, not time).
    var drainChecks: Int { drainWait.load(ordering: .relaxed).map { w in w.queue.sync { w.checks } } ?? 0 }

    private func drainCheck(_ wait: DrainWait) {
        // Cleared before looking: an event after this point queues another check.
        wait.checkQueued.store(false, ordering: .relaxed)
        guard !wait.finished else { return }
        wait.checks += 1
        guard liveCounts().exchanges == 0 && connectionsStillSending() == 0 else { return }
        wait.finished = true
        wait.onDrained(0)
    }

    private func drainDeadline(_ wait: DrainWait) {
        guard !wait.finished else { return }
        wait.finished = true
        let counts = liveCounts()
        logger.warning("drain deadline passed; aborting the rest", [("aborted", .int(counts.exchanges))])
        closeAllConnections()
        wait.onDrained(counts.exchanges)
    }

    /// Connections with response bytes still on their way to a (slow) client.
    private func connectionsStillSending() -> Int {
        var count = 0
        for state in loopStates {
            state.loop.queue.sync {
                count += state.connections.values.filter { $0.connection.pendingByteCount > 0 }.count
            }
        }
        return count
    }

    private func closeAllConnections() {
        for state in loopStates {
            state.loop.queue.sync {
                for server in Array(state.connections.values) { server.connection.close() }
            }
        }
    }

    /// Stops accepting, closes every connection (cancelling their upstream transfers) and releases curl.
    package func shutdown() {
        draining.store(true, ordering: .relaxed)
        let stopping = lifecycle.withLock { state -> Lifecycle in
            let result = state
            state = Lifecycle()
            return result
        }
        stopping.listener?.stop()
        stopping.admin?.stop()
        stopping.jwksRefresher?.stop()
        attestation?.shutdown()
        rejectionLog.stop()
        for state in loopStates {
            state.loop.queue.sync {
                for server in Array(state.connections.values) { server.connection.close() }
                state.driver.shutdown()
            }
        }
        // After the exchanges ended (their settles are queued ahead of the close): stop refreshing leases.
        store.shutdown()
    }

    /// Addresses `limits.maxConnectionsPerAddress` counts a connection for now (tests: none once all closed).
    package var connectionsPerAddressOpen: Int { connectionsPerAddress?.addresses ?? 0 }

    /// The largest pending-write buffer any open connection has had (what slow readers cost, at most).
    package func maxPendingBytesObserved() -> Int {
        var result = 0
        for state in loopStates {
            state.loop.queue.sync {
                for server in state.connections.values { result = max(result, server.connection.maxPendingByteCount) }
            }
        }
        return result
    }

    /// A line per open connection, for diagnosing a test that finds connections left open.
    package func debugConnections() -> [String] {
        var lines: [String] = []
        for state in loopStates {
            state.loop.queue.sync {
                for server in state.connections.values { lines.append(server.debugDescription) }
            }
        }
        return lines
    }

    /// The relay's own timers armed on every loop (connection and exchange timeouts, Redis commands, …): it must
    /// follow what is open, never the requests that came and went. The timers curl asks for, one per shard at
    /// most, are not counted (`CurlDriver.armedTimerCount`).
    package func armedTimerCount() -> Int {
        loopStates.reduce(0) { total, state in
            total + state.loop.queue.sync { state.loop.armedTimerCount - state.driver.armedTimerCount }
        }
    }

    /// Counts taken on each loop: open client connections, live exchanges, running curl transfers.
    package func liveCounts() -> (connections: Int, exchanges: Int, transfers: Int) {
        var totals = (0, 0, 0)
        for state in loopStates {
            state.loop.queue.sync {
                totals.0 += state.connections.count
                totals.1 += state.exchanges.count
                totals.2 += state.driver.activeTransferCount
            }
        }
        return totals
    }
}

/// What one loop owns on the server's behalf. Touched on `loop.queue` only.
final class LoopState: @unchecked Sendable {
    // Invariant: touched on `loop.queue` only.
    let loop: EventLoop
    let driver: CurlDriver
    // With room from the start: a dictionary type's first storage makes the Swift runtime scan every
    // conformance record for its key's, which otherwise fell on the first request (S1's cold first byte).
    var connections = [ObjectIdentifier: ServerConnection](minimumCapacity: 16)
    var exchanges = [ObjectIdentifier: RelayExchange](minimumCapacity: 16)
    init(loop: EventLoop, driver: CurlDriver) {
        self.loop = loop
        self.driver = driver
    }
}

/// Request ids: 16 hex digits, distinct within the process. They name a request in the logs and in
/// `X-Request-Id` and grant nothing, so they need not come from the CSPRNG, whose `getrandom` was a system call
/// per request: a counter, offset by a random seed per process and mixed by SplitMix64's finaliser (a bijection,
/// so no two requests of a process share one; replicas start from different seeds).
enum RequestIDs {
    /// Shared by every loop; one integer operation under its lock.
    private static let counter = Locked<UInt64>({
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }())

    static func make() -> String {
        var z = counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return hex16(z)
    }

    /// `n` as 16 lowercase hex digits.
    static func hex16(_ n: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { out in
            let digits: StaticString = "0123456789abcdef"
            for i in 0..<16 { out[i] = digits.utf8Start[Int((n >> UInt64(60 - 4 * i)) & 0xF)] }
            return 16
        }
    }
}

enum System {
    static var coreCount: Int {
        Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}

/// Open connections per client address (`limits.maxConnectionsPerAddress`), counted at accept and close: one client
/// cannot hold the whole `maxConnections`. Counted on `ClientAddress.limitKey` of the socket's peer (an IPv6 client's
/// /64); a trusted proxy's connections carry many clients and are not counted. Accepts and closes run on every loop:
/// the counts are behind a lock.
final class ConnectionsPerAddress: Sendable {
    let limit: Int
    let trusted: ClientAddressResolver
    private let counts = Locked<[String: Int]>([:])

    init(limit: Int, trusted: ClientAddressResolver) {
        self.limit = limit
        self.trusted = trusted
    }

    /// Counts a new connection from `peer`; false (and nothing counted) when its address is at the limit.
    func open(_ peer: String) -> Bool {
        guard !trusted.isTrusted(peer) else { return true }
        let key = ClientAddress.limitKey(of: peer)
        return counts.withLock { counts in
            let n = counts[key, default: 0]
            guard n < limit else { return false }
            counts[key] = n + 1
            return true
        }
    }

    /// A connection `open` counted has closed.
    func closed(_ peer: String) {
        guard !trusted.isTrusted(peer) else { return }
        let key = ClientAddress.limitKey(of: peer)
        counts.withLock { counts in
            guard let n = counts[key] else { return }
            counts[key] = n > 1 ? n - 1 : nil
        }
    }

    /// Addresses with a connection open (tests: the counts go back to nothing).
    var addresses: Int { counts.withLock { $0.count } }
}
