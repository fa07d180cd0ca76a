import Foundation
import RelayTestSupport
import TestHarness
import Testing

/// RFC 9112 §3.2 end to end: an absolute-form target is served on its path and its authority never picks where
/// the request goes; an HTTP/1.1 request without Host, or with bare LF in its chunked framing, is a 400 that
/// never reaches the provider.
@Suite("Request target forms and Host")
struct RequestTargetFormTests {
    @Test("absolute-form: routed on its path, the upstream comes from the route, never from the authority")
    func absoluteFormRoutesOnPath() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try RequestForwardingTests.echoUpstream(requests: requests)
        // A second listener named in the request's authority: it must never be dialled.
        let decoy = try RequestForwardingTests.echoUpstream(requests: Mailbox<RecordedRequest>())
        let relay = try RelayFixture(upstream: upstream) { config in
            config.upstreams["test"] = .init(name: "test", baseURL: upstream.baseURL + "/api", key: .init(RelayFixture.providerKey))
            config.routes = [.init(prefix: "/anthropic/", upstream: "test", stripPrefix: true)]
        }
        let client = try relay.client()
        let decoyAuthority = "127.0.0.1:\(decoy.port)"
        try client.send("POST http://\(decoyAuthority)/anthropic/v1/messages?x=1 HTTP/1.1\r\nHost: \(decoyAuthority)\r\n"
            + "Content-Length: \(chatBody.count)\r\n\r\n" + String(decoding: chatBody, as: UTF8.self))
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == Array("ok".utf8))
        let request = try requests.take()
        #expect(request.target == "/api/v1/messages?x=1")
        #expect(request.header("Host") == "127.0.0.1:\(upstream.port)")
        #expect(request.body == chatBody)

        // The path decides the route: an absolute URI to a path outside every route is a 404.
        try client.send("GET HTTP://\(decoyAuthority)/v1/models HTTP/1.1\r\nHost: \(decoyAuthority)\r\n\r\n")
        let missing = try client.readHead()
        #expect(missing.status == 404)
        _ = try client.readBody(head: missing)
        try relay.waitUntilIdle()
        #expect(decoy.acceptedConnections == 0)
        #expect(upstream.acceptedConnections == 1)
        // Logs show the path that was served, not the URI the client wrote.
        let line = try #require(relay.logs.lines.first { $0.contains(#""message":"exchange""#) })
        #expect(line.contains(#""path":"/anthropic/v1/messages""#))
        #expect(!relay.logs.lines.contains { $0.contains(decoyAuthority) })
    }

    struct Refused: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: String
        var message: String
        var testDescription: String { name }
    }

    @Test("refused with 400 before anything reaches the provider", arguments: [
        Refused(name: "HTTP/1.1 without Host", bytes: "GET /v1/models HTTP/1.1\r\nAccept: */*\r\n\r\n", message: "missing Host field"),
        Refused(name: "absolute-form without Host", bytes: "GET http://h/v1/models HTTP/1.1\r\n\r\n", message: "missing Host field"),
        Refused(name: "two Host fields", bytes: "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", message: "multiple Host fields"),
        Refused(name: "absolute-form with another scheme", bytes: "GET ftp://h/v1/models HTTP/1.1\r\nHost: h\r\n\r\n",
                message: "request-target is neither a path nor an http(s) URI"),
        Refused(name: "absolute-form with userinfo", bytes: "GET http://u:p@h/v1/models HTTP/1.1\r\nHost: h\r\n\r\n",
                message: "userinfo in request-target"),
        Refused(name: "CONNECT", bytes: "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n", message: "CONNECT is not supported"),
        Refused(name: "bare LF after a chunk size", bytes: "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "2\nhi\r\n0\r\n\r\n", message: "bare LF in chunk size line"),
        Refused(name: "bare LF after chunk data", bytes: "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "2\r\nhi\n0\r\n\r\n", message: "missing CRLF after chunk data"),
    ])
    func refused(_ c: Refused) throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try RequestForwardingTests.echoUpstream(requests: requests)
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.send(c.bytes)
        let head = try client.readHead()
        #expect(head.status == 400)
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(body.contains(#""code":"bad_request""#))
        #expect(body.contains(c.message))
        try relay.waitUntilIdle()
        // The whole request came in one write: nothing of it may reach the provider.
        #expect(upstream.acceptedConnections == 0)
    }

    @Test("HTTP/1.0 without Host is still served")
    func http10WithoutHost() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try RequestForwardingTests.echoUpstream(requests: requests))
        let client = try relay.client()
        try client.send("GET /v1/models HTTP/1.0\r\n\r\n")
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try requests.take().target == "/v1/models")
    }
}
