import Auth
import Foundation
import Support

/// `clients`: who may call the relay. Tokens are stored as SHA-256 hashes only; JWT keys come from a JWKS file
/// read at start-up and/or a JWKS URL refreshed in the background.
package struct ClientsConfiguration: Sendable {
    package struct Token: Sendable, Equatable {
        package var id: String
        package var sha256Hex: String
        package init(id: String, sha256Hex: String) { self.id = id; self.sha256Hex = sha256Hex }
    }

    package struct JWT: Sendable {
        package var settings: JWTVerifier.Settings
        package var hmacSecret: Secret?
        /// Keys read from `jwksFile` at start-up.
        package var keys: JWKSet
        package var jwksURL: String?
        package var jwksRefreshSeconds: Double
        package init(settings: JWTVerifier.Settings, hmacSecret: Secret? = nil, keys: JWKSet = .empty,
                    jwksURL: String? = nil, jwksRefreshSeconds: Double = 3600) {
            self.settings = settings
            self.hmacSecret = hmacSecret
            self.keys = keys
            self.jwksURL = jwksURL
            self.jwksRefreshSeconds = jwksRefreshSeconds
        }
    }

    package var tokens: [Token] = []
    package var jwt: JWT?
    package init() {}
}

extension ConfigReader {
    mutating func routeAuth(_ value: Any?, _ path: String) -> RelayConfiguration.RouteAuth? {
        guard let value else {
            problem(path, #"is required: "token", "jwt" or "none" (anonymous access must be chosen explicitly, e.g. "auth": "none")"#)
            return nil
        }
        guard let s = value as? String, let auth = RelayConfiguration.RouteAuth(rawValue: s) else {
            problem(path, #"must be "token", "jwt" or "none""#)
            return nil
        }
        return auth
    }

    mutating func bodyPolicy(_ route: [String: Any], _ path: String) -> BodyPolicy {
        var policy = BodyPolicy()
        if let m = route["models"] {
            if let list = m as? [String], !list.isEmpty { policy.models = list } else { problem("\(path).models", "must be a non-empty list of model names") }
        }
        if let t = route["maxTokens"] {
            guard let o = t as? [String: Any] else {
                problem("\(path).maxTokens", #"must be {"limit": N, "mode": "reject" | "clamp"}"#)
                return policy
            }
            checkKnown(o, ["limit", "mode"], "\(path).maxTokens")
            let limit = int(o, "limit", "\(path).maxTokens.limit", min: 1, max: 10_000_000)
            if o["limit"] == nil { problem("\(path).maxTokens.limit", "is required") }
            let modeName = string(o, "mode", "\(path).maxTokens.mode") ?? "reject"
            let mode: BodyPolicy.MaxTokens.Mode?
            switch modeName {
            case "reject": mode = .reject
            case "clamp": mode = .clamp
            default:
                problem("\(path).maxTokens.mode", #"must be "reject" or "clamp""#)
                mode = nil
            }
            if let limit, let mode { policy.maxTokens = .init(limit: limit, mode: mode) }
        }
        return policy
    }

    mutating func readClients(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let c = object["clients"] {
            guard let clients = c as? [String: Any] else { problem("clients", "must be an object"); return }
            checkKnown(clients, ["tokens", "jwt"], "clients")
            if let t = clients["tokens"] {
                if let list = t as? [Any] {
                    for (i, entry) in list.enumerated() {
                        let path = "clients.tokens[\(i)]"
                        guard let e = entry as? [String: Any] else { problem(path, "must be an object"); continue }
                        checkKnown(e, ["id", "sha256"], path)
                        guard let id = string(e, "id", "\(path).id"), !id.isEmpty else { problem("\(path).id", "is required"); continue }
                        guard let hex = string(e, "sha256", "\(path).sha256"),
                              hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else {
                            problem("\(path).sha256", "must be 64 hex digits (the SHA-256 of the token, never the token)")
                            continue
                        }
                        config.clients.tokens.append(.init(id: id, sha256Hex: hex.lowercased()))
                    }
                    do { _ = try TokenAuthenticator(tokens: config.clients.tokens.map { ($0.id, $0.sha256Hex) }) } catch {
                        problem("clients.tokens", "\(error)")
                    }
                } else { problem("clients.tokens", "must be a list") }
            }
            if let j = clients["jwt"] { config.clients.jwt = readJWT(j) }
        }
        let rateLimitNames = ["perIdentity", "perAddress", "authFailuresPerAddress", "resumesPerStream"]
        for name in rateLimitNames {
            let path = "rateLimits.\(name)"
            guard let r = object["rateLimits"] else { break }
            guard let limits = r as? [String: Any] else { problem("rateLimits", "must be an object"); break }
            if name == "perIdentity" { checkKnown(limits, Set(rateLimitNames), "rateLimits") }
            guard let entry = limits[name] else { continue }
            guard let e = entry as? [String: Any] else { problem(path, "must be an object"); continue }
            let rateOnly = name == "authFailuresPerAddress" || name == "resumesPerStream"
            checkKnown(e, rateOnly ? ["requestsPerMinute", "burst"] : ["requestsPerMinute", "burst", "concurrentStreams"], path)
            let rpm = int(e, "requestsPerMinute", "\(path).requestsPerMinute", min: 1, max: 1_000_000_000)
            let burst = int(e, "burst", "\(path).burst", min: 1, max: 100_000_000)
            let streams = int(e, "concurrentStreams", "\(path).concurrentStreams", min: 1, max: 1_000_000)
            let value = RateLimits(requestsPerMinute: rpm, burst: burst, maxConcurrentStreams: streams)
            switch name {
            case "perIdentity": config.rateLimits.perIdentity = value
            case "perAddress": config.rateLimits.perAddress = value
            default:
                if rpm == nil { problem("\(path).requestsPerMinute", "is required") }
                if name == "resumesPerStream" { config.rateLimits.resumesPerStream = value } else { config.rateLimits.authFailuresPerAddress = value }
            }
        }
        if let c = object["cors"] {
            guard let cors = c as? [String: Any] else { problem("cors", "must be an object"); return }
            checkKnown(cors, ["allowedOrigins", "allowedHeaders", "maxAgeSeconds"], "cors")
            guard let origins = cors["allowedOrigins"] as? [String], !origins.isEmpty else {
                problem("cors.allowedOrigins", "must be a non-empty list of origins (\"https://app.example.com\")")
                return
            }
            var headers = CORSPolicy.defaultAllowedHeaders
            if let h = cors["allowedHeaders"] {
                if let list = h as? [String] { headers = list } else { problem("cors.allowedHeaders", "must be a list of header names") }
            }
            let maxAge = int(cors, "maxAgeSeconds", "cors.maxAgeSeconds", min: 0, max: 86_400) ?? 600
            config.cors = CORSPolicy(allowedOrigins: origins, allowedHeaders: headers, maxAgeSeconds: maxAge)
        }
        // Cross-checks: a route's auth must have what it needs.
        for (i, route) in config.routes.enumerated() {
            if route.auth == .token && config.clients.tokens.isEmpty {
                problem("routes[\(i)].auth", #"is "token" but clients.tokens is empty"#)
            }
            if route.auth == .jwt && config.clients.jwt == nil {
                problem("routes[\(i)].auth", #"is "jwt" but clients.jwt is not configured"#)
            }
        }
    }

    /// A JWKS URL decides who may sign tokens: anyone who can answer for it on the way mints any identity. So it
    /// is `https://`, or `http://` to this host only (a local key server, tests): a loopback address or
    /// `localhost`, with no user info.
    mutating func checkJWKSURL(_ url: String, _ path: String) {
        if url.hasPrefix("https://") && url.utf8.count > 8 { return }
        if url.hasPrefix("http://") && !RelayConfiguration.isClearTextBeyondThisHost(url) { return }
        problem(path, "must be an https:// URL (http:// only to this host: 127.0.0.1, ::1 or localhost), since whoever answers it can sign any token")
    }

    mutating func readJWT(_ value: Any) -> ClientsConfiguration.JWT? {
        guard let j = value as? [String: Any] else { problem("clients.jwt", "must be an object"); return nil }
        checkKnown(j, ["algorithms", "issuers", "audiences", "skewSeconds", "maxLifetimeSeconds", "hmacSecret", "jwksFile", "jwksURL",
                       "jwksRefreshSeconds"], "clients.jwt")
        var algorithms: Set<JWTAlgorithm> = []
        if let list = j["algorithms"] as? [String], !list.isEmpty {
            for name in list {
                if let alg = JWTAlgorithm(rawValue: name) { algorithms.insert(alg) } else {
                    problem("clients.jwt.algorithms", "\(name) is not supported (HS256, RS256, ES256; never none)")
                }
            }
        } else { problem("clients.jwt.algorithms", "must be a non-empty list, e.g. [\"RS256\"]") }
        let issuers = j["issuers"] as? [String] ?? []
        if issuers.isEmpty { problem("clients.jwt.issuers", "must list the accepted issuers (iss)") }
        let audiences = j["audiences"] as? [String] ?? []
        if audiences.isEmpty { problem("clients.jwt.audiences", "must list the accepted audiences (aud)") }
        var skew = 60.0
        if let v = j["skewSeconds"] {
            if let d = ConfigReader.number(v), d >= 0, d <= 3600 { skew = d } else { problem("clients.jwt.skewSeconds", "must be 0 to 3600") }
        }
        var maxLifetime = JWTVerifier.Settings.defaultMaxLifetimeSeconds
        if let v = j["maxLifetimeSeconds"] {
            if let d = ConfigReader.number(v), d >= 1, d <= 366 * 86_400 {
                maxLifetime = d
            } else {
                problem("clients.jwt.maxLifetimeSeconds", "must be 1 to 31622400 seconds (exp - iat; default 86400)")
            }
        }
        var hmac: Secret?
        if let s = j["hmacSecret"] { hmac = secret(s, "clients.jwt.hmacSecret") }
        var keys = JWKSet.empty
        if let file = string(j, "jwksFile", "clients.jwt.jwksFile") {
            if let text = sources.readFile(file) {
                do { keys = try JWKSet(json: Data(text.utf8)) } catch { problem("clients.jwt.jwksFile", "\(file): \(error)") }
            } else { problem("clients.jwt.jwksFile", "cannot read \(file)") }
        }
        let url = string(j, "jwksURL", "clients.jwt.jwksURL")
        if let url { checkJWKSURL(url, "clients.jwt.jwksURL") }
        var refresh = 3600.0
        if let v = seconds(j, "jwksRefreshSeconds", "clients.jwt.jwksRefreshSeconds") { refresh = v }
        let needsKeys = algorithms.contains(.rs256) || algorithms.contains(.es256)
        if needsKeys && keys.isEmpty && url == nil {
            problem("clients.jwt", "RS256/ES256 need jwksFile or jwksURL")
        }
        let settings = JWTVerifier.Settings(algorithms: algorithms, issuers: issuers, audiences: audiences, skewSeconds: skew,
                                            maxLifetimeSeconds: maxLifetime)
        do {
            _ = try JWTVerifier(settings: settings, hmacSecret: hmac, keys: keys)
        } catch {
            problem("clients.jwt", "\(error)")
        }
        return .init(settings: settings, hmacSecret: hmac, keys: keys, jwksURL: url, jwksRefreshSeconds: refresh)
    }
}
