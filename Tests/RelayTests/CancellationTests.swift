import Foundation
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// When the client leaves (FIN or RST) the upstream request is cancelled at once, in every phase: the scripted
/// upstream observes its connection closed, and the relay ends up holding no exchange and no curl handle.
@Suite("Cancellation")
struct CancellationTests {
    enum Phase: String, CaseIterable, Sendable {
        /// The upstream has read the request and says nothing.
        case beforeUpstreamHead
        /// The head went out; no body byte yet (a model thinking).
        case silentAfterHead
        /// Some events went out; more would follow.
        case midStream
        /// A non-streaming body with a Content-Length, partly sent.
        case nonStreamingBody
    }

    enum Leave: String, CaseIterable, Sendable { case fin, rst }


    /// Plays the upstream's side up to `phase`: nothing, a head, a head and two events, or part of a
    /// Content-Length body. Shared with the leak test.
    static func bring(_ connection: UpstreamConnection, to phase: Phase) throws {
        switch phase {
        case .beforeUpstreamHead:
            break
        case .silentAfterHead:
            try connection.writeHead(status: 200, headers: sseHead)
        case .midStream:
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: one\n\n")
            try connection.writeChunk("data: two\n\n")
        case .nonStreamingBody:
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "100000")])
            try connection.write(Array(repeating: UInt8(ascii: "x"), count: 1000))
        }
    }

    @Test("upstream connection closes when the client leaves", arguments: Phase.allCases, Leave.allCases)
    func cancelsUpstream(phase: Phase, leave: Leave) throws {
        let inPhase = Gate()
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try Self.bring(connection, to: phase)
            inPhase.signal()
            closed.put(try connection.waitForPeerClose(timeout: 5))
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        try inPhase.wait()
        // Read what the upstream sent, so that a FIN stays a FIN (unread input turns close into RST).
        switch phase {
        case .beforeUpstreamHead:
            break
        case .silentAfterHead:
            _ = try client.readHead()
        case .midStream:
            _ = try client.readHead()
            _ = try client.readChunkedBody(until: "data: two\n\n")
        case .nonStreamingBody:
            let head = try client.readHead()
            #expect(head.header("Content-Length") == "100000")
        }
        let leftAt = monotonicNanoseconds()
        if leave == .fin { client.close() } else { client.reset() }
        let close = try closed.take(timeout: 2)
        let ms = Double(close.atNanoseconds - min(close.atNanoseconds, leftAt)) / 1e6
        #expect(ms < 1000, "upstream closed \(ms) ms after the client left")
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("a client that leaves while curl is still connecting cancels the attempt", arguments: Leave.allCases)
    func cancelWhileConnecting(leave: Leave) throws {
        // A loopback listener that never accepts, its accept queue filled first: Linux then drops further SYNs,
        // so curl's connection attempt stays in progress for as long as the test wants.
        let blackhole = try FullBacklogListener()
        defer { blackhole.close() }
        let relay = try RelayFixture(upstream: nil, baseURL: "http://127.0.0.1:\(blackhole.port)") { config in
            config.timeouts.upstreamConnectSeconds = 30
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        // Once the transfer exists, curl is connecting.
        try relay.waitUntil("connecting upstream") { $0.transfers > 0 }
        #expect(relay.server.liveCounts().transfers == 1)
        if leave == .fin { client.close() } else { client.reset() }
        try relay.waitUntilIdle(timeout: 1)
    }

    @Test("many clients leaving mid-stream leave nothing behind")
    func manyCancels() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: first\n\n")
            _ = try connection.waitForPeerClose(timeout: 5)
        }
        let relay = try RelayFixture(upstream: upstream)
        for i in 0..<50 {
            let client = try relay.client()
            try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
            _ = try client.readHead()
            _ = try client.readChunkedBody(until: "data: first\n\n")
            if i % 2 == 0 { client.close() } else { client.reset() }
        }
        try upstream.waitForScriptsToFinish(timeout: 5)
        #expect(upstream.scriptErrors.isEmpty, "\(upstream.scriptErrors)")
        try relay.waitUntilIdle()
        let counts = relay.server.liveCounts()
        #expect(counts.exchanges == 0 && counts.transfers == 0)
    }
}
