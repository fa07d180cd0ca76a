import HTTP1

/// What to answer to a request that may be a CORS preflight.
package enum PreflightDecision: Equatable, Sendable {
    /// Not a preflight (not OPTIONS, or no Origin, or no Access-Control-Request-Method): route it as usual.
    case notPreflight
    /// Answer 204 with exactly these headers (no body); the provider is not called.
    case allow(headers: [(String, String)])
    /// Answer this error (403); the provider is not called.
    case deny(RelayError)

    package static func == (a: PreflightDecision, b: PreflightDecision) -> Bool {
        switch (a, b) {
        case (.notPreflight, .notPreflight): true
        case (.allow(let x), .allow(let y)): x.map { "\($0.0):\($0.1)" } == y.map { "\($0.0):\($0.1)" }
        case (.deny(let x), .deny(let y)): x == y
        default: false
        }
    }
}

/// Which browser origins may call the relay, and the CORS headers that say so. Pure configuration plus pure
/// functions; no state, safe from any thread.
///
/// Origins match whole (scheme, host and port, as browsers serialize them: `https://app.example.com:8443`),
/// ASCII case-insensitively; a trailing `/` in configuration is ignored. `"*"` allows every origin and is answered
/// with a literal `*`, which browsers never combine with credentials, so `allowCredentials` only ever applies to
/// origins listed explicitly. A listed origin is echoed back (with `Vary: Origin`, since the answer depends on
/// it). A preflight is denied when the origin is not allowed, when the method is not one of the route's, or when
/// it asks for a header outside `allowedHeaders` — an explicit 403 rather than a 204 the browser would refuse
/// anyway, so the reason shows up in the relay's logs.
package struct CORSPolicy: Equatable, Sendable {
    package static let defaultAllowedHeaders = ["authorization", "content-type", "x-request-id", "openai-beta"]
    package static let defaultExposedHeaders = ["X-Request-Id", "Retry-After"]

    package var allowedOrigins: [String]
    /// Request headers a preflight may ask for, compared case-insensitively.
    package var allowedHeaders: [String]
    /// Response headers scripts may read (beyond the CORS-safelisted ones).
    package var exposedHeaders: [String]
    package var maxAgeSeconds: Int
    /// Send `Access-Control-Allow-Credentials: true` to explicitly listed origins (never to `*`).
    package var allowCredentials: Bool

    package init(
        allowedOrigins: [String], allowedHeaders: [String] = CORSPolicy.defaultAllowedHeaders,
        exposedHeaders: [String] = CORSPolicy.defaultExposedHeaders, maxAgeSeconds: Int = 600,
        allowCredentials: Bool = false
    ) {
        self.allowedOrigins = allowedOrigins
        self.allowedHeaders = allowedHeaders
        self.exposedHeaders = exposedHeaders
        self.maxAgeSeconds = maxAgeSeconds
        self.allowCredentials = allowCredentials
    }

    /// How an origin is allowed: echoed (listed) or as `*` (wildcard).
    private enum Match {
        case listed, wildcard
    }

    private func match(_ origin: String) -> Match? {
        let wanted = Self.asciiLowercased(origin)
        var wildcard = false
        for entry in allowedOrigins {
            if entry == "*" {
                wildcard = true
                continue
            }
            var normalized = Self.asciiLowercased(entry)
            if normalized.hasSuffix("/") { normalized.removeLast() }
            if normalized == wanted { return .listed }
        }
        return wildcard ? .wildcard : nil
    }

    private func originHeaders(_ origin: String, _ match: Match) -> [(String, String)] {
        switch match {
        case .wildcard:
            return [("Access-Control-Allow-Origin", "*"), ("Vary", "Origin")]
        case .listed:
            var headers = [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]
            if allowCredentials { headers.append(("Access-Control-Allow-Credentials", "true")) }
            return headers
        }
    }

    /// Decides a request that may be a preflight. `httpMethod` is the request line's method; `origin`,
    /// `requestMethod` and `requestHeaders` are the Origin, Access-Control-Request-Method and
    /// Access-Control-Request-Headers field values (nil when absent); `routeMethods` are the methods the matched
    /// route accepts.
    package func preflight(
        httpMethod: String, origin: String?, requestMethod: String?, requestHeaders: String?, routeMethods: [String]
    ) -> PreflightDecision {
        guard httpMethod == "OPTIONS", let origin, let requestMethod else { return .notPreflight }
        guard let match = match(origin) else { return .deny(.corsOriginNotAllowed) }
        guard routeMethods.contains(requestMethod) else { return .deny(.corsMethodNotAllowed) }
        let allowed = Set(allowedHeaders.map(Self.asciiLowercased))
        for name in (requestHeaders ?? "").split(separator: ",") {
            let trimmed = Self.asciiLowercased(String(name.trimmingSpaces()))
            if !trimmed.isEmpty && !allowed.contains(trimmed) { return .deny(.corsHeaderNotAllowed) }
        }
        return .allow(headers: originHeaders(origin, match) + [
            ("Access-Control-Allow-Methods", routeMethods.joined(separator: ", ")),
            ("Access-Control-Allow-Headers", allowedHeaders.joined(separator: ", ")),
            ("Access-Control-Max-Age", String(maxAgeSeconds)),
        ])
    }

    /// Headers to add to an actual (non-preflight) response: the origin grant and the exposed headers when
    /// `origin` is allowed, nothing otherwise (the browser then withholds the response from the script).
    package func responseHeaders(origin: String?) -> [(String, String)] {
        guard let origin, let match = match(origin) else { return [] }
        return originHeaders(origin, match)
            + (exposedHeaders.isEmpty ? [] : [("Access-Control-Expose-Headers", exposedHeaders.joined(separator: ", "))])
    }

    package static func == (a: CORSPolicy, b: CORSPolicy) -> Bool {
        a.allowedOrigins == b.allowedOrigins && a.allowedHeaders == b.allowedHeaders
            && a.exposedHeaders == b.exposedHeaders && a.maxAgeSeconds == b.maxAgeSeconds
            && a.allowCredentials == b.allowCredentials
    }

    static func asciiLowercased(_ s: String) -> String {
        String(decoding: s.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}

extension RelayError {
    /// 403 `cors_origin_not_allowed`: the Origin is not on the list. The origin itself is not echoed.
    package static let corsOriginNotAllowed = RelayError(
        status: 403, type: "invalid_request_error", code: "cors_origin_not_allowed",
        message: "This origin is not allowed to call the relay.")

    /// 403 `cors_method_not_allowed`: the preflight asks for a method the route does not accept.
    package static let corsMethodNotAllowed = RelayError(
        status: 403, type: "invalid_request_error", code: "cors_method_not_allowed",
        message: "This method is not allowed from a browser on this path.")

    /// 403 `cors_header_not_allowed`: the preflight asks for a request header the relay does not allow.
    package static let corsHeaderNotAllowed = RelayError(
        status: 403, type: "invalid_request_error", code: "cors_header_not_allowed",
        message: "A requested header is not allowed from a browser.")
}
