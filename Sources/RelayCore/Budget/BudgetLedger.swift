/// Token and dollar limits of one budget (`budgets.perIdentity`, `budgets.total`); nil for no limit in that window.
/// Dollars are held as nano-dollars (`usdPerDay` × 10⁹), exact integers.
package struct BudgetLimits: Sendable, Equatable {
    package var tokensPerDay: Int?
    package var tokensPerMonth: Int?
    package var nanoUSDPerDay: Int?
    package var nanoUSDPerMonth: Int?

    package init(tokensPerDay: Int? = nil, tokensPerMonth: Int? = nil, nanoUSDPerDay: Int? = nil, nanoUSDPerMonth: Int? = nil) {
        self.tokensPerDay = tokensPerDay
        self.tokensPerMonth = tokensPerMonth
        self.nanoUSDPerDay = nanoUSDPerDay
        self.nanoUSDPerMonth = nanoUSDPerMonth
    }

    package var isEmpty: Bool { tokensPerDay == nil && tokensPerMonth == nil && !hasDollarLimits }
    package var hasDollarLimits: Bool { nanoUSDPerDay != nil || nanoUSDPerMonth != nil }
}

/// The UTC calendar windows budgets count in, computed from Unix seconds (no Foundation, no time zone: a day is
/// 86 400 s; leap seconds do not exist in Unix time).
package enum BudgetWindow: Sendable, Equatable {
    case day, month

    /// Days since 1970-01-01 (UTC).
    static func dayNumber(_ seconds: Int64) -> Int64 { floorDiv(seconds, 86_400) }

    /// The window's period: the day number for `day`, `year·12 + month−1` for `month`.
    func period(at seconds: Int64) -> Int64 {
        self == .day ? Self.dayNumber(seconds) : BudgetPeriods(at: seconds).month
    }

    /// Seconds from `seconds` to the start of the next window (at least 1).
    package func secondsUntilReset(from seconds: Int64) -> Int {
        let day = Self.dayNumber(seconds)
        let next: Int64
        switch self {
        case .day:
            next = (day + 1) * 86_400
        case .month:
            let (y, m, _) = Self.civil(fromDays: day)
            next = Self.days(fromCivil: m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86_400
        }
        return Int(max(1, next - seconds))
    }

    /// `2026-12-01` for a day, `2026-12` for a month: the window that contains `seconds`.
    package func label(at seconds: Int64) -> String {
        let (y, m, d) = Self.civil(fromDays: Self.dayNumber(seconds))
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        switch self {
        case .day: return "\(y)-\(two(m))-\(two(d))"
        case .month: return "\(y)-\(two(m))"
        }
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day number.
    static func civil(fromDays z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = z0 + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Howard Hinnant's `days_from_civil`.
    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

/// The day and month periods of one moment (what `BudgetWindow.period(at:)` answers for each), computed once per
/// ledger operation: the month's needs a calendar conversion, which every account and window looked at repeated.
struct BudgetPeriods: Equatable {
    let day: Int64
    let month: Int64

    init(at seconds: Int64) {
        day = BudgetWindow.dayNumber(seconds)
        let (y, m, _) = BudgetWindow.civil(fromDays: day)
        month = y * 12 + (m - 1)
    }
}

/// Token budgets as a value: per key (an identity, or a client address on `auth: "none"` routes) and in total,
/// each over the UTC calendar day and month. Pure: time comes in as Unix seconds. Mutable; whoever holds it owns
/// it (`MemoryAdmissionStore` keeps it behind its lock).
///
/// Reserve, then settle, like a card hold: `reserve` takes the request's ceiling in all four windows (the key's
/// day and month, the total's day and month) or in none; `extend` grows a reservation the same way; `settle`
/// charges what was really used and releases the rest. A window counts `used + reserved`, so requests running at
/// once can together spend at most the limit plus what each used beyond its reservation.
///
/// Windows roll over lazily: the first touch after midnight (or the month's end) starts the new window from zero.
/// A reservation made in a window that has since rolled over is forgotten with that window; its settlement is
/// charged to the current window. Memory: one small entry per key seen this month, plus one per open reservation;
/// when the month rolls over, idle keys are dropped (`prune`).
///
/// Keys are bounded (`maxKeys`, `limits.maxTrackedIdentities`): a new key that finds the table full evicts the
/// least recently used *idle* key (no open reservation), which forgets that key's spend. A key with an open
/// reservation is never evicted, so a flood of new keys cannot release anyone's hold; if every key is busy, the
/// table grows past the bound by at most the open reservations (themselves bounded by the connections). The total
/// budget is never evicted: whatever keys are forgotten, `budgets.total` still holds.
package struct BudgetLedger: Sendable {
    /// One window's counters.
    struct Counter: Sendable, Equatable {
        var period: Int64
        var used = 0
        var reserved = 0
    }

    /// A key's (or the total's) day and month.
    struct Account: Sendable, Equatable {
        var day: Counter
        var month: Counter
        /// Reservations open on this key.
        var open = 0
    }

    /// What one reservation holds, in the periods it was taken in.
    struct Reservation: Sendable, Equatable {
        var key: String
        var dayPeriod: Int64
        var dayTokens: Int
        var monthPeriod: Int64
        var monthTokens: Int
    }

    /// The answer to `reserve` and `extend`.
    package enum Decision: Sendable, Equatable {
        case reserved(id: UInt64)
        /// Some window cannot hold it: seconds until the latest of the refusing windows resets.
        case refused(retryAfterSeconds: Int)
    }

    package let perKey: BudgetLimits
    package let total: BudgetLimits
    /// Keys remembered at most (see the type's documentation).
    package let maxKeys: Int
    private var accounts: [String: Account] = [:]
    /// The keys without an open reservation, least recently used first: the eviction order.
    private var idle = RecencyList()
    /// Idle keys forgotten to make room for new ones.
    package private(set) var evictions = 0
    private var totalAccount = Account(day: Counter(period: .min), month: Counter(period: .min))
    // With room from the start: a dictionary type's first storage makes the Swift runtime scan every
    // conformance record for its key's, which otherwise fell on the first request (S1's cold first byte).
    private var reservations = [UInt64: Reservation](minimumCapacity: 16)
    private var nextID: UInt64 = 0
    /// The month whose idle keys were last dropped.
    private var prunedMonth: Int64 = .min

    package static let defaultMaxKeys = 100_000

    package init(perKey: BudgetLimits, total: BudgetLimits, maxKeys: Int = BudgetLedger.defaultMaxKeys) {
        self.perKey = perKey
        self.total = total
        self.maxKeys = max(1, maxKeys)
    }

    /// Keys remembered now (for tests of the memory bound).
    package var trackedKeys: Int { accounts.count }
    /// Reservations not yet settled.
    package var openReservations: Int { reservations.count }

    /// The Retry-After `reserve` would answer now, or nil when `tokens` fit; changes nothing.
    package func refusal(key: String, tokens: Int, now: Int64) -> Int? {
        let periods = BudgetPeriods(at: now)
        return refusal(rolled(accounts[key], periods), rolled(totalAccount, periods), adding: max(tokens, 0), now: now)
    }

    /// The Retry-After `extend(id, byTokens: tokens)` would answer now, or nil when they fit; changes nothing.
    /// An unknown id is refused without a wait.
    package func refusal(extending id: UInt64, byTokens tokens: Int, now: Int64) -> Int? {
        guard let r = reservations[id] else { return 0 }
        return refusal(key: r.key, tokens: tokens, now: now)
    }

    /// Reserves `tokens` for `key` at `now`, in every window or none.
    package mutating func reserve(key: String, tokens: Int, now: Int64) -> Decision {
        let tokens = max(tokens, 0)
        let periods = BudgetPeriods(at: now)
        if periods.month != prunedMonth { prune(now: now) }
        var account = rolled(accounts[key], periods)
        var totals = rolled(totalAccount, periods)
        if let wait = refusal(account, totals, adding: tokens, now: now) {
            if account.open > 0 || account.month.used > 0 { store(account, for: key) }
            return .refused(retryAfterSeconds: wait)
        }
        nextID &+= 1
        account.day.reserved += tokens
        account.month.reserved += tokens
        account.open += 1
        totals.day.reserved += tokens
        totals.month.reserved += tokens
        store(account, for: key)
        totalAccount = totals
        reservations[nextID] = Reservation(key: key, dayPeriod: account.day.period, dayTokens: tokens,
                                           monthPeriod: account.month.period, monthTokens: tokens)
        return .reserved(id: nextID)
    }

    /// Grows reservation `id` by `tokens` (in the current windows), or refuses and changes nothing. An unknown id
    /// (settled already) is refused without a wait.
    package mutating func extend(_ id: UInt64, byTokens tokens: Int, now: Int64) -> Decision {
        guard var r = reservations[id] else { return .refused(retryAfterSeconds: 0) }
        let tokens = max(tokens, 0)
        let periods = BudgetPeriods(at: now)
        var account = rolled(accounts[r.key], periods)
        var totals = rolled(totalAccount, periods)
        if let wait = refusal(account, totals, adding: tokens, now: now) {
            store(account, for: r.key)
            totalAccount = totals
            return .refused(retryAfterSeconds: wait)
        }
        // A window that rolled over since the reservation forgot its part: only what is added now counts there.
        if r.dayPeriod != account.day.period { (r.dayPeriod, r.dayTokens) = (account.day.period, 0) }
        if r.monthPeriod != account.month.period { (r.monthPeriod, r.monthTokens) = (account.month.period, 0) }
        r.dayTokens += tokens
        r.monthTokens += tokens
        account.day.reserved += tokens
        account.month.reserved += tokens
        totals.day.reserved += tokens
        totals.month.reserved += tokens
        store(account, for: r.key)
        totalAccount = totals
        reservations[id] = r
        return .reserved(id: id)
    }

    /// Ends reservation `id`: `usedTokens` are charged to the current windows, and what it held is released.
    /// Settling an unknown id (twice) does nothing.
    package mutating func settle(_ id: UInt64, usedTokens: Int, now: Int64) {
        guard let r = reservations.removeValue(forKey: id) else { return }
        let used = max(usedTokens, 0)
        let periods = BudgetPeriods(at: now)
        var account = rolled(accounts[r.key], periods)
        var totals = rolled(totalAccount, periods)
        func release(_ counter: inout Counter, period: Int64, tokens: Int) {
            if counter.period == period { counter.reserved = max(0, counter.reserved - tokens) }
            counter.used += used
        }
        release(&account.day, period: r.dayPeriod, tokens: r.dayTokens)
        release(&account.month, period: r.monthPeriod, tokens: r.monthTokens)
        release(&totals.day, period: r.dayPeriod, tokens: r.dayTokens)
        release(&totals.month, period: r.monthPeriod, tokens: r.monthTokens)
        account.open = max(0, account.open - 1)
        store(account, for: r.key)
        totalAccount = totals
    }

    /// Writes `key`'s account and marks it used now: busy (open reservations) keys leave the eviction order, idle
    /// ones go to its newest end. A new key first makes room, evicting the least recently used idle key.
    private mutating func store(_ account: Account, for key: String) {
        if let i = accounts.index(forKey: key) {
            accounts.values[i] = account   // one lookup for a known key
        } else {
            while accounts.count >= maxKeys, let oldest = idle.oldest {
                idle.remove(oldest)
                accounts.removeValue(forKey: oldest)
                evictions += 1
            }
            accounts[key] = account
        }
        if account.open > 0 { idle.remove(key) } else { idle.touch(key) }
    }

    /// The key's windows at `now` (used, reserved, limit, seconds to reset), day then month.
    package func report(key: String, now: Int64) -> [BudgetReport.Window] {
        let account = rolled(accounts[key], BudgetPeriods(at: now))
        return [
            BudgetReport.Window(name: "day", period: BudgetWindow.day.label(at: now), usedTokens: account.day.used,
                                reservedTokens: account.day.reserved, limitTokens: perKey.tokensPerDay,
                                resetsInSeconds: BudgetWindow.day.secondsUntilReset(from: now)),
            BudgetReport.Window(name: "month", period: BudgetWindow.month.label(at: now), usedTokens: account.month.used,
                                reservedTokens: account.month.reserved, limitTokens: perKey.tokensPerMonth,
                                resetsInSeconds: BudgetWindow.month.secondsUntilReset(from: now)),
        ]
    }

    /// Forgets keys with nothing to remember: no open reservation and nothing used this month.
    package mutating func prune(now: Int64) {
        let periods = BudgetPeriods(at: now)
        for (key, account) in accounts {
            let a = rolled(account, periods)
            if a.open > 0 || a.month.used > 0 || a.month.reserved > 0 { continue }
            accounts.removeValue(forKey: key)
            idle.remove(key)
        }
        prunedMonth = periods.month
    }

    /// The account as it stands in `periods`: a counter whose period has passed starts over.
    private func rolled(_ account: Account?, _ periods: BudgetPeriods) -> Account {
        var a = account ?? Account(day: Counter(period: periods.day), month: Counter(period: periods.month))
        if a.day.period != periods.day { a.day = Counter(period: periods.day) }
        if a.month.period != periods.month { a.month = Counter(period: periods.month) }
        return a
    }

    /// Nil when `tokens` fit every window; else the seconds until the latest refusing window resets.
    private func refusal(_ account: Account, _ totals: Account, adding tokens: Int, now: Int64) -> Int? {
        var wait: Int?
        func check(_ counter: Counter, _ limit: Int?, _ window: BudgetWindow) {
            guard let limit else { return }
            let (sum, overflow) = (counter.used + counter.reserved).addingReportingOverflow(tokens)
            if overflow || sum > limit { wait = max(wait ?? 0, window.secondsUntilReset(from: now)) }
        }
        check(account.day, perKey.tokensPerDay, .day)
        check(account.month, perKey.tokensPerMonth, .month)
        check(totals.day, total.tokensPerDay, .day)
        check(totals.month, total.tokensPerMonth, .month)
        return wait
    }
}

/// Keys in the order they were last touched, oldest first: O(1) `touch`, `remove` and `oldest`, as a doubly linked
/// list threaded through a dictionary. A plain value, owned by whoever holds it.
struct RecencyList: Sendable {
    private var links: [String: (older: String?, newer: String?)] = [:]
    private(set) var oldest: String?
    private var newest: String?

    var count: Int { links.count }

    /// Makes `key` the newest (adding it if absent).
    mutating func touch(_ key: String) {
        if newest == key { return }
        remove(key)
        links[key] = (older: newest, newer: nil)
        if let newest { links[newest]!.newer = key } else { oldest = key }
        newest = key
    }

    mutating func remove(_ key: String) {
        guard let link = links.removeValue(forKey: key) else { return }
        if let older = link.older { links[older]!.newer = link.newer } else { oldest = link.newer }
        if let newer = link.newer { links[newer]!.older = link.older } else { newest = link.older }
    }

    /// Oldest first (tests).
    var keys: [String] {
        var out: [String] = []
        var next = oldest
        while let key = next {
            out.append(key)
            next = links[key]!.newer
        }
        return out
    }
}
