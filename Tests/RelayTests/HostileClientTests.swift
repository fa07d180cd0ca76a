import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import TestSupportCore
import Testing

/// Hostile or broken clients get a clear answer (or a closed connection), within the configured limits, and
/// nothing else is harmed. Timeouts here are short real ones (a few hundred ms) with generous safety bounds;
/// their logic is tested exactly, with instants, in ConnectionDeadlinesTests.
@Suite("Hostile clients")
struct HostileClientTests {
    static func quickTimeouts(_ config: inout RelayConfiguration) {
        config.timeouts.headerReadSeconds = 0.3
        config.timeouts.bodyReadSeconds = 0.3
        config.timeouts.keepAliveIdleSeconds = 0.3
        config.timeouts.clientWriteStallSeconds = 0.3
    }

    static func okUpstream() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest(timeout: 10)
                try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
                try connection.write("ok")
            }
        }
    }

    @Test("slowloris: a head that never completes gets 408 and the connection closes")
    func slowHead() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream(), configure: Self.quickTimeouts)
        let client = try relay.client()
        try client.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        let head = try client.readHead(timeout: 3)
        #expect(head.status == 408)
        #expect(head.header("Connection") == "close")
        #expect(String(decoding: try client.readBody(head: head), as: UTF8.self).contains(#""code":"request_timeout""#))
        #expect(try client.readUntilClose(timeout: 3).bytes.isEmpty)
    }

    /// Half a request followed by RST (or FIN) in one go: the relay must notice the close at once, not at the
    /// header timeout (default 10 s here). A single recv per readiness event missed it.
    @Test("half a request then RST or FIN: the connection is released at once", arguments: [true, false])
    func partialThenClose(reset: Bool) throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream())
        for _ in 0..<50 {
            let client = try relay.client()
            try client.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
            if reset { client.reset() } else { client.close() }
        }
        // A synchronisation point: the listen backlog is accepted in order, so once this request is answered every
        // connection above has been accepted (no open count of 0 seen before the last accept).
        let probe = try relay.client()
        try probe.sendRequest(method: "GET", path: "/healthz", headers: [("Host", "x")])
        #expect(try probe.readHead().status == 200)
        probe.close()
        try relay.waitUntilNoConnections(timeout: 2)
        #expect(relay.server.liveCounts().connections == 0)
    }

    @Test("a malformed second request on a keep-alive connection still gets its 400 JSON")
    func malformedAfterKeepAlive() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream())
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/models")
        let first = try client.readHead()
        #expect(first.status == 200)
        _ = try client.readBody(head: first)
        try client.send("GET /v1/models HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        let second = try client.readHead()
        #expect(second.status == 400)
        #expect(String(decoding: try client.readBody(head: second), as: UTF8.self).contains(#""type":"invalid_request_error""#))
    }

    @Test("a connection that never sends a byte is closed quietly")
    func silentConnection() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream(), configure: Self.quickTimeouts)
        let client = try relay.client()
        let (bytes, _) = try client.readUntilClose(timeout: 3)
        #expect(bytes.isEmpty)
    }

    @Test("an idle keep-alive connection is closed quietly after its timeout")
    func keepAliveIdle() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream(), configure: Self.quickTimeouts)
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/models")
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let (bytes, _) = try client.readUntilClose(timeout: 3)
        #expect(bytes.isEmpty)
    }

    /// The body is read whole before the provider is called, so a slow one never reaches it.
    @Test("a body that stops arriving gets 408; the provider never sees the request")
    func slowBody() throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try RelayFixture(upstream: upstream, configure: Self.quickTimeouts)
        let client = try relay.client()
        try client.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":")
        let head = try client.readHead(timeout: 3)
        #expect(head.status == 408)
        let error = try UpstreamFaultTests.errorJSON(try client.readBody(head: head))
        #expect(error["code"] as? String == "request_timeout")
        try relay.waitUntilIdle()
        // Every connection curl could have opened is closed and every script has ended: nothing arrived.
        relay.server.shutdown()
        try upstream.waitForScriptsToFinish()
        #expect(upstream.acceptedConnections == 0)
    }

    @Test("a client that stops reading is closed after the write-stall timeout; its upstream is cancelled")
    func writeStall() throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            let event = Array(("data: " + String(repeating: "x", count: 16 * 1024) + "\n\n").utf8)
            do {
                while true { try connection.writeChunk(event) }
            } catch {
                closed.put(try connection.waitForPeerClose(timeout: 5))
            }
        }
        let relay = try RelayFixture(upstream: upstream) { config in
            Self.quickTimeouts(&config)
            config.buffers.highWaterBytes = 64 * 1024
            config.buffers.lowWaterBytes = 16 * 1024
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        // The client reads nothing at all; the relay must give up on it and cancel the upstream.
        _ = try closed.take(timeout: 10)
        try relay.waitUntilIdle(timeout: 3)
    }

    @Test("over maxConnections: new connections get 503 and close; existing ones are untouched")
    func connectionLimit() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream()) { $0.limits.maxConnections = 2 }
        let (first, _) = try Self.twoOpenThenOneRefused(relay, status: 503)
        try first.sendRequest(method: "GET", path: "/v1/models")
        #expect(try first.readHead().status == 200)
    }

    /// Two connections, each accepted (a request round trip on each) before a third connects, which gets `status`
    /// and `too_many_connections`; the two are returned open.
    static func twoOpenThenOneRefused(_ relay: RelayFixture, status: Int) throws -> (TestClient, TestClient) {
        let first = try relay.client()
        let second = try relay.client()
        for client in [first, second] {
            try client.sendRequest(method: "GET", path: "/v1/models")
            _ = try client.readBody(head: try client.readHead())
        }
        let third = try relay.client()
        let head = try third.readHead(timeout: 3)
        #expect(head.status == status)
        #expect(String(decoding: try third.readBody(head: head), as: UTF8.self).contains(#""code":"too_many_connections""#))
        return (first, second)
    }

    @Test("over maxConnectionsPerAddress: that address's next connection gets 429 and closes; a closed one frees its place")
    func connectionLimitPerAddress() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream()) { $0.limits.maxConnectionsPerAddress = 2 }
        let (first, second) = try Self.twoOpenThenOneRefused(relay, status: 429)
        // The first two go on; once one closes, the address may connect again.
        try first.sendRequest(method: "GET", path: "/v1/models")
        #expect(try first.readHead().status == 200)
        second.close()
        try eventually("the relay saw the close", timeout: 5) { relay.server.liveCounts().connections == 1 }
        let fourth = try relay.client()
        try fourth.sendRequest(method: "GET", path: "/v1/models")
        #expect(try fourth.readHead().status == 200)
        first.close()
        fourth.close()
        try eventually("every connection closed", timeout: 5) { relay.server.liveCounts().connections == 0 }
        #expect(relay.server.connectionsPerAddressOpen == 0, "no count left behind")
    }

    @Test("a trusted proxy's connections carry many clients: maxConnectionsPerAddress does not count them")
    func connectionLimitPerAddressSparesTrustedProxies() throws {
        let relay = try RelayFixture(upstream: try Self.okUpstream()) {
            $0.limits.maxConnectionsPerAddress = 1
            $0.trustedProxies = [CIDR("127.0.0.1/32")!]
        }
        let clients = try (0..<3).map { _ in try relay.client() }
        for client in clients {
            try client.sendRequest(method: "GET", path: "/v1/models", headers: [("X-Forwarded-For", "203.0.113.9")])
            #expect(try client.readHead().status == 200)
        }
    }

    @Test("a method the route does not allow: 405 with Allow, the provider is not called")
    func methodNotAllowed() throws {
        let upstream = try ScriptedUpstream { _ in }
        let relay = try RelayFixture(upstream: upstream) { config in
            config.routes = [.init(prefix: "/v1/", upstream: "test", methods: ["GET", "POST"])]
        }
        let client = try relay.client()
        try client.sendRequest(method: "DELETE", path: "/v1/files/abc")
        let head = try client.readHead()
        #expect(head.status == 405)
        #expect(head.header("Allow") == "GET, POST")
        _ = try client.readBody(head: head)
        try client.sendRequest(method: "BREW", path: "/v1/pot")
        #expect(try client.readHead().status == 405)
        #expect(upstream.acceptedConnections == 0)
    }

    struct Hostile: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: String
        var status: Int
        var testDescription: String { name }
    }

    @Test("hostile requests get their 4xx while another client's stream goes on byte-exact", arguments: [
        Hostile(name: "CL and TE", bytes: "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
        Hostile(name: "two Content-Lengths", bytes: "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400),
        Hostile(name: "body too large", bytes: "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", status: 413),
        Hostile(name: "URI too long", bytes: "GET /v1/" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\n\r\n", status: 414),
        Hostile(name: "head too large", bytes: "GET /v1/x HTTP/1.1\r\n" + String(repeating: "X-Pad: \(String(repeating: "p", count: 1000))\r\n", count: 40) + "\r\n", status: 431),
        Hostile(name: "HTTP/2.0", bytes: "GET /v1/x HTTP/2.0\r\n\r\n", status: 505),
        Hostile(name: "NUL in a header", bytes: "GET /v1/x HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n", status: 400),
        Hostile(name: "obsolete folding", bytes: "GET /v1/x HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", status: 400),
        Hostile(name: "bad chunk size", bytes: "POST /v1/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 400),
        Hostile(name: "no Host on HTTP/1.1", bytes: "GET /v1/x HTTP/1.1\r\n\r\n", status: 400),
        Hostile(name: "bare LF in chunked framing", bytes: "POST /v1/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\nz\r\n0\r\n\r\n", status: 400),
        Hostile(name: "garbage", bytes: "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}\r\n\r\n", status: 400),
    ])
    func hostileBesideAStream(_ hostile: Hostile) throws {
        let step = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for k in 0..<3 {
                try connection.writeChunk("data: \(k)\n\n")
                try step.wait()
            }
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        let streaming = try relay.client()
        try streaming.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try streaming.readHead()
        _ = try streaming.readChunkedBody(until: "data: 0\n\n")

        let attacker = try relay.client()
        try attacker.send(hostile.bytes)
        let head = try attacker.readHead()
        #expect(head.status == hostile.status)
        #expect(head.header("Content-Type") == "application/json")
        #expect(String(decoding: try attacker.readBody(head: head), as: UTF8.self).hasPrefix(#"{"error":{"message":"#))

        step.signal()
        _ = try streaming.readChunkedBody(until: "data: 1\n\n")
        step.signal()
        let body = try streaming.readChunkedBody(until: "data: 2\n\n")
        step.signal()
        #expect(try streaming.readChunk() == nil)
        #expect(body == Array("data: 0\n\ndata: 1\n\ndata: 2\n\n".utf8))
        // And the server still answers new requests.
        let after = try relay.client()
        try after.sendRequest(method: "GET", path: "/healthz")
        #expect(try after.readHead().status == 200)
    }
}
