import Support

/// `state`: where the limits several replicas must agree on are kept (buckets, stream leases, budgets).
package struct StateConfiguration: Sendable, Equatable {
    package enum Backend: Sendable, Equatable {
        /// This process's memory (`MemoryAdmissionStore`): one replica.
        case memory
        /// A Redis server shared by every replica (`state.redis`).
        case redis(Redis)
    }

    /// What an admission does when Redis does not answer within `timeoutMs` or is down.
    package enum OnUnavailable: String, Sendable, Equatable, CaseIterable {
        /// 503 `state_unavailable`.
        case reject
        /// Admit without limits, logged and counted.
        case allow
        /// Decide on this replica's memory limits (`MemoryAdmissionStore`).
        case local
    }

    /// `state.redis`. The URL is parsed here; the Redis store connects with these values.
    package struct Redis: Sendable, Equatable {
        package var host: String
        package var port: Int = 6379
        /// The `SELECT`ed database (the URL's path, `/0` by default).
        package var database: Int = 0
        /// `AUTH` password (`{"env": …}` or `{"file": …}`); nil for none.
        package var password: Secret?
        /// Prepended to every key the relay writes, so several relays (or other users) can share one Redis.
        package var keyPrefix = "sse-relay:"
        /// How long an admission waits for Redis before `onUnavailable` decides.
        package var timeoutMilliseconds = 50
        package var onUnavailable = OnUnavailable.reject
        /// Concurrency leases expire this long after their last refresh (a replica killed with -9 frees its own).
        package var leaseTTLSeconds = 30

        package init(host: String, port: Int = 6379, database: Int = 0) {
            self.host = host
            self.port = port
            self.database = database
        }
    }

    package var backend = Backend.memory
    package init() {}
}

/// `budgets`: token budgets per identity (or client address on `auth: "none"` routes) and in total, per UTC
/// calendar day and month (README, "Budgets").
package struct BudgetConfiguration: Sendable, Equatable {
    /// What happens when a running stream's budget cannot cover the next extension of its reservation.
    package enum OnExceed: String, Sendable, Equatable, CaseIterable {
        /// End the stream at an event boundary with one error event in the provider's shape.
        case cut
        /// Let it run to its end and charge it.
        case finish
    }

    /// The reservation (and each extension) when a request names no ceiling and its route has none: 4096 tokens,
    /// a long chat answer, so most answers need no extension.
    package static let defaultReserve = 4096

    /// Output tokens charged per second of a stream that ends without the provider's counts (a cancel, a cut, a
    /// provider that died), counted from the provider's response head and capped by the output the stream
    /// reserved: a client that waits through a reasoning model's silent phase and then leaves still pays for
    /// the reasoning it caused (README, "Budgets"). 0 turns the floor off.
    package static let defaultCancelFloor = 50

    /// Tokens each image, audio clip or inline file counts at least when the provider's count is unknown (a
    /// reservation; a stream that ends before the provider's usage): more than one image costs on gpt-4o (at most
    /// 1 445), Claude (about 1 600) or Gemini (258 to 1 120). Not enough for gpt-4o-mini, whose large images cost tens
    /// of thousands of tokens, for the same dollars: raise `budgets.mediaTokens` for token budgets on such a model.
    package static let defaultMediaTokens = 2_000

    package var perIdentity = BudgetLimits()
    package var total = BudgetLimits()
    package var onExceed = OnExceed.cut
    package var defaultReserveTokens = BudgetConfiguration.defaultReserve
    /// `budgets.cancelFloorTokensPerSecond`; see `defaultCancelFloor`.
    package var cancelFloorTokensPerSecond = BudgetConfiguration.defaultCancelFloor
    /// `budgets.mediaTokens`; see `defaultMediaTokens`.
    package var mediaTokens = BudgetConfiguration.defaultMediaTokens
    /// Some limit is in dollars: every metered request needs a price (403 `model_not_priced` without one).
    package var hasDollarLimits: Bool { perIdentity.hasDollarLimits || total.hasDollarLimits }

    package init(perIdentity: BudgetLimits = BudgetLimits(), total: BudgetLimits = BudgetLimits(),
                onExceed: OnExceed = .cut, defaultReserveTokens: Int = BudgetConfiguration.defaultReserve) {
        self.perIdentity = perIdentity
        self.total = total
        self.onExceed = onExceed
        self.defaultReserveTokens = defaultReserveTokens
    }
}

extension ConfigReader {
    /// `state`.
    mutating func readState(_ object: [String: Any], into config: inout RelayConfiguration) {
        guard let value = object["state"] else { return }
        guard let s = value as? [String: Any] else { problem("state", "must be an object"); return }
        checkKnown(s, ["backend", "redis"], "state")
        let backend = string(s, "backend", "state.backend") ?? "memory"
        switch backend {
        case "memory":
            if s["redis"] != nil { problem("state.redis", "applies only with \"backend\": \"redis\"") }
        case "redis":
            guard let r = s["redis"] else { problem("state.redis", "is required with \"backend\": \"redis\""); return }
            guard let redis = r as? [String: Any] else { problem("state.redis", "must be an object"); return }
            if let settings = readRedis(redis) { config.state.backend = .redis(settings) }
        default:
            problem("state.backend", "must be \"memory\" or \"redis\"")
        }
    }

    /// `state.redis`.
    mutating func readRedis(_ r: [String: Any]) -> StateConfiguration.Redis? {
        let path = "state.redis"
        checkKnown(r, ["url", "password", "keyPrefix", "timeoutMs", "onUnavailable", "leaseTTLSeconds"], path)
        guard let url = string(r, "url", "\(path).url") else {
            if r["url"] == nil { problem("\(path).url", "is required") }
            return nil
        }
        guard var settings = Self.redisURL(url) else {
            problem("\(path).url", "must be redis://HOST[:PORT][/DB] (no TLS: use a TLS sidecar; a password goes in \(path).password)")
            return nil
        }
        if let p = r["password"] { settings.password = secret(p, "\(path).password") }
        if let prefix = string(r, "keyPrefix", "\(path).keyPrefix") {
            if prefix.utf8.count <= 64, prefix.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
                settings.keyPrefix = prefix
            } else {
                problem("\(path).keyPrefix", "must be at most 64 printable ASCII characters without spaces")
            }
        }
        if let v = int(r, "timeoutMs", "\(path).timeoutMs", min: 1, max: 10_000) { settings.timeoutMilliseconds = v }
        if let name = string(r, "onUnavailable", "\(path).onUnavailable") {
            if let mode = StateConfiguration.OnUnavailable(rawValue: name) {
                settings.onUnavailable = mode
            } else {
                problem("\(path).onUnavailable", "must be \"reject\", \"allow\" or \"local\"")
            }
        }
        if let v = int(r, "leaseTTLSeconds", "\(path).leaseTTLSeconds", min: 1, max: 86_400) { settings.leaseTTLSeconds = v }
        return settings
    }

    /// `redis://host[:port][/db]`; host may be a bracketed IPv6 literal. No user info (the password has its own
    /// key, so it is never in a URL that ends up in a log) and no query.
    static func redisURL(_ url: String) -> StateConfiguration.Redis? {
        guard url.hasPrefix("redis://") else { return nil }
        var rest = Substring(url.dropFirst("redis://".count))
        guard !rest.contains("@"), !rest.contains("?"), !rest.contains("#") else { return nil }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard db.allSatisfy(\.isASCII), let n = Int(db), (0...10_000).contains(n) else { return nil }
                database = n
            }
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else { return nil }
        var port = 6379
        if let portText {
            guard portText.allSatisfy(\.isASCII), let p = Int(portText), (1...65535).contains(p) else { return nil }
            port = p
        }
        return StateConfiguration.Redis(host: String(host), port: port, database: database)
    }

    /// `budgets`.
    mutating func readBudgets(_ object: [String: Any], into config: inout RelayConfiguration) {
        guard let value = object["budgets"] else { return }
        guard let b = value as? [String: Any] else { problem("budgets", "must be an object"); return }
        checkKnown(b, ["perIdentity", "total", "onExceed", "defaultReserveTokens", "cancelFloorTokensPerSecond", "mediaTokens"], "budgets")
        var budgets = BudgetConfiguration()
        func limits(_ key: String) -> BudgetLimits {
            let path = "budgets.\(key)"
            guard let v = b[key] else { return BudgetLimits() }
            guard let l = v as? [String: Any] else { problem(path, "must be an object"); return BudgetLimits() }
            checkKnown(l, ["tokensPerDay", "tokensPerMonth", "usdPerDay", "usdPerMonth"], path)
            let maxTokens = 1_000_000_000_000
            return BudgetLimits(tokensPerDay: int(l, "tokensPerDay", "\(path).tokensPerDay", min: 1, max: maxTokens),
                                tokensPerMonth: int(l, "tokensPerMonth", "\(path).tokensPerMonth", min: 1, max: maxTokens),
                                nanoUSDPerDay: usdLimit(key, "usdPerDay"), nanoUSDPerMonth: usdLimit(key, "usdPerMonth"))
        }
        budgets.perIdentity = limits("perIdentity")
        budgets.total = limits("total")
        if let name = string(b, "onExceed", "budgets.onExceed") {
            if let mode = BudgetConfiguration.OnExceed(rawValue: name) {
                budgets.onExceed = mode
            } else {
                problem("budgets.onExceed", "must be \"cut\" or \"finish\"")
            }
        }
        if let v = int(b, "defaultReserveTokens", "budgets.defaultReserveTokens", min: 1, max: 10_000_000) {
            budgets.defaultReserveTokens = v
        }
        if let v = int(b, "cancelFloorTokensPerSecond", "budgets.cancelFloorTokensPerSecond", min: 0, max: 1_000_000) {
            budgets.cancelFloorTokensPerSecond = v
        }
        if let v = int(b, "mediaTokens", "budgets.mediaTokens", min: 1, max: 10_000_000) {
            budgets.mediaTokens = v
        }
        if budgets.perIdentity.isEmpty && budgets.total.isEmpty {
            problem("budgets", "sets no limit: give budgets.perIdentity or budgets.total a tokensPerDay, tokensPerMonth, usdPerDay or usdPerMonth")
        }
        config.budgets = budgets
    }
}
