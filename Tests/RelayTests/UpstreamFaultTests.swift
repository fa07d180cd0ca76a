import Foundation
import HTTP1
import RelayTestSupport
import TestHarness
import TestSupportCore
import Testing
import Upstream

/// Provider faults become clear answers before the head (502, 504 with an OpenAI-style JSON body), and a
/// truncated stream after it (no terminal chunk: never a clean end). Provider errors pass through unchanged.
@Suite("Upstream faults")
struct UpstreamFaultTests {
    static func errorJSON(_ body: [UInt8]) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        return try #require(object?["error"] as? [String: Any])
    }

    @Test("connection refused → 502 upstream_unreachable")
    func refused() throws {
        let nobody = try RefusingPort()
        let relay = try RelayFixture(upstream: nil, baseURL: "http://127.0.0.1:\(nobody.port)")
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 502)
        #expect(head.header("Content-Type") == "application/json")
        #expect(head.header("X-Request-Id") != nil)
        let error = try Self.errorJSON(try client.readBody(head: head))
        #expect(error["code"] as? String == "upstream_unreachable")
        #expect(error["type"] as? String == "upstream_error")
        #expect((error["message"] as? String)?.isEmpty == false)
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("no response head within the first-byte timeout → 504, and the upstream is closed")
    func firstByteTimeout() throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            closed.put(try connection.waitForPeerClose(timeout: 5))
        }
        let relay = try RelayFixture(upstream: upstream) { $0.timeouts.upstreamFirstByteSeconds = 0.2 }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead(timeout: 3)
        #expect(head.status == 504)
        #expect(try Self.errorJSON(try client.readBody(head: head))["code"] as? String == "upstream_timeout")
        _ = try closed.take(timeout: 2)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"upstream_timeout""#) })
    }

    @Test("the upstream dies mid-stream: the client sees a truncated stream, never a clean end", arguments: [false, true])
    func midStreamDeath(reset: Bool) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: one\n\n")
            try connection.writeChunk("data: two\n\n")
            if reset { connection.reset() } else { connection.close() }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        var body: [UInt8] = []
        var ended: Error?
        do {
            while let chunk = try client.readChunk() { body += chunk }
        } catch {
            ended = error
        }
        #expect(body == Array("data: one\n\ndata: two\n\n".utf8))
        let error = try #require(ended, "the stream ended cleanly (a terminal chunk was sent)")
        #expect([HarnessError.truncated, .connectionReset].contains(error as? HarnessError))
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"upstream_error""#) })
    }

    @Test("a provider that never completes the TCP handshake → 502 connect timeout, not a 504 much later")
    func connectTimeout() throws {
        let blackhole = try FullBacklogListener()
        defer { blackhole.close() }
        let relay = try RelayFixture(upstream: nil, baseURL: "http://127.0.0.1:\(blackhole.port)") { config in
            config.timeouts.upstreamConnectSeconds = 0.3
            config.timeouts.upstreamFirstByteSeconds = 30
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead(timeout: 5)
        #expect(head.status == 502)
        #expect(try Self.errorJSON(try client.readBody(head: head))["code"] as? String == "upstream_connect_timeout")
    }

    @Test("HTTP/1.0 client, upstream dies mid-body: the connection is reset, not closed as if complete")
    func http10Truncation() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: one\n\n")
            connection.reset()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.send("POST /v1/chat/completions HTTP/1.0\r\nContent-Length: \(chatBody.count)\r\n\r\n")
        try client.send(chatBody)
        let outcome = try? client.readUntilClose()
        #expect(outcome == nil || outcome?.reset == true, "a close-delimited body ended with a clean FIN")
    }

    @Test("the upstream closes before any head → 502 upstream_connection_reset")
    func closesBeforeHead() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            connection.close()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 502)
        #expect(try Self.errorJSON(try client.readBody(head: head))["code"] as? String == "upstream_connection_reset")
    }

    /// Garbage, or a 101 to a request that asked for no upgrade (RFC 9110 15.2.2: a server switches only to a
    /// protocol the client named in `Upgrade`, and the relay sends none upstream). After a 101 curl stops reading
    /// heads and takes what follows for a body; passed on, the client would get an interim status as its answer, on
    /// a connection kept open for its next request.
    @Test("the upstream sends garbage or an unasked 101 instead of an answer → 502", arguments: [
        "SMTP ready\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    ])
    func malformedHead(_ wire: String) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write(wire)
            connection.close()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 502)
    }

    /// curl takes a head of up to 300 KiB, each line up to 100 KiB: here a `Connection` line naming 30 001 fields,
    /// the last one the name of 30 000 fields that follow, about 240 KiB. Compared pairwise, that is 900 million
    /// name comparisons on the loop that also serves every other stream it holds (it held it for minutes). The
    /// bound is 3 s times `sanitizerSlowdown`: under ThreadSanitizer, with every suite running at once on a busy
    /// 2-core machine, the linear work took 3.09 s once, and the pairwise one takes minutes before a sanitizer.
    @Test("a head whose Connection names thousands of fields costs the loop no more than its size")
    func connectionNamingThousands() throws {
        let count = 30_000
        var wire = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: "
        wire += String(repeating: "a,", count: count) + "b\r\n" + String(repeating: "b: 1\r\n", count: count) + "\r\nok"
        let head = wire
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write(head)
            _ = try? connection.waitForPeerClose(timeout: 10)
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let started = ContinuousClock.now
        let answer = try client.readHead(timeout: 20 * sanitizerSlowdown)
        let took = ContinuousClock.now - started
        #expect(answer.status == 200)
        #expect(answer.headerValues("b").isEmpty)
        #expect(try client.readBody(head: answer) == Array("ok".utf8))
        #expect(took < .seconds(3 * sanitizerSlowdown), "the relay spent \(took) on one head")
    }

    struct Framing: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var fields: [(String, String)]
        var wire: String
        var body: String
        /// The length the client is told, nil when its body is chunked.
        var length: String?
    }

    static let usageStream = String(decoding: UsageAccountingTests.stream, as: UTF8.self)   // with the provider's usage event

    /// Provider heads whose framing the client's head cannot copy, each answered twice on one client connection
    /// (a body shorter or longer than the client was told would hang it or split the next response):
    /// - `Connection` naming `Content-Length` (RFC 9110 7.6.1: a proxy drops the field named), or a length that is
    ///   not one plain number though curl reads it (`+5`): the relay frames the body (chunked);
    /// - a length beside a chunked body (RFC 9112 6.3: the coding wins, and curl reads by it): dropped;
    /// - `Connection` naming `Content-Type` on an event stream with a length: the client's head says no event stream
    ///   and keeps the length, so the usage meter must read the body as that kind too, and not strip the usage event
    ///   (the route injects include_usage).
    @Test("a provider framing the client's head cannot copy: the client's body is framed right", arguments: [
        Framing(testDescription: "Connection names the length", fields: [("Content-Type", "application/json"), ("Content-Length", "5"),
                ("Connection", "content-length")], wire: "hello", body: "hello", length: nil),
        Framing(testDescription: "+5", fields: [("Content-Type", "application/json"), ("Content-Length", "+5")],
                wire: "hello", body: "hello", length: nil),
        Framing(testDescription: "a length beside chunks", fields: [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
                ("Content-Length", "5")], wire: "b\r\nhello world\r\n0\r\n\r\n", body: "hello world", length: nil),
        Framing(testDescription: "Connection names the event stream's type", fields: [("Content-Type", "text/event-stream"),
                ("Connection", "content-type"), ("Content-Length", "\(usageStream.utf8.count)")], wire: usageStream,
                body: usageStream, length: "\(usageStream.utf8.count)"),
    ])
    func framingTheClientsHeadCannotCopy(_ c: Framing) throws {
        let upstream = try ScriptedUpstream { connection in
            while (try? connection.readRequest()) != nil {
                try connection.writeHead(status: 200, headers: c.fields)
                try connection.write(c.wire)
            }
        }
        let relay = try RelayFixture(upstream: upstream) { config in config.routes[0].bodyPolicy.models = ["gpt-4o-mini"] }
        let client = try relay.client()
        for _ in 0..<2 {
            try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
            let head = try client.readHead()
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == c.length)
            #expect(head.header("Transfer-Encoding") == (c.length == nil ? "chunked" : nil))
            #expect(try client.readBody(head: head) == Array(c.body.utf8))
        }
    }

    struct PassThrough: Sendable, CustomTestStringConvertible {
        var status: Int
        var headers: [(String, String)]
        var body: String
        var testDescription: String { "\(status)" }
    }

    @Test("provider errors pass through with their headers and body", arguments: [
        PassThrough(status: 429, headers: [("Retry-After", "17"), ("x-ratelimit-remaining-requests", "0")],
                    body: #"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#),
        PassThrough(status: 400, headers: [("openai-request-id", "req_abc")],
                    body: #"{"error":{"message":"Unknown model","type":"invalid_request_error","code":"model_not_found"}}"#),
        PassThrough(status: 401, headers: [], body: #"{"error":{"message":"Incorrect API key","code":"invalid_api_key"}}"#),
        PassThrough(status: 500, headers: [], body: #"{"error":{"message":"The server had an error"}}"#),
        PassThrough(status: 503, headers: [("Retry-After", "2")], body: #"{"error":{"message":"overloaded"}}"#),
    ])
    func passThrough(_ c: PassThrough) throws {
        let body = Array(c.body.utf8)
        // A keep-alive provider: one that closed right after answering would race the relay's next request
        // on the pooled connection, which a POST may lose (it is never sent twice).
        let upstream = try ScriptedUpstream { connection in
            while (try? connection.readRequest()) != nil {
                try connection.writeHead(status: c.status, headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.count)")] + c.headers)
                try connection.write(body)
            }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == c.status)
        for (name, value) in c.headers { #expect(head.header(name) == value) }
        #expect(try client.readBody(head: head) == body)
        // The connection stays usable after a provider error.
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        #expect(try client.readHead().status == c.status)
    }
}

/// A plain-HTTP provider that writes a second answer after the first (or more than its Content-Length): the bytes
/// are left on the connection curl would keep for reuse. Read with the first answer, curl finds them in excess and
/// closes the connection. Arriving after it, they wait in the socket, and libcurl 7.88 reuses a connection with bytes
/// waiting (only one at its end counts as dead): the relay drops it before sending (`dropsStaleConnection`). Either
/// way the next request gets its own answer, never the stale one. One worker, so that both requests go through the
/// same curl connection cache.
@Suite("Upstream faults: bytes left on a kept connection")
struct StaleConnectionBytesTests {
    /// The second request's body: one curl reads in place, and one above `Transfer.inlineBodyLimit`, read through
    /// the callback (curl asks to rewind it before sending on the new connection: nothing was read, so that is
    /// allowed, and it is still one send).
    static let bodies: [[UInt8]] = [
        chatBody,
        Array((#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":""#
               + String(repeating: "x", count: Transfer.inlineBodyLimit) + #""}]}"#).utf8),
    ]

    @Test("bytes an earlier answer left on its connection never become the next request's answer",
          arguments: [false, true], bodies)
    func staleBytesAreNotTheNextAnswer(separateWrite: Bool, secondBody: [UInt8]) throws {
        try Self.staleBytes(separateWrite: separateWrite, secondBody: secondBody, version: .http1_1)
    }

    /// `httpVersion: "2"` on an http:// provider: curl speaks HTTP/1.1 there (no h2c) and keeps the connection, which
    /// is checked as any HTTP/1.1 one.
    @Test("the same with HTTP/2 asked for from a plain-HTTP provider")
    func staleBytesWithHTTP2Asked() throws {
        try Self.staleBytes(separateWrite: true, secondBody: chatBody, version: .http2)
    }

    static func staleBytes(separateWrite: Bool, secondBody: [UInt8], version: UpstreamHTTPVersion) throws {
        let requests = HarnessMonitor(0)
        let firstAnswerRelayed = Gate()
        let staleWritten = Gate()
        let upstream = try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest(timeout: 10)
                let n = requests.withLock { value -> Int in value += 1; return value }
                let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(n == 1 ? 2 : 5)\r\n\r\n"
                    + (n == 1 ? "ok" : "fresh")
                let stale = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nstale"
                if n > 1 {
                    try connection.write(answer)
                } else if separateWrite {
                    // The stale answer comes once curl has read the first one: it waits in the kept connection.
                    try connection.write(answer)
                    try firstAnswerRelayed.wait(timeout: 30)
                    try connection.write(stale)
                } else {
                    try connection.write(answer + stale)
                }
                if n == 1 {
                    try eventually("every byte in the relay's socket", timeout: 30) { try connection.unacknowledgedBytes() == 0 }
                    staleWritten.signal()
                }
            }
        }
        let relay = try RelayFixture(upstream: upstream) { configuration in
            configuration.workers = 1
            configuration.upstreams["test"]?.httpVersion = version
        }
        func post(_ body: [UInt8] = chatBody) throws -> (Int, String) {
            let client = try relay.client()
            defer { client.close() }
            try client.sendRequest(path: "/v1/chat/completions", body: body)
            let head = try client.readHead()
            return (head.status, String(decoding: try client.readBody(head: head), as: UTF8.self))
        }
        #expect(try post() == (200, "ok"))
        firstAnswerRelayed.signal()
        try staleWritten.wait(timeout: 30)
        try relay.waitUntilIdle()
        #expect(try post(secondBody) == (200, "fresh"))
        #expect(requests.withLock { $0 } == 2)
        #expect(upstream.acceptedConnections >= 2, "the connection holding the stale answer was not used again")
    }
}
