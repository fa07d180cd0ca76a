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

/// Token budgets through the real relay: a request the budget cannot hold is refused before the provider is
/// called, a stream without a ceiling is cut at an event boundary when its budget runs out, and ops read the spend
/// on the admin listener. The wall clock is fixed (2026-12-15T10:00:00Z).
@Suite("Budgets")
struct BudgetTests {
    static let now = 1_797_328_800.0
    /// 18 characters of message text: 5 estimated prompt tokens.
    static let request = Array(#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
    static let chunk = #"data: {"choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}"# + "\n\n"

    static func relay(_ upstream: ScriptedUpstream, perDay: Int, reserve: Int = 4096, clock: any Clock = MonotonicClock()) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: now, clock: clock) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: perDay), defaultReserveTokens: reserve)
            config.admin = .init(host: "127.0.0.1", port: 0)
        }
    }

    static func post(_ client: TestClient) throws {
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")],
                               body: request)
    }

    /// One request, refused 429 `budget_exhausted` with Retry-After to UTC midnight; the provider sees nothing.
    static func expectRefusedBeforeTheProvider(_ relay: RelayFixture, _ upstream: ScriptedUpstream) throws {
        let client = try relay.client()
        try post(client)
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == 429)
        #expect(head.header("Retry-After") == String(14 * 3600))
        #expect(ClientAuthTests.code(body) == "budget_exhausted")
        #expect(body.contains(#""type":"budget_exhausted""#))
        try relay.waitUntilIdle()
        #expect(upstream.requests.isEmpty)
    }

    @Test("a request the budget cannot hold gets 429 budget_exhausted with Retry-After to UTC midnight; the provider sees nothing")
    func refusedBeforeTheProvider() throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try Self.relay(upstream, perDay: 4000)   // 4096 + 5 does not fit
        try Self.expectRefusedBeforeTheProvider(relay, upstream)
        #expect(relay.server.metrics.render().contains(#"sse_relay_rejections_total{reason="budget_exhausted"} 1"#))
    }

    /// Reserve 10 + 5, raised to the floor of the body's bytes ÷ 4 (131 bytes: 33), against a day of 35: the
    /// extension is asked when the 26th event is counted (33 - 5 prompt - 10 / 5) and refused (the memory store
    /// answers at once). That event arrives in one delivery with the first half of the 27th, so the relay passes the
    /// rest of the 27th from the next delivery, then the closing event and a clean end; the 28th event is dropped and
    /// the provider's connection closed. One upstream chunk is one delivery (curl's chunk decoder), so the split is
    /// the one the script writes.
    @Test("a stream without a ceiling is cut at an event boundary with one error event when its budget runs out")
    func cutMidStream() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for _ in 0..<25 { try connection.writeChunk(Self.chunk) }
            let bytes = Array(Self.chunk.utf8)
            try connection.writeChunk(bytes + Array(bytes[..<20]))
            try connection.writeChunk(Array(bytes[20...]) + bytes)
            _ = try connection.waitForPeerClose(timeout: 5)
        }
        #expect((Self.request.count + 3) / 4 == 33)
        let relay = try Self.relay(upstream, perDay: 35, reserve: 10)
        let client = try relay.client()
        try Self.post(client)
        let head = try client.readHead()
        #expect(head.status == 200)
        let closing = #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        let body = try client.readChunkedBody(until: closing)
        #expect(String(decoding: body, as: UTF8.self) == String(repeating: Self.chunk, count: 27) + closing)
        #expect(try client.readChunk() == nil, "a clean end: the terminal chunk")
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(relay.server.metrics.render().contains(#"sse_relay_budget_cuts_total{route="/v1/"} 1"#))
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"budget_exhausted""#) })
    }

    /// `"max_tokens":10` reserves 10 + 5, raised to the body's floor (146 bytes: 37): 32 of output. A provider that
    /// keeps the ceiling sends 10 events and is never guarded; one that does not (it reads the ceiling otherwise
    /// than the relay) is trusted to twice its reserved output and one step (32 + 32 + 10, less a fifth of a step:
    /// the 72nd event), then asks for more, is refused (a day of 40) and cut after that event. Once the relay read a named ceiling as
    /// the end of the matter, and such a stream ran to its end past the budget.
    @Test("a stream whose provider does not keep the named ceiling is cut past twice its reservation; one that does is not",
          arguments: [10, 200])
    func aNamedCeilingNotKept(events: Int) throws {
        let body = Array(#"{"model":"gpt-4o","stream":true,"max_tokens":10,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
        #expect((body.count + 3) / 4 == 37)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for _ in 0..<events { try connection.writeChunk(Self.chunk) }
            if events <= 10 { try connection.writeLastChunk() } else { _ = try connection.waitForPeerClose(timeout: 5) }
        }
        let relay = try Self.relay(upstream, perDay: 40, reserve: 10)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")], body: body)
        let head = try client.readHead()
        #expect(head.status == 200)
        let closing = #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        if events <= 10 {
            #expect(String(decoding: try client.readBody(head: head), as: UTF8.self) == String(repeating: Self.chunk, count: events))
            try relay.waitUntilIdle()
            #expect(!relay.server.metrics.render().contains("sse_relay_budget_cuts_total{"))
        } else {
            let received = try client.readChunkedBody(until: closing)
            #expect(String(decoding: received, as: UTF8.self) == String(repeating: Self.chunk, count: 72) + closing)
            try upstream.waitForScriptsToFinish()
            try relay.waitUntilIdle()
            #expect(relay.server.metrics.render().contains(#"sse_relay_budget_cuts_total{route="/v1/"} 1"#))
        }
    }

    @Test("GET /usage?identity= on the admin listener answers the identity's windows; 400 without identity")
    func usageEndpoint() throws {
        // A clock that stands still: the stream ends without the provider's counts, and the cancel floor (per second
        // since the head) then adds nothing, so the spend below is exact.
        let relay = try Self.relay(try oneEventUpstream(), perDay: 100_000, clock: ManualClock())
        let client = try relay.client()
        try Self.post(client)
        let head = try client.readHead()
        _ = try client.readBody(head: head)
        try relay.waitUntilIdle()
        let admin = try TestClient(port: relay.server.adminPort!)
        try admin.sendRequest(method: "GET", path: "/usage?identity=static%3Aapp")   // the identity as logged
        let answer = try admin.readHead()
        let json = String(decoding: try admin.readBody(head: answer), as: UTF8.self)
        #expect(answer.status == 200)
        // The one event is `data: x` (not a chat chunk): the settle is the prompt estimate alone.
        #expect(json == #"{"identity":"static:app","openStreams":0,"windows":[{"window":"day","period":"2026-12-15","used":5,"reserved":0,"limit":100000,"usedUSD":"0.000000000","reservedUSD":"0.000000000","limitUSD":null,"resetsIn":50400},{"window":"month","period":"2026-12","used":5,"reserved":0,"limit":null,"usedUSD":"0.000000000","reservedUSD":"0.000000000","limitUSD":null,"resetsIn":1432800}]}"# + "\n")
        try admin.sendRequest(method: "GET", path: "/usage")
        let missing = try admin.readHead()
        #expect(missing.status == 400)
        _ = try admin.readBody(head: missing)
        let publicPort = try relay.client()
        try publicPort.sendRequest(method: "GET", path: "/usage?identity=app", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")])
        #expect(try publicPort.readHead().status != 200, "the public port does not answer /usage")
    }

    /// A non-streaming answer cannot be cut, so a request without a ceiling carries the one it reserved
    /// (`max_completion_tokens` on chat completions, the default reservation here): the provider stops there, and
    /// concurrent requests cannot overspend beyond their reservations. A request that names its ceiling is
    /// forwarded byte for byte.
    @Test("a non-streaming request without a ceiling reaches the provider with the reserved one; one with its own is untouched")
    func nonStreamingRequestsCarryTheirReservedCeiling() throws {
        let json = Array(#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#.utf8)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(json.count)"),
                                                            ("Connection", "close")])
            try connection.write(json)
        }
        let relay = try Self.relay(upstream, perDay: 100_000, reserve: 512)
        let bare = Array(#"{"model":"o3","messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
        let named = Array(#"{"model":"o3", "max_completion_tokens": 64, "messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
        for body in [bare, named] {
            let client = try relay.client()
            try client.sendRequest(path: "/v1/chat/completions", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")], body: body)
            let head = try client.readHead()
            #expect(head.status == 200)
            #expect(try client.readBody(head: head) == json, "the answer passes byte for byte")
        }
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(upstream.requests.map { String(decoding: $0.body, as: UTF8.self) } == [
            #"{"model":"o3","messages":[{"role":"user","content":"How are you today?"}],"max_completion_tokens":512}"#,
            String(decoding: named, as: UTF8.self),
        ])
        #expect(upstream.requests.first?.header("Content-Length") == String(bare.count + #","max_completion_tokens":512"#.utf8.count))
    }
}
