import Foundation
import Relay
import RelayTestSupport
import Synchronization
import TestHarness
import Testing

/// What ops rely on: the relay's own endpoints, its metrics, the access log, and a drain that lets in-flight
/// streams finish while refusing new connections.
@Suite("Operations")
struct OperationsTests {
    static func get(_ port: Int, _ path: String) throws -> (status: Int, body: String, head: ResponseHeadResult) {
        let client = try TestClient(port: port)
        try client.sendRequest(method: "GET", path: path)
        let head = try client.readHead()
        return (head.status, String(decoding: try client.readBody(head: head), as: UTF8.self), head)
    }

    /// Answers one request with a one-event SSE stream (`data: x`, 9 bytes).
    static func oneEventUpstream() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: x\n\n")
            try connection.writeLastChunk()
        }
    }

    @Test("/healthz, /readyz and /metrics are answered by the relay itself")
    func builtinEndpoints() throws {
        let upstream = try Self.oneEventUpstream()
        let relay = try RelayFixture(upstream: upstream)
        #expect(try Self.get(relay.port, "/healthz").status == 200)
        #expect(try Self.get(relay.port, "/readyz").status == 200)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        try relay.waitUntilIdle()
        _ = try Self.get(relay.port, "/nowhere")
        let metrics = try Self.get(relay.port, "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.head.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        #expect(metrics.body.contains(#"sse_relay_requests_total{route="/v1/",status="200",outcome="completed"} 1"#))
        #expect(metrics.body.contains(#"sse_relay_rejections_total{reason="not_found"} 1"#))
        #expect(metrics.body.contains(#"sse_relay_bytes_relayed_total{direction="to_client"} 9"#))
        #expect(metrics.body.contains("sse_relay_time_to_first_byte_seconds_count 1"))
        #expect(metrics.body.contains("sse_relay_active_streams 0"))
        #expect(upstream.acceptedConnections == 1)
    }

    @Test("with an admin listener, /metrics lives only there, and the admin port forwards nothing")
    func adminListener() throws {
        let upstream = try ScriptedUpstream { _ in }
        let relay = try RelayFixture(upstream: upstream) { $0.admin = .init(host: "127.0.0.1", port: 0) }
        let admin = try #require(relay.server.adminPort)
        #expect(try Self.get(relay.port, "/metrics").status == 404)
        #expect(try Self.get(admin, "/metrics").status == 200)
        #expect(try Self.get(admin, "/healthz").status == 200)
        #expect(try Self.get(relay.port, "/healthz").status == 200)
        #expect(try Self.get(admin, "/v1/models").status == 404)
        #expect(upstream.acceptedConnections == 0)
    }

    @Test("drain: an in-flight stream completes byte-exact, /readyz turns 503, new connections are refused")
    func drainLetsStreamsFinish() throws {
        let step = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: before\n\n")
            try step.wait()
            try connection.writeChunk("data: during\n\n")
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream) { $0.admin = .init(host: "127.0.0.1", port: 0) }
        let admin = try #require(relay.server.adminPort)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "data: before\n\n")

        let drained = Mailbox<Int>()
        relay.server.beginDrain(deadline: 10) { aborted in drained.put(aborted) }
        #expect(try Self.get(admin, "/readyz").status == 503)
        #expect(throws: (any Error).self) { _ = try TestClient(port: relay.port, timeout: 1) }

        step.signal()
        let body = try client.readChunkedBody(until: "data: during\n\n")
        #expect(try client.readChunk() == nil)   // a clean end
        #expect(body == Array("data: before\n\ndata: during\n\n".utf8))
        #expect(try drained.take(timeout: 5) == 0)
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

    @Test("the access log has one JSON line per exchange with every field, and no secret")
    func accessLog() throws {
        let upstream = try Self.oneEventUpstream()
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions?x=1", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)"),
                                                                      ("X-Request-Id", "app-req-42")], body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        try relay.waitUntilIdle()
        let line = try #require(relay.logs.lines.first { $0.contains(#""message":"exchange""#) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["request_id"] as? String == "app-req-42")
        #expect(object["client_ip"] as? String == "127.0.0.1")
        #expect(object["method"] as? String == "POST")
        #expect(object["path"] as? String == "/v1/chat/completions")
        #expect(object["route"] as? String == "/v1/")
        #expect(object["upstream"] as? String == "test")
        #expect(object["status"] as? Int == 200)
        #expect(object["bytes_in"] as? Int == chatBody.count)
        #expect(object["bytes_out"] as? Int == 9)
        #expect(object["outcome"] as? String == "completed")
        for field in ["time", "level", "upstream_head_ms", "first_byte_ms", "duration_ms"] {
            #expect(object[field] != nil, "missing \(field)")
        }
        relay.assertNoSecretLeaks(clients: [client])
    }
}
