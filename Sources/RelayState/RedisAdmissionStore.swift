import Redis
import RelayCore
import Support
import Transport

/// The admission store every replica shares: buckets, stream leases and budget reservations in Redis, each
/// admission one atomic Lua script (`RedisAdmissionScripts`) in one round trip. See README, "Running several
/// replicas".
///
/// One `RedisClient` per event loop: a request's admission, extension and settlement go out on the connection of
/// the loop its exchange lives on, so no call hops between queues and no lock guards a connection (a handful of
/// connections per replica is nothing for Redis). Requests wait asynchronously, many in flight on each connection.
///
/// Leases and reservations carry an expiry (`leaseTTL`) that one timer per store (on the first loop) pushes forward
/// for every live grant every `leaseTTL / 3`, in script calls of a few hundred grants each. A replica killed with -9
/// stops refreshing, so its leases and reservations lapse within the TTL and the other replicas admit again.
///
/// When Redis does not answer within `timeout` (or is down), `onUnavailable` decides: `reject` refuses
/// (`.unavailable`, 503), `allow` admits without limits (mode `.allowedUnavailable`), `local` asks the injected
/// fallback store (this replica's memory limits, mode `.local`). A stream already running is never cut because
/// Redis went away: an `extend` that cannot reach Redis answers `true` whatever `onUnavailable` says (with `reject`
/// that means "let it finish"). A degraded grant never touches Redis when it settles (a `.local` one settles in
/// the fallback). A settle Redis does not confirm (down, stalled, the connection lost) is kept, bounded, and sent
/// again when Redis is back (`PendingSettle`): a stream's usage is not lost because Redis blinked; a settle sent
/// twice is applied once.
///
/// Thread safety: the live-grant table and the script hashes are behind locks (`Locked`); each client is owned by
/// its loop's queue. `admit`, `extend` and `usageReport` are called on `loop`; `settle` from anywhere.
package final class RedisAdmissionStore: AdmissionStore, Sendable {
    // Invariant: `clients`, `live`, `shas`, `refreshTimer` and `pendingSettles` are only touched under their locks; a client itself
    // only on its loop's queue.

    package typealias OnUnavailable = StateConfiguration.OnUnavailable

    /// Budget limits in tokens; nil: none for that window.
    package struct BudgetLimits: Sendable, Equatable {
        package var identityTokensPerDay: Int?
        package var identityTokensPerMonth: Int?
        package var totalTokensPerDay: Int?
        package var totalTokensPerMonth: Int?
        /// The dollar limits in nano-dollars, in the same order (identity day, month, total day, month).
        package var nanoUSD: [Int?] = [nil, nil, nil, nil]

        package init(identityTokensPerDay: Int? = nil, identityTokensPerMonth: Int? = nil, totalTokensPerDay: Int? = nil,
                    totalTokensPerMonth: Int? = nil, nanoUSD: [Int?] = [nil, nil, nil, nil]) {
            self.identityTokensPerDay = identityTokensPerDay
            self.identityTokensPerMonth = identityTokensPerMonth
            self.totalTokensPerDay = totalTokensPerDay
            self.totalTokensPerMonth = totalTokensPerMonth
            self.nanoUSD = nanoUSD
        }

        /// The dollar limits as script arguments (-1: none).
        var nanoUSDArguments: [String] { (0..<4).map { String((nanoUSD.count > $0 ? nanoUSD[$0] : nil) ?? -1) } }
    }

    /// What the store needs from the configuration (`state.redis`, `limits`, `budgets`).
    package struct Settings: Sendable {
        /// Where Redis is, its credentials, and `timeoutMs`: how long an admission waits before `onUnavailable`.
        package var redis: RedisClient.Configuration
        /// Prepended to every key, so several relays (or environments) can share one Redis.
        package var keyPrefix: String
        package var onUnavailable: OnUnavailable
        package var leaseTTLSeconds: Double
        package var perIdentity: RateLimits?
        package var perAddress: RateLimits?
        package var budgets: BudgetLimits
        /// Milliseconds for buckets and lease expiry; nil (production): Redis's own clock, which every replica
        /// shares. Tests pass a manual one.
        package var clockMilliseconds: (@Sendable () -> Int64)?
        /// Settles Redis has not confirmed, kept per event loop to be sent again (`PendingSettles`); past this the
        /// oldest is dropped and counted (`sse_relay_settles_dropped_total`).
        package var maxPendingSettles = 10_000
        /// The first wait before a failed settle is sent again; it doubles up to `settleRetryMaxMs` while Redis keeps
        /// failing, and a reconnect sends every waiting settle at once.
        package var settleRetryInitialMs = 100
        package var settleRetryMaxMs = 5_000
        /// The most grants one refresh script pushes (`refreshNow`); the next batch goes once the previous one is
        /// answered. A script blocks Redis for every replica while it runs: one script for every live grant took
        /// 33 ms at 5 000 grants of six keys (57 ms on a busy machine), against the 50 ms answer deadline (past it the
        /// connection is dropped, failing the admissions waiting on it), and every other replica's admissions waited
        /// as long. 200 grants take 1.3 ms.
        package var refreshBatchGrants = 200
        /// How the connections turn `redis.host` into an address when it is a name (tests hold it).
        package var resolver: any HostResolver = SystemHostResolver()

        package init(redis: RedisClient.Configuration = .init(), keyPrefix: String = "sse-relay:", onUnavailable: OnUnavailable = .reject,
                    leaseTTLSeconds: Double = 30, perIdentity: RateLimits? = nil, perAddress: RateLimits? = nil,
                    budgets: BudgetLimits = BudgetLimits(), clockMilliseconds: (@Sendable () -> Int64)? = nil) {
            self.redis = redis
            self.keyPrefix = keyPrefix
            self.onUnavailable = onUnavailable
            self.leaseTTLSeconds = max(0.1, leaseTTLSeconds)
            self.perIdentity = perIdentity
            self.perAddress = perAddress
            self.budgets = budgets
            self.clockMilliseconds = clockMilliseconds
        }
    }

    /// What the store remembers of an admitted grant until it settles.
    private struct Live {
        var loop: any LoopScheduler
        var uid: String
        var mode: AdmissionGrant.Mode
        /// The stream sets holding the grant's leases (address, identity): where it holds none, nil.
        var streamKeys: [String?]
        /// The four budget windows (hash, reservations) the grant reserved in, then the four dollar windows; empty
        /// without a budget.
        var windowKeys: [String]
        var windowEnds: (day: Int64, month: Int64)
        /// The fallback's own grant, for `.local` grants.
        var fallbackGrant: AdmissionGrant?
    }

    package let settings: Settings
    private let loops: [EventLoop]
    private let fallback: (any AdmissionStore)?
    private let logger: Logger
    private let metrics: RelayMetrics?
    private let clients: Locked<[ObjectIdentifier: RedisClient]>
    private let live = Locked<[UInt64: Live]>([:])
    private let shas = Locked<[RedisAdmissionScripts.Name: String]>([:])
    private let nextID = Locked<UInt64>(0)
    private let refreshTimer = Locked<(timer: LoopTimer?, stopped: Bool)>((nil, false))
    private let counters = Locked(Counters())
    /// Distinguishes this store's grants from other replicas' in the shared sets.
    private let instanceTag: String
    /// What every admission sends that depends on the settings only, made once: key prefixes, the placeholder
    /// keys of a request without a budget, the lease TTL, and the limits (with and without an identity).
    private let prefixes: (rateAddress: String, rateIdentity: String, streamsAddress: String, streamsIdentity: String, released: String)
    private let unusedWindowKeys: [String]
    private let ttlString: String
    private let limitArguments: (anonymous: [String], identified: [String])

    /// Decisions taken without Redis, by kind: for metrics and tests.
    package struct Counters: Sendable, Equatable {
        package var rejectedUnavailable = 0
        package var allowedUnavailable = 0
        package var localFallback = 0
        /// Extensions granted because Redis could not be asked (a running stream is never cut for that).
        package var extendedUnavailable = 0
        /// Settle attempts that failed (each is kept and sent again, unless dropped).
        package var settleFailures = 0
        /// Settles given up: the pending queue was full, Redis refused the script, or the store was shut down.
        /// That stream's usage is not counted (`sse_relay_settles_dropped_total`).
        package var settlesDropped = 0
    }

    package var unavailableCounters: Counters { counters.withLock { $0 } }

    /// Scripts whose SHA1 is known (loaded with SCRIPT LOAD since a connection became ready).
    package var loadedScriptCount: Int { shas.withLock { $0.count } }

    /// - Parameters:
    ///   - loops: the loops requests arrive on; one connection each, connected now. The first runs the refresh timer.
    ///   - fallback: the store `onUnavailable: local` decides with (this replica's memory store).
    ///   - metrics: where dropped settles are counted (`sse_relay_settles_dropped_total`).
    package init(settings: Settings, loops: [EventLoop], fallback: (any AdmissionStore)? = nil, logger: Logger,
                metrics: RelayMetrics? = nil) {
        precondition(!loops.isEmpty, "RedisAdmissionStore needs at least one event loop")
        self.settings = settings
        self.loops = loops
        self.fallback = fallback
        self.logger = logger
        self.metrics = metrics
        var random = SystemRandomNumberGenerator()
        instanceTag = String(random.next() as UInt64, radix: 36)
        let p = settings.keyPrefix
        prefixes = (p + "rate:addr:", p + "rate:id:", p + "streams:addr:", p + "streams:id:", p + "released:")
        unusedWindowKeys = Array(repeating: p + "unused", count: 8)
        ttlString = String(Int64(settings.leaseTTLSeconds * 1000))
        func limitStrings(_ limit: RateLimits?) -> [String] {
            [String(limit?.requestsPerMinute ?? 0), String(limit?.burst ?? 1), String(limit?.maxConcurrentStreams ?? -1),
             String(limit?.concurrencyRetryAfterSeconds ?? 1)]
        }
        let b = settings.budgets
        let budgetLimits = [b.identityTokensPerDay, b.identityTokensPerMonth, b.totalTokensPerDay, b.totalTokensPerMonth].map { String($0 ?? -1) }
        limitArguments = (limitStrings(settings.perAddress) + limitStrings(nil) + ["0"] + budgetLimits,
                          limitStrings(settings.perAddress) + limitStrings(settings.perIdentity) + ["1"] + budgetLimits)
        clients = Locked([:])
        for loop in loops {
            let client = makeClient(loop)
            loop.execute { client.start() }
        }
        loops[0].execute { [weak self] in self?.scheduleRefresh() }
    }

    /// Stops refreshing and closes the connections once what was sent on them is answered: the settles of the
    /// exchanges that just ended are queued on their loops ahead of this, and the ones waiting to be sent again go
    /// out one last time. Grants still live lapse after the lease TTL.
    package func shutdown() {
        let armed = refreshTimer.withLock { state in
            state.stopped = true
            defer { state.timer = nil }
            return state.timer
        }
        if let armed { loops[0].execute { armed.cancel() } }
        for (_, client) in clients.withLock({ $0 }) {
            let retry = pendingSettles.withLock { $0[ObjectIdentifier(client.loop)]?.timer }
            client.loop.execute { [weak self] in
                retry?.cancel()
                self?.flushPendingSettles(on: client.loop)
                client.closeWhenAnswered()
            }
        }
    }

    // MARK: AdmissionStore

    package func admit(_ request: AdmissionRequest, on loop: any LoopScheduler, _ completion: @escaping @Sendable (AdmissionDecision) -> Void) {
        let id = nextID.withLock { $0 &+= 1; return $0 }
        let uid = "\(instanceTag):\(id)"
        let a = settings.perAddress
        // Window labels and ends only matter to a request with a budget.
        let windows = request.budget == nil ? BudgetWindows.none : BudgetWindows(wallClockSeconds: request.wallClockSeconds)
        let streamKeys = [prefixes.streamsAddress + request.address, prefixes.streamsIdentity + (request.identity ?? "")]
        let windowKeys = request.budget.map { windowKeyList($0.key, windows) } ?? unusedWindowKeys
        let dollarKeys = request.budget.map { windowKeyList($0.key, windows, unit: "budget:usd:") } ?? []
        let tombstone = prefixes.released + uid
        var keys = [prefixes.rateAddress + request.address, prefixes.rateIdentity + (request.identity ?? "")]
        keys.reserveCapacity(13)
        keys += streamKeys
        keys += windowKeys
        keys.append(tombstone)
        keys += dollarKeys
        // now, ttl, uid, the address's and identity's limits, whether there is an identity, the reservation, the
        // budget limits (limitArguments keeps that order), then the wall clock and the windows' ends.
        var arguments = [nowArgument(), ttlString, uid]
        arguments.reserveCapacity(25)
        let limits = request.identity == nil ? limitArguments.anonymous : limitArguments.identified
        arguments += limits[0..<9]
        arguments.append(String(max(0, request.budget?.tokens ?? 0)))
        arguments += limits[9...]
        arguments += [String(request.wallClockSeconds), String(windows.dayEnd), String(windows.monthEnd)]
        arguments.append(String(max(0, request.budget?.nanoUSD ?? 0)))
        arguments += settings.budgets.nanoUSDArguments

        evaluate(.admit, keys: keys, arguments: arguments, on: loop) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let value):
                guard let reply = value.array, let first = reply.first?.integer else {
                    return self.unavailable(request, id: id, on: loop, why: "unexpected reply \(value)", completion)
                }
                if first == 1 {
                    let held = [a?.maxConcurrentStreams == nil ? nil : streamKeys[0], request.identity == nil ? nil : streamKeys[1]]
                    let record = Live(loop: loop, uid: uid, mode: .shared, streamKeys: held,
                                      windowKeys: request.budget == nil ? [] : windowKeys + dollarKeys,
                                      windowEnds: (windows.dayEnd, windows.monthEnd), fallbackGrant: nil)
                    self.live.withLock { $0[id] = record }
                    completion(.admitted(AdmissionGrant(id: id, reservedTokens: request.budget?.tokens ?? 0)))
                    return
                }
                let seconds = reply.count > 2 ? Int(reply[2].integer ?? 1) : 1
                switch reply.count > 1 ? reply[1].string : nil {
                case "rate": completion(.refused(.rate(retryAfterSeconds: seconds)))
                case "concurrency": completion(.refused(.concurrency(retryAfterSeconds: seconds)))
                case "budget": completion(.refused(.budget(retryAfterSeconds: seconds)))
                default: self.unavailable(request, id: id, on: loop, why: "unexpected reply \(value)", completion)
                }
            case .failure(let error):
                if error == .timeout || error == .connectionLost {
                    // Sent, unanswered: Redis may run it yet, after we decided without it. The settle's tombstone
                    // (`released:UID`) stops that late run.
                    let budget = request.budget == nil ? "0" : "1"
                    self.sendSettle(PendingSettle(keys: streamKeys + (request.budget == nil ? [] : windowKeys + dollarKeys) + [tombstone],
                                                  arguments: [uid, "0", budget, String(windows.dayEnd), String(windows.monthEnd),
                                                              self.tombstoneTTL, budget, "0"]), on: loop)
                }
                self.unavailable(request, id: id, on: loop, why: "\(error)", completion)
            }
        }
    }

    /// One settle script call (`RedisAdmissionScripts.settle`): a grant's end, or the release of an admission that
    /// may have run in Redis unseen (its reply timed out, or its connection dropped with it sent). Its last key is
    /// the grant's tombstone, `released:UID`, which the script checks first and writes last: a settle sent again
    /// after one that did run (its reply lost) changes nothing, and an admission that runs after its release takes
    /// nothing (without it the late run would hold a stream slot and a reservation for the lease TTL though the
    /// client was answered without them).
    private struct PendingSettle: Sendable {
        var keys: [String]
        var arguments: [String]
    }

    /// Settles Redis has not confirmed, per loop, sent again when its connection is ready again or after a backoff
    /// (doubling from `settleRetryInitialMs` to `settleRetryMaxMs`). Bounded: past `maxPendingSettles` the oldest
    /// is dropped and counted.
    private struct PendingSettles {
        /// Oldest first from `head` (a head index: dropping the oldest of thousands must not shift them all).
        var waiting: [PendingSettle] = []
        var head = 0
        var timer: LoopTimer?
        var backoffMs: Int
        var count: Int { waiting.count - head }
    }

    /// Each loop's entry is changed on that loop's queue only; the lock is for readers elsewhere (`pendingSettleCount`,
    /// `shutdown`).
    private let pendingSettles = Locked<[ObjectIdentifier: PendingSettles]>([:])

    /// How long a tombstone lasts: long enough that a settle sent again within it is recognised (a settle waiting
    /// longer than this, whose first attempt did reach Redis, may be counted twice: over, never under), and at
    /// least twice the lease TTL, the longest an admission's late run can come.
    private var tombstoneTTL: String { String(max(Self.tombstoneMs, 2 * Int64(settings.leaseTTLSeconds * 1000))) }
    static let tombstoneMs: Int64 = 600_000

    /// Settles waiting to be sent again, on every loop (for tests and ops).
    package var pendingSettleCount: Int { pendingSettles.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Sends a settle on `loop` (call there); one Redis did not confirm is kept and sent again.
    private func sendSettle(_ settle: PendingSettle, on loop: any LoopScheduler) {
        evaluate(.settle, keys: settle.keys, arguments: settle.arguments, on: loop) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                self.pendingSettles.withLock { $0[ObjectIdentifier(loop)]?.backoffMs = self.settings.settleRetryInitialMs }
            case .failure(.server(let message)):
                // Redis ran the script and refused it (out of memory, a script error): sending it again would fail alike.
                self.dropped(1, why: "redis refused the settle: \(message)")
            case .failure(.closed):
                self.dropped(1, why: "store shut down")
            case .failure(let error):
                self.counters.withLock { $0.settleFailures += 1 }
                self.logger.debug("redis settle failed, kept to send again", [("error", .string("\(error)"))])
                self.keep(settle, on: loop)
            }
        }
    }

    /// Queues a failed settle and arms its loop's retry timer. Call on `loop`.
    private func keep(_ settle: PendingSettle, on loop: any LoopScheduler) {
        let key = ObjectIdentifier(loop)
        let (overflow, delayMs) = pendingSettles.withLock { all -> (Int, Int?) in
            var state = all[key] ?? PendingSettles(backoffMs: settings.settleRetryInitialMs)
            state.waiting.append(settle)
            let overflow = max(0, state.count - max(1, settings.maxPendingSettles))
            state.head += overflow
            if state.head >= 1024 && state.head * 2 >= state.waiting.count {
                state.waiting.removeSubrange(0..<state.head)
                state.head = 0
            }
            var delay: Int?
            if state.timer == nil {
                delay = state.backoffMs
                state.backoffMs = min(state.backoffMs * 2, max(settings.settleRetryInitialMs, settings.settleRetryMaxMs))
            }
            all[key] = state
            return (overflow, delay)
        }
        if overflow > 0 { dropped(overflow, why: "pending settles full (\(settings.maxPendingSettles))") }
        guard let delayMs else { return }
        // Armed and fired on this loop's queue, like every change to this loop's queue of settles: no other
        // `keep` can run in between.
        let timer = loop.schedule(afterSeconds: Double(delayMs) / 1000) { [weak self] in
            guard let self else { return }
            self.pendingSettles.withLock { $0[key]?.timer = nil }
            self.flushPendingSettles(on: loop)
        }
        pendingSettles.withLock { $0[key]?.timer = timer }
    }

    /// Sends every waiting settle of `loop` again (call there). Those that fail again come back through `keep`.
    private func flushPendingSettles(on loop: any LoopScheduler) {
        let waiting = pendingSettles.withLock { all -> ArraySlice<PendingSettle> in
            guard let state = all[ObjectIdentifier(loop)] else { return [] }
            all[ObjectIdentifier(loop)]!.waiting = []
            all[ObjectIdentifier(loop)]!.head = 0
            return state.waiting[state.head...]
        }
        for settle in waiting { sendSettle(settle, on: loop) }
    }

    private func dropped(_ count: Int, why: String) {
        counters.withLock { $0.settlesDropped += count }
        metrics?.settlesDropped.wrappingAdd(count, ordering: .relaxed)
        logger.warning("redis settle dropped: that usage goes uncounted", [("count", .int(count)), ("why", .string(why))])
    }

    package func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        extend(grant, by: BudgetAmount(tokens: tokens), on: loop, completion)
    }

    /// Grows the token and dollar reservations in one script run: both, or neither.
    package func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        let tokens = amount.tokens
        guard let record = live.withLock({ $0[grant.id] }) else { return completion(true) }
        if record.mode == .local, let fallback, let inner = record.fallbackGrant {
            fallback.extend(inner, by: amount, on: loop) { [weak self] granted in
                if granted { self?.live.withLock { $0[grant.id]?.fallbackGrant?.reservedTokens += tokens } }
                completion(granted)
            }
            return
        }
        guard !record.windowKeys.isEmpty, tokens > 0 || amount.nanoUSD > 0 else { return completion(true) }
        let limits = settings.budgets
        let arguments = [nowArgument(), ttlArgument(), record.uid, String(max(0, tokens))]
            + [limits.identityTokensPerDay, limits.identityTokensPerMonth, limits.totalTokensPerDay, limits.totalTokensPerMonth].map { String($0 ?? -1) }
            + [String(max(0, amount.nanoUSD))] + limits.nanoUSDArguments
        evaluate(.extend, keys: record.windowKeys, arguments: arguments, on: loop) { [weak self] result in
            switch result {
            case .success(let value) where value.integer != nil:
                completion(value.integer == 1)
            default:
                // Redis cannot be asked: the stream goes on, whatever onUnavailable says.
                self?.counters.withLock { $0.extendedUnavailable += 1 }
                completion(true)
            }
        }
    }

    package func settle(_ grant: AdmissionGrant, usedTokens: Int) {
        settle(grant, used: BudgetAmount(tokens: usedTokens))
    }

    package func settle(_ grant: AdmissionGrant, used amount: BudgetAmount) {
        let usedTokens = amount.tokens
        guard let record = live.withLock({ $0.removeValue(forKey: grant.id) }) else { return }
        switch record.mode {
        case .allowedUnavailable:
            return
        case .local:
            if let fallback, let inner = record.fallbackGrant { fallback.settle(inner, used: amount) }
        case .shared:
            let keys = record.streamKeys.map { $0 ?? key("unused") } + record.windowKeys + [prefixes.released + record.uid]
            let hasBudget = !record.windowKeys.isEmpty
            let nano = max(0, amount.nanoUSD)
            // Only a charge is not idempotent: a settle without one (no budget, nothing used) leaves no tombstone.
            let arguments = [record.uid, String(max(0, usedTokens)), hasBudget ? "1" : "0", String(record.windowEnds.day),
                             String(record.windowEnds.month), hasBudget && (usedTokens > 0 || nano > 0) ? tombstoneTTL : "0",
                             hasBudget ? "1" : "0", String(nano)]
            // Until Redis confirms it, the settle is kept and sent again: the leases and reservation would lapse
            // after the TTL anyway, but the usage would go uncounted.
            let settle = PendingSettle(keys: keys, arguments: arguments)
            record.loop.execute { [weak self] in self?.sendSettle(settle, on: record.loop) }
        }
    }

    package func usageReport(identity: String, wallClockSeconds: Int64, on loop: any LoopScheduler,
                            _ completion: @escaping @Sendable (BudgetReport?) -> Void) {
        let windows = BudgetWindows(wallClockSeconds: wallClockSeconds)
        let keys = Array(windowKeyList(identity, windows).prefix(4)) + [key("streams:id:", identity)]
            + Array(windowKeyList(identity, windows, unit: "budget:usd:").prefix(4))
        let limits = settings.budgets
        evaluate(.report, keys: keys, arguments: [nowArgument()], on: loop) { result in
            guard case .success(let value) = result, let numbers = value.array?.compactMap(\.integer), numbers.count == 9 else {
                return completion(nil)
            }
            var day = BudgetReport.Window(name: "day", period: windows.day, usedTokens: Int(numbers[0]), reservedTokens: Int(numbers[1]),
                                          limitTokens: limits.identityTokensPerDay, resetsInSeconds: Int(windows.dayEnd - wallClockSeconds))
            var month = BudgetReport.Window(name: "month", period: windows.month, usedTokens: Int(numbers[2]), reservedTokens: Int(numbers[3]),
                                            limitTokens: limits.identityTokensPerMonth, resetsInSeconds: Int(windows.monthEnd - wallClockSeconds))
            (day.usedNanoUSD, day.reservedNanoUSD, day.limitNanoUSD) = (Int(numbers[5]), Int(numbers[6]), limits.nanoUSD.first ?? nil)
            (month.usedNanoUSD, month.reservedNanoUSD, month.limitNanoUSD) = (Int(numbers[7]), Int(numbers[8]), limits.nanoUSD.count > 1 ? limits.nanoUSD[1] : nil)
            completion(BudgetReport(identity: identity, windows: [day, month], openStreams: Int(numbers[4])))
        }
    }

    // MARK: Refreshing leases

    /// Pushes every live grant's lease and reservation expiry now (the timer does it every `leaseTTL / 3`), in
    /// batches of `refreshBatchGrants`, one after another; `done` runs when Redis answered the last (or did not).
    /// Call on the first loop.
    package func refreshNow(_ done: (@Sendable () -> Void)? = nil) {
        let records = live.withLock { Array($0.values) }.filter { $0.mode == .shared }
        refresh(records[...], done)
    }

    private func refresh(_ records: ArraySlice<Live>, _ done: (@Sendable () -> Void)?) {
        let batch = records.prefix(max(1, settings.refreshBatchGrants))
        let rest = records.dropFirst(batch.count)
        var members: [String: [String]] = [:]
        var order: [String] = []
        func add(_ key: String, _ uid: String) {
            if members[key] == nil { order.append(key) }
            members[key, default: []].append(uid)
        }
        for record in batch { for key in record.streamKeys.compactMap({ $0 }) { add(key, record.uid) } }
        let streamSets = order.count
        for record in batch { for (index, key) in record.windowKeys.enumerated() where index % 2 == 1 { add(key, record.uid) } }
        guard !order.isEmpty else {
            done?()
            return
        }
        let arguments = [nowArgument(), ttlArgument(), String(streamSets)] + order.map { members[$0, default: []].joined(separator: " ") }
        evaluate(.refresh, keys: order, arguments: arguments, on: loops[0]) { [weak self] result in
            if case .failure(let error) = result {
                self?.logger.warning("redis lease refresh failed", [("error", .string("\(error)"))])
            }
            guard let self, !rest.isEmpty, !self.refreshTimer.withLock({ $0.stopped }) else {
                done?()
                return
            }
            self.refresh(rest, done)
        }
    }

    private func scheduleRefresh() {
        guard !refreshTimer.withLock({ $0.stopped }) else { return }
        let timer = loops[0].schedule(afterSeconds: settings.leaseTTLSeconds / 3) { [weak self] in
            guard let self, !self.refreshTimer.withLock({ $0.stopped }) else { return }
            self.refreshNow()
            self.scheduleRefresh()
        }
        refreshTimer.withLock { $0.timer = timer }
    }

    // MARK: Degraded decisions

    private func unavailable(_ request: AdmissionRequest, id: UInt64, on loop: any LoopScheduler, why: String,
                             _ completion: @escaping @Sendable (AdmissionDecision) -> Void) {
        logger.debug("redis admission unavailable", [("error", .string(why)), ("onUnavailable", .string(settings.onUnavailable.rawValue))])
        switch settings.onUnavailable {
        case .local where fallback != nil:
            counters.withLock { $0.localFallback += 1 }
            fallback?.admit(request, on: loop) { [weak self] decision in
                guard case .admitted(let inner) = decision else { return completion(decision) }
                self?.live.withLock {
                    $0[id] = Live(loop: loop, uid: "", mode: .local, streamKeys: [nil, nil], windowKeys: [], windowEnds: (0, 0), fallbackGrant: inner)
                }
                completion(.admitted(AdmissionGrant(id: id, reservedTokens: inner.reservedTokens, mode: .local)))
            }
        case .allow:
            counters.withLock { $0.allowedUnavailable += 1 }
            completion(.admitted(AdmissionGrant(id: id, reservedTokens: request.budget?.tokens ?? 0, mode: .allowedUnavailable)))
        case .reject, .local:
            counters.withLock { $0.rejectedUnavailable += 1 }
            completion(.refused(.unavailable))
        }
    }

    // MARK: Redis

    private func makeClient(_ loop: EventLoop) -> RedisClient {
        let client = RedisClient(loop: loop, configuration: settings.redis, logger: logger, resolver: settings.resolver)
        client.onReady = { [weak self, unowned client] in
            for name in RedisAdmissionScripts.Name.allCases {
                client.send(["SCRIPT", "LOAD", RedisAdmissionScripts.source(name)]) { result in
                    guard case .success(let value) = result, let sha = value.string else { return }
                    self?.shas.withLock { $0[name] = sha }
                }
            }
            guard let self else { return }
            self.flushPendingSettles(on: loop)
        }
        clients.withLock { $0[ObjectIdentifier(loop)] = client }
        return client
    }

    /// The loop's client; a loop the store was not built with gets one now (tests, late loops). The attestation
    /// store sends on these connections too.
    package func client(for scheduler: any LoopScheduler) -> RedisClient {
        // A Redis connection needs sockets on a real loop: the store serves the server's loops only, never a fake.
        guard let loop = scheduler.eventLoop else { preconditionFailure("the Redis store runs on event loops only") }
        if let client = clients.withLock({ $0[ObjectIdentifier(loop)] }) { return client }
        let client = makeClient(loop)
        client.start()
        return client
    }

    /// EVALSHA when the hash is known, EVAL otherwise; NOSCRIPT (a restarted or flushed Redis) is answered by one
    /// EVAL, which runs the script and caches it again. Call on `loop`.
    private func evaluate(_ name: RedisAdmissionScripts.Name, keys: [String], arguments: [String], on loop: any LoopScheduler,
                          _ completion: @escaping (Result<RESPValue, RedisError>) -> Void) {
        let client = client(for: loop)
        let tail = [String(keys.count)] + keys + arguments
        guard let sha = shas.withLock({ $0[name] }) else {
            return client.send(["EVAL", RedisAdmissionScripts.source(name)] + tail, completion)
        }
        client.send(["EVALSHA", sha] + tail) { result in
            if case .failure(.server(let message)) = result, message.hasPrefix("NOSCRIPT") {
                client.send(["EVAL", RedisAdmissionScripts.source(name)] + tail, completion)
                return
            }
            completion(result)
        }
    }

    private func key(_ parts: String...) -> String { settings.keyPrefix + parts.joined() }

    /// The four windows' keys (hash, reservations each); `unit` `budget:usd:` for the dollar windows.
    private func windowKeyList(_ budgetKey: String, _ windows: BudgetWindows, unit: String = "budget:") -> [String] {
        let identityDay = key(unit, "id:", budgetKey, ":day:", windows.day)
        let identityMonth = key(unit, "id:", budgetKey, ":month:", windows.month)
        let totalDay = key(unit, "total:day:", windows.day)
        let totalMonth = key(unit, "total:month:", windows.month)
        return [identityDay, identityDay + ":res", identityMonth, identityMonth + ":res", totalDay, totalDay + ":res", totalMonth, totalMonth + ":res"]
    }

    private func nowArgument() -> String { settings.clockMilliseconds.map { String($0()) } ?? "" }
    private func ttlArgument() -> String { ttlString }
}

/// The UTC calendar day and month a wall-clock second falls in (the ledger's `BudgetWindow`), and when each ends.
struct BudgetWindows: Equatable {
    /// For a request without a budget: nothing is read from it.
    static let none = BudgetWindows(day: "", month: "", dayEnd: 0, monthEnd: 0)

    var day: String
    var month: String
    /// Unix seconds at which the day and the month end.
    var dayEnd: Int64
    var monthEnd: Int64

    init(day: String, month: String, dayEnd: Int64, monthEnd: Int64) {
        self.day = day
        self.month = month
        self.dayEnd = dayEnd
        self.monthEnd = monthEnd
    }

    init(wallClockSeconds seconds: Int64) {
        day = BudgetWindow.day.label(at: seconds)
        month = BudgetWindow.month.label(at: seconds)
        dayEnd = seconds + Int64(BudgetWindow.day.secondsUntilReset(from: seconds))
        monthEnd = seconds + Int64(BudgetWindow.month.secondsUntilReset(from: seconds))
    }
}
