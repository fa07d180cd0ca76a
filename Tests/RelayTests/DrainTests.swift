import Foundation
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import TestHarness
import Testing

/// A drain lets in-flight streams finish while /readyz turns 503 and new connections are refused; at its
/// deadline what still runs is aborted.
@Suite("Drain")
struct DrainTests {
    /// A relay with one stream in flight: "before" is read, "during" and the end wait for `step`.
    static func streamHeldOpen(step: Gate, configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> (RelayFixture, TestClient) {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: before\n\n")
            try step.wait()
            try connection.writeChunk("data: during\n\n")
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream, configure: configure)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "data: before\n\n")
        return (relay, client)
    }

    @Test("drain: an in-flight stream completes byte-exact, /readyz turns 503, new connections are refused")
    func drainLetsStreamsFinish() throws {
        let step = Gate()
        let (relay, client) = try Self.streamHeldOpen(step: step) { $0.admin = .init(host: "127.0.0.1", port: 0) }
        let admin = try #require(relay.server.adminPort)

        let drained = Mailbox<Int>()
        relay.server.beginDrain(deadline: 10) { aborted in drained.put(aborted) }
        #expect(try TestClient.get(port: admin, path: "/readyz").status == 503)
        #expect(throws: (any Error).self) { _ = try TestClient(port: relay.port, timeout: 1) }

        step.signal()
        let body = try client.readChunkedBody(until: "data: during\n\n")
        #expect(try client.readChunk() == nil)   // a clean end
        #expect(body == Array("data: before\n\ndata: during\n\n".utf8))
        #expect(try drained.take(timeout: 5) == 0)
    }

    @Test("drain waits on events: one look while a stream runs, and done as soon as it ends")
    func drainFollowsEvents() throws {
        let step = Gate()
        let (relay, client) = try Self.streamHeldOpen(step: step)

        let drained = Mailbox<Int>()
        relay.server.beginDrain(deadline: 60) { aborted in drained.put(aborted) }
        // Not drained while the stream runs. The wait is for something that must not happen; a poll every 20 ms
        // would have looked about 10 times meanwhile, an event-driven drain once.
        #expect(throws: (any Error).self) { _ = try drained.take(timeout: 0.2) }
        #expect(relay.server.drainChecks == 1)

        step.signal()
        _ = try client.readChunkedBody(until: "data: during\n\n")
        #expect(try client.readChunk() == nil)   // a clean end
        #expect(try drained.take(timeout: 5) == 0)
        // One look per event at most: the first, the exchange's end, the connection's close.
        #expect(relay.server.drainChecks <= 3)
    }

    @Test("drain deadline: a stream still running is aborted (no clean end)")
    func drainDeadlineAborts() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: forever\n\n")
            _ = try connection.waitForPeerClose(timeout: 5)
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "data: forever\n\n")
        let drained = Mailbox<Int>()
        relay.server.beginDrain(deadline: 0.2) { aborted in drained.put(aborted) }
        #expect(try drained.take(timeout: 5) == 1)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }
    }
}
