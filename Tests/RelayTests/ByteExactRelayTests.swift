import Foundation
import RelayTestSupport
import TestHarness
import Testing

/// The bytes the client's HTTP layer hands up equal the bytes the provider sent, for every SSE shape that has
/// broken proxies before. Each piece is one upstream write (one chunk on the wire).
@Suite("Byte-exact relay")
struct ByteExactRelayTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var pieces: [[UInt8]]
        var testDescription: String { name }
    }

    static let bigEvent: [UInt8] = {
        var bytes = Array("data: ".utf8)
        var x: UInt32 = 12345
        for _ in 0..<(256 * 1024) {
            x = x &* 1_103_515_245 &+ 12345
            bytes.append(UInt8(0x21 + (x >> 16) % 90))   // printable, no newlines
        }
        return bytes + Array("\n\n".utf8)
    }()

    static let cases: [Case] = [
        Case(name: "CRLF line endings", pieces: [Array("data: one\r\n\r\n".utf8), Array("data: two\r\n\r\n".utf8)]),
        Case(name: "CR-only line endings", pieces: [Array("data: one\r\r".utf8), Array("data: two\r\r".utf8)]),
        Case(name: "comments and keep-alives", pieces: [Array(": ping\n\n".utf8), Array(":\n\n".utf8), Array("data: x\n\n".utf8)]),
        Case(name: "event, id and retry fields", pieces: [Array("event: message_start\nid: 41\nretry: 3000\ndata: {\"a\":1}\n\n".utf8),
                                                          Array("event: content_block_delta\nid: 42\ndata: {\"b\":2}\n\n".utf8)]),
        Case(name: "UTF-8 character split across two writes", pieces: {
            let bytes = Array("data: {\"content\":\"caf\u{e9} \u{1F600}\"}\n\n".utf8)
            let split = bytes.firstIndex(of: 0xC3)! + 1   // between the two bytes of é
            let emoji = bytes.firstIndex(of: 0xF0)! + 2   // inside the 4-byte emoji
            return [Array(bytes[..<split]), Array(bytes[split..<emoji]), Array(bytes[emoji...])]
        }()),
        Case(name: "one-byte upstream writes", pieces: Array("event: delta\ndata: {\"x\":\"y\"}\n\ndata: [DONE]\n\n".utf8).map { [$0] }),
        Case(name: "256 KiB event", pieces: [bigEvent, Array("data: [DONE]\n\n".utf8)]),
        Case(name: "no trailing newline at the end", pieces: [Array("data: a\n\n".utf8), Array("data: partial".utf8)]),
    ]

    @Test("relays every byte unchanged", arguments: cases)
    func relaysExactly(_ testCase: Case) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for piece in testCase.pieces { try connection.writeChunk(piece) }
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(head.header("Content-Type") == "text/event-stream")
        #expect(head.header("Content-Length") == nil)
        #expect(head.header("Cache-Control") == "no-cache")
        #expect(head.header("X-Accel-Buffering") == "no")
        let body = try client.readBody(head: head)
        #expect(body == testCase.pieces.flatMap { $0 })
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("relays a close-delimited upstream body (no length, no chunking) as chunks")
    func closeDelimitedUpstream() throws {
        let events = (0..<5).map { Array("data: event \($0)\n\n".utf8) }
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "text/event-stream"), ("Connection", "close")])
            for e in events { try connection.write(e) }
            connection.close()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.header("Transfer-Encoding") == "chunked")
        #expect(try client.readBody(head: head) == events.flatMap { $0 })
    }

    /// The upstream writes event k+1 only after the test client has received event k. A relay that buffers
    /// (waits for more bytes, or for the end) never delivers event k, the upstream never writes k+1, and the
    /// gate's safety timeout fails the test.
    @Test("delivers each event before the next one exists (lock-step)")
    func lockStep() throws {
        let received = Gate()
        let count = 30
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for k in 0..<count {
                try connection.writeChunk("data: {\"k\":\(k)}\n\n")
                try received.wait(timeout: 5)
            }
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        for k in 0..<count {
            let soFar = try client.readChunkedBody(until: "data: {\"k\":\(k)}\n\n", timeout: 2)
            #expect(String(decoding: soFar, as: UTF8.self).hasSuffix("data: {\"k\":\(k)}\n\n"))
            received.signal()
        }
        #expect(try client.readChunk() == nil)
        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors.isEmpty)
    }

    @Test("non-streaming JSON keeps its Content-Length and bytes")
    func nonStreamingJSON() throws {
        let json = Array(#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"content":"héllo"}}]}"#.utf8)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(json.count)")])
            try connection.write(Array(json[..<10]))
            try connection.write(Array(json[10...]))
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: Array(#"{"model":"m"}"#.utf8))
        let head = try client.readHead()
        #expect(head.header("Content-Length") == "\(json.count)")
        #expect(head.header("Transfer-Encoding") == nil)
        #expect(try client.readBody(head: head) == json)
    }
}
