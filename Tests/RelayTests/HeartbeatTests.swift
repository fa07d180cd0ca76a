import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore

/// Heartbeats end to end on a manual clock: the relay's timers run when the test moves the clock
/// (`RelayServer.runDueTimers`), so counts are exact and nothing waits in real time.
@Suite("Heartbeats")
struct HeartbeatTests {
    static let heartbeat = ": keep-alive\n\n"

    /// An upstream that writes `parts`, each after the test lets it (`next`), then ends.
    static func upstream(_ parts: [String], next: Mailbox<Int>) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for part in parts {
                _ = try next.take(timeout: 10)
                try connection.writeChunk(part)
            }
            try connection.writeLastChunk()
        }
    }

    static func relay(_ upstream: ScriptedUpstream, clock: ManualClock, seconds: Double = 1) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, clock: clock) { config in
            config.routes[0].heartbeatSeconds = seconds
        }
    }

    /// Moves the clock in `step`s up to `total` seconds, running the relay's due timers after each.
    static func advance(_ relay: RelayFixture, _ clock: ManualClock, total: Double, step: Double = 0.25) {
        var moved = 0.0
        while moved < total - 1e-9 {
            clock.advance(bySeconds: step)
            moved += step
            relay.server.runDueTimers()
        }
    }

    @Test("a 3.5 s pause between events with heartbeatSeconds 1: exactly 3 heartbeats, at the boundary")
    func threeHeartbeatsInAPause() throws {
        let clock = ManualClock()
        let next = Mailbox<Int>()
        let relay = try Self.relay(Self.upstream(["data: {\"a\":\"é\"}\n\n", "data: b\n\n"], next: next), clock: clock)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        next.put(1)
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "\n\n")
        Self.advance(relay, clock, total: 3.5)
        next.put(2)
        let body = try client.readChunkedBody(until: "data: b\n\n")
        #expect(String(decoding: body, as: UTF8.self)
                == "data: {\"a\":\"é\"}\n\n" + String(repeating: Self.heartbeat, count: 3) + "data: b\n\n")
        #expect(try client.readChunk() == nil)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""heartbeats":3"#) && $0.contains(#""bytes_out":27"#) })
    }

    @Test("a heartbeat is one chunk: its framing and the comment together")
    func oneChunkPerHeartbeat() throws {
        let clock = ManualClock()
        let next = Mailbox<Int>()
        let relay = try Self.relay(Self.upstream(["data: a\n\n"], next: next), clock: clock)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readHead()
        Self.advance(relay, clock, total: 1)
        #expect(try client.readChunk() == Array(Self.heartbeat.utf8), "a thinking model gets heartbeats before its first byte")
        next.put(1)
        #expect(try client.readChunk() == Array("data: a\n\n".utf8))
        #expect(try client.readChunk() == nil)
    }

    /// The provider stops mid-event, or between the CR and LF of a CRLF blank line: no heartbeat until the event
    /// is whole; then one, after a full interval of silence.
    @Test("a pause inside an event gets no heartbeat until the event completes", arguments: [
        ("data: a\n\ndata: par", "tial\n\n"),
        ("data: a\r\n\r", "\ndata: b\r\n\r\n"),
        ("data: a\n", "\n"),
        ("event: x\ndata: a", "\n\n"),
    ])
    func noHeartbeatMidEvent(first: String, rest: String) throws {
        let clock = ManualClock()
        let next = Mailbox<Int>()
        let relay = try Self.relay(Self.upstream([first, rest, "data: end\n\n"], next: next), clock: clock)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        next.put(1)
        _ = try client.readHead()
        #expect(try client.readChunk() == Array(first.utf8))
        Self.advance(relay, clock, total: 5)
        next.put(2)
        #expect(try client.readChunk() == Array(rest.utf8), "no heartbeat inside the event")
        Self.advance(relay, clock, total: 1)
        next.put(3)
        var body: [UInt8] = []
        while let chunk = try client.readChunk() { body += chunk }
        #expect(String(decoding: body, as: UTF8.self) == Self.heartbeat + "data: end\n\n")
    }

    @Test("heartbeatSeconds 0 turns them off")
    func off() throws {
        let clock = ManualClock()
        let next = Mailbox<Int>()
        let relay = try Self.relay(Self.upstream(["data: a\n\n", "data: b\n\n"], next: next), clock: clock, seconds: 0)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        next.put(1)
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "data: a\n\n")
        Self.advance(relay, clock, total: 60, step: 5)
        next.put(2)
        #expect(try client.readChunkedBody(until: "data: b\n\n") == Array("data: a\n\ndata: b\n\n".utf8))
    }

    @Test("a non-streaming answer never gets one")
    func notOnJSON() throws {
        let clock = ManualClock()
        let release = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])
            try connection.writeChunk("{\"a\":")
            try release.wait(timeout: 10)
            try connection.writeChunk("1}")
            try connection.writeLastChunk()
        }
        let relay = try Self.relay(upstream, clock: clock)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        Self.advance(relay, clock, total: 5)
        release.signal()
        #expect(try client.readBody(head: head) == Array("{\"a\":1}".utf8))
    }
}
