import Foundation
import HTTP1
import HTTPServer
import RelayTestSupport
import Support
import TestHarness
import Testing
import Transport

/// Bytes ready for the client leave at once. A response the provider completes in one read leaves before the
/// relay's own end-of-exchange work (usage, settle, metrics, the access-log line), and a held head leaves with the
/// first body delivery rather than when the loop's turn ends. Each test holds a loop at the point in question; the
/// client must have its bytes while it is held.
@Suite("Response before bookkeeping")
struct ResponseFlushTests {
    /// The provider's whole answer in one write, so the relay reads it, and ends the exchange, in one turn.
    static func upstream(_ answer: String) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write(Array(answer.utf8))
        }
    }

    /// A relay whose loop stops in the access-log line (saying so on `entered`) until `gate` opens. The test opens
    /// it only once the client has its answer: an answer waiting for the log line never comes (the client's
    /// 3-second safety timeout fails the test).
    static func relay(_ upstream: ScriptedUpstream, entered: Gate, gate: Gate) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, onLogLine: { line in
            guard line.contains(#""message":"exchange""#) else { return }
            entered.signal()
            try? gate.wait(timeout: 10)
        })
    }

    @Test("a non-streaming answer reaches the client while the relay is still writing its log line")
    func plainAnswer() throws {
        let body = #"{"id":"chatcmpl-1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#
        let upstream = try Self.upstream("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let entered = Gate(), gate = Gate()
        let relay = try Self.relay(upstream, entered: entered, gate: gate)
        defer { gate.signal(2) }
        let client = try TestClient(port: relay.port, timeout: 3)
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")],
                               body: Array(#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}"#.utf8))
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == Array(body.utf8))
        try entered.wait(timeout: 3)   // the loop is in the log line, and the client has its answer
        gate.signal()
        try relay.waitUntilIdle(timeout: 5)
        #expect(relay.logs.lines.contains { $0.contains(#""message":"exchange""#) && $0.contains(#""status":200"#) })
    }

    @Test("a stream that ends in the read that brought its first event reaches the client before the log line")
    func oneReadStream() throws {
        let events = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"
        let chunked = String(events.utf8.count, radix: 16) + "\r\n" + events + "\r\n0\r\n\r\n"
        let upstream = try Self.upstream("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
        let entered = Gate(), gate = Gate()
        let relay = try Self.relay(upstream, entered: entered, gate: gate)
        defer { gate.signal(2) }
        let client = try TestClient(port: relay.port, timeout: 3)
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == Array(events.utf8))
        try entered.wait(timeout: 3)
        gate.signal()
        try relay.waitUntilIdle(timeout: 5)
        #expect(relay.logs.lines.contains { $0.contains(#""message":"exchange""#) && $0.contains(#""status":200"#) })
    }

    /// A server whose handler writes a streaming head and its first chunk, then holds its loop (inside the same
    /// turn, as curl's further work on a read would) until the test has read both.
    struct FirstChunkHandler: RequestHandler {
        let chunk: [UInt8]
        let received: Gate
        func handle(_ head: RequestHead, writer: any ResponseWriter) -> (any RequestResponder)? {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Transfer-Encoding", value: "chunked")
            writer.sendHead(ResponseHead(status: 200, headers: headers), mode: .chunked)
            chunk.withUnsafeBytes { _ = writer.sendBody($0) }
            try? received.wait(timeout: 10)
            writer.finish(keepAlive: false)
            return nil
        }
        func connectionRejected(_ error: ErrorResponse, writer: any ResponseWriter) {}
        func proxyHeaderRejected(_ reason: String, writer: any ResponseWriter) {}
        func untrustedProxyPeerRefused(_ peer: String) {}
    }

    @Test("a held response head leaves with its first chunk, not when the loop's turn ends")
    func headLeavesWithTheFirstChunk() throws {
        let chunk = Array("data: first\n\n".utf8)
        let received = Gate()
        let group = EventLoopGroup(count: 1)
        let settings = ServerSettings(timeouts: ConnectionDeadlines.Settings(headerReadSeconds: 10, bodyReadSeconds: 10,
                                                                             keepAliveIdleSeconds: 10, clientWriteStallSeconds: 10))
        let listener = try serve(host: "127.0.0.1", port: 0, group: group, settings: settings,
                                 handler: FirstChunkHandler(chunk: chunk, received: received),
                                 logger: Logger(label: "test", sink: MemoryLogSink()))
        listener.start()
        defer { listener.stop() }
        defer { received.signal(2) }   // first: the handler's wait ends before the listener stops
        let client = try TestClient(port: listener.port, timeout: 3)
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()   // a head held to the turn's end never comes while the handler waits
        #expect(head.status == 200)
        #expect(try client.readChunk() == chunk)
        received.signal()
        #expect(try client.readChunk() == nil)   // then the last chunk
    }
}
