// BudgetLedger as a value: UTC windows from Unix seconds, reserve/extend/settle, all-or-nothing, rollover, memory.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing
import TestSupportCore

@Suite struct BudgetLedgerTests {
    static let dec15 = Int64(1_797_328_800)        // 2026-12-15T10:00:00Z
    static let dec31Last = Int64(1_798_761_599)    // 2026-12-31T23:59:59Z
    static let jan1 = Int64(1_798_761_600)         // 2027-01-01T00:00:00Z

    @Test func windowsAreUTCCalendarDaysAndMonths() {
        #expect(BudgetWindow.day.label(at: Self.dec15) == "2026-12-15")
        #expect(BudgetWindow.month.label(at: Self.dec15) == "2026-12")
        #expect(BudgetWindow.day.secondsUntilReset(from: Self.dec15) == 14 * 3600)
        #expect(BudgetWindow.month.secondsUntilReset(from: Self.dec15) == 16 * 86_400 + 14 * 3600)
        #expect(BudgetWindow.day.secondsUntilReset(from: Self.dec31Last) == 1)
        #expect(BudgetWindow.month.secondsUntilReset(from: Self.dec31Last) == 1)
        #expect(BudgetWindow.day.label(at: Self.jan1) == "2027-01-01")
        #expect(BudgetWindow.month.period(at: Self.jan1) == BudgetWindow.month.period(at: Self.dec31Last) + 1)
        // Leap day: 2028-02-29 is its own day, and February 2028 ends a day later than February 2026.
        #expect(BudgetWindow.day.label(at: 1_835_395_200) == "2028-02-29")
        #expect(BudgetWindow.month.secondsUntilReset(from: 1_835_395_200) == 86_400)
        #expect(BudgetWindow.month.secondsUntilReset(from: 1_772_280_000) == 12 * 3600)   // 2026-02-28T12:00Z
        // Every day of four years round-trips through the civil calendar.
        for day in Int64(20_000)..<Int64(21_461) {
            let (y, m, d) = BudgetWindow.civil(fromDays: day)
            #expect(BudgetWindow.days(fromCivil: y, m, d) == day)
        }
        // The periods a ledger operation computes once: days since 1970, and year·12 + month−1, at their edges.
        func periods(_ seconds: Int64) -> [Int64] { let p = BudgetPeriods(at: seconds); return [p.day, p.month] }
        #expect(periods(0) == [0, 1970 * 12])
        #expect(periods(-1) == [-1, 1969 * 12 + 11])
        #expect(periods(Self.dec15) == [Self.dec15 / 86_400, 2026 * 12 + 11])
        #expect(periods(Self.dec31Last) == [Self.dec31Last / 86_400, 2026 * 12 + 11])
        #expect(periods(Self.jan1) == [Self.jan1 / 86_400, 2027 * 12])
        #expect(periods(1_835_395_200) == [21_243, 2028 * 12 + 1])            // 2028-02-29
        #expect(periods(1_835_395_200 + 86_400) == [21_244, 2028 * 12 + 2])   // 2028-03-01
        #expect(BudgetWindow.month.period(at: Self.jan1) == 2027 * 12 && BudgetWindow.day.period(at: -86_401) == -2)
    }

    // MARK: The bound on tracked keys (issue 18 §5)

    /// Reserves and settles `tokens` for `key` at `now`: a key that spent, now idle.
    static func spend(_ ledger: inout BudgetLedger, _ key: String, _ tokens: Int, at now: Int64) {
        guard case .reserved(let id) = ledger.reserve(key: key, tokens: tokens, now: now) else {
            Issue.record("\(key) refused")
            return
        }
        ledger.settle(id, usedTokens: tokens, now: now)
    }

    /// Keys a, b, c spend at 10:00:01, :02, :03; a spends again at :04, so b is the least recently used. A new
    /// key at :05 evicts b (forgetting its spend), then the next one c, then a: oldest idle first, by last use.
    @Test func aFullTableEvictsTheLeastRecentlyUsedIdleKey() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000), total: BudgetLimits(), maxKeys: 3)
        Self.spend(&ledger, "a", 100, at: Self.dec15 + 1)
        Self.spend(&ledger, "b", 200, at: Self.dec15 + 2)
        Self.spend(&ledger, "c", 300, at: Self.dec15 + 3)
        Self.spend(&ledger, "a", 1, at: Self.dec15 + 4)
        #expect(ledger.trackedKeys == 3 && ledger.evictions == 0)
        Self.spend(&ledger, "d", 1, at: Self.dec15 + 5)
        #expect(ledger.trackedKeys == 3 && ledger.evictions == 1)
        #expect(ledger.report(key: "b", now: Self.dec15 + 5)[0].usedTokens == 0, "b was not the one evicted")
        #expect(ledger.report(key: "a", now: Self.dec15 + 5)[0].usedTokens == 101)
        #expect(ledger.report(key: "c", now: Self.dec15 + 5)[0].usedTokens == 300)
        Self.spend(&ledger, "e", 1, at: Self.dec15 + 6)
        #expect(ledger.report(key: "c", now: Self.dec15 + 6)[0].usedTokens == 0)
        #expect(ledger.report(key: "a", now: Self.dec15 + 6)[0].usedTokens == 101)
        Self.spend(&ledger, "f", 1, at: Self.dec15 + 7)
        #expect(ledger.report(key: "a", now: Self.dec15 + 7)[0].usedTokens == 0)
        #expect(ledger.trackedKeys == 3 && ledger.evictions == 3)
    }

    /// A key with an open reservation is never evicted, however old: the flood of new keys evicts the idle ones
    /// around it, and when every key is busy the table holds one more rather than release a hold.
    @Test func aKeyWithAnOpenReservationIsNeverEvicted() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000), total: BudgetLimits(), maxKeys: 2)
        guard case .reserved(let held) = ledger.reserve(key: "busy", tokens: 900, now: Self.dec15) else {
            Issue.record("refused")
            return
        }
        for i in 0..<50 { Self.spend(&ledger, "new-\(i)", 1, at: Self.dec15 + 1 + Int64(i)) }
        #expect(ledger.trackedKeys == 2)
        #expect(ledger.report(key: "busy", now: Self.dec15 + 60)[0].reservedTokens == 900)
        #expect(ledger.reserve(key: "busy", tokens: 101, now: Self.dec15 + 60) == .refused(retryAfterSeconds: 14 * 3600 - 60),
                "the busy key's hold was forgotten")
        // Every key busy: a new key is still tracked (the table grows by the open reservations, no more).
        guard case .reserved = ledger.reserve(key: "other", tokens: 1, now: Self.dec15 + 61),
              case .reserved = ledger.reserve(key: "third", tokens: 1, now: Self.dec15 + 62) else {
            Issue.record("refused")
            return
        }
        #expect(ledger.trackedKeys == 3)
        // Once the hold settles, the busy key is idle and, least recently used, the next to go.
        ledger.settle(held, usedTokens: 900, now: Self.dec15 + 63)
        Self.spend(&ledger, "late", 1, at: Self.dec15 + 64)
        #expect(ledger.report(key: "busy", now: Self.dec15 + 64)[0].usedTokens == 0)
    }

    @Test func theRecencyListKeepsTouchOrder() {
        var list = RecencyList()
        for key in ["a", "b", "c", "b", "d", "a"] { list.touch(key) }
        #expect(list.keys == ["c", "b", "d", "a"] && list.oldest == "c")
        list.remove("b")
        list.remove("a")
        list.remove("zz")
        #expect(list.keys == ["c", "d"] && list.count == 2)
        list.remove("c")
        list.remove("d")
        #expect(list.keys.isEmpty && list.oldest == nil)
        list.touch("e")
        #expect(list.keys == ["e"])
    }

    @Test func reserveSettleReleasesTheRest() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000), total: BudgetLimits())
        guard case .reserved(let id) = ledger.reserve(key: "app", tokens: 600, now: Self.dec15) else { Issue.record("refused"); return }
        #expect(ledger.reserve(key: "app", tokens: 401, now: Self.dec15) == .refused(retryAfterSeconds: 14 * 3600))
        ledger.settle(id, usedTokens: 100, now: Self.dec15)
        let day = ledger.report(key: "app", now: Self.dec15)[0]
        #expect(day.usedTokens == 100 && day.reservedTokens == 0 && day.limitTokens == 1000)
        #expect(ledger.reserve(key: "app", tokens: 900, now: Self.dec15) != .refused(retryAfterSeconds: 14 * 3600))
        #expect(ledger.reserve(key: "app", tokens: 1, now: Self.dec15) == .refused(retryAfterSeconds: 14 * 3600))
        ledger.settle(id, usedTokens: 500, now: Self.dec15)   // a second settle changes nothing
        #expect(ledger.report(key: "app", now: Self.dec15)[0].usedTokens == 100)
        #expect(ledger.reserve(key: "other", tokens: 1000, now: Self.dec15) != .refused(retryAfterSeconds: 14 * 3600), "keys are separate")
    }

    @Test func allOrNothingAcrossKeyAndTotalDayAndMonth() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000, tokensPerMonth: 1500),
                                  total: BudgetLimits(tokensPerDay: 1200))
        guard case .reserved(let a) = ledger.reserve(key: "a", tokens: 1000, now: Self.dec15) else { Issue.record("refused"); return }
        ledger.settle(a, usedTokens: 1000, now: Self.dec15)
        // b fits its own windows but not the total's day: refused, and nothing is held anywhere.
        #expect(ledger.reserve(key: "b", tokens: 300, now: Self.dec15) == .refused(retryAfterSeconds: 14 * 3600))
        #expect(ledger.report(key: "b", now: Self.dec15).allSatisfy { $0.reservedTokens == 0 })
        #expect(ledger.openReservations == 0)
        // Next day: a's day window is new, but its month has 500 left: a month refusal waits for the month.
        let dec16 = Self.dec15 + 86_400
        #expect(ledger.reserve(key: "a", tokens: 600, now: dec16) == .refused(retryAfterSeconds: 15 * 86_400 + 14 * 3600))
        // When day and month both refuse, Retry-After is the later reset (the month's).
        #expect(ledger.reserve(key: "a", tokens: 1100, now: dec16) == .refused(retryAfterSeconds: 15 * 86_400 + 14 * 3600))
        #expect(ledger.reserve(key: "a", tokens: 500, now: dec16) != .refused(retryAfterSeconds: 0))
    }

    @Test func extendGrowsAReservationOrRefusesWithoutChange() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 10_000), total: BudgetLimits())
        guard case .reserved(let id) = ledger.reserve(key: "app", tokens: 4096, now: Self.dec15) else { Issue.record("refused"); return }
        #expect(ledger.extend(id, byTokens: 4096, now: Self.dec15) == .reserved(id: id))
        #expect(ledger.report(key: "app", now: Self.dec15)[0].reservedTokens == 8192)
        #expect(ledger.extend(id, byTokens: 4096, now: Self.dec15) == .refused(retryAfterSeconds: 14 * 3600))
        #expect(ledger.report(key: "app", now: Self.dec15)[0].reservedTokens == 8192)
        ledger.settle(id, usedTokens: 9000, now: Self.dec15)
        #expect(ledger.report(key: "app", now: Self.dec15)[0] .usedTokens == 9000)
        #expect(ledger.report(key: "app", now: Self.dec15)[0].reservedTokens == 0)
        #expect(ledger.extend(id, byTokens: 1, now: Self.dec15) == .refused(retryAfterSeconds: 0), "a settled reservation cannot grow")
    }

    @Test func windowsRollOverAtUTCMidnightAndMonthEnd() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 100, tokensPerMonth: 150), total: BudgetLimits())
        guard case .reserved(let id) = ledger.reserve(key: "app", tokens: 100, now: Self.dec31Last) else { Issue.record("refused"); return }
        ledger.settle(id, usedTokens: 100, now: Self.dec31Last)
        #expect(ledger.reserve(key: "app", tokens: 1, now: Self.dec31Last) == .refused(retryAfterSeconds: 1))
        // One second later it is a new day and a new month: everything starts from zero.
        #expect(ledger.reserve(key: "app", tokens: 100, now: Self.jan1) != .refused(retryAfterSeconds: 1))
        let report = ledger.report(key: "app", now: Self.jan1)
        #expect(report.map(\.period) == ["2027-01-01", "2027-01"])
        #expect(report.map(\.usedTokens) == [0, 0])
        #expect(report.map(\.reservedTokens) == [100, 100])
    }

    @Test func aReservationThatOutlivesItsWindowIsChargedToTheNewOne() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000), total: BudgetLimits(tokensPerDay: 5000))
        guard case .reserved(let id) = ledger.reserve(key: "app", tokens: 800, now: Self.dec31Last) else { Issue.record("refused"); return }
        #expect(ledger.extend(id, byTokens: 800, now: Self.jan1) == .reserved(id: id), "the new day holds only the extension")
        ledger.settle(id, usedTokens: 1200, now: Self.jan1)
        let day = ledger.report(key: "app", now: Self.jan1)[0]
        #expect(day.usedTokens == 1200 && day.reservedTokens == 0)
    }

    @Test func oldWindowsAreDroppedWhenTheMonthRollsOver() {
        var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: 1000), total: BudgetLimits())
        for i in 0..<500 {
            if case .reserved(let id) = ledger.reserve(key: "key-\(i)", tokens: 10, now: Self.dec15) {
                ledger.settle(id, usedTokens: 5, now: Self.dec15)
            }
        }
        guard case .reserved(let open) = ledger.reserve(key: "streaming", tokens: 10, now: Self.dec15) else { Issue.record("refused"); return }
        #expect(ledger.trackedKeys == 501)
        _ = ledger.reserve(key: "new", tokens: 10, now: Self.jan1)
        #expect(ledger.trackedKeys == 2, "only the key with an open reservation and the new one are left")
        ledger.settle(open, usedTokens: 10, now: Self.jan1)
        // Refused keys are not remembered.
        for i in 0..<100 { _ = ledger.reserve(key: "big-\(i)", tokens: 5000, now: Self.jan1) }
        #expect(ledger.trackedKeys == 2)
    }

    /// Fifty requests from one identity reserve at once, then settle with what each used (at most its reservation:
    /// a stream without a ceiling grows its reservation before it uses it), interleaved in a seeded random order with
    /// more reservations: the day never holds more than the limit, so nothing is overspent, let alone by more than
    /// one reservation.
    @Test func fiftyConcurrentReservationsNeverOverspend() {
        for seed in UInt64(1)...20 {
            var random = SplitMix64(seed: seed)
            let limit = 20_000, reservation = 1000
            var ledger = BudgetLedger(perKey: BudgetLimits(tokensPerDay: limit), total: BudgetLimits())
            var open: [UInt64] = []
            for _ in 0..<50 {
                if case .reserved(let id) = ledger.reserve(key: "app", tokens: reservation, now: Self.dec15) { open.append(id) }
            }
            #expect(open.count == limit / reservation, "seed \(seed)")
            var pending = 50
            while pending > 0 || !open.isEmpty {
                if pending > 0 && (open.isEmpty || random.next() % 2 == 0) {
                    pending -= 1
                    if case .reserved(let id) = ledger.reserve(key: "app", tokens: reservation, now: Self.dec15) { open.append(id) }
                } else {
                    let id = open.remove(at: Int(random.next() % UInt64(open.count)))
                    ledger.settle(id, usedTokens: Int(random.next() % UInt64(reservation + 1)), now: Self.dec15)
                }
                let day = ledger.report(key: "app", now: Self.dec15)[0]
                #expect(day.usedTokens + day.reservedTokens <= limit, "seed \(seed)")
            }
        }
    }
}
