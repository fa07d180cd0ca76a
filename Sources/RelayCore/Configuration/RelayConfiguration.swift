import Foundation
import HTTP1
import JSON
import Support
import Usage

/// Everything the relay needs to run, validated. Built from a JSON file (`RelayConfiguration.load`) or in code
/// (tests, dev mode). Secrets are resolved at load time, so an unset key variable stops start-up instead of
/// failing the first request.
package struct RelayConfiguration: Sendable {
    package struct Listen: Sendable, Equatable {
        package var host: String
        package var port: Int
        /// Every connection starts with a PROXY protocol header (v1 or v2) from a trusted L4 balancer
        /// (`trustedProxies`); its source address is the client. Public listener only.
        package var proxyProtocol: Bool
        package init(host: String = "127.0.0.1", port: Int = 8080, proxyProtocol: Bool = false) {
            self.host = host
            self.port = port
            self.proxyProtocol = proxyProtocol
        }
    }

    package struct Upstream: Sendable {
        package var name: String
        /// Scheme, host, optional port and optional path prefix; no trailing slash.
        package var baseURL: String
        package var key: Secret?
        /// The API family: how the key is sent (`keyHeader`'s default, fixed headers) and how usage is read.
        package var provider: Provider
        package var keyHeader: String
        package var keyPrefix: String
        /// `httpVersion`: what to speak to an https:// provider. "2" (the default for https://) multiplexes streams
        /// over one TLS connection and resets a cancelled request's stream; "1.1" (always for http://) uses a
        /// connection per stream and closes a cancelled request's connection. HTTP/2 measured less CPU and memory
        /// per stream (README, "Performance": the TLS rows); curl falls back to 1.1 if the provider offers no h2.
        package var httpVersion: UpstreamHTTPVersion = .http1_1
        /// `caFile`: a PEM bundle of certificate authorities trusted for this provider instead of the system's.
        package var caFile: String?
        /// A pooled connection idle longer than this is closed instead of reused: below the keep-alive limits
        /// providers and their load balancers commonly apply (AWS ALB 60 s, nginx 75 s), so the relay, not the
        /// provider, retires an idle connection, and a request never races the provider's close. Such a race
        /// is answered 502 `upstream_connection_reset` (never a second send of a chat request).
        package var idleConnectionSeconds = 30
        /// `headers`: fields the operator sets on every request to this provider (`RelayConfiguration+UpstreamHeaders`).
        package var headers = HTTPHeaders()
        /// `keys`: the key pool, instead of `key` (`RelayConfiguration+Pools`; `pool` reads either).
        package var keys: [UpstreamKey] = []
        /// How long a key the provider answered 401 or 403 stays unused.
        package var keyDisabledSeconds = 600.0
        /// `keyHeader` defaults to the provider's (`Provider.keyHeader`), `keyPrefix` to `Bearer ` for
        /// `Authorization` and nothing otherwise.
        package init(name: String, baseURL: String, key: Secret?, provider: Provider = .openai, keyHeader: String? = nil,
                    keyPrefix: String? = nil) {
            self.name = name
            var url = baseURL
            while url.hasSuffix("/") { url.removeLast() }
            self.baseURL = url
            self.key = key
            self.provider = provider
            let header = keyHeader ?? provider.keyHeader
            self.keyHeader = header
            self.keyPrefix = keyPrefix ?? Provider.keyPrefix(forHeader: header)
        }
    }

    package struct Route: Sendable, Equatable {
        package static let defaultMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
        package var prefix: String
        package var upstream: String
        /// Remove `prefix` from the path before appending it to the upstream's baseURL.
        package var stripPrefix: Bool
        /// Methods forwarded on this route; any other gets 405 with `Allow`.
        package var methods: [String]
        /// Who may call. Required in a configuration file; code-built configurations default to `.none`.
        package var auth: RouteAuth
        /// The path must equal `prefix` (an allowlist of one endpoint) rather than start with it.
        package var exact: Bool
        /// Model allowlist and max-tokens ceiling, checked against the JSON body before the provider is called.
        package var bodyPolicy: BodyPolicy
        /// The provider of `upstream`, copied here by the configuration reader so everything that handles this
        /// route's requests and responses (query rewriting, usage reading) has it at hand. Code that builds a
        /// configuration sets it to its upstream's.
        package var provider: Provider
        /// Usage accounting options (`usage.inject`, `onClientCancel`, `drainMaxSeconds`).
        package var usage: RouteUsage
        /// With budgets, requests to endpoints whose cost the relay cannot count (`Endpoint.unmetered`) pass
        /// instead of getting 403 `endpoint_not_metered`: the operator accepts that they are not charged.
        package var unmetered = false
        /// With budgets, requests with input the relay cannot count (`ReferencedInput`: `previous_response_id`, files
        /// by id or URL) pass instead of getting 400 `input_not_metered`: the operator accepts that such input is
        /// charged only when the provider's counts come back (not for a stream cancelled before its end).
        package var referencedInput = false
        /// With budgets, requests that turn on a tool the provider runs (`ProviderTools`: web or file search, code
        /// execution, image generation, remote MCP servers) pass instead of getting 403 `tool_not_metered`: the
        /// operator accepts that their per-call fees are not charged.
        package var providerTools = false
        /// Whether a proof of the genuine app is asked for (`attestation`: off, required, optional).
        package var attestation = RouteAttestation.off
        /// Seconds of provider silence before a `: keep-alive` comment on an event stream; 0 for none (`+Resume`).
        package var heartbeatSeconds = Route.defaultHeartbeatSeconds
        /// Resumable streams (`resume`); nil when off (`RelayConfiguration+Resume.swift`).
        package var resume: RouteResume?
        /// `upstreams`: tried in order (`upstream` is the first); empty for the one `upstream` (`upstreamChain`).
        package var upstreams: [String] = []
        /// Provider calls per request, failovers included (`RelayConfiguration+Pools`).
        package var maxAttempts = 3
        package init(prefix: String, upstream: String, stripPrefix: Bool = false, methods: [String] = Route.defaultMethods,
                    auth: RouteAuth = .none, exact: Bool = false, bodyPolicy: BodyPolicy = BodyPolicy(),
                    provider: Provider = .openai, usage: RouteUsage = RouteUsage()) {
            self.prefix = prefix
            self.upstream = upstream
            self.stripPrefix = stripPrefix
            self.methods = methods
            self.auth = auth
            self.exact = exact
            self.bodyPolicy = bodyPolicy
            self.provider = provider
            self.usage = usage
        }

        /// Whether streaming chat requests on this route get `stream_options.include_usage` added (and the extra
        /// usage event removed from the client's stream): `usage.inject`, else the provider's default; never for a
        /// provider that does not speak OpenAI's format.
        package var injectsUsage: Bool { provider.speaksOpenAI && (usage.inject ?? provider.injectsUsageByDefault) }

        /// Whether a request to `endpoint` gets `stream_options.include_usage`: on OpenAI-shaped chat, whatever the
        /// preset (Gemini's and Anthropic's OpenAI-compatible endpoints take it too), unless `usage.inject` is false.
        /// Whether a POST can reach an endpoint that is neither metered nor free: every route but an exact one on a
        /// metered or free endpoint.
        package var reachesUnmeteredEndpoints: Bool { !exact || Endpoint(method: "POST", path: prefix) == .unmetered }

        package func injectsUsage(at endpoint: Endpoint) -> Bool { endpoint == .openAIChat && (usage.inject ?? true) }

        /// Prefix matching stops at segment boundaries: `/v1/models` matches `/v1/models` and `/v1/models/x`,
        /// never `/v1/modelsX`. A trailing slash, on the path or the prefix, never changes a match (both are read
        /// as their `RequestPath.endpoint`): `/v1/chat/completions/` takes the route `/v1/chat/completions` takes,
        /// exact routes included, so it cannot slip past an exact route's body policy to a broader route.
        package func matches(path: String) -> Bool {
            let path = RequestPath.endpoint(of: path), prefix = RequestPath.endpoint(of: prefix)
            if exact { return path == prefix }
            let p = path.utf8, q = prefix.utf8
            guard p.starts(with: q) else { return false }
            if p.count == q.count || q.last == UInt8(ascii: "/") { return true }
            return p[p.index(p.startIndex, offsetBy: q.count)] == UInt8(ascii: "/")
        }
    }

    /// How a route authenticates its callers.
    package enum RouteAuth: String, Sendable, Equatable {
        /// `Authorization: Bearer <token>` whose SHA-256 is in `clients.tokens`.
        case token
        /// `Authorization: Bearer <JWT>` verified against `clients.jwt`.
        case jwt
        /// Anyone: chosen explicitly, and warned about at start-up.
        case none
    }

    /// Every timeout is an idle gap or a phase limit, never a total duration: long streams must not be cut.
    package struct Timeouts: Sendable, Equatable {
        /// The whole request head, from accept for a connection's first request and from the first byte for a
        /// later one (slowloris). Then 408, closed. A new connection that sends nothing is closed quietly.
        package var headerReadSeconds: Double = 10
        /// Idle gap while reading a request body. Then 408, closed.
        package var bodyReadSeconds: Double = 30
        /// An idle keep-alive connection (between requests) is closed quietly.
        package var keepAliveIdleSeconds: Double = 75
        package var upstreamConnectSeconds: Double = 10
        package var upstreamFirstByteSeconds: Double = 120
        package var upstreamIdleSeconds: Double = 300
        /// A client whose buffer stays above the high-water mark this long is closed and its upstream cancelled.
        package var clientWriteStallSeconds: Double = 60
        /// On SIGTERM, how long in-flight exchanges may run before they are aborted.
        package var drainSeconds: Double = 30
        package init() {}
    }

    /// Connection-level limits beyond the per-request ones in `RequestLimits`.
    /// `limits`: the request limits the HTTP/1.1 parser enforces, plus the connection cap. The parser's own
    /// settings read through (`limits.maxHeadBytes`), so Swift names match the JSON keys.
    @dynamicMemberLookup
    package struct Limits: Sendable, Equatable {
        package var request = RequestLimits()
        /// Open client connections; a new one over the limit gets 503 and is closed.
        package var maxConnections: Int = 10_000
        /// Open connections from one client address (an IPv6 one's /64) when it connects directly, not through a
        /// trusted proxy; a new one over it gets 429 and is closed. 0: no limit (the default).
        package var maxConnectionsPerAddress: Int = 0
        /// Identities (or addresses) the memory backend remembers budgets and buckets for (`MemoryAdmissionStore`).
        package var maxTrackedIdentities: Int = BudgetLedger.defaultMaxKeys
        /// All replay buffers of resumable streams together (`RelayConfiguration+Resume.swift`).
        package var resumeBufferBytes: Int = Limits.defaultResumeBufferBytes
        package init() {}
        package subscript(dynamicMember keyPath: WritableKeyPath<RequestLimits, Int>) -> Int {
            get { request[keyPath: keyPath] }
            set { request[keyPath: keyPath] = newValue }
        }
    }

    /// `rateLimits`: token buckets and stream caps per identity and per client address.
    package struct RateLimitSettings: Sendable, Equatable {
        /// Per authenticated identity (`rateLimits.perIdentity`); nil for none.
        package var perIdentity: RateLimits?
        /// Per client address (`rateLimits.perAddress`); nil for none. Failed authentications draw from it too.
        package var perAddress: RateLimits?
        /// Failed authentications per client address (`rateLimits.authFailuresPerAddress`). Once an address's
        /// bucket is empty, every request from it is answered 429 before its credentials are looked at, so
        /// guessing tokens costs the attacker time.
        package var authFailuresPerAddress = RateLimits(requestsPerMinute: 60, burst: 20)
        /// Resumes of one resumable stream (`rateLimits.resumesPerStream`), counted once the request has proven the
        /// stream its own. A resume at another replica replays from Redis, so without a bound a loop of resumes is
        /// Redis traffic at will; with it, each stream (which took a paid, rate-limited request to start) buys a
        /// bounded number. Per stream, not per identity: a static client token is one identity for every install.
        /// The client library reconnects with a backoff, far below it. Kept per replica; stops are not counted.
        package var resumesPerStream = RateLimits(requestsPerMinute: 120, burst: 30)
        package init() {}
    }

    package struct Buffers: Sendable, Equatable {
        /// Above this many bytes pending to a client, the upstream transfer is paused.
        package var highWaterBytes: Int = 256 * 1024
        /// At or below this, it is resumed.
        package var lowWaterBytes: Int = 64 * 1024
        package init() {}
    }

    package var listen = Listen()
    /// A second listener for /metrics, /healthz and /readyz only (keeps /metrics off the public port).
    package var admin: Listen?
    package var upstreams: [String: Upstream] = [:]
    package var routes: [Route] = []
    package var limits = Limits()
    package var timeouts = Timeouts()
    package var buffers = Buffers()
    /// Event loops (threads serving connections); 0 means one per core.
    package var workers = 0
    package var logLevel = LogLevel.info

    package init() {}

    /// Static client tokens and JWT settings (`clients`).
    package var clients = ClientsConfiguration()
    /// Request-rate and concurrent-stream limits per identity and per address, and the failed-authentication bucket.
    package var rateLimits = RateLimitSettings()
    /// Browser clients: allowed origins and the preflight answer.
    package var cors: CORSPolicy?
    /// Where buckets, stream leases and budgets are kept (`state`): this process, or Redis shared by every replica.
    package var state = StateConfiguration()
    /// Token budgets (`budgets`); nil for none.
    package var budgets: BudgetConfiguration?
    /// The relay's own reverse proxies and balancers: only their `X-Forwarded-For` (and PROXY headers) are believed.
    package var trustedProxies: [CIDR] = []
    /// App Attest and App Check (`attestation`); empty for none.
    package var attestation = AttestationConfiguration()
    /// Prices per model (`pricing` or `pricingFile`); empty for none.
    package var pricing = PricingConfiguration()

    /// The route with the longest prefix that `path` starts with (or equals, for exact routes), trailing slashes
    /// aside (`Route.matches`); between prefixes equal but for that slash, an exact route first, whatever the order.
    package func route(for path: String) -> Route? {
        var best: Route?
        func rank(_ r: Route) -> (Int, Int, Int) { (RequestPath.endpoint(of: r.prefix).utf8.count, r.exact ? 1 : 0, r.prefix.utf8.count) }
        for route in routes where route.matches(path: path) {
            if best == nil || rank(route) > rank(best!) { best = route }
        }
        return best
    }
}

/// Every problem found in a configuration, each naming its key path (`upstreams.openai.key.env`).
package struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    package var problems: [String]
    package var description: String { problems.joined(separator: "\n") }
    package init(problems: [String]) { self.problems = problems }
}

/// Where secrets and the environment come from: the process's (`ConfigurationSources.system`, in the shell) or a
/// test's. The core reads no file and no environment of its own.
package struct ConfigurationSources: Sendable {
    package var environment: [String: String]
    package var readFile: @Sendable (String) -> String?
    package init(environment: [String: String], readFile: @escaping @Sendable (String) -> String?) {
        self.environment = environment
        self.readFile = readFile
    }
}

extension RelayConfiguration {
    /// Parses and validates a JSON configuration. Throws `ConfigurationError` listing every problem.
    package static func load(json: Data, sources: ConfigurationSources) throws -> RelayConfiguration {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: json)
        } catch {
            throw ConfigurationError(problems: ["the configuration is not valid JSON: \(error.localizedDescription)"])
        }
        var reader = ConfigReader(sources: sources)
        reader.rawJSON = Array(json)
        let configuration = reader.read(root)
        if !reader.problems.isEmpty { throw ConfigurationError(problems: reader.problems) }
        return configuration
    }
}

/// Walks the JSON tree, collecting problems instead of stopping at the first.
struct ConfigReader {
    let sources: ConfigurationSources
    var problems: [String] = []
    /// The configuration's bytes, for the values read from their exact text (`RelayConfiguration+Pricing`).
    var rawJSON: [UInt8] = []
    var exactCache: JSONDocument?

    init(sources: ConfigurationSources) { self.sources = sources }

    mutating func problem(_ path: String, _ text: String) { problems.append("\(path): \(text)") }

    /// The whole file: one reader per top-level section, each naming its problems by key path.
    mutating func read(_ root: Any) -> RelayConfiguration {
        var config = RelayConfiguration()
        guard let object = root as? [String: Any] else {
            problem("(root)", "must be a JSON object")
            return config
        }
        let known: Set<String> = ["listen", "admin", "upstreams", "routes", "limits", "timeouts", "buffers", "workers", "logLevel",
                                  "clients", "rateLimits", "cors", "trustedProxies", "state", "budgets", "attestation",
                                  "pricing", "pricingFile"]
        for key in object.keys where !known.contains(key) { problem(key, "unknown key") }
        readListeners(object, into: &config)
        readUpstreams(object, into: &config)
        readRoutes(object, into: &config)
        readLimits(object, into: &config)
        readTimeouts(object, into: &config)
        readBuffers(object, into: &config)
        readClients(object, into: &config)
        readAttestation(object, into: &config)
        readTrustedProxies(object, into: &config)
        readState(object, into: &config)
        readBudgets(object, into: &config)
        readPricing(object, into: &config)
        checkPricedBudgets(config)
        if let w = int(object, "workers", "workers", min: 0, max: 256) { config.workers = w }
        if let level = string(object, "logLevel", "logLevel") {
            if let l = LogLevel(name: level) { config.logLevel = l } else { problem("logLevel", "must be one of debug, info, warning, error") }
        }
        return config
    }

    /// `listen` and `admin`.
    mutating func readListeners(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let listen = object["listen"] {
            if let l = listen as? [String: Any] {
                checkKnown(l, ["host", "port", "proxyProtocol"], "listen")
                if let host = string(l, "host", "listen.host") { config.listen.host = host }
                if let port = int(l, "port", "listen.port", min: 0, max: 65535) { config.listen.port = port }
                if let v = bool(l, "proxyProtocol", "listen.proxyProtocol") { config.listen.proxyProtocol = v }
            } else { problem("listen", "must be an object") }
        }
        if let admin = object["admin"] {
            if let a = admin as? [String: Any] {
                checkKnown(a, ["host", "port"], "admin")
                var listen = RelayConfiguration.Listen(host: "127.0.0.1", port: 9090)
                if let host = string(a, "host", "admin.host") { listen.host = host }
                if let port = int(a, "port", "admin.port", min: 0, max: 65535) { listen.port = port }
                config.admin = listen
            } else { problem("admin", "must be an object") }
        }
    }

    /// `upstreams`: at least one.
    mutating func readUpstreams(_ object: [String: Any], into config: inout RelayConfiguration) {
        guard let ups = object["upstreams"] as? [String: Any], !ups.isEmpty else {
            problem("upstreams", "at least one upstream is required")
            return
        }
        for name in ups.keys.sorted() {
            if let upstream = readUpstream(name, ups[name]!) { config.upstreams[name] = upstream }
        }
    }

    /// `upstreams.NAME`.
    mutating func readUpstream(_ name: String, _ value: Any) -> RelayConfiguration.Upstream? {
        let path = "upstreams.\(name)"
        guard let u = value as? [String: Any] else { problem(path, "must be an object"); return nil }
        checkKnown(u, ["baseURL", "key", "provider", "keyHeader", "keyPrefix", "httpVersion", "caFile", "idleConnectionSeconds", "headers",
                       "keys", "keyDisabledSeconds"], path)
        guard let base = string(u, "baseURL", "\(path).baseURL") else {
            if u["baseURL"] == nil { problem("\(path).baseURL", "is required") }
            return nil
        }
        if !(base.hasPrefix("http://") || base.hasPrefix("https://")) || base.contains("?") || base.contains("#") {
            problem("\(path).baseURL", "must be an http:// or https:// URL without query or fragment")
        }
        var key: Secret?
        if let k = u["key"] {
            key = providerKey(k, "\(path).key")
        }
        let provider = self.provider(u, path)
        let header = string(u, "keyHeader", "\(path).keyHeader") ?? provider.keyHeader
        if !isToken(header) { problem("\(path).keyHeader", "must be a header name") }
        let prefix = string(u, "keyPrefix", "\(path).keyPrefix") ?? Provider.keyPrefix(forHeader: header)
        if !prefix.utf8.allSatisfy({ $0 == 0x09 || (0x20...0x7E).contains($0) }) {
            problem("\(path).keyPrefix", "must be printable text without control characters")
        }
        var upstream = RelayConfiguration.Upstream(name: name, baseURL: base, key: key, provider: provider,
                                                   keyHeader: header, keyPrefix: prefix)
        upstream.httpVersion = base.hasPrefix("https://") ? .http2 : .http1_1
        if let version = string(u, "httpVersion", "\(path).httpVersion") {
            if let parsed = UpstreamHTTPVersion(rawValue: version) {
                upstream.httpVersion = parsed
            } else {
                problem("\(path).httpVersion", "must be \"1.1\" or \"2\"")
            }
        }
        if let caFile = string(u, "caFile", "\(path).caFile") {
            // Checked at start-up: a missing bundle would otherwise fail every request with a TLS error.
            if let pem = sources.readFile(caFile), pem.contains("-----BEGIN CERTIFICATE-----") {
                upstream.caFile = caFile
            } else {
                problem("\(path).caFile", "cannot read a PEM certificate from \"\(caFile)\"")
            }
        }
        if let v = int(u, "idleConnectionSeconds", "\(path).idleConnectionSeconds", min: 1, max: 3600) {
            upstream.idleConnectionSeconds = v
        }
        if let fields = u["headers"] { upstream.headers = fixedHeaders(fields, "\(path).headers", keyHeader: header) }
        readPool(u, path, into: &upstream)
        return upstream
    }

    /// `routes`: at least one, each naming a configured upstream.
    mutating func readRoutes(_ object: [String: Any], into config: inout RelayConfiguration) {
        guard let routes = object["routes"] as? [Any], !routes.isEmpty else {
            problem("routes", "at least one route is required")
            return
        }
        let upstreamNames = Set((object["upstreams"] as? [String: Any] ?? [:]).keys)
        for (i, r) in routes.enumerated() {
            if let route = readRoute(r, "routes[\(i)]", upstreams: config.upstreams, upstreamNames: upstreamNames) {
                config.routes.append(route)
            }
        }
    }

    /// `routes[i]`.
    mutating func readRoute(_ value: Any, _ path: String, upstreams: [String: RelayConfiguration.Upstream],
                            upstreamNames: Set<String>) -> RelayConfiguration.Route? {
        guard let route = value as? [String: Any] else { problem(path, "must be an object"); return nil }
        checkKnown(route, ["prefix", "upstream", "stripPrefix", "methods", "auth", "exact", "models", "maxTokens",
                           "usage", "onClientCancel", "drainMaxSeconds", "unmetered", "referencedInput", "providerTools", "attestation", "upstreams", "maxAttempts",
                           "heartbeatSeconds", "resume"], path)
        let prefix = string(route, "prefix", "\(path).prefix")
        let upstream = string(route, "upstream", "\(path).upstream") ?? (route["upstreams"] as? [String])?.first
        if prefix == nil && route["prefix"] == nil { problem("\(path).prefix", "is required") }
        if route["upstream"] == nil && route["upstreams"] == nil { problem("\(path).upstream", "is required") }
        if route["upstream"] == nil, route["upstreams"] != nil, upstream == nil { problem("\(path).upstreams", "must be a non-empty list of upstream names") }
        if route["upstream"] != nil && route["upstreams"] != nil { problem("\(path).upstreams", "give either upstream or upstreams, not both") }
        if let prefix, !prefix.hasPrefix("/") { problem("\(path).prefix", "must start with /") }
        if route["upstream"] != nil, let upstream, upstreams[upstream] == nil, !upstreamNames.contains(upstream) {
            problem("\(path).upstream", "names no upstream (\"\(upstream)\")")
        }
        let strip = bool(route, "stripPrefix", "\(path).stripPrefix") ?? false
        var methods = RelayConfiguration.Route.defaultMethods
        if let m = route["methods"] {
            if let list = m as? [String], !list.isEmpty, list.allSatisfy({ isToken($0) }) {
                methods = list.map { $0.uppercased() }
            } else {
                problem("\(path).methods", "must be a non-empty list of method names")
            }
        }
        let auth = routeAuth(route["auth"], "\(path).auth")
        let exact = bool(route, "exact", "\(path).exact") ?? false
        let bodyPolicy = self.bodyPolicy(route, path)
        let provider = upstream.flatMap { upstreams[$0]?.provider } ?? .openai
        let usage = routeUsage(route, path, provider: provider)
        let unmetered = bool(route, "unmetered", "\(path).unmetered") ?? false
        let referencedInput = bool(route, "referencedInput", "\(path).referencedInput") ?? false
        let providerTools = bool(route, "providerTools", "\(path).providerTools") ?? false
        let attestation = routeAttestation(route, path)
        guard let prefix, let upstream else { return nil }
        var result = RelayConfiguration.Route(prefix: prefix, upstream: upstream, stripPrefix: strip, methods: methods, auth: auth ?? .none,
                                              exact: exact, bodyPolicy: bodyPolicy, provider: provider, usage: usage)
        result.unmetered = unmetered
        result.referencedInput = referencedInput
        result.providerTools = providerTools
        result.attestation = attestation
        routeStreaming(route, path, into: &result)
        readRouteUpstreams(route, path, upstreams: upstreams, upstreamNames: upstreamNames, into: &result)
        return result
    }

    /// `limits`.
    mutating func readLimits(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let limits = object["limits"] as? [String: Any] {
            checkKnown(limits, ["maxHeadBytes", "maxHeaderCount", "maxURIBytes", "maxBodyBytes", "maxConnections", "maxConnectionsPerAddress",
                               "maxTrackedIdentities", "resumeBufferBytes"], "limits")
            resumeLimits(limits, into: &config)
            if let v = int(limits, "maxHeadBytes", "limits.maxHeadBytes", min: 1024, max: 1 << 24) { config.limits.maxHeadBytes = v }
            if let v = int(limits, "maxHeaderCount", "limits.maxHeaderCount", min: 1, max: 10_000) { config.limits.maxHeaderCount = v }
            if let v = int(limits, "maxURIBytes", "limits.maxURIBytes", min: 64, max: 1 << 20) { config.limits.maxURIBytes = v }
            if let v = int(limits, "maxBodyBytes", "limits.maxBodyBytes", min: 0, max: 1 << 30) { config.limits.maxBodyBytes = v }
            if let v = int(limits, "maxConnections", "limits.maxConnections", min: 1, max: 1_000_000) { config.limits.maxConnections = v }
            if let v = int(limits, "maxConnectionsPerAddress", "limits.maxConnectionsPerAddress", min: 0, max: 1_000_000) {
                config.limits.maxConnectionsPerAddress = v
            }
            if let v = int(limits, "maxTrackedIdentities", "limits.maxTrackedIdentities", min: 1, max: 100_000_000) {
                config.limits.maxTrackedIdentities = v
            }
        } else if object["limits"] != nil { problem("limits", "must be an object") }
    }

    /// `timeouts`.
    mutating func readTimeouts(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let t = object["timeouts"] as? [String: Any] {
            checkKnown(t, ["headerReadSeconds", "bodyReadSeconds", "keepAliveIdleSeconds", "upstreamConnectSeconds",
                           "upstreamFirstByteSeconds", "upstreamIdleSeconds", "clientWriteStallSeconds", "drainSeconds"], "timeouts")
            if let v = seconds(t, "headerReadSeconds", "timeouts.headerReadSeconds") { config.timeouts.headerReadSeconds = v }
            if let v = seconds(t, "bodyReadSeconds", "timeouts.bodyReadSeconds") { config.timeouts.bodyReadSeconds = v }
            if let v = seconds(t, "keepAliveIdleSeconds", "timeouts.keepAliveIdleSeconds") { config.timeouts.keepAliveIdleSeconds = v }
            if let v = seconds(t, "clientWriteStallSeconds", "timeouts.clientWriteStallSeconds") { config.timeouts.clientWriteStallSeconds = v }
            if let v = seconds(t, "drainSeconds", "timeouts.drainSeconds") { config.timeouts.drainSeconds = v }
            if let v = seconds(t, "upstreamConnectSeconds", "timeouts.upstreamConnectSeconds") { config.timeouts.upstreamConnectSeconds = v }
            if let v = seconds(t, "upstreamFirstByteSeconds", "timeouts.upstreamFirstByteSeconds") { config.timeouts.upstreamFirstByteSeconds = v }
            if let v = seconds(t, "upstreamIdleSeconds", "timeouts.upstreamIdleSeconds") { config.timeouts.upstreamIdleSeconds = v }
        } else if object["timeouts"] != nil { problem("timeouts", "must be an object") }
    }

    /// `buffers`.
    mutating func readBuffers(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let b = object["buffers"] as? [String: Any] {
            checkKnown(b, ["highWaterBytes", "lowWaterBytes"], "buffers")
            if let v = int(b, "highWaterBytes", "buffers.highWaterBytes", min: 1024, max: 1 << 30) { config.buffers.highWaterBytes = v }
            if let v = int(b, "lowWaterBytes", "buffers.lowWaterBytes", min: 0, max: 1 << 30) { config.buffers.lowWaterBytes = v }
            if config.buffers.lowWaterBytes >= config.buffers.highWaterBytes {
                problem("buffers.lowWaterBytes", "must be below buffers.highWaterBytes")
            }
        } else if object["buffers"] != nil { problem("buffers", "must be an object") }
    }

    /// A typo in a key name must not silently fall back to a default.
    mutating func checkKnown(_ o: [String: Any], _ keys: Set<String>, _ path: String) {
        for key in o.keys.sorted() where !keys.contains(key) { problem("\(path).\(key)", "unknown key") }
    }

    mutating func secret(_ value: Any, _ path: String) -> Secret? {
        guard let k = value as? [String: Any], k.count == 1 else {
            problem(path, "must be {\"env\": \"VARIABLE\"} or {\"file\": \"/path\"}")
            return nil
        }
        if let variable = k["env"] as? String {
            let value = sources.environment[variable]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            guard !value.isEmpty else {
                problem("\(path).env", "environment variable \(variable) is not set")
                return nil
            }
            return Secret(value)
        }
        if let file = k["file"] as? String {
            guard let v = sources.readFile(file) else {
                problem("\(path).file", "cannot read \(file)")
                return nil
            }
            let trimmed = v.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty { problem("\(path).file", "\(file) is empty"); return nil }
            return Secret(trimmed)
        }
        problem(path, "must be {\"env\": \"VARIABLE\"} or {\"file\": \"/path\"}")
        return nil
    }

    /// A provider key (`secret`) that can go into a header as it is: printable ASCII, no control characters. A CR or
    /// LF in one would end the header line curl writes, add headers of the value's choosing upstream, and keep the
    /// masker, which looks for the whole key, from finding it in an answer that echoes the first line.
    mutating func providerKey(_ value: Any, _ path: String) -> Secret? {
        guard let key = secret(value, path) else { return nil }
        guard Self.isFieldValue(key.revealForHeader()) else {
            problem(path, "the key must be printable text without control characters")
            return nil
        }
        return key
    }

    mutating func string(_ o: [String: Any], _ key: String, _ path: String) -> String? {
        guard let v = o[key] else { return nil }
        guard let s = v as? String else { problem(path, "must be a string"); return nil }
        return s
    }

    mutating func bool(_ o: [String: Any], _ key: String, _ path: String) -> Bool? {
        guard let v = o[key] else { return nil }
        guard let n = v as? NSNumber, ConfigReader.number(v) == nil else { problem(path, "must be true or false"); return nil }
        return n.boolValue
    }

    mutating func int(_ o: [String: Any], _ key: String, _ path: String, min: Int, max: Int) -> Int? {
        guard let v = o[key] else { return nil }
        guard let d = ConfigReader.number(v), d == d.rounded(), d >= Double(min), d <= Double(max) else {
            problem(path, "must be a whole number from \(min) to \(max)")
            return nil
        }
        return Int(d)
    }

    mutating func seconds(_ o: [String: Any], _ key: String, _ path: String) -> Double? {
        guard let v = o[key] else { return nil }
        guard let d = ConfigReader.number(v), d > 0, d <= 86_400 * 7 else {
            problem(path, "must be a number of seconds above 0")
            return nil
        }
        return d
    }

    /// A JSON number (not a boolean: Foundation bridges both to NSNumber, and `0 is Bool` is true on Linux).
    static func number(_ v: Any) -> Double? {
        guard let n = v as? NSNumber, String(describing: type(of: v)) != "__NSCFBoolean" else { return nil }
        #if canImport(Darwin)
        if CFGetTypeID(n) == CFBooleanGetTypeID() { return nil }
        #endif
        return n.doubleValue
    }

    func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }
}

extension RelayConfiguration {
    /// Environment variables a container platform sets, applied over the file (command-line flags apply last).
    package static let environmentOverrides = ["SSE_RELAY_HOST", "SSE_RELAY_PORT", "SSE_RELAY_LOG_LEVEL", "SSE_RELAY_WORKERS", "SSE_RELAY_ADMIN_PORT"]

    /// Applies `SSE_RELAY_*` overrides. Throws `ConfigurationError` naming each bad variable.
    package mutating func applyEnvironment(_ environment: [String: String]) throws {
        var problems: [String] = []
        if let host = environment["SSE_RELAY_HOST"], !host.isEmpty { listen.host = host }
        if let v = environment["SSE_RELAY_PORT"], !v.isEmpty {
            if let port = Int(v), (0...65535).contains(port) { listen.port = port } else { problems.append("SSE_RELAY_PORT: must be 0 to 65535") }
        }
        if let v = environment["SSE_RELAY_LOG_LEVEL"], !v.isEmpty {
            if let level = LogLevel(name: v) { logLevel = level } else { problems.append("SSE_RELAY_LOG_LEVEL: must be debug, info, warning or error") }
        }
        if let v = environment["SSE_RELAY_WORKERS"], !v.isEmpty {
            if let n = Int(v), (0...256).contains(n) { workers = n } else { problems.append("SSE_RELAY_WORKERS: must be 0 to 256") }
        }
        if let v = environment["SSE_RELAY_ADMIN_PORT"], !v.isEmpty {
            if let port = Int(v), (0...65535).contains(port) {
                admin = Self.adminListen(port: port, existing: admin, publicListen: listen)
            } else {
                problems.append("SSE_RELAY_ADMIN_PORT: must be 0 to 65535")
            }
        }
        if !problems.isEmpty { throw ConfigurationError(problems: problems) }
    }
}
