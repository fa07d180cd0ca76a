import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing

/// Metrics and admin endpoints never listen beyond the host the operator chose (issue: /metrics on a public
/// listener, SSE_RELAY_ADMIN_PORT binding 0.0.0.0). Only loopback listeners are started here; the non-loopback
/// decisions are covered by RelayConfigurationExposureTests.
@Suite("Admin and metrics exposure")
struct AdminExposureTests {
    /// Local addresses (hex, as the kernel prints them) of the sockets listening on `port`; nil without /proc.
    static func listeningAddresses(port: Int) -> [String]? {
        tcpSocketTable()?.filter { $0.isListening && $0.localPort == port }.map(\.localAddress)
    }

    @Test("SSE_RELAY_ADMIN_PORT without an admin block: the admin listener is on loopback and serves /metrics; the public one does not")
    func adminPortFromTheEnvironment() throws {
        let upstream = try ScriptedUpstream { _ in }
        let relay = try RelayFixture(upstream: upstream) { config in
            do { try config.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "0"]) } catch { Issue.record("\(error)") }
        }
        #expect(relay.server.configuration.admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 0))
        let admin = try #require(relay.server.adminPort)
        if let addresses = Self.listeningAddresses(port: admin) {
            #expect(addresses == ["0100007F"], "the admin port listens on \(addresses), not only 127.0.0.1")
        }
        let metrics = try TestClient.get(port: admin, path: "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("sse_relay_active_connections"))
        #expect(try TestClient.get(port: relay.port, path: "/metrics").status == 404)
        #expect(try TestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(upstream.acceptedConnections == 0)
    }

    @Test("a public listener the relay cannot prove to be loopback serves no /metrics without an admin block")
    func unprovenLoopbackServesNoMetrics() throws {
        // "127.1" is 127.0.0.1 to getaddrinfo (inet_aton shorthand), so this stays a loopback socket, but it is
        // not a canonical loopback address: the relay takes the safe reading, exactly as for 0.0.0.0.
        let relay = try RelayFixture(upstream: try ScriptedUpstream { _ in }) { $0.listen.host = "127.1" }
        #expect(!relay.server.configuration.publicListenerServesMetrics)
        #expect(relay.server.adminPort == nil)
        #expect(try TestClient.get(port: relay.port, path: "/metrics").status == 404)
        #expect(try TestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(relay.logs.lines.contains { $0.contains("/metrics is not served") })
    }

    @Test("a loopback public listener behind a trusted proxy serves no /metrics, /usage or /upstreams")
    func loopbackBehindAProxyServesNoOperatorEndpoints() throws {
        // nginx (or a sidecar) on this host in front of a relay on 127.0.0.1: every client on the internet reaches
        // the loopback port through it, so loopback says nothing about who asks.
        let upstream = try ScriptedUpstream { _ in }
        let relay = try RelayFixture(upstream: upstream) { $0.trustedProxies = [CIDR("127.0.0.1/32")!] }
        #expect(!relay.server.configuration.publicListenerServesMetrics)
        for path in ["/metrics", "/usage?identity=static:app", "/upstreams"] {
            let answer = try TestClient.get(port: relay.port, path: path, headers: [("X-Forwarded-For", "203.0.113.9")])
            #expect(answer.status == 404, "\(path) answered \(answer.status) on the public port")
            #expect(!answer.body.contains("sse_relay_") && !answer.body.contains("windows") && !answer.body.contains("upstreams"), "\(path)")
        }
        #expect(try TestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(relay.logs.lines.contains { $0.contains("/metrics is not served") })
        #expect(upstream.acceptedConnections == 0)
    }

    @Test("a loopback public listener without an admin block still serves /metrics")
    func loopbackPublicListenerServesMetrics() throws {
        let relay = try RelayFixture(upstream: try ScriptedUpstream { _ in })
        #expect(relay.server.adminPort == nil)
        #expect(try TestClient.get(port: relay.port, path: "/metrics").status == 200)
        #expect(!relay.logs.lines.contains { $0.contains("/metrics is not served") })
    }
}
