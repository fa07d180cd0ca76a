import Foundation
import HTTP1
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore
import Upstream

/// What reaches the provider: the key injected exactly once, no client credential, the body byte-exact, and
/// the HTTP/1.1 request features a mobile client or curl uses.
@Suite("Request forwarding")
struct RequestForwardingTests {
    static let credentialHeaders: [(String, String)] = [
        ("Authorization", "Bearer \(RelayFixture.clientToken)"),
        ("Proxy-Authorization", "Basic \(RelayFixture.clientToken)"),
        ("x-api-key", RelayFixture.clientToken),
        ("api-key", RelayFixture.clientToken),
        ("X-Goog-Api-Key", RelayFixture.clientToken),
        ("Cookie", "session=\(RelayFixture.clientToken)"),
    ]

    static func echoUpstream(requests: Mailbox<RecordedRequest>) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 5)
                requests.put(request)
                let body = Array("ok".utf8)
                try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "\(body.count)")])
                try connection.write(body)
            }
        }
    }

    @Test("the key is injected exactly and client credentials never reach the provider")
    func keyInjection() throws {
        let requests = Mailbox<RecordedRequest>()
        // Usage injection off: this test holds the body to byte-exactness (UsageAccountingTests covers the edit).
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests)) { $0.routes[0].usage.inject = false }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions?trace=1",
                               headers: [("Content-Type", "application/json"), ("OpenAI-Beta", "assistants=v2"),
                                         ("Connection", "keep-alive, X-Hop"), ("X-Hop", "drop me"), ("TE", "trailers"),
                                         ("Accept-Encoding", "gzip, br"), ("X-Forwarded-For", "203.0.113.9")] + Self.credentialHeaders,
                               body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let request = try requests.take()
        #expect(request.method == "POST")
        #expect(request.target == "/v1/chat/completions?trace=1")
        #expect(request.headerValues("Authorization") == ["Bearer \(RelayFixture.providerKey)"])
        for (name, _) in Self.credentialHeaders where name != "Authorization" {
            #expect(request.header(name) == nil, "\(name) reached the provider")
        }
        #expect(!request.rawHead.contains(subsequence: Array(RelayFixture.clientToken.utf8)))
        #expect(request.header("X-Hop") == nil)
        #expect(request.header("TE") == nil)
        #expect(request.header("Accept-Encoding") == "identity")
        #expect(request.header("X-Forwarded-For") == "127.0.0.1", "a direct client's own chain is replaced, not appended to")
        #expect(request.header("X-Forwarded-Proto") == "http")
        #expect(request.header("OpenAI-Beta") == "assistants=v2")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Expect") == nil)
        let requestID = try #require(request.header("X-Request-Id"))
        #expect(head.header("X-Request-Id") == requestID)
        #expect(request.body == chatBody)
        relay.assertNoSecretLeaks(clients: [client])
    }

    /// Issue 18 §5: with a key shared by several organizations, the client chose who was billed.
    @Test("the client cannot choose who is billed: OpenAI-Organization and OpenAI-Project are the operator's")
    func billingFieldsAreTheOperators() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests)) { config in
            config.upstreams["test"]!.headers = HTTPHeaders([("OpenAI-Organization", "org-operator")])
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions",
                               headers: [("Content-Type", "application/json"), ("OpenAI-Organization", "org-victim"),
                                         ("openai-project", "proj_victim"), ("X-Goog-User-Project", "victim")],
                               body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let request = try requests.take()
        #expect(request.headerValues("OpenAI-Organization") == ["org-operator"])
        #expect(request.header("OpenAI-Project") == nil)
        #expect(request.header("X-Goog-User-Project") == nil)
        #expect(!request.rawHead.contains(subsequence: Array("victim".utf8)))
    }

    @Test("a custom key header (x-api-key) replaces the client's own value")
    func customKeyHeader() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try Self.echoUpstream(requests: requests)
        let relay = try RelayFixture(upstream: upstream) { config in
            config.upstreams["test"] = .init(name: "test", baseURL: upstream.baseURL + "/api", key: .init(RelayFixture.providerKey),
                                             keyHeader: "x-api-key", keyPrefix: "")
            config.routes = [.init(prefix: "/anthropic/", upstream: "test", stripPrefix: true)]
        }
        let client = try relay.client()
        try client.sendRequest(path: "/anthropic/v1/messages", headers: [("x-api-key", RelayFixture.clientToken),
                                                                         ("anthropic-version", "2023-06-01")], body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        let request = try requests.take()
        #expect(request.target == "/api/v1/messages")
        #expect(request.headerValues("x-api-key") == [RelayFixture.providerKey])
        #expect(request.header("Authorization") == nil)
        #expect(request.header("anthropic-version") == "2023-06-01")
    }

    @Test("keep-alive: several requests on one client connection, and pipelined ones answered in order")
    func keepAliveAndPipelining() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests))
        let client = try relay.client()
        for _ in 0..<3 {
            try client.sendRequest(path: "/v1/models", headers: [], body: [])
            let head = try client.readHead()
            #expect(head.status == 200)
            #expect(try client.readBody(head: head) == Array("ok".utf8))
        }
        // Three requests in one write, the middle one to an unknown route.
        let one = "GET /v1/a HTTP/1.1\r\nHost: x\r\n\r\n"
        let two = "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
        let three = "POST /v1/c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        try client.send(one + two + three)
        let h1 = try client.readHead(); _ = try client.readBody(head: h1)
        let h2 = try client.readHead(); _ = try client.readBody(head: h2)
        let h3 = try client.readHead(); _ = try client.readBody(head: h3)
        let statuses: [Int] = [h1.status, h2.status, h3.status]
        #expect(statuses == [200, 404, 200])
        for _ in 0..<3 { #expect(try requests.take().target == "/v1/models") }
        let first = try requests.take()
        let third = try requests.take()
        #expect(first.target == "/v1/a")
        #expect(third.target == "/v1/c")
        #expect(third.body == Array("abc".utf8))
    }

    @Test("Expect: 100-continue is answered by the relay, then the body is forwarded")
    func expectContinue() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests))
        let client = try relay.client()
        let body = Array(repeating: UInt8(ascii: "a"), count: 5000)
        try client.send("POST /v1/uploads HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
        let interim = try client.readHead()
        #expect(interim.status == 100)
        try client.send(body)
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let request = try requests.take()
        #expect(request.body == body)
        #expect(request.header("Expect") == nil)
    }

    @Test("a chunked request body is forwarded byte-exact")
    func chunkedRequestBody() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests))
        let client = try relay.client()
        try client.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "5\r\n{\"a\":\r\n3;ext=1\r\n\"b\"\r\n1\r\n}\r\n0\r\n\r\n")
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        #expect(try requests.take().body == Array(#"{"a":"b"}"#.utf8))
    }

    /// Every byte value, NUL first: bodies curl reads in place (up to `Transfer.inlineBodyLimit`, where a length
    /// taken by `strlen` would send nothing) and through the read callback.
    @Test("a binary body arrives byte-exact",
          arguments: [1, 256, Transfer.inlineBodyLimit, Transfer.inlineBodyLimit + 1, 3 << 20])
    func binaryBodyExact(size: Int) throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try Self.echoUpstream(requests: requests)) { $0.limits.maxBodyBytes = 4 << 20 }
        let client = try relay.client()
        var body = [UInt8](repeating: 0, count: size)
        for i in body.indices { body[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 8) }
        try client.sendRequest(path: "/v1/files", headers: [("Content-Type", "application/octet-stream")], body: body)
        let head = try client.readHead(timeout: 10)
        #expect(head.status == 200)
        #expect(try requests.take(timeout: 10).body == body)
    }

    @Test("unknown path: 404 JSON, the provider is never called")
    func unknownRoute() throws {
        let upstream = try ScriptedUpstream { _ in }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/admin", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")])
        let head = try client.readHead()
        #expect(head.status == 404)
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(body.contains(#""code":"route_not_found""#))
        #expect(upstream.acceptedConnections == 0)
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("malformed request: 400 JSON and the connection closes")
    func malformed() throws {
        let relay = try RelayFixture(upstream: try ScriptedUpstream { _ in })
        let client = try relay.client()
        try client.send("POST /v1/x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
        let head = try client.readHead()
        #expect(head.status == 400)
        #expect(head.header("Connection") == "close")
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(body.contains(#""type":"invalid_request_error""#))
        let rest = try client.readUntilClose()
        #expect(rest.bytes.isEmpty)
    }

    @Test("HTTP/1.0 client: close-delimited response")
    func http10() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: a\n\n")
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.send("POST /v1/chat/completions HTTP/1.0\r\nContent-Length: \(chatBody.count)\r\n\r\n")
        try client.send(chatBody)
        let (bytes, _) = try client.readUntilClose()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(!text.lowercased().contains("transfer-encoding"))
        #expect(text.hasSuffix("\r\n\r\ndata: a\n\n"))
    }
}
