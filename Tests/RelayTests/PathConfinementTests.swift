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

/// The key goes only where a route allows: a request whose path could be resolved (by curl, a load balancer or
/// the provider) to a path outside its route is refused before any upstream call, on every kind of route.
@Suite("Path confinement")
struct PathConfinementTests {
    /// Every attack on every kind of route: prefix, exact, stripPrefix, auth "none", raw and encoded.
    static let attacks: [String] = [
        "/v1/models/../organization/admin_api_keys",
        "/v1/models/./../organization/admin_api_keys",
        "/v1/models/%2e%2e/organization/admin_api_keys",
        "/v1/models/%2E%2E/organization/admin_api_keys",
        "/v1/models/.%2e/organization",
        "/v1/models%2f..%2forganization",
        "/v1/models%2F..%2Forganization",
        "/v1/models/..%5corganization",
        "/v1/models/..%5Corganization",
        "/v1/models\\..\\organization",
        "/v1/models//organization",
        "/v1/models/..",
        "/v1/models/..;/organization/admin_api_keys",
        "/v1/models/x/..?limit=1",
        "/v1/models#/../organization",
        "/v1/chat/x/../completions",
        "/v1/chat/completions/..",
        "/v1/chat/completions/%2e%2e/x",
        "/anthropic/../v1/organization",
        "/anthropic/%2e%2e/v1/organization",
        "/anthropic//v1/organization",
        "/open/../v1/organization",
        "/open/%2e%2e/organization",
    ]

    static func relay(requests: Mailbox<RecordedRequest>) throws -> RelayFixture {
        let upstream = try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 5)
                requests.put(request)
                try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
                try connection.write("ok")
            }
        }
        // A manual clock: the rejection log's per-second share below is then exact.
        return try RelayFixture(upstream: upstream, clock: ManualClock()) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [
                .init(prefix: "/v1/models", upstream: "test", methods: ["GET", "POST"], auth: .token),
                .init(prefix: "/v1/chat/completions", upstream: "test", methods: ["GET", "POST"], auth: .token, exact: true),
                .init(prefix: "/anthropic/", upstream: "test", stripPrefix: true, methods: ["GET", "POST"], auth: .token),
                .init(prefix: "/open/", upstream: "test", methods: ["GET", "POST"], auth: .none),
            ]
        }
    }

    @Test("no dot segment, empty segment, backslash or encoded separator reaches the provider", arguments: ["GET", "POST"])
    func attacksAreRefusedBeforeTheProvider(method: String) throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        var clients: [TestClient] = []
        for path in Self.attacks {
            let client = try relay.client()
            clients.append(client)
            try client.sendRequest(method: method, path: path,
                                   headers: [("Authorization", "Bearer \(RelayFixture.clientToken)"), ("Content-Type", "application/json")],
                                   body: method == "POST" ? Array(#"{"model":"gpt-4o"}"#.utf8) : [])
            let head = try client.readHead()
            #expect(head.status == 400, "\(path)")
            let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
            #expect(body.contains(#""code":"invalid_path""#), "\(path): \(body)")
        }
        // The control: a plain path on the same relay does reach the provider, so the refusals above are the
        // path check and not a broken upstream.
        let control = try relay.client()
        try control.sendRequest(method: "GET", path: "/v1/models/gpt-4o", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")])
        #expect(try control.readHead().status == 200)
        #expect(try requests.take().target == "/v1/models/gpt-4o")
        let reached = relay.upstream?.requests.map(\.target) ?? []
        #expect(reached == ["/v1/models/gpt-4o"], "a refused path reached the provider")
        relay.assertNoSecretLeaks(clients: clients)
        // Ops see what was refused and why (up to the rejection log's share of 10 lines a second per reason).
        let refusals = relay.logs.lines.filter { $0.contains(#""reason":"invalid_path:"#) }
        #expect(refusals.count == 10)
    }

    @Test("the provider receives exactly the path that was routed, byte for byte")
    func pathIsSentAsRouted() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        let cases: [(sent: String, received: String)] = [
            ("/v1/models/a%20b,c=d,e@f:g!$&'()*+~_-", "/v1/models/a%20b,c=d,e@f:g!$&'()*+~_-"),
            ("/v1/models/x?a=1;b=2", "/v1/models/x?a=1;b=2"),
            ("/v1/models/...", "/v1/models/..."),
            ("/v1/models/.well-known?q=../..%2f", "/v1/models/.well-known?q=../..%2f"),
            ("/anthropic/v1/messages?beta=true", "/v1/messages?beta=true"),
            ("/open/x", "/open/x"),
        ]
        for c in cases {
            let client = try relay.client()
            try client.sendRequest(method: "GET", path: c.sent, headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")])
            #expect(try client.readHead().status == 200, "\(c.sent)")
            #expect(try requests.take().target == c.received)
        }
    }

    @Test("a prefix matches at segment boundaries only")
    func prefixStopsAtSegmentBoundary() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        for path in ["/v1/modelsX", "/v1/models-admin", "/v1/chat/completionsX", "/v1/chat/completions/x", "/openx"] {
            let client = try relay.client()
            try client.sendRequest(method: "GET", path: path, headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")])
            #expect(try client.readHead().status == 404, "\(path)")
        }
        #expect(relay.upstream?.requests.isEmpty == true)
    }
}
