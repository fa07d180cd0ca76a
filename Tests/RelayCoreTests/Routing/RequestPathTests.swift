// RequestPath: the path the relay routes on is the path the provider receives, so anything a later hop could
// resolve into another path is refused.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

@Suite struct RequestPathTests {
    static let refused: [(String, RequestPath.Rejection)] = [
        ("/v1/models/../organization/admin_api_keys", .dotSegment),
        ("/v1/models/./x", .dotSegment),
        ("/v1/models/..", .dotSegment),
        ("/v1/models/..;/organization/admin_api_keys", .pathParameter),
        ("/v1/models/..;x/organization", .pathParameter),
        ("/v1/models/.;/x", .pathParameter),
        ("/v1/models/;x/y", .pathParameter),
        ("/v1/models/;", .pathParameter),
        ("/v1/chat/completions;x", .pathParameter),
        ("/v1/chat/completions;", .pathParameter),
        ("/v1/chat;x/completions", .pathParameter),
        ("/v1/models/gpt;v=2", .pathParameter),
        ("/v1/chat/completions%3Bx", .pathParameter),
        ("/v1/chat/completions%3b", .pathParameter),
        ("/v1/models/.", .dotSegment),
        ("/..", .dotSegment),
        ("/v1/models/..?x=1", .dotSegment),
        ("/v1/chat/x/../completions", .dotSegment),
        ("/v1/models/%2e%2e/organization", .encodedSeparator),
        ("/v1/models/%2E%2E/organization", .encodedSeparator),
        ("/v1/models/.%2e/x", .encodedSeparator),
        ("/v1/models/%2e/x", .encodedSeparator),
        ("/v1/models%2f..%2fadmin", .encodedSeparator),
        ("/v1/models%2F..", .encodedSeparator),
        ("/v1/models/..%5cadmin", .encodedSeparator),
        ("/v1/models/x%5Cy", .encodedSeparator),
        ("/v1/models\\..\\admin", .backslash),
        ("/v1/models\\x", .backslash),
        ("/v1/models//admin", .emptySegment),
        ("//v1/models", .emptySegment),
        ("/v1//", .emptySegment),
        ("/v1/models#/../x", .fragment),
        ("/v1/models?a=1#frag", .fragment),
        ("/v1/models/%zz", .badPercentEncoding),
        ("/v1/models/%2", .badPercentEncoding),
        ("/v1/models/%", .badPercentEncoding),
        ("/v1/models/%2?x=1", .badPercentEncoding),
        ("/v1/models/a\"b", .invalidCharacter),
        ("/v1/models/<x>", .invalidCharacter),
        ("/v1/models/a^b", .invalidCharacter),
        ("/v1/models/a|b", .invalidCharacter),
        ("*", .notOriginForm),
        ("v1/models", .notOriginForm),
        ("http://example.com/v1/models", .notOriginForm),
        ("", .notOriginForm),
    ]

    @Test(arguments: refused.map { Case($0.0, $0.1) })
    func refusesWhatAnotherHopCouldResolveElsewhere(_ c: Case) {
        #expect(RequestPath.parse(c.target) == .failure(c.rejection))
    }

    static let accepted: [(String, String, String?)] = [
        ("/", "/", nil),
        ("/v1/", "/v1/", nil),
        ("/v1/models", "/v1/models", nil),
        ("/v1/models?limit=2&after=x%20y", "/v1/models", "limit=2&after=x%20y"),
        ("/v1beta/models/gemini-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-pro:streamGenerateContent", "alt=sse"),
        ("/v1/models/a%20b,c=d,e@f!$&'()*+~_-", "/v1/models/a%20b,c=d,e@f!$&'()*+~_-", nil),
        ("/v1/files/file-abc.jsonl", "/v1/files/file-abc.jsonl", nil),
        ("/v1/...", "/v1/...", nil),
        ("/v1/.well-known", "/v1/.well-known", nil),
        ("/v1/a..b", "/v1/a..b", nil),
        ("/v1/models?a=1;b=2", "/v1/models", "a=1;b=2"),
        ("/v1/models?q=../..&r=%2e%2f", "/v1/models", "q=../..&r=%2e%2f"),
        ("/v1/models?", "/v1/models", ""),
        // Unreserved escapes are decoded (RFC 3986 §6.2.2.2), in every segment and either hex case; reserved and
        // non-ASCII ones stay as sent, and so does the query.
        ("/v1/x%41%7a", "/v1/xAz", nil),
        ("/v1/chat/complet%69ons", "/v1/chat/completions", nil),
        ("/%76%31/%63hat/completion%73", "/v1/chat/completions", nil),
        ("/v1/c%68at/c%6Fmpletions/", "/v1/chat/completions/", nil),
        ("/v1/c%68at/c%6fmpletions?x=%69", "/v1/chat/completions", "x=%69"),
        ("/v1/%2D%5F%7E%2d%5f%7e%30%39", "/v1/-_~-_~09", nil),
        ("/v1/%3A%3a%40%2C%20%25%C3%A9%7F%00", "/v1/%3A%3a%40%2C%20%25%C3%A9%7F%00", nil),
        ("/v1/a%3Ab%69c", "/v1/a%3Abic", nil),
        ("/v1/models/gemini%2Dpro%3AstreamGenerateContent", "/v1/models/gemini-pro%3AstreamGenerateContent", nil),
    ]

    @Test(arguments: accepted.map { Accepted($0.0, $0.1, $0.2) })
    func acceptsPlainPaths(_ c: Accepted) throws {
        let parsed = try RequestPath.parse(c.target).get()
        #expect(parsed.path == c.path)
        #expect(parsed.query == c.query)
    }

    @Test func removingPrefixAlwaysLeavesAnAbsolutePath() throws {
        #expect(try RequestPath.parse("/anthropic/v1/messages").get().removingPrefix("/anthropic/") == "/v1/messages")
        #expect(try RequestPath.parse("/anthropic/v1/messages").get().removingPrefix("/anthropic") == "/v1/messages")
        #expect(try RequestPath.parse("/anthropic").get().removingPrefix("/anthropic") == "/")
        #expect(try RequestPath.parse("/anthropic/").get().removingPrefix("/anthropic/") == "/")
        // A prefix's trailing slash does not change what is removed (the route also matches the bare prefix).
        #expect(try RequestPath.parse("/anthropic").get().removingPrefix("/anthropic/") == "/")
        #expect(try RequestPath.parse("/anthropic/v1/messages/").get().removingPrefix("/anthropic/") == "/v1/messages/")
        #expect(try RequestPath.parse("/x").get().removingPrefix("/") == "/x")
    }

    @Test func theEndpointIsThePathWithoutOneTrailingSlash() throws {
        #expect(try RequestPath.parse("/v1/chat/completions/").get().endpoint == "/v1/chat/completions")
        #expect(try RequestPath.parse("/v1/chat/completions").get().endpoint == "/v1/chat/completions")
        #expect(try RequestPath.parse("/v1/chat/complet%69ons/?a=b").get().endpoint == "/v1/chat/completions")
        #expect(try RequestPath.parse("/").get().endpoint == "/")
        #expect(try RequestPath.parse("/v1/").get().endpoint == "/v1")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var target: String
        var rejection: RequestPath.Rejection
        init(_ target: String, _ rejection: RequestPath.Rejection) { self.target = target; self.rejection = rejection }
        var testDescription: String { "\(target) → \(rejection.detail)" }
    }

    struct Accepted: Sendable, CustomTestStringConvertible {
        var target: String
        var path: String
        var query: String?
        init(_ target: String, _ path: String, _ query: String?) { self.target = target; self.path = path; self.query = query }
        var testDescription: String { target }
    }
}

@Suite struct RouteMatchingTests {
    @Test(arguments: [
        ("/v1/models", "/v1/models", true), ("/v1/models", "/v1/models/x", true), ("/v1/models", "/v1/modelsX", false),
        ("/v1/models", "/v1/model", false), ("/v1/models/", "/v1/models/x", true), ("/v1/models/", "/v1/models", true),
        ("/v1/models", "/v1/models/", true), ("/", "/anything", true), ("/", "/", true), ("/v1/models/", "/v1/modelsX", false),
    ])
    func prefixMatchingStopsAtSegmentBoundaries(prefix: String, path: String, matches: Bool) {
        #expect(RelayConfiguration.Route(prefix: prefix, upstream: "u").matches(path: path) == matches)
    }

    @Test func exactRoutesMatchOnlyTheirPathWithOrWithoutTheTrailingSlash() {
        let route = RelayConfiguration.Route(prefix: "/v1/chat/completions", upstream: "u", exact: true)
        #expect(route.matches(path: "/v1/chat/completions"))
        #expect(route.matches(path: "/v1/chat/completions/"))
        #expect(!route.matches(path: "/v1/chat/completions/x"))
        #expect(!route.matches(path: "/v1/chat/completionsX"))
        #expect(!route.matches(path: "/v1/chat"))
        let slashed = RelayConfiguration.Route(prefix: "/v1/chat/completions/", upstream: "u", exact: true)
        #expect(slashed.matches(path: "/v1/chat/completions"))
        #expect(slashed.matches(path: "/v1/chat/completions/"))
    }

    /// The reproducer: an exact route beside a broad one. Whatever the spelling of the same endpoint, the
    /// same route is chosen, in either order of the routes.
    @Test(arguments: ["/v1/chat/completions", "/v1/chat/completions/"])
    func aTrailingSlashChoosesTheRouteTheBarePathChooses(path: String) throws {
        var c = RelayConfiguration()
        c.routes = [
            .init(prefix: "/v1/", upstream: "broad"),
            .init(prefix: "/v1/chat/completions", upstream: "exact", exact: true),
            .init(prefix: "/v1/chat/completions/", upstream: "slashed"),
        ]
        let parsed = try RequestPath.parse(path).get()
        #expect(c.route(for: parsed.path)?.upstream == "exact")
        c.routes.reverse()
        #expect(c.route(for: parsed.path)?.upstream == "exact")
        #expect(c.route(for: try RequestPath.parse("/v1/chat/completions/x").get().path)?.upstream == "slashed")
    }
}
