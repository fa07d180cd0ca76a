// CORSPolicy: what is and is not a preflight, exact header lists for allowed preflights and responses, denials for
// unknown origins, methods and headers, and the wildcard that never carries credentials.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

private let app = "https://app.example.com"
private let policy = CORSPolicy(allowedOrigins: [app, "http://localhost:5173"], maxAgeSeconds: 600)
private let routeMethods = ["GET", "POST"]

private func fields(_ pairs: [(String, String)]) -> [String] { pairs.map { "\($0.0): \($0.1)" } }

private func preflight(
    _ p: CORSPolicy = policy, method: String = "OPTIONS", origin: String? = app, requestMethod: String? = "POST",
    requestHeaders: String? = "authorization, content-type"
) -> PreflightDecision {
    p.preflight(httpMethod: method, origin: origin, requestMethod: requestMethod, requestHeaders: requestHeaders,
                routeMethods: routeMethods)
}

private func allowedFields(_ d: PreflightDecision, sourceLocation: SourceLocation = #_sourceLocation) -> [String]? {
    guard case .allow(let headers) = d else {
        Issue.record("expected allow, got \(d)", sourceLocation: sourceLocation)
        return nil
    }
    return fields(headers)
}

@Suite struct CORSPolicyTests {
    // MARK: what a preflight is

    @Test func onlyOptionsWithOriginAndRequestMethodIsAPreflight() {
        #expect(preflight(method: "POST") == .notPreflight)
        #expect(preflight(method: "GET") == .notPreflight)
        #expect(preflight(method: "options") == .notPreflight, "methods are case-sensitive")
        #expect(preflight(origin: nil) == .notPreflight)
        #expect(preflight(requestMethod: nil) == .notPreflight)
        #expect(preflight(origin: "https://evil.example", requestMethod: nil) == .notPreflight)
    }

    // MARK: allowed

    @Test func anAllowedPreflightEchoesTheOriginWithEveryField() {
        #expect(allowedFields(preflight()) == [
            "Access-Control-Allow-Origin: https://app.example.com",
            "Vary: Origin",
            "Access-Control-Allow-Methods: GET, POST",
            "Access-Control-Allow-Headers: authorization, content-type, x-request-id, openai-beta",
            "Access-Control-Max-Age: 600",
        ])
        #expect(allowedFields(preflight(origin: "http://localhost:5173"))?.first
            == "Access-Control-Allow-Origin: http://localhost:5173")
    }

    @Test(arguments: [
        nil, "", "Authorization", "AUTHORIZATION,Content-Type", "content-type , x-request-id,openai-beta",
        " authorization ,, \tcontent-type", "OpenAI-Beta",
    ] as [String?])
    func requestedHeadersOnTheListAreAllowed(_ requested: String?) {
        #expect(allowedFields(preflight(requestHeaders: requested)) != nil)
    }

    @Test func theHeaderListAndMaxAgeAreConfigurable() {
        let custom = CORSPolicy(allowedOrigins: [app], allowedHeaders: ["Authorization", "X-Stainless-Lang"], maxAgeSeconds: 86400)
        let fields = allowedFields(preflight(custom, requestHeaders: "authorization, x-stainless-lang"))
        #expect(fields?.contains("Access-Control-Allow-Headers: Authorization, X-Stainless-Lang") == true)
        #expect(fields?.contains("Access-Control-Max-Age: 86400") == true)
        #expect(preflight(custom, requestHeaders: "content-type") == .deny(.corsHeaderNotAllowed))
    }

    @Test func originsMatchCaseInsensitivelyAndIgnoreATrailingSlashInConfiguration() {
        let p = CORSPolicy(allowedOrigins: ["HTTPS://App.Example.com/"])
        #expect(allowedFields(preflight(p))?.first == "Access-Control-Allow-Origin: https://app.example.com")
        #expect(fields(p.responseHeaders(origin: "https://APP.example.com")).first
            == "Access-Control-Allow-Origin: https://APP.example.com")
    }

    // MARK: denied

    @Test(arguments: [
        "https://app.example.com:8443", "http://app.example.com", "https://evil.example.com",
        "https://app.example.com.evil.com", "https://xapp.example.com", "https://app.example.co", "null", "",
        "https://app.example.com/", "*",
    ])
    func anOriginNotListedIsDenied(_ origin: String) {
        #expect(preflight(origin: origin) == .deny(.corsOriginNotAllowed))
        #expect(policy.responseHeaders(origin: origin).isEmpty)
    }

    @Test func theDenialIsA403ThatDoesNotEchoTheOrigin() {
        let e = RelayError.corsOriginNotAllowed
        #expect(e.status == 403)
        #expect(e.code == "cors_origin_not_allowed")
        #expect(!e.message.contains("evil"))
        #expect(RelayError.corsMethodNotAllowed.status == 403)
        #expect(RelayError.corsHeaderNotAllowed.status == 403)
    }

    @Test(arguments: ["DELETE", "PUT", "post", "PATCH"])
    func aMethodTheRouteDoesNotAcceptIsDenied(_ method: String) {
        #expect(preflight(requestMethod: method) == .deny(.corsMethodNotAllowed))
    }

    @Test(arguments: ["x-api-key", "authorization, cookie", "content-type, x-custom", "authorizationx"])
    func aHeaderNotOnTheListIsDenied(_ requested: String) {
        #expect(preflight(requestHeaders: requested) == .deny(.corsHeaderNotAllowed))
    }

    // MARK: wildcard

    @Test func theWildcardAllowsAnyOriginAsALiteralStar() {
        let open = CORSPolicy(allowedOrigins: ["*"], allowCredentials: true)
        #expect(allowedFields(preflight(open, origin: "https://anyone.example")) == [
            "Access-Control-Allow-Origin: *",
            "Vary: Origin",
            "Access-Control-Allow-Methods: GET, POST",
            "Access-Control-Allow-Headers: authorization, content-type, x-request-id, openai-beta",
            "Access-Control-Max-Age: 600",
        ])
        #expect(fields(open.responseHeaders(origin: "null")) == [
            "Access-Control-Allow-Origin: *", "Vary: Origin", "Access-Control-Expose-Headers: X-Request-Id, Retry-After",
        ], "no credentials with *, even when configured")
        #expect(open.responseHeaders(origin: nil).isEmpty)
        #expect(preflight(open, requestMethod: "DELETE") == .deny(.corsMethodNotAllowed))
    }

    @Test func credentialsGoOnlyToListedOrigins() {
        let p = CORSPolicy(allowedOrigins: ["*", app], allowCredentials: true)
        #expect(allowedFields(preflight(p))?.prefix(3) == [
            "Access-Control-Allow-Origin: https://app.example.com", "Vary: Origin", "Access-Control-Allow-Credentials: true",
        ])
        #expect(fields(p.responseHeaders(origin: "https://other.example")).first == "Access-Control-Allow-Origin: *")
        #expect(!fields(p.responseHeaders(origin: "https://other.example")).contains { $0.contains("Credentials") })
        #expect(!(allowedFields(preflight())?.contains { $0.contains("Credentials") } ?? true), "off by default")
    }

    // MARK: actual responses

    @Test func responseHeadersForAnAllowedOrigin() {
        #expect(fields(policy.responseHeaders(origin: app)) == [
            "Access-Control-Allow-Origin: https://app.example.com", "Vary: Origin",
            "Access-Control-Expose-Headers: X-Request-Id, Retry-After",
        ])
    }

    @Test func noResponseHeadersWithoutAnAllowedOrigin() {
        #expect(policy.responseHeaders(origin: nil).isEmpty)
        #expect(policy.responseHeaders(origin: "https://evil.example").isEmpty)
        #expect(CORSPolicy(allowedOrigins: []).responseHeaders(origin: app).isEmpty)
    }
}
