// RequestPath: the path the relay routes on is the path the provider receives, so anything a later hop could
// resolve into another path is refused.
import Relay
import Testing

@Suite struct RequestPathTests {
    static let refused: [(String, RequestPath.Rejection)] = [
        ("/v1/models/../organization/admin_api_keys", .dotSegment),
        ("/v1/models/./x", .dotSegment),
        ("/v1/models/..", .dotSegment),
        ("/v1/models/..;/organization/admin_api_keys", .dotSegment),
        ("/v1/models/..;x/organization", .dotSegment),
        ("/v1/models/.;/x", .dotSegment),
        ("/v1/models/;x/y", .emptySegment),
        ("/v1/models/;", .emptySegment),
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
        ("/v1/models/a%20b;c=d,e@f!$&'()*+~_-", "/v1/models/a%20b;c=d,e@f!$&'()*+~_-", nil),
        ("/v1/files/file-abc.jsonl", "/v1/files/file-abc.jsonl", nil),
        ("/v1/...", "/v1/...", nil),
        ("/v1/.well-known", "/v1/.well-known", nil),
        ("/v1/a..b", "/v1/a..b", nil),
        ("/v1/models/gpt;v=2", "/v1/models/gpt;v=2", nil),
        ("/v1/models?q=../..&r=%2e%2f", "/v1/models", "q=../..&r=%2e%2f"),
        ("/v1/models?", "/v1/models", ""),
        ("/v1/x%41%7a", "/v1/x%41%7a", nil),
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
        ("/v1/models", "/v1/model", false), ("/v1/models/", "/v1/models/x", true), ("/v1/models/", "/v1/models", false),
        ("/v1/models", "/v1/models/", true), ("/", "/anything", true),
    ])
    func prefixMatchingStopsAtSegmentBoundaries(prefix: String, path: String, matches: Bool) {
        #expect(RelayConfiguration.Route(prefix: prefix, upstream: "u").matches(path: path) == matches)
    }

    @Test func exactRoutesMatchOnlyTheirPath() {
        let route = RelayConfiguration.Route(prefix: "/v1/chat/completions", upstream: "u", exact: true)
        #expect(route.matches(path: "/v1/chat/completions"))
        #expect(!route.matches(path: "/v1/chat/completions/"))
        #expect(!route.matches(path: "/v1/chat/completions/x"))
    }
}
