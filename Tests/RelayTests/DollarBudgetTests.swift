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

/// Prices and dollar budgets through the real relay (issue 23): a dollar budget refuses what it cannot hold before
/// the provider is called, refuses an unpriced model, cuts a stream whose next extension it cannot price in, and
/// settles at the real cost, which the access log, the metrics and `GET /usage` report exactly. The wall clock is
/// fixed (2026-12-15T10:00:00Z).
@Suite("Dollar budgets")
struct DollarBudgetTests {
    /// 18 characters of message text: 5 estimated prompt tokens; 131 bytes: a reservation of at least 33 tokens.
    static let request = BudgetTests.request
    /// `{"gpt-4o*": {"input": 1, "output": 1}, "gpt-4o-mini*": {"input": 0.15, "cachedInput": 0.075, "output": 0.60}}`,
    /// in nano-dollars per million.
    static var pricing: PriceTable {
        var table = PriceTable()
        table.add("gpt-4o*", ModelPrice(input: 1_000_000_000, output: 1_000_000_000))
        table.add("gpt-4o-mini*", ModelPrice(input: 150_000_000, cachedInput: 75_000_000, output: 600_000_000))
        return table
    }

    static func relay(_ upstream: ScriptedUpstream, limits: BudgetLimits, reserve: Int = 4096, onExceed: BudgetConfiguration.OnExceed = .cut,
                      clock: any Clock = MonotonicClock(), pricing: PriceTable = pricing) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: BudgetTests.now, clock: clock) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.budgets = BudgetConfiguration(perIdentity: limits, onExceed: onExceed, defaultReserveTokens: reserve)
            config.pricing = PricingConfiguration(table: pricing)
            config.admin = .init(host: "127.0.0.1", port: 0)
        }
    }

    static func post(_ client: TestClient, body: [UInt8] = request) throws {
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")], body: body)
    }

    /// gpt-4o at $1 per million both ways: 4 096 + 5 tokens reserve 4 101 000 n$, over a day of $0.004.
    @Test("a request a dollar budget cannot hold gets 429 budget_exhausted though the token limit would hold it")
    func refusedAtTheDollarLimit() throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try Self.relay(upstream, limits: BudgetLimits(tokensPerDay: 1_000_000, nanoUSDPerDay: 4_000_000))
        try BudgetTests.expectRefusedBeforeTheProvider(relay, upstream)
    }

    /// A model without a price, or a request with audio whose model has no audio prices (gpt-4o here), would cost
    /// an unknown amount: refused before the provider.
    @Test("with a dollar budget, an unpriced model or unpriced audio is refused 403; the provider sees nothing", arguments: [
        ("o3", "", "model_not_priced"), ("gpt-4o", #","modalities":["text","audio"],"audio":{"voice":"alloy"}"#, "modality_not_priced"),
    ])
    func unpricedModelRefused(model: String, extra: String, code: String) throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try Self.relay(upstream, limits: BudgetLimits(nanoUSDPerDay: 1_000_000_000))
        let client = try relay.client()
        try Self.post(client, body: Array(#"{"model":"\#(model)","stream":true,"messages":[{"role":"user","content":"hi"}]\#(extra)}"#.utf8))
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == 403)
        #expect(ClientAuthTests.code(body) == code)
        #expect(!body.contains(model), "the model is not echoed")
        try relay.waitUntilIdle()
        #expect(upstream.requests.isEmpty)
        #expect(relay.server.metrics.render().contains(#"sse_relay_rejections_total{reason="\#(code)"} 1"#))
    }

    /// The token test's stream (BudgetTests.cutMidStream) with the limit in dollars: 33 tokens reserved at $1 per
    /// million = 33 000 n$ of a day of 35 000; the extension of 10 tokens (10 000 n$) does not fit, so the stream is
    /// cut at the same event boundary though the token limit is far away.
    ///
    /// With long-context prices past 4 prompt tokens (input $1, output $2 per million), the 5-token prompt makes it
    /// a long request: 5 × 1 000 + 28 × 2 000 = 61 000 n$ reserved, and the extension costs 20 000 n$ at the long
    /// output price, so a day of 75 000 cuts it at the same boundary (priced at the base output price, 10 000 n$,
    /// it would have fitted).
    @Test("a stream is cut mid-stream when its dollar budget cannot cover the next extension", arguments: [
        (35_000, false), (75_000, true),
    ])
    func cutMidStream(limit: Int, longContext: Bool) throws {
        let chunk = BudgetTests.chunk
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for _ in 0..<25 { try connection.writeChunk(chunk) }
            let bytes = Array(chunk.utf8)
            try connection.writeChunk(bytes + Array(bytes[..<20]))
            try connection.writeChunk(Array(bytes[20...]) + bytes)
            _ = try connection.waitForPeerClose(timeout: 5)
        }
        var pricing = Self.pricing
        if longContext {
            let long = LongContextPrice(above: 4, price: ModelPrice(input: 1_000_000_000, output: 2_000_000_000))
            pricing.add("gpt-4o*", ModelPrice(input: 1_000_000_000, output: 1_000_000_000, longContext: long))
        }
        let relay = try Self.relay(upstream, limits: BudgetLimits(tokensPerDay: 1_000_000, nanoUSDPerDay: limit), reserve: 10,
                                   pricing: pricing)
        let client = try relay.client()
        try Self.post(client)
        #expect(try client.readHead().status == 200)
        let closing = #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        let body = try client.readChunkedBody(until: closing)
        #expect(String(decoding: body, as: UTF8.self) == String(repeating: chunk, count: 27) + closing)
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(relay.server.metrics.render().contains(#"sse_relay_budget_cuts_total{route="/v1/"} 1"#))
    }

    /// The provider answers as gpt-4o-mini-2024-07-18 with 2 000 prompt tokens (1 500 cached) and 700 completion (300
    /// reasoning): 500 × 0.15 + 1 500 × 0.075 + 700 × 0.60 = 607.5 $/M = 607 500 n$, priced by the pattern for the
    /// model the provider reported. The reservation (4 096 + 5 at gpt-4o-mini's prices) is released.
    @Test("the budget settles at the real cost, which the log, the metrics and GET /usage report exactly")
    func settlesAtTheRealCost() throws {
        let usage = #"data: {"id":"c","model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":700,"prompt_tokens_details":{"cached_tokens":1500},"completion_tokens_details":{"reasoning_tokens":300}}}"# + "\n\n"
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(#"data: {"id":"c","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"Hi"}}]}"# + "\n\n")
            try connection.writeChunk(usage + "data: [DONE]\n\n")
            try connection.writeLastChunk()
        }
        let relay = try Self.relay(upstream, limits: BudgetLimits(nanoUSDPerDay: 1_000_000_000))
        let client = try relay.client()
        try Self.post(client, body: Array(#"{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8))
        let head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        try relay.waitUntilIdle()
        let line = try #require(relay.logs.lines.first { $0.contains(#""msg":"exchange""#) || $0.contains(#""message":"exchange""#) })
        #expect(line.contains(#""cost_usd":"0.000607500""#), "\(line)")
        #expect(line.contains(#""cost_source":"provider""#))
        #expect(relay.server.metrics.render().contains(#"sse_relay_cost_usd_total{route="/v1/",model="other",source="provider"} 0.000607500"#))
        let admin = try TestClient(port: relay.server.adminPort!)
        try admin.sendRequest(method: "GET", path: "/usage?identity=static%3Aapp")
        let answer = try admin.readHead()
        let json = String(decoding: try admin.readBody(head: answer), as: UTF8.self)
        #expect(json.contains(#""usedUSD":"0.000607500","reservedUSD":"0.000000000","limitUSD":"1.000000000""#), "\(json)")
    }

    /// `"service_tier": "priority"` makes OpenAI bill every token at its priority rates (about twice the standard
    /// ones), and the app chooses it. A model priced with `priority` rates settles at them: 2 000 prompt × 0.30 + 700
    /// output × 1.20 = 1 440 $/M = 1 440 000 n$, against 2 000 × 0.15 + 700 × 0.60 = 720 $/M at the standard rates,
    /// which `flex`, `auto` and no tier pay. A model without priority rates is refused before the provider (403
    /// `service_tier_not_priced`), and so is a value the relay does not know.
    @Test("a priority request pays the model's priority prices, or is refused without them", arguments: [
        (#""service_tier":"priority","#, "gpt-4o-mini", 200, "0.001440000"),
        (#""service_tier":"priority","#, "gpt-4o", 403, ""),
        (#""service_tier":"turbo","#, "gpt-4o", 403, ""),
        (#""service_tier":"flex","#, "gpt-4o-mini", 200, "0.000720000"),
        (#""service_tier":"auto","#, "gpt-4o-mini", 200, "0.000720000"),
        ("", "gpt-4o-mini", 200, "0.000720000"),
    ])
    func priorityRequestsPayPriorityPrices(tier: String, model: String, status: Int, cost: String) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(#"data: {"id":"c","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":700}}"#
                                      + "\n\ndata: [DONE]\n\n")
            try connection.writeLastChunk()
        }
        var pricing = Self.pricing
        pricing.add("gpt-4o-mini*", ModelPrice(input: 150_000_000, cachedInput: 75_000_000, output: 600_000_000,
                                               priority: PriorityPrice(ModelPrice(input: 300_000_000, output: 1_200_000_000))))
        let relay = try Self.relay(upstream, limits: BudgetLimits(nanoUSDPerDay: 1_000_000_000), pricing: pricing)
        let client = try relay.client()
        try Self.post(client, body: Array(#"{"model":"\#(model)",\#(tier)"stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8))
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == status, "\(body)")
        try relay.waitUntilIdle()
        if status == 403 {
            #expect(ClientAuthTests.code(body) == "service_tier_not_priced")
            #expect(upstream.requests.isEmpty)
            return
        }
        let line = try #require(relay.logs.lines.first { $0.contains(#""message":"exchange""#) })
        #expect(line.contains(#""cost_usd":"\#(cost)""#), "\(line)")
    }

    /// Token budgets only: an unpriced model passes, its cost is unknown (`cost_source` none, no `cost_usd`), and
    /// the warning is logged once for the model, not once per request.
    @Test("an unpriced model under token budgets: cost unknown, warned once per model")
    func unpricedModelWarnedOnce() throws {
        let upstream = try ScriptedUpstream { connection in
            for _ in 0..<2 {
                _ = try connection.readRequest()
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk(#"data: {"model":"o3","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"# + "\n\ndata: [DONE]\n\n")
                try connection.writeLastChunk()
            }
        }
        let relay = try Self.relay(upstream, limits: BudgetLimits(tokensPerDay: 100_000))
        for _ in 0..<2 {
            let client = try relay.client()
            try Self.post(client, body: Array(#"{"model":"o3","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#.utf8))
            let head = try client.readHead()
            #expect(head.status == 200)
            _ = try client.readBody(head: head)
            try relay.waitUntilIdle()
        }
        let exchanges = relay.logs.lines.filter { $0.contains(#""route":"/v1/""#) && $0.contains("usage_source") }
        #expect(exchanges.count == 2)
        #expect(exchanges.allSatisfy { $0.contains(#""cost_source":"none""#) && !$0.contains("cost_usd") })
        #expect(relay.logs.lines.filter { $0.contains("model has no price") }.count == 1)
        #expect(!relay.server.metrics.render().contains("sse_relay_cost_usd_total{"))
    }
}

extension DollarBudgetTests {
    /// `onExceed: "finish"` with the limit in dollars: the refused extension stops the guard, the stream runs to its
    /// end, and it is charged in full.
    @Test("with onExceed finish, a stream past its dollar budget runs to its end")
    func finishRunsOn() throws {
        let events = String(repeating: BudgetTests.chunk, count: 40) + "data: [DONE]\n\n"
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(events)
            try connection.writeLastChunk()
        }
        let relay = try Self.relay(upstream, limits: BudgetLimits(nanoUSDPerDay: 35_000), reserve: 10, onExceed: .finish)
        let client = try relay.client()
        try Self.post(client)
        let head = try client.readHead()
        #expect(head.status == 200)
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(body == events)
        try relay.waitUntilIdle()
        #expect(!relay.server.metrics.render().contains("sse_relay_budget_cuts_total{"))
        let line = try #require(relay.logs.lines.first { $0.contains(#""message":"exchange""#) })
        #expect(line.contains(#""cost_source":"estimate""#), "\(line)")
    }
}
