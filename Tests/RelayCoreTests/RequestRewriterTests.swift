// RequestRewriter: what the provider receives. Credentials and hop-by-hop fields never pass, the relay's key
// appears exactly once, end-to-end fields keep their order and spelling.
import HTTP1
import HTTPServer
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

private let openAI = RelayConfiguration.Upstream(
    name: "openai", baseURL: "https://api.openai.com", key: Secret("sk-relay-key"))

private func rewrite(
    _ pairs: [(String, String)], upstream: RelayConfiguration.Upstream = openAI, client: ClientAddress = .direct("10.0.0.7"),
    requestID: String = "req-1"
) -> HTTPHeaders {
    RequestRewriter.upstreamHeaders(from: headers(pairs), upstream: upstream, client: client, requestID: requestID)
}

/// A request that came through a trusted ingress (10.0.0.2) on behalf of 203.0.113.9.
private let viaIngress = ClientAddress(address: "203.0.113.9", forwardedFor: "203.0.113.9, 10.0.0.2", viaTrustedProxy: true)

/// What the relay appends to every request for `openAI` from 10.0.0.7, in order.
private let appended = [
    "Accept-Encoding: identity", "X-Forwarded-For: 10.0.0.7", "X-Forwarded-Proto: http", "X-Request-Id: req-1",
    "Authorization: Bearer sk-relay-key",
]

@Suite struct RequestRewriterTests {
    struct Field: Sendable, CustomTestStringConvertible {
        var name: String
        var value: String
        init(_ name: String, _ value: String) { self.name = name; self.value = value }
        var testDescription: String { "\(name): \(value)" }
    }

    static let droppedFields: [Field] = [
        // Client credentials, any spelling.
        Field("Authorization", "Bearer sk-client"), Field("authorization", "Bearer sk-client"),
        Field("AUTHORIZATION", "Basic dXNlcjpwYXNz"), Field("Proxy-Authorization", "Basic abc"),
        Field("proxy-authorization", "Basic abc"), Field("x-api-key", "sk-ant-client"), Field("X-API-KEY", "sk-ant-client"),
        Field("X-Api-Key", "sk-ant-client"), Field("api-key", "azure-client"), Field("Api-Key", "azure-client"),
        Field("x-goog-api-key", "goog-client"), Field("X-Goog-Api-Key", "goog-client"), Field("Cookie", "session=1"),
        Field("cookie", "session=1"), Field("COOKIE", "a=b; c=d"),
        // Hop-by-hop (RFC 9110 §7.6.1).
        Field("Connection", "keep-alive"), Field("Connection", "close"), Field("Keep-Alive", "timeout=5"),
        Field("Proxy-Connection", "keep-alive"), Field("Transfer-Encoding", "chunked"), Field("TE", "trailers"),
        Field("Trailer", "X-Checksum"), Field("Upgrade", "websocket"),
        // Left to curl or answered by the relay.
        Field("Host", "relay.example"), Field("host", "relay.example"), Field("Content-Length", "17"),
        Field("Expect", "100-continue"),
        // Replaced by the relay's own.
        Field("Accept-Encoding", "gzip, br"), Field("X-Request-Id", "client-id"),
        // A client's claims about where it came from or what it asked for (issue 9 item 4).
        Field("X-Forwarded-For", "198.51.100.66"), Field("x-forwarded-for", "1.1.1.1, 2.2.2.2"),
        Field("X-Real-IP", "198.51.100.66"), Field("x-real-ip", "1.1.1.1"),
        Field("Forwarded", "for=198.51.100.66;proto=https;host=evil.example"), Field("forwarded", "for=1.1.1.1"),
        Field("X-Forwarded-Host", "internal.provider"), Field("X-Original-URL", "/v1/organization/admin_api_keys"),
        Field("X-Rewrite-URL", "/admin"), Field("X-HTTP-Method-Override", "DELETE"), Field("X-Method-Override", "PUT"),
        Field("x-http-method-override", "DELETE"), Field("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"),
        Field("X-Forwarded-Proto", "https"),
        // Underscores: a CGI-style gateway reads `X_Forwarded_For` as `X-Forwarded-For` (nginx drops them).
        Field("X_Forwarded_For", "198.51.100.66"), Field("x_api_key", "sk-smuggled"), Field("X-Api_Key", "sk-smuggled"),
        Field("Authorization_", "Bearer x"), Field("_", "x"), Field("OpenAI_Organization", "org-other"),
        // Who is billed (issue 18 §5): with a key shared by several organizations or projects, the client would
        // choose the one the provider bills.
        Field("OpenAI-Organization", "org-other"), Field("openai-organization", "org-other"),
        Field("OpenAI-Project", "proj_other"), Field("OPENAI-PROJECT", "proj_other"),
        Field("X-Goog-User-Project", "someone-elses-project"),
    ]

    @Test(arguments: droppedFields)
    func fieldIsDropped(_ field: Field) {
        let out = rewrite([("Content-Type", "application/json"), (field.name, field.value)])
        #expect(lines(out) == ["Content-Type: application/json"] + appended)
        #expect(!out.values(field.name).contains(field.value))
    }

    @Test func allCredentialFieldsAtOnceLeaveOnlyTheRelayKey() {
        let credentials = RequestRewriter.clientCredentialFields
        #expect(Set(credentials) == ["authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"])
        let out = rewrite(credentials.map { ($0, "client-secret") } + [("Accept", "text/event-stream")])
        #expect(lines(out) == ["Accept: text/event-stream"] + appended)
        #expect(!lines(out).joined().contains("client-secret"))
    }

    @Test func fieldsNamedInConnectionAreDropped() {
        let out = rewrite([
            ("Connection", "X-Custom, x-other"), ("connection", " X-Third "), ("X-Custom", "1"), ("X-Other", "2"),
            ("x-third", "3"), ("X-Keep", "4"),
        ])
        #expect(lines(out) == ["X-Keep: 4"] + appended)
    }

    @Test func acceptEncodingBecomesExactlyIdentity() {
        let out = rewrite([("Accept-Encoding", "gzip"), ("accept-encoding", "br, deflate")])
        #expect(out.values("Accept-Encoding") == ["identity"])
        #expect(rewrite([]).values("accept-encoding") == ["identity"])
    }

    @Test func xForwardedForIsSetWhenAbsent() {
        #expect(rewrite([]).values("X-Forwarded-For") == ["10.0.0.7"])
    }

    /// From a direct client the chain it sent is its own claim: replaced by its address, never appended to.
    @Test(arguments: ["203.0.113.5", "203.0.113.5, 198.51.100.2", "", "garbage"])
    func aDirectClientsForwardedForIsReplaced(existing: String) {
        let out = rewrite([("x-forwarded-for", existing), ("X-Forwarded-For", "192.0.2.1"), ("Accept", "*/*")])
        #expect(out.values("X-Forwarded-For") == ["10.0.0.7"])
    }

    /// Behind a trusted proxy the resolver's chain goes up as it is, whatever lines the proxy sent.
    @Test func theResolvedChainIsSentFromATrustedProxy() {
        let out = rewrite([("X-Forwarded-For", "6.6.6.6, 203.0.113.9"), ("X-Real-IP", "203.0.113.9")], client: viaIngress)
        #expect(out.values("X-Forwarded-For") == ["203.0.113.9, 10.0.0.2"])
        #expect(out.values("X-Real-IP") == [])
    }

    @Test func xForwardedProtoIsKeptFromATrustedProxy() {
        let out = rewrite([("X-Forwarded-Proto", "https")], client: viaIngress)
        #expect(out.values("X-Forwarded-Proto") == ["https"])
        #expect(lines(out) == [
            "X-Forwarded-Proto: https", "Accept-Encoding: identity", "X-Forwarded-For: 203.0.113.9, 10.0.0.2",
            "X-Request-Id: req-1", "Authorization: Bearer sk-relay-key",
        ])
    }

    @Test func xForwardedProtoFromADirectClientIsReplaced() {
        #expect(rewrite([("X-Forwarded-Proto", "https")]).values("X-Forwarded-Proto") == ["http"])
    }

    @Test func everySteeringFieldIsListed() {
        #expect(Set(RequestRewriter.steeringFields) == [
            "forwarded", "x-forwarded-host", "x-real-ip", "x-original-url", "x-rewrite-url", "x-http-method-override",
            "x-method-override", "http2-settings", "x-http-method", "x-original-method", "x-original-uri",
            "x-envoy-original-path", "x-forwarded-uri", "x-forwarded-path", "x-forwarded-scheme", "x-forwarded-ssl", "x-host", "x-original-host",
            "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server",
            "x-original-forwarded-for", "true-client-ip", "x-client-ip", "cf-connecting-ip",
            "openai-organization", "openai-project", "x-goog-user-project", "x-goog-fieldmask",
        ])
    }

    /// Every steering field is removed, whatever its case, and nothing else with it.
    @Test func everySteeringFieldIsRemoved() {
        let out = rewrite(RequestRewriter.steeringFields.map { ($0.uppercased(), "/v1/files") } + [("Accept", "*/*")])
        for name in RequestRewriter.steeringFields { #expect(out.values(name) == [], "\(name)") }
        #expect(out.values("Accept") == ["*/*"])
    }

    /// Google's field mask in a header (any case) never reaches the provider: it could have the answer leave its
    /// usage out.
    @Test func aFieldMaskHeaderIsRemoved() {
        let out = rewrite([("X-Goog-FieldMask", "candidates"), ("x-goog-fieldmask", "candidates.content"), ("Accept", "*/*")])
        #expect(out.values("X-Goog-FieldMask") == [])
        #expect(out.values("Accept") == ["*/*"])
    }

    /// `upstreams.NAME.headers`: the operator's fields go on every request, after the relay's own and before the
    /// preset's defaults (which they may replace); the client can neither override nor repeat them.
    @Test func theOperatorsFixedFieldsReplaceTheClientsAndPrecedeThePresetDefaults() {
        var upstream = RelayConfiguration.Upstream(name: "anthropic", baseURL: "https://api.anthropic.com",
                                                   key: Secret("sk-ant-relay"), provider: .anthropic)
        upstream.headers = HTTPHeaders([("OpenAI-Organization", "org-operator"), ("anthropic-version", "2024-01-01"),
                                        ("X-Gateway-Tenant", "app-1")])
        let out = rewrite([("openai-organization", "org-client"), ("X-GATEWAY-TENANT", "other"), ("Accept", "*/*"),
                           ("Anthropic-Version", "2023-06-01")], upstream: upstream)
        #expect(lines(out) == [
            "Accept: */*", "Accept-Encoding: identity", "X-Forwarded-For: 10.0.0.7", "X-Forwarded-Proto: http",
            "X-Request-Id: req-1", "OpenAI-Organization: org-operator", "anthropic-version: 2024-01-01",
            "X-Gateway-Tenant: app-1", "x-api-key: sk-ant-relay",
        ])
        // Without operator fields, the preset's default still comes when the client sent none.
        let plain = RelayConfiguration.Upstream(name: "anthropic", baseURL: "https://api.anthropic.com",
                                                key: Secret("sk-ant-relay"), provider: .anthropic)
        #expect(rewrite([("OpenAI-Project", "proj_client")], upstream: plain).values("anthropic-version") == ["2023-06-01"])
        #expect(rewrite([("OpenAI-Project", "proj_client")], upstream: plain).values("OpenAI-Project") == [])
    }

    @Test func xForwardedProtoDefaultsToHTTP() {
        #expect(rewrite([]).values("X-Forwarded-Proto") == ["http"])
    }

    @Test func requestIDIsSetOnce() {
        let out = rewrite([("X-Request-Id", "from-client"), ("x-request-id", "again")], requestID: "abc-123")
        #expect(out.values("X-Request-Id") == ["abc-123"])
    }

    struct KeyCase: Sendable, CustomTestStringConvertible {
        var keyHeader: String
        var keyPrefix: String
        var clientFields: [Field]
        var testDescription: String { "\(keyHeader) with client \(clientFields.map(\.testDescription))" }
    }

    static let keyCases: [KeyCase] = [
        KeyCase(keyHeader: "Authorization", keyPrefix: "Bearer ", clientFields: []),
        KeyCase(keyHeader: "Authorization", keyPrefix: "Bearer ", clientFields: [Field("authorization", "Bearer sk-client")]),
        KeyCase(keyHeader: "x-api-key", keyPrefix: "", clientFields: [Field("x-api-key", "sk-ant-client")]),
        KeyCase(keyHeader: "x-api-key", keyPrefix: "", clientFields: [Field("X-Api-Key", "a"), Field("X-API-KEY", "b")]),
        KeyCase(keyHeader: "api-key", keyPrefix: "", clientFields: [Field("Api-Key", "azure-client")]),
        // A provider-specific header that is not in the credential list: still never the client's value.
        KeyCase(keyHeader: "X-Provider-Token", keyPrefix: "Token ", clientFields: [Field("x-provider-token", "mine")]),
    ]

    @Test(arguments: keyCases)
    func theKeyHeaderAppearsExactlyOnceWithPrefixAndKey(_ c: KeyCase) {
        let upstream = RelayConfiguration.Upstream(
            name: "p", baseURL: "https://provider.example", key: Secret("sk-relay"), keyHeader: c.keyHeader,
            keyPrefix: c.keyPrefix)
        let out = rewrite(c.clientFields.map { ($0.name, $0.value) } + [("Content-Type", "application/json")],
                          upstream: upstream)
        #expect(out.values(c.keyHeader) == [c.keyPrefix + "sk-relay"])
        #expect(out.count(where: { $0.name.lowercased() == c.keyHeader.lowercased() }) == 1)
        // Injected last, so nothing before it can shadow it.
        #expect(Array(out).last == HTTPField(name: c.keyHeader, value: c.keyPrefix + "sk-relay"))
        for field in c.clientFields { #expect(!out.values(field.name).contains(field.value)) }
    }

    @Test func noKeyConfiguredMeansNoKeyHeaderAndTheClientsIsStillDropped() {
        let keyless = RelayConfiguration.Upstream(name: "local", baseURL: "http://127.0.0.1:11434", key: nil)
        let out = rewrite([("Authorization", "Bearer sk-client"), ("Accept", "*/*")], upstream: keyless)
        #expect(lines(out) == [
            "Accept: */*", "Accept-Encoding: identity", "X-Forwarded-For: 10.0.0.7", "X-Forwarded-Proto: http",
            "X-Request-Id: req-1",
        ])
    }

    @Test func endToEndFieldsAreKeptInOrderAndSpelling() {
        let out = rewrite([
            ("Content-Type", "application/json"), ("Authorization", "Bearer sk-client"), ("Accept", "text/event-stream"),
            ("Connection", "keep-alive"), ("OpenAI-Organization", "org-123"), ("Host", "relay"),
            ("User-Agent", "OpenAI/Python 1.40.0"), ("openai-beta", "assistants=v2"), ("X-Dup", "1"), ("x-dup", "2"),
            ("Content-Length", "120"), ("Cookie", "a=b"),
        ])
        #expect(lines(out) == [
            "Content-Type: application/json", "Accept: text/event-stream",
            "User-Agent: OpenAI/Python 1.40.0", "openai-beta: assistants=v2", "X-Dup: 1", "x-dup: 2",
        ] + appended)
    }

    // MARK: upstreamURL

    struct URLCase: Sendable, CustomTestStringConvertible {
        var baseURL: String
        var prefix: String
        var strip: Bool
        var target: String
        var expected: String
        var testDescription: String { "\(baseURL) + \(target) (prefix \(prefix), strip \(strip))" }
    }

    static let urlCases: [URLCase] = [
        URLCase(baseURL: "https://api.openai.com", prefix: "/v1/", strip: false, target: "/v1/chat/completions",
                expected: "https://api.openai.com/v1/chat/completions"),
        URLCase(baseURL: "https://openrouter.ai/api", prefix: "/v1/", strip: false, target: "/v1/chat",
                expected: "https://openrouter.ai/api/v1/chat"),
        URLCase(baseURL: "https://openrouter.ai/api/", prefix: "/v1/", strip: false, target: "/v1/chat",
                expected: "https://openrouter.ai/api/v1/chat"),
        URLCase(baseURL: "https://api.openai.com", prefix: "/v1/", strip: false, target: "/v1/models?limit=2&after=x%20y",
                expected: "https://api.openai.com/v1/models?limit=2&after=x%20y"),
        URLCase(baseURL: "http://127.0.0.1:8081", prefix: "/openai/", strip: true, target: "/openai/v1/chat/completions",
                expected: "http://127.0.0.1:8081/v1/chat/completions"),
        URLCase(baseURL: "https://api.anthropic.com", prefix: "/anthropic", strip: true, target: "/anthropic/v1/messages?beta=true",
                expected: "https://api.anthropic.com/v1/messages?beta=true"),
        URLCase(baseURL: "https://api.anthropic.com", prefix: "/anthropic", strip: true, target: "/anthropic",
                expected: "https://api.anthropic.com/"),
        URLCase(baseURL: "https://api.anthropic.com", prefix: "/anthropic", strip: true, target: "/anthropic?x=1",
                expected: "https://api.anthropic.com/?x=1"),
        URLCase(baseURL: "https://openrouter.ai/api", prefix: "/or/", strip: true, target: "/or/v1/chat",
                expected: "https://openrouter.ai/api/v1/chat"),
        URLCase(baseURL: "https://api.anthropic.com", prefix: "/anthropic", strip: false, target: "/anthropic/v1/messages",
                expected: "https://api.anthropic.com/anthropic/v1/messages"),
    ]

    @Test(arguments: urlCases)
    func upstreamURL(_ c: URLCase) throws {
        let upstream = RelayConfiguration.Upstream(name: "u", baseURL: c.baseURL, key: nil)
        let route = RelayConfiguration.Route(prefix: c.prefix, upstream: "u", stripPrefix: c.strip)
        let path = try #require(try? RequestPath.parse(c.target).get())
        #expect(RequestRewriter.upstreamURL(baseURL: upstream.baseURL, route: route, path: path) == c.expected)
    }

    // MARK: requestID

    @Test(arguments: [
        "abc", "0f8fad5b-d9cb-469f-a165-70867728950e", "req_01HZX.2", String(repeating: "a", count: 64), "A", "-._",
    ])
    func aSaneClientRequestIDIsKept(_ id: String) {
        #expect(RequestRewriter.requestID(clientValue: id, generated: "gen-1") == id)
    }

    @Test(arguments: [
        "", "has space", "a\r\nX-Injected: 1", "line\nbreak", "tab\there", String(repeating: "a", count: 65),
        String(repeating: "b", count: 1000), "ünïcode", "a/b", "a;b", "\"quoted\"", "a\0b", "<script>",
    ])
    func aHostileClientRequestIDIsReplaced(_ id: String) {
        #expect(RequestRewriter.requestID(clientValue: id, generated: "gen-1") == "gen-1")
    }

    @Test func aMissingClientRequestIDIsGenerated() {
        #expect(RequestRewriter.requestID(clientValue: nil, generated: "gen-2") == "gen-2")
    }

    /// The generated id is made only when the client's is not kept.
    @Test func anIDIsGeneratedOnlyWhenNeeded() {
        var made = 0
        func generate() -> String { made += 1; return "gen-3" }
        #expect(RequestRewriter.requestID(clientValue: "app-1", generated: generate()) == "app-1")
        #expect(made == 0)
        #expect(RequestRewriter.requestID(clientValue: "bad id", generated: generate()) == "gen-3")
        #expect(made == 1)
    }
}
