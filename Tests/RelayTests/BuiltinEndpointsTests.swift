import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing

/// The relay's own endpoints (/healthz, /readyz, /metrics): answered without the provider, and on the admin
/// listener alone when there is one.
@Suite("Built-in endpoints")
struct BuiltinEndpointsTests {
    @Test("/healthz, /readyz and /metrics are answered by the relay itself")
    func builtinEndpoints() throws {
        let upstream = try oneEventUpstream()
        let relay = try RelayFixture(upstream: upstream)
        #expect(try TestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(try TestClient.get(port: relay.port, path: "/readyz").status == 200)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        try relay.waitUntilIdle()
        _ = try TestClient.get(port: relay.port, path: "/nowhere")
        let metrics = try TestClient.get(port: relay.port, path: "/metrics")
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
        #expect(try TestClient.get(port: relay.port, path: "/metrics").status == 404)
        #expect(try TestClient.get(port: admin, path: "/metrics").status == 200)
        #expect(try TestClient.get(port: admin, path: "/healthz").status == 200)
        #expect(try TestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(try TestClient.get(port: admin, path: "/v1/models").status == 404)
        #expect(upstream.acceptedConnections == 0)
    }
}
