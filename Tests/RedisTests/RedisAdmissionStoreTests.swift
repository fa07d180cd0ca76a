import Foundation
import Redis
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import Testing
import TestHarness
import TestSupportCore
import Transport

/// Milliseconds that only move when the test says so (buckets and lease expiry without waiting).
final class ManualMilliseconds: Sendable {
    let value = Locked<Int64>(1_800_000_000_000)
    var read: @Sendable () -> Int64 { { [value] in value.withLock { $0 } } }
    func advance(_ ms: Int64) { value.withLock { $0 += ms } }
}

/// One "replica": a store on its own event loop with its own connection.
struct Replica: Sendable {
    let loop: EventLoop
    let store: RedisAdmissionStore

    init(_ server: RedisServerProcess, _ settings: RedisAdmissionStore.Settings, fallback: (any AdmissionStore)? = nil, index: Int = 0,
         metrics: RelayMetrics? = nil) {
        var settings = settings
        settings.redis.port = server.port
        loop = EventLoop(index: index)
        store = RedisAdmissionStore(settings: settings, loops: [loop], fallback: fallback, logger: Logger(label: "redis-store", level: .error),
                                    metrics: metrics)
    }

    func admit(_ request: AdmissionRequest) throws -> AdmissionDecision {
        let box = Mailbox<AdmissionDecision>()
        loop.execute { store.admit(request, on: loop) { box.put($0) } }
        return try box.take(timeout: 5)
    }

    /// `count` admissions issued in one turn of the loop (all in flight together); decisions go to `box`, each
    /// with the replica that decided it (the one that must settle it).
    func burst(_ count: Int, _ request: AdmissionRequest, into box: Mailbox<(Replica, AdmissionDecision)>) {
        let replica = self
        loop.execute { for _ in 0..<count { store.admit(request, on: loop) { box.put((replica, $0)) } } }
    }

    func extend(_ grant: AdmissionGrant, _ tokens: Int) throws -> Bool {
        let box = Mailbox<Bool>()
        loop.execute { store.extend(grant, byTokens: tokens, on: loop) { box.put($0) } }
        return try box.take(timeout: 5)
    }

    func report(_ identity: String, wall: Int64) throws -> BudgetReport? {
        let box = Mailbox<BudgetReport?>()
        loop.execute { store.usageReport(identity: identity, wallClockSeconds: wall, on: loop) { box.put($0) } }
        return try box.take(timeout: 5)
    }

    func refresh() throws {
        let gate = Gate()
        loop.execute { store.refreshNow { gate.signal() } }
        try gate.wait(timeout: 5)
    }
}

/// One hour into today (UTC): budget keys expire an hour after their window ends by Redis's own clock, so a
/// fixed date would have its keys gone at once once that day is past (these tests failed the day after they were
/// written). `day` and `month` are the windows' names in the keys and the report.
private let wall: Int64 = Int64(Date().timeIntervalSince1970) / 86_400 * 86_400 + 3_600
private let day = BudgetWindow.day.label(at: wall)
private let month = BudgetWindow.month.label(at: wall)

private func request(_ identity: String? = "alice", tokens: Int? = nil) -> AdmissionRequest {
    AdmissionRequest(address: "10.0.0.1", identity: identity, budget: tokens.map { BudgetCharge(key: identity ?? "10.0.0.1", tokens: $0) },
                     wallClockSeconds: wall)
}

private func admitted(_ decisions: [AdmissionDecision]) -> [AdmissionGrant] {
    decisions.compactMap { if case .admitted(let grant) = $0 { grant } else { nil } }
}

private func admitted(_ decisions: [(Replica, AdmissionDecision)]) -> [(Replica, AdmissionGrant)] {
    decisions.compactMap { if case .admitted(let grant) = $0.1 { ($0.0, grant) } else { nil } }
}

@Suite struct RedisAdmissionStoreTests {
    /// A bucket of 10 (no refill: the clock stands still) admits exactly 10 of 40 requests sent at once through
    /// two replicas; the others are refused with a Retry-After.
    @Test func bucketAdmitsExactlyNAcrossTwoReplicas() throws {
        let server = try RedisServerProcess()
        let clock = ManualMilliseconds()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), perIdentity: RateLimits(requestsPerMinute: 10), clockMilliseconds: clock.read)
        let one = Replica(server, settings), two = Replica(server, settings, index: 1)
        let box = Mailbox<(Replica, AdmissionDecision)>()
        one.burst(20, request(), into: box)
        two.burst(20, request(), into: box)
        let decisions = try (0..<40).map { _ in try box.take(timeout: 5) }
        #expect(admitted(decisions).count == 10)
        #expect(decisions.filter { $0.1 == .refused(.rate(retryAfterSeconds: 6)) }.count == 30)
        clock.advance(6_000)
        #expect(admitted([try two.admit(request())]).count == 1, "one token back after 6 s at 10/min")
        #expect(try one.admit(request()) == .refused(.rate(retryAfterSeconds: 6)))
    }

    /// A cap of 3 streams holds across replicas; settling one frees its slot for the other replica.
    @Test func concurrencyCapHoldsAcrossReplicas() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), perIdentity: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 3))
        let one = Replica(server, settings), two = Replica(server, settings, index: 1)
        let box = Mailbox<(Replica, AdmissionDecision)>()
        one.burst(5, request(), into: box)
        two.burst(5, request(), into: box)
        let decisions = try (0..<10).map { _ in try box.take(timeout: 5) }
        let grants = admitted(decisions)
        #expect(grants.count == 3)
        #expect(decisions.filter { $0.1 == .refused(.concurrency(retryAfterSeconds: 1)) }.count == 7)
        #expect(try two.report("alice", wall: wall)?.openStreams == 3)
        #expect(try one.admit(request()) == .refused(.concurrency(retryAfterSeconds: 1)))
        // One replica settles one of its grants: the other replica gets the slot.
        let (owner, grant) = try #require(grants.first)
        owner.store.settle(grant, usedTokens: 0)
        let other = owner.loop === one.loop ? two : one
        try eventually("a slot freed", timeout: 5) { admitted([try other.admit(request())]).count == 1 }
    }

    /// A replica killed with -9 (here: shut down without settling, its refresh stopped) frees its leases once the
    /// TTL passes; a live replica's refresh keeps them.
    @Test func leaseExpiryFreesSlotsAndRefreshKeepsThem() throws {
        let server = try RedisServerProcess()
        let clock = ManualMilliseconds()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), leaseTTLSeconds: 1,
                                                     perIdentity: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 1),
                                                     clockMilliseconds: clock.read)
        let holder = Replica(server, settings), other = Replica(server, settings, index: 1)
        #expect(admitted([try holder.admit(request())]).count == 1)
        #expect(try other.admit(request()) == .refused(.concurrency(retryAfterSeconds: 1)))
        clock.advance(800)
        try holder.refresh()
        clock.advance(800)
        #expect(try other.admit(request()) == .refused(.concurrency(retryAfterSeconds: 1)), "refreshed at 0.8 s: alive at 1.6 s")
        holder.store.shutdown()
        clock.advance(1_001)
        #expect(admitted([try other.admit(request())]).count == 1, "lapsed 1 s after its last refresh")
    }

    /// The refresh goes in batches (`refreshBatchGrants`), one script each, the next once the previous answered:
    /// one script for every live grant blocked Redis for tens of milliseconds at a few thousand grants. Every lease of
    /// every batch is pushed.
    @Test func refreshGoesInBatchesAndKeepsEveryLease() throws {
        let server = try RedisServerProcess()
        let clock = ManualMilliseconds()
        var settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), leaseTTLSeconds: 1,
                                                    perIdentity: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 5),
                                                    clockMilliseconds: clock.read)
        settings.refreshBatchGrants = 2
        let holder = Replica(server, settings), other = Replica(server, settings, index: 1)
        #expect(admitted((0..<5).map { _ in try! holder.admit(request()) }).count == 5)
        #expect(try other.admit(request()) == .refused(.concurrency(retryAfterSeconds: 1)))
        let before = try Self.scriptCalls(server)
        clock.advance(800)
        try holder.refresh()
        #expect(try Self.scriptCalls(server) - before == 3, "5 grants in batches of 2")
        clock.advance(800)
        #expect(try other.admit(request()) == .refused(.concurrency(retryAfterSeconds: 1)), "all 5 refreshed at 0.8 s: alive at 1.6 s")
        holder.store.shutdown()
        clock.advance(1_001)
        #expect(admitted([try other.admit(request())]).count == 1)
    }

    /// Script calls Redis has run so far (`EVALSHA` and `EVAL`, from `INFO commandstats`).
    static func scriptCalls(_ server: RedisServerProcess) throws -> Int {
        try server.info("commandstats").split(whereSeparator: \.isNewline).reduce(0) { sum, line in
            guard line.hasPrefix("cmdstat_evalsha:") || line.hasPrefix("cmdstat_eval:"),
                  let calls = line.split(separator: ",").first?.split(separator: "=").last, let n = Int(calls) else { return sum }
            return sum + n
        }
    }

    /// After SCRIPT FLUSH, and after a restart of Redis (empty script cache, the connection lost), admissions go
    /// on without restarting the store.
    @Test func scriptCacheLossIsRecovered() throws {
        let server = try RedisServerProcess()
        let replica = Replica(server, RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000)))
        #expect(admitted([try replica.admit(request())]).count == 1)
        try eventually("scripts loaded", timeout: 5) { replica.store.loadedScriptCount == 5 }
        #expect(admitted([try replica.admit(request())]).count == 1)
        #expect(try server.command("SCRIPT FLUSH") == "+OK")
        #expect(admitted([try replica.admit(request())]).count == 1, "NOSCRIPT answered by EVAL")
        try server.restart()
        try eventually("admitting after the restart", timeout: 5) { admitted([try replica.admit(request())]).count == 1 }
    }

    /// Redis stopped (SIGSTOP): each onUnavailable answers within about timeoutMs; a grant decided locally
    /// settles in the fallback; a running stream's extension is never refused for want of Redis.
    @Test(arguments: RedisAdmissionStore.OnUnavailable.allCases)
    func unavailableRedisAnswersPerPolicyWithinTheTimeout(_ policy: RedisAdmissionStore.OnUnavailable) throws {
        let server = try RedisServerProcess()
        let fallback = RecordingAdmissionStore(.admitAll(grantID: 7_000))
        let replica = Replica(server, RedisAdmissionStore.Settings(redis: .init(timeoutMs: 150), onUnavailable: policy,
                                                                    budgets: .init(identityTokensPerDay: 1_000)), fallback: fallback)
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        let running = try #require(admitted([try replica.admit(request(tokens: 100))]).first)
        server.pause()
        defer { server.resume() }
        let start = monotonicNanoseconds()
        let decision = try replica.admit(request(tokens: 100))
        let elapsedMs = Double(monotonicNanoseconds() - start) / 1e6
        // Never before the timeout; the upper bound is wide, for a loaded machine.
        #expect(elapsedMs >= 140 && elapsedMs < 1_000, "answered after \(elapsedMs) ms (timeout 150 ms)")
        #expect(try replica.extend(running, 5_000), "a running stream is not cut because Redis is away")
        switch policy {
        case .reject:
            #expect(decision == .refused(.unavailable))
        case .allow:
            let grant = try #require(admitted([decision]).first)
            #expect(grant.mode == .allowedUnavailable)
            replica.store.settle(grant, usedTokens: 10)
        case .local:
            let grant = try #require(admitted([decision]).first)
            #expect(grant.mode == .local)
            #expect(try replica.extend(grant, 50))
            replica.store.settle(grant, usedTokens: 42)
            #expect(fallback.log == ["admit", "extend 7000", "settle 7000 42"])
        }
        #expect(replica.store.unavailableCounters.extendedUnavailable == 1)
    }

    /// 50 reservations of 700 tokens at once from two replicas against a daily budget of 10 000: exactly 14 fit
    /// (9 800), never more, and a refusal leaves nothing behind (no bucket token, no lease, no reservation).
    @Test func budgetReservationsNeverOverspend() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), perIdentity: RateLimits(requestsPerMinute: 1_000, maxConcurrentStreams: 100),
                                                     budgets: .init(identityTokensPerDay: 10_000))
        let one = Replica(server, settings), two = Replica(server, settings, index: 1)
        let box = Mailbox<(Replica, AdmissionDecision)>()
        one.burst(25, request(tokens: 700), into: box)
        two.burst(25, request(tokens: 700), into: box)
        let decisions = try (0..<50).map { _ in try box.take(timeout: 5) }
        let grants = admitted(decisions)
        #expect(grants.count == 14)
        #expect(decisions.filter { $0.1 == .refused(.budget(retryAfterSeconds: 23 * 3_600)) }.count == 36)
        let report = try #require(try one.report("alice", wall: wall))
        #expect(report.windows[0].reservedTokens == 9_800)
        #expect(report.windows[0].period == day && report.windows[1].period == month)
        #expect(report.openStreams == 14)
        // The refusals took nothing: 14 bucket tokens gone of 1000, 14 leases.
        #expect(try server.command("ZCARD sse-relay:streams:id:alice") == ":14")
        #expect(try server.command("EXISTS sse-relay:rate:id:alice") == ":1")

        // Settle at the real usage: the budget then counts what was used, not what was reserved.
        for (replica, grant) in grants { replica.store.settle(grant, usedTokens: 500) }
        try eventually("settled", timeout: 5) { try one.report("alice", wall: wall)?.windows[0].usedTokens == 7_000 }
        let after = try #require(try one.report("alice", wall: wall))
        #expect(after.windows[0].reservedTokens == 0 && after.openStreams == 0)
    }

    /// Dollar budgets in the same scripts (issue 23): 50 reservations of 700 tokens and $0.0007 from two replicas
    /// against $0.01 a day (and a token limit that would take them all): exactly 14 fit, in one admission each; an
    /// extension grows tokens and dollars or neither; the settle charges the exact nano-dollars.
    @Test func dollarReservationsNeverOverspend() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), perIdentity: RateLimits(requestsPerMinute: 1_000, maxConcurrentStreams: 100),
                                                     budgets: .init(identityTokensPerDay: 1_000_000, nanoUSD: [10_000_000, nil, nil, 50_000_000]))
        let one = Replica(server, settings), two = Replica(server, settings, index: 1)
        let box = Mailbox<(Replica, AdmissionDecision)>()
        let charged = AdmissionRequest(address: "10.0.0.1", identity: "alice", budget: BudgetCharge(key: "alice", tokens: 700, nanoUSD: 700_000),
                                       wallClockSeconds: wall)
        one.burst(25, charged, into: box)
        two.burst(25, charged, into: box)
        let decisions = try (0..<50).map { _ in try box.take(timeout: 5) }
        let grants = admitted(decisions)
        #expect(grants.count == 14)
        #expect(decisions.filter { $0.1 == .refused(.budget(retryAfterSeconds: 23 * 3_600)) }.count == 36)
        let report = try #require(try one.report("alice", wall: wall))
        #expect(report.windows[0].reservedNanoUSD == 9_800_000 && report.windows[0].reservedTokens == 9_800)
        #expect(report.windows[0].limitNanoUSD == 10_000_000)
        #expect(try server.command("HINCRBY sse-relay:budget:usd:total:month:\(month) reserved 0") == ":9800000")

        // 200 000 left: an extension of 300 000 is refused and grows neither unit.
        let (owner, grant) = try #require(grants.first)
        let grown = Mailbox<Bool>()
        owner.loop.execute { owner.store.extend(grant, by: BudgetAmount(tokens: 10, nanoUSD: 300_000), on: owner.loop) { grown.put($0) } }
        #expect(try grown.take(timeout: 5) == false)
        owner.loop.execute { owner.store.extend(grant, by: BudgetAmount(tokens: 10, nanoUSD: 200_000), on: owner.loop) { grown.put($0) } }
        #expect(try grown.take(timeout: 5) == true)
        #expect(try one.report("alice", wall: wall)?.windows[0].reservedTokens == 9_810)

        for (replica, grant) in grants { replica.store.settle(grant, used: BudgetAmount(tokens: 500, nanoUSD: 123_457)) }
        try eventually("settled", timeout: 5) { try one.report("alice", wall: wall)?.windows[0].usedNanoUSD == 14 * 123_457 }
        let after = try #require(try one.report("alice", wall: wall))
        #expect(after.windows[0].reservedNanoUSD == 0 && after.windows[0].usedTokens == 7_000)
        #expect(try server.command("HINCRBY sse-relay:budget:usd:total:day:\(day) used 0") == ":1728398")
    }

    /// A refusal by the budget leaves the bucket and the stream set untouched.
    @Test func refusalHasNoSideEffects() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), perIdentity: RateLimits(requestsPerMinute: 5, maxConcurrentStreams: 1),
                                                     budgets: .init(identityTokensPerDay: 100))
        let replica = Replica(server, settings)
        #expect(try replica.admit(request(tokens: 500)) == .refused(.budget(retryAfterSeconds: 23 * 3_600)))
        #expect(try server.command("EXISTS sse-relay:rate:id:alice") == ":0")
        #expect(try server.command("EXISTS sse-relay:streams:id:alice") == ":0")
        #expect(try server.command("EXISTS sse-relay:budget:id:alice:day:\(day)") == ":0")
    }

    /// Extensions grow a reservation while the budget covers them; settling charges the real usage.
    @Test func extendGrowsTheReservationUntilTheBudgetIsSpent() throws {
        let server = try RedisServerProcess()
        let replica = Replica(server, RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), budgets: .init(identityTokensPerDay: 2_500, totalTokensPerDay: 100_000)))
        let grant = try #require(admitted([try replica.admit(request(tokens: 1_000))]).first)
        #expect(try replica.extend(grant, 1_000))
        #expect(try replica.extend(grant, 1_000) == false)
        #expect(try replica.report("alice", wall: wall)?.windows[0].reservedTokens == 2_000)
        replica.store.settle(grant, usedTokens: 1_500)
        try eventually("settled", timeout: 5) { try replica.report("alice", wall: wall)?.windows[0].usedTokens == 1_500 }
        #expect(try replica.report("alice", wall: wall)?.windows[0].reservedTokens == 0)
        #expect(try server.command("HINCRBY sse-relay:budget:total:day:\(day) used 0") == ":1500")
    }

    /// Redis stalls (SIGSTOP) with an admission written to it: the store answers onUnavailable at the timeout, but
    /// Redis runs the script when it wakes. That late run must not keep a lease and a reservation nobody will ever
    /// settle: the client was refused, yet it held its one stream slot and 600 of its 1 000 tokens for the lease TTL.
    @Test(arguments: RedisAdmissionStore.OnUnavailable.allCases)
    func anAdmissionRunAfterItsTimeoutLeavesNothingBehind(_ policy: RedisAdmissionStore.OnUnavailable) throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 150), onUnavailable: policy, leaseTTLSeconds: 30,
                                                     perIdentity: RateLimits(requestsPerMinute: 1_000, maxConcurrentStreams: 1),
                                                     budgets: .init(identityTokensPerDay: 1_000))
        let replica = Replica(server, settings, fallback: RecordingAdmissionStore(.admitAll(grantID: 7_000)))
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        server.pause()
        let degraded = try replica.admit(request(tokens: 600))
        server.resume()
        if case .admitted(let grant) = degraded { replica.store.settle(grant, usedTokens: 0) }
        // Redis runs what it had buffered (the late admission) before anything from the reconnected client.
        try eventually("the slot and the tokens are free again", timeout: 5) {
            guard case .admitted(let grant) = try replica.admit(request(tokens: 600)) else { return false }
            replica.store.settle(grant, usedTokens: 0)
            return grant.mode == .shared   // decided by Redis, not by onUnavailable while reconnecting
        }
    }

    // MARK: Settles while Redis is away (issue 18 §5)

    /// Redis stopped: the stream's settle fails, is kept, and lands once Redis is back (a new, empty server here, as
    /// after a restart without persistence): the usage is counted, nothing dropped.
    @Test func aSettleWhileRedisIsDownIsAppliedWhenItIsBack() throws {
        let server = try RedisServerProcess()
        let metrics = RelayMetrics()
        let replica = Replica(server, RedisAdmissionStore.Settings(redis: .init(timeoutMs: 500), budgets: .init(identityTokensPerDay: 100_000)),
                              metrics: metrics)
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        let grant = try #require(admitted([try replica.admit(request(tokens: 1_000))]).first)
        server.kill()
        replica.store.settle(grant, usedTokens: 700)
        try eventually("the failed settle is kept", timeout: 10) { replica.store.pendingSettleCount == 1 }
        #expect(replica.store.unavailableCounters.settleFailures >= 1)
        try server.restart()
        try eventually("the settle applied once Redis is back", timeout: 10) {
            replica.store.pendingSettleCount == 0 && (try? replica.report("alice", wall: wall))??.windows[0].usedTokens == 700
        }
        #expect(replica.store.unavailableCounters.settlesDropped == 0)
        #expect(metrics.render().contains("sse_relay_settles_dropped_total 0\n"))
    }

    /// The queue is bounded: with room for 2, the third failed settle drops the oldest, counted in
    /// `sse_relay_settles_dropped_total`; the two kept land when Redis is back.
    @Test func pendingSettlesAreBoundedAndDropsAreCounted() throws {
        let server = try RedisServerProcess()
        let metrics = RelayMetrics()
        var settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 500), budgets: .init(identityTokensPerDay: 100_000))
        settings.maxPendingSettles = 2
        settings.settleRetryInitialMs = 60_000   // only the reconnect sends them again: the queue's order stays the failures'
        let replica = Replica(server, settings, metrics: metrics)
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        let grants = try (0..<3).map { _ in try #require(admitted([try replica.admit(request(tokens: 100))]).first) }
        server.kill()
        for (grant, used) in zip(grants, [10, 20, 30]) { replica.store.settle(grant, usedTokens: used) }
        try eventually("two kept, one dropped", timeout: 10) {
            replica.store.pendingSettleCount == 2 && replica.store.unavailableCounters.settlesDropped == 1
        }
        #expect(metrics.render().contains("sse_relay_settles_dropped_total 1\n"))
        try server.restart()
        try eventually("the two kept settles applied", timeout: 10) {
            replica.store.pendingSettleCount == 0 && (try? replica.report("alice", wall: wall))??.windows[0].usedTokens == 20 + 30
        }
    }

    /// Redis stalls (SIGSTOP) with a settle written to it: its reply times out, so the store keeps it and sends it
    /// again; Redis, woken, runs both. The grant's tombstone makes the second a no-op: 700 used, not 1 400.
    @Test func aSettleSentTwiceIsAppliedOnce() throws {
        let server = try RedisServerProcess()
        var settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 150), budgets: .init(identityTokensPerDay: 100_000))
        settings.settleRetryInitialMs = 10
        let replica = Replica(server, settings)
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        let grant = try #require(admitted([try replica.admit(request(tokens: 1_000))]).first)
        server.pause()
        replica.store.settle(grant, usedTokens: 700)
        try eventually("the unanswered settle is kept", timeout: 10) { replica.store.unavailableCounters.settleFailures >= 1 }
        server.resume()
        try eventually("settled", timeout: 10) {
            replica.store.pendingSettleCount == 0 && (try? replica.report("alice", wall: wall))??.windows[0].usedTokens == 700
        }
        // Both copies have run by now (the first was in Redis's socket before the second was sent): a later
        // admission and report see one charge.
        _ = try replica.admit(request(tokens: 1))
        #expect(try replica.report("alice", wall: wall)?.windows[0].usedTokens == 700)
        #expect(replica.store.unavailableCounters.settlesDropped == 0)
    }

    /// A budget in dollars only has no token limit, so reservations of the most tokens a body can ask for (its
    /// `max_tokens` saturated, a model whose output is priced at 0) are summed in the token windows unchecked. Their
    /// sum must stay an exact integer for Lua and inside HINCRBY's 64 bits: an overflow fails the script (after its
    /// first writes), which the store takes for "Redis unavailable", and every later admission in the total
    /// window would fail alike.
    @Test func reservationsAtTheCeilingNeverOverflowTheWindows() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), budgets: .init(nanoUSD: [nil, nil, 1_000_000_000, nil]))
        let replica = Replica(server, settings)
        let most = RequestBodyPlan.maxReservation * 2   // the output ceiling and the prompt estimate, both saturated
        for i in 0..<5 {
            let huge = AdmissionRequest(address: "10.0.0.9", identity: "m\(i)", budget: BudgetCharge(key: "m\(i)", tokens: most, nanoUSD: 10),
                                        wallClockSeconds: wall)
            #expect(admitted([try replica.admit(huge)]).first?.mode == .shared)
        }
        let ordinary = AdmissionRequest(address: "10.0.0.1", identity: "alice", budget: BudgetCharge(key: "alice", tokens: 100, nanoUSD: 10),
                                        wallClockSeconds: wall)
        #expect(admitted([try replica.admit(ordinary)]).first?.mode == .shared)
        #expect(replica.store.unavailableCounters.rejectedUnavailable == 0)
    }

    // MARK: Shutdown

    /// The server shuts down right after its last exchanges ended: their settles are queued on the loop ahead of
    /// the store's shutdown, so they reach Redis before the connection closes. Closing first would drop them, and
    /// every stream cut at the end of a drain would go uncounted.
    @Test func aSettleQueuedBeforeShutdownReachesRedis() throws {
        let server = try RedisServerProcess()
        let settings = RedisAdmissionStore.Settings(redis: .init(timeoutMs: 2_000), budgets: .init(identityTokensPerDay: 100_000))
        let replica = Replica(server, settings), other = Replica(server, settings, index: 1)
        try eventually("connected, scripts loaded", timeout: 10) { replica.store.loadedScriptCount == 5 }
        let grant = try #require(admitted([try replica.admit(request(tokens: 1_000))]).first)
        try onLoop(replica.loop) {
            replica.store.settle(grant, usedTokens: 700)
            replica.store.shutdown()
        }
        try eventually("the settle reached Redis", timeout: 5) {
            (try? other.report("alice", wall: wall))??.windows[0].usedTokens == 700
        }
        #expect(replica.store.unavailableCounters.settlesDropped == 0)
    }
}
