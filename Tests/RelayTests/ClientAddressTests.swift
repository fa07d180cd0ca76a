import Foundation
import HTTP1
import HTTPServer
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// Who the client is, end to end: from an untrusted peer its own X-Forwarded-For, X-Real-IP and Forwarded change
/// nothing (rate-limit key, log, what the provider hears); behind a trusted proxy the right-most untrusted hop is
/// the client; behind an L4 balancer the PROXY header's source is. Every test runs a live relay on loopback, so
/// the peer is always 127.0.0.1: trusting `127.0.0.1/32` or not is what makes it a proxy or a client.
@Suite("Client address behind proxies")
struct ClientAddressTests {
    static let oneRequestPerMinute = RateLimits(requestsPerMinute: 1, burst: 1)

    static func relay(trusted: [String], proxyProtocol: Bool = false, requests: Mailbox<RecordedRequest>,
                      configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: try RequestForwardingTests.echoUpstream(requests: requests)) {
            $0.trustedProxies = trusted.map { CIDR($0)! }
            $0.listen.proxyProtocol = proxyProtocol
            $0.rateLimits.perAddress = oneRequestPerMinute
            configure(&$0)
        }
    }

    /// One GET on a new connection; the answer's status.
    static func get(_ relay: RelayFixture, headers: [(String, String)] = [], before: [UInt8] = []) throws -> Int {
        let client = try relay.client()
        if !before.isEmpty { try client.send(before) }
        try client.sendRequest(method: "GET", path: "/v1/models", headers: headers)
        let head = try client.readHead()
        _ = try client.readBody(head: head)
        return head.status
    }

    /// The `client_ip` of every exchange log line (rejections included), sorted: an exchange's line is written
    /// when its transfer ends, which may be after the client read its answer and sent the next request.
    static func loggedClients(_ relay: RelayFixture) throws -> [String] {
        try relay.waitUntilIdle()
        return try relay.logs.lines.filter { $0.contains(#""message":"exchange""#) }.map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require(object["client_ip"] as? String)
        }.sorted()
    }

    static let spoofing: [[(String, String)]] = [
        [("X-Forwarded-For", "198.51.100.1")],
        [("X-Forwarded-For", "198.51.100.2, 203.0.113.7"), ("X-Real-IP", "198.51.100.3")],
        [("Forwarded", "for=198.51.100.4"), ("X-Real-IP", "198.51.100.5"), ("X-Forwarded-For", "10.0.0.1")],
    ]

    @Test("from an untrusted peer, spoofed forwarding headers share one bucket and one logged address")
    func untrustedPeerCannotChooseItsAddress() throws {
        let requests = Mailbox<RecordedRequest>()
        // 10.0.0.0/8 is trusted, the loopback peer is not.
        let relay = try Self.relay(trusted: ["10.0.0.0/8"], requests: requests)
        #expect(try Self.get(relay, headers: Self.spoofing[0]) == 200)
        for headers in Self.spoofing.dropFirst() {
            #expect(try Self.get(relay, headers: headers) == 429, "\(headers)")
        }
        #expect(requests.count == 1)
        let request = try requests.take()
        #expect(request.headerValues("X-Forwarded-For") == ["127.0.0.1"], "replaced, not appended to")
        #expect(request.header("X-Real-IP") == nil)
        #expect(request.header("Forwarded") == nil)
        #expect(try Self.loggedClients(relay) == ["127.0.0.1", "127.0.0.1", "127.0.0.1"])
    }

    @Test("behind a trusted proxy, the right-most untrusted X-Forwarded-For hop is the client")
    func trustedProxyNamesTheClient() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(trusted: ["127.0.0.1/32", "10.0.0.0/8"], requests: requests)
        // Two clients behind the same proxy: a bucket each.
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "203.0.113.1")]) == 200)
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "198.51.100.66, 203.0.113.2, 10.1.1.1")]) == 200)
        // The first client again, whatever it wrote left of its own address: its bucket is empty.
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "192.0.2.99, 203.0.113.1")]) == 429)
        let first = try requests.take(), second = try requests.take()
        #expect(first.headerValues("X-Forwarded-For") == ["203.0.113.1, 127.0.0.1"])
        #expect(second.headerValues("X-Forwarded-For") == ["203.0.113.2, 10.1.1.1, 127.0.0.1"])
        #expect(try Self.loggedClients(relay) == ["203.0.113.1", "203.0.113.1", "203.0.113.2"])
    }

    @Test("IPv6 clients behind a trusted proxy share a bucket per /64, however many addresses they rotate through")
    func ipv6ClientsCountPerSlash64() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(trusted: ["127.0.0.1/32"], requests: requests)
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "2001:db8:1:2::a")]) == 200)
        // The next addresses of the same /64: one bucket, already empty.
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "2001:db8:1:2::b")]) == 429)
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "2001:db8:1:2:ffff:1:2:3")]) == 429)
        // Another /64 is another client.
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "2001:db8:1:3::a")]) == 200)
        #expect(requests.count == 2)
        // Logs keep the whole address.
        #expect(try Self.loggedClients(relay) == ["2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:1:2:ffff:1:2:3", "2001:db8:1:3::a"].sorted())
    }

    @Test("headers that steer the provider never reach it")
    func steeringHeadersAreDropped() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try RequestForwardingTests.echoUpstream(requests: requests))
        let steering = [
            ("Forwarded", "for=1.2.3.4;host=internal"), ("X-Forwarded-Host", "internal.provider"),
            ("X-Original-URL", "/v1/organization/admin_api_keys"), ("X-Rewrite-URL", "/admin"),
            ("X-HTTP-Method-Override", "DELETE"), ("X-Method-Override", "DELETE"), ("HTTP2-Settings", "AAMAAABkAAQAAP__"),
            ("X_Forwarded_For", "1.2.3.4"), ("X-Api_Key", "sk-smuggled"), ("X-Real-IP", "1.2.3.4"),
        ]
        #expect(try Self.get(relay, headers: steering + [("X-Keep", "yes")]) == 200)
        let request = try requests.take()
        for (name, _) in steering { #expect(request.header(name) == nil, "\(name) reached the provider") }
        #expect(!request.headers.contains { $0.name.contains("_") })
        #expect(request.header("X-Keep") == "yes")
        #expect(request.method == "GET")
        #expect(request.target == "/v1/models")
    }

    // MARK: PROXY protocol

    static func v1(_ source: String) -> [UInt8] { Array("PROXY TCP4 \(source) 127.0.0.1 40000 8080\r\n".utf8) }

    static func v2(command: UInt8 = 0x21, source: [UInt8]) -> [UInt8] {
        [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, command, 0x11, 0, 12]
            + source + [127, 0, 0, 1, 0x9C, 0x40, 0x1F, 0x90]
    }

    @Test("PROXY v1 and v2 from a trusted balancer: the source is the client, its X-Forwarded-For is not believed")
    func proxyProtocolNamesTheClient() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(trusted: ["127.0.0.1/32"], proxyProtocol: true, requests: requests)
        #expect(try Self.get(relay, headers: [("X-Forwarded-For", "192.0.2.1")], before: Self.v1("203.0.113.50")) == 200)
        #expect(try Self.get(relay, before: Self.v2(source: [203, 0, 113, 51])) == 200)
        // The header's last byte and the request in one segment, and the other way round.
        let header = Self.v1("203.0.113.50")
        let client = try relay.client()
        try client.send(Array(header.dropLast()))
        try client.send([header.last!] + Array("GET /v1/models HTTP/1.1\r\nHost: relay\r\n\r\n".utf8))
        #expect(try client.readHead().status == 429, "same client as the first request")
        // LOCAL: the balancer's own health check is the balancer.
        #expect(try Self.get(relay, before: Self.v2(command: 0x20, source: [203, 0, 113, 52])) == 200)
        let first = try requests.take(), second = try requests.take(), third = try requests.take()
        #expect(first.headerValues("X-Forwarded-For") == ["203.0.113.50"])
        #expect(second.headerValues("X-Forwarded-For") == ["203.0.113.51"])
        #expect(third.headerValues("X-Forwarded-For") == ["127.0.0.1"])
        #expect(try Self.loggedClients(relay) == ["127.0.0.1", "203.0.113.50", "203.0.113.50", "203.0.113.51"])
    }

    @Test("a PROXY listener closes connections without a valid header, and any from an untrusted peer")
    func proxyProtocolRefusals() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(trusted: ["127.0.0.1/32"], proxyProtocol: true, requests: requests)
        let attempts: [[UInt8]] = [
            Array("GET /v1/models HTTP/1.1\r\nHost: relay\r\n\r\n".utf8),        // no header at all
            Array("PROXY TCP4 203.0.113.50 127.0.0.1 40000\r\n".utf8),             // malformed v1
            Self.v2(command: 0x11, source: [203, 0, 113, 51]),                       // v2 with version 1
        ]
        for bytes in attempts {
            let client = try relay.client()
            try client.send(bytes)
            let rest = try client.readUntilClose()
            #expect(rest.bytes.isEmpty, "closed without an answer")
        }
        // Only 127.0.0.2 is a balancer: the loopback client is refused at once, valid header or not.
        let strict = try Self.relay(trusted: ["127.0.0.2/32"], proxyProtocol: true, requests: requests)
        let client = try strict.client()
        try? client.send(Self.v1("203.0.113.50") + Array("GET /v1/models HTTP/1.1\r\nHost: relay\r\n\r\n".utf8))
        #expect(try client.readUntilClose().bytes.isEmpty)
        #expect(requests.count == 0)
        #expect(relay.server.metrics.render().contains(#"sse_relay_rejections_total{reason="proxy_protocol_invalid"} 3"#))
        #expect(strict.server.metrics.render().contains(#"sse_relay_rejections_total{reason="proxy_protocol_untrusted"} 1"#))
    }

    @Test("a PROXY header that stalls half-way is closed quietly when the head timeout passes")
    func proxyHeaderStall() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(trusted: ["127.0.0.1/32"], proxyProtocol: true, requests: requests) {
            $0.timeouts.headerReadSeconds = 0.3
        }
        let client = try relay.client()
        try client.send(Array(Self.v1("203.0.113.50").prefix(20)))
        let started = monotonicNanoseconds()
        #expect(try client.readUntilClose(timeout: 5).bytes.isEmpty)
        #expect(monotonicNanoseconds() - started < 3_000_000_000)
        #expect(requests.count == 0)
    }
}
