// Prices and costs (issue 23): the table read from the number text, pattern precedence, cost against a hand
// computation for each provider's usage shape, the configuration's problems by key path, and reloading.
import Foundation
import JSON
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing
import Usage

private func table(_ json: String) throws -> PriceTable {
    let document = try JSONDocument(parsing: Array(json.utf8))
    let (table, problems) = PriceTable.read(document, at: JSONDocument.root, path: "pricing")
    #expect(problems.isEmpty, "\(problems)")
    return try #require(table)
}

private func tapped(_ provider: Provider, contentType: String = "text/event-stream", _ body: String) -> UsageTap {
    var tap = UsageTap(provider: provider, contentType: contentType)
    // Fed one byte at a time: the tap must not depend on how deliveries split.
    for byte in body.utf8 { tap.feed([byte]) }
    return tap
}

private func relayConfig(_ root: String, files: [String: String] = [:]) throws -> RelayConfiguration {
    let json = """
    {
      "upstreams": { "openai": { "baseURL": "https://api.openai.com", "key": { "env": "K" } } },
      "routes": [ { "prefix": "/v1/", "upstream": "openai", "auth": "none" } ]\(root)
    }
    """
    return try RelayConfiguration.load(json: Data(json.utf8),
                                       sources: ConfigurationSources(environment: ["K": "sk-1"], readFile: { files[$0] }))
}

private func problemPaths(_ root: String, files: [String: String] = [:]) -> [String] {
    configurationProblems { _ = try relayConfig(root, files: files) }.map { p in p.range(of: ": ").map { String(p[..<$0.lowerBound]) } ?? p }
}

@Suite struct PricingTests {
    @Test func pricesAreReadExactlyFromTheirText() throws {
        let t = try table(#"{"m": {"input": 0.075, "cachedInput": 1.5e-2, "output": 0.60, "cacheWrite": 3.75}, "n": {"input": 0, "output": 1E2}}"#)
        #expect(t.price(for: "m") == ModelPrice(input: 75_000_000, cachedInput: 15_000_000, output: 600_000_000, cacheWrite: 3_750_000_000))
        #expect(t.price(for: "n") == ModelPrice(input: 0, output: 100_000_000_000))
        // 0.1 + 0.2 in binary floating point is 0.30000000000000004; from the text it is exact.
        #expect(PriceTable.decimal(Array("0.000000001".utf8), scale: 9) == 1)
        #expect(PriceTable.decimal(Array("0.0000000015".utf8), scale: 9) == nil, "more than nine decimals is not exact")
        #expect(PriceTable.decimal(Array("2.500000000000".utf8), scale: 9) == 2_500_000_000, "trailing zeros are fine")
    }

    @Test func theLongestMatchWinsAndAnExactNameBeatsItsPattern() throws {
        let t = try table(#"{"claude-sonnet-4*": {"input": 3, "output": 15}, "claude-*": {"input": 1, "output": 1}, "# +
                          #""claude-sonnet-4-5*": {"input": 4, "output": 16}, "claude-sonnet-4": {"input": 9, "output": 9}, "*": {"input": 100, "output": 100}}"#)
        #expect(t.price(for: "claude-sonnet-4-20250514")?.input == 3_000_000_000)
        #expect(t.price(for: "claude-sonnet-4-5-20250929")?.input == 4_000_000_000)
        #expect(t.price(for: "claude-sonnet-4")?.input == 9_000_000_000, "exact beats the pattern of the same length")
        #expect(t.price(for: "claude-haiku")?.input == 1_000_000_000)
        #expect(t.price(for: "gpt-4o")?.input == 100_000_000_000, "a lone * is the default")
        let noDefault = try table(#"{"gpt-4o*": {"input": 1, "output": 1}}"#)
        #expect(noDefault.price(for: "gpt-4") == nil)
        #expect(noDefault.price(for: nil) == nil)
    }

    /// OpenAI chat with `include_usage`: 2 000 prompt of which 1 500 cached, 700 completion of which 300 reasoning.
    /// gpt-4o-mini at 0.15 / 0.075 / 0.60 per million: 500 × 0.15 + 1 500 × 0.075 + 700 × 0.60 = 75 + 112.5 + 420
    /// = 607.5 dollars per million tokens = 0.0006075 $ = 607 500 nano-dollars. The provider names a dated model,
    /// which the pattern prices.
    @Test func openAIWithCachedAndReasoningTokens() throws {
        let t = try table(#"{"gpt-4o-mini*": {"input": 0.15, "cachedInput": 0.075, "output": 0.60}}"#)
        let tap = tapped(.openai, #"data: {"id":"c","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"Hi"}}]}"# + "\n\n"
                         + #"data: {"id":"c","model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":700,"prompt_tokens_details":{"cached_tokens":1500},"completion_tokens_details":{"reasoning_tokens":300}}}"# + "\n\ndata: [DONE]\n\n")
        #expect(tap.reportedModel == "gpt-4o-mini-2024-07-18")
        let cost = ExchangeCost(tap.usage(), reported: tap.reportedModel, requested: "gpt-4o-mini", prices: PriceBook(table: t))
        #expect(cost == ExchangeCost(nanoUSD: 607_500, source: .provider, model: "gpt-4o-mini-2024-07-18"))
        #expect(Cost.decimalString(nanoUSD: 607_500) == "0.000607500")
    }

    /// Nine decimals always, a sign for a negative amount, every magnitude up to `Int`'s ends: against the plain
    /// arithmetic spelled with `String(_:)`.
    @Test func decimalStringsOfNanoDollars() {
        func reference(_ nano: Int) -> String {
            let m = nano.magnitude
            let fraction = String(m % 1_000_000_000)
            let text = String(m / 1_000_000_000) + "." + String(repeating: "0", count: 9 - fraction.count) + fraction
            return nano < 0 ? "-" + text : text
        }
        #expect(Cost.decimalString(nanoUSD: 0) == "0.000000000")
        #expect(Cost.decimalString(nanoUSD: 1) == "0.000000001")
        #expect(Cost.decimalString(nanoUSD: 999_999_999) == "0.999999999")
        #expect(Cost.decimalString(nanoUSD: 1_000_000_000) == "1.000000000")
        #expect(Cost.decimalString(nanoUSD: -1_500_000_001) == "-1.500000001")
        #expect(Cost.decimalString(nanoUSD: Int.max) == "9223372036.854775807")
        #expect(Cost.decimalString(nanoUSD: Int.min) == "-9223372036.854775808")
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for shift in 0..<64 {
            for sign in [1, -1] {
                x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let nano = sign * Int(truncatingIfNeeded: x >> UInt64(shift + 1))
                #expect(Cost.decimalString(nanoUSD: nano) == reference(nano), "\(nano)")
            }
        }
    }

    /// Anthropic: 100 uncached input, 4 000 cache reads, 2 000 cache writes, 500 output, at 3 / 0.30 / 15 / 3.75:
    /// 100 × 3 + 4 000 × 0.30 + 2 000 × 3.75 + 500 × 15 = 300 + 1 200 + 7 500 + 7 500 = 16 500 $/M = 16 500 000 n$.
    @Test func anthropicWithCacheReadAndWrite() throws {
        let t = try table(#"{"claude-sonnet-4*": {"input": 3, "cachedInput": 0.30, "output": 15, "cacheWrite": 3.75}}"#)
        let tap = tapped(.anthropic, "event: message_start\n" + #"data: {"type":"message_start","message":{"id":"m","model":"claude-sonnet-4-20250514","usage":{"input_tokens":100,"cache_read_input_tokens":4000,"cache_creation_input_tokens":2000,"output_tokens":1}}}"# + "\n\n"
                         + "event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"# + "\n\n"
                         + "event: message_delta\n" + #"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":500}}"# + "\n\n")
        #expect(tap.reportedModel == "claude-sonnet-4-20250514")
        let cost = ExchangeCost(tap.usage(), reported: tap.reportedModel, requested: "claude-sonnet-4-0", prices: PriceBook(table: t))
        #expect(cost.nanoUSD == 16_500_000)
        #expect(cost.source == .provider)
    }

    /// A client chooses the cache's lifetime (`"cache_control": {"type": "ephemeral", "ttl": "1h"}`), and Anthropic
    /// bills a one-hour write at twice the input price, against 1.25 times for five minutes. Of 2 000 tokens written,
    /// 1 500 for an hour: 100 × 3 + 4 000 × 0.30 + 500 × 3.75 + 1 500 × 6 + 500 × 15 = 300 + 1 200 + 1 875 + 9 000
    /// + 7 500 = 19 875 $/M. At the five-minute price for all of them it was 16 500 $/M. `cacheWriteOneHour` sets
    /// the price; without it, twice the input price (Anthropic's rate, and never below `cacheWrite`).
    @Test func anthropicOneHourCacheWritesArePricedAtTheirOwnRate() throws {
        let t = try table(#"{"claude-sonnet-4*": {"input": 3, "cachedInput": 0.30, "output": 15, "cacheWrite": 3.75}, "# +
                          #""claude-opus-4*": {"input": 3, "cachedInput": 0.30, "output": 15, "cacheWrite": 3.75, "cacheWriteOneHour": 7}}"#)
        let usage = #"{"input_tokens":100,"cache_read_input_tokens":4000,"cache_creation_input_tokens":2000,"# +
            #""cache_creation":{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1500},"output_tokens":"#
        let tap = tapped(.anthropic, "event: message_start\n" + #"data: {"type":"message_start","message":{"id":"m","model":"claude-sonnet-4-20250514","usage":"# + usage + #"1}}}"# + "\n\n"
                         + "event: message_delta\n" + #"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":500}}"# + "\n\n")
        #expect(tap.usage().cacheCreationOneHour == 1_500)
        #expect(ExchangeCost(tap.usage(), reported: tap.reportedModel, requested: nil, prices: PriceBook(table: t)).nanoUSD == 19_875_000)
        let body = tapped(.anthropic, contentType: "application/json", #"{"model":"claude-opus-4-1","usage":"# + usage + "500}}")
        // 300 + 1 200 + 1 875 + 1 500 × 7 + 7 500 = 21 375 $/M.
        #expect(ExchangeCost(body.usage(), reported: body.reportedModel, requested: nil, prices: PriceBook(table: t)).nanoUSD == 21_375_000)
    }

    /// Gemini: 1 000 prompt (200 cached), 300 candidates + 100 thoughts, at 0.30 / 0.075 / 2.50:
    /// 800 × 0.30 + 200 × 0.075 + 400 × 2.50 = 240 + 15 + 1 000 = 1 255 $/M = 1 255 000 n$.
    @Test func gemini() throws {
        let t = try table(#"{"gemini-2.5-flash*": {"input": 0.30, "cachedInput": 0.075, "output": 2.50}}"#)
        let tap = tapped(.gemini, #"data: {"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":1000},"modelVersion":"gemini-2.5-flash"}"# + "\r\n\r\n"
                         + #"data: {"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1000,"cachedContentTokenCount":200,"candidatesTokenCount":300,"thoughtsTokenCount":100},"modelVersion":"gemini-2.5-flash"}"# + "\r\n\r\n")
        #expect(tap.reportedModel == "gemini-2.5-flash")
        #expect(ExchangeCost(tap.usage(), reported: tap.reportedModel, requested: nil, prices: PriceBook(table: t)).nanoUSD == 1_255_000)
    }

    /// Long context (Gemini 2.5 Pro, Claude's 1M context): a request whose prompt is past the threshold pays the
    /// long-context prices for every token, input and output; at the threshold, the base prices. Gemini 2.5 Pro at
    /// 1.25 / 10, and 2.50 / 15 above 200 000 prompt tokens:
    /// - 200 000 prompt, 1 000 output: 200 000 × 1.25 + 1 000 × 10 = 260 000 $/M;
    /// - 200 001 prompt: 200 001 × 2.50 + 1 000 × 15 = 515 002.5 $/M.
    @Test func aPromptPastTheLongContextThresholdPaysTheLongContextPrices() throws {
        let t = try table(#"{"gemini-2.5-pro*": {"input": 1.25, "cachedInput": 0.31, "output": 10, "# +
                          #""longContext": {"above": 200000, "input": 2.5, "cachedInput": 0.625, "output": 15}}}"#)
        let price = try #require(t.price(for: "gemini-2.5-pro"))
        #expect(price.longContext?.above == 200_000)
        let book = PriceBook(table: t)
        func cost(prompt: Int, cached: Int? = nil) -> Int? {
            ExchangeCost(Usage(prompt: prompt, completion: 1_000, cached: cached, source: .provider), reported: "gemini-2.5-pro",
                         requested: nil, prices: book).nanoUSD
        }
        #expect(cost(prompt: 200_000) == 260_000_000)
        #expect(cost(prompt: 200_001) == 515_002_500)
        // Cached input counts toward the threshold (the prompt is every input token), at the long cached price:
        // 1 000 × 2.50 + 199 500 × 0.625 + 1 000 × 15 = 2 500 + 124 687.5 + 15 000 = 142 187.5 $/M.
        #expect(cost(prompt: 200_500, cached: 199_500) == 142_187_500)
        // The reservation is priced by its prompt estimate, and each extension of a long request at the long
        // output price.
        #expect(Cost.reservation(promptTokens: 300_000, outputTokens: 1_000, price: price) == 765_000_000)
        #expect(Cost.reservation(promptTokens: 100_000, outputTokens: 1_000, price: price) == 135_000_000)
        #expect(BudgetAmount.step(100, price: price, promptTokens: 300_000).nanoUSD == 1_500_000)
        #expect(BudgetAmount.step(100, price: price, promptTokens: 100_000).nanoUSD == 1_000_000)
        // Long-context fields left out follow the same defaults as the base ones (cache writes at the input price).
        let bare = try table(#"{"m": {"input": 1, "output": 2, "longContext": {"above": 10, "input": 3, "output": 4}}}"#)
        #expect(bare.price(for: "m")?.forPrompt(11) == ModelPrice(input: 3_000_000_000, output: 4_000_000_000))
        #expect(bare.price(for: "m")?.forPrompt(10).input == 1_000_000_000)
    }

    /// `priority` prices: read with their own defaults and long-context prices, used for a priority request only,
    /// and a priority request of a model without them has no price (never the standard one).
    @Test func priorityPricesApplyToPriorityRequestsOnly() throws {
        let t = try table(#"{"gpt-5*": {"input": 1.25, "output": 10, "priority": {"input": 2.5, "cachedInput": 0.25, "output": 20, "# +
                          #""longContext": {"above": 100, "input": 5, "output": 40}}}, "gpt-4o*": {"input": 2.5, "output": 10}}"#)
        let book = PriceBook(table: t)
        func cost(_ model: String, _ tier: ServiceTier, _ usage: Usage = Usage(prompt: 100, completion: 10, source: .provider)) -> Int? {
            ExchangeCost(usage, reported: model, requested: nil, prices: book, tier: tier).nanoUSD
        }
        #expect(cost("gpt-5", .standard) == 100 * 1_250 + 10 * 10_000)
        #expect(cost("gpt-5", .priority) == 100 * 2_500 + 10 * 20_000)
        #expect(cost("gpt-5", .priority, Usage(prompt: 101, completion: 10, source: .provider)) == 101 * 5_000 + 10 * 40_000)
        #expect(cost("gpt-4o", .priority) == nil)
        #expect(cost("gpt-5", .unpriced) == nil)
        #expect(cost("gpt-4o", .standard) == 100 * 2_500 + 10 * 10_000)
        #expect(t.price(for: "gpt-5")?.forTier(.priority)?.cachedInput == 250_000_000)
        #expect(t.price(for: "gpt-5")?.forTier(.priority)?.cacheWrite == 2_500_000_000, "defaults to the priority input price")
    }

    /// Audio and images are billed at their own rates: gpt-4o-mini-audio-preview takes $0.15 / $0.60 for text and
    /// $10 / $20 for audio; OpenAI reports the audio parts in the usage details, Gemini in its counts by modality.
    /// Without `audioInput` / `audioOutput` / `imageOutput` a part is priced at the text rate (a request with audio
    /// is not admitted so under a dollar budget: `anAudioRequestNeedsAudioPricesUnderADollarBudget`).
    @Test func audioAndImagePartsArePricedAtTheirOwnRates() throws {
        let t = try table(#"{"gpt-4o-mini-audio*": {"input": 0.15, "output": 0.60, "audioInput": 10, "audioOutput": 20}, "# +
                          #""gemini-2.5-flash-image": {"input": 0.30, "output": 2.50, "imageOutput": 30}, "plain": {"input": 1, "output": 2}}"#)
        let book = PriceBook(table: t)
        let chat = tapped(.openai, #"data: {"id":"c","model":"gpt-4o-mini-audio-preview","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":800},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":400}}}"# + "\n\ndata: [DONE]\n\n")
        #expect(chat.usage().audioPrompt == 800 && chat.usage().audioCompletion == 400)
        #expect(ExchangeCost(chat.usage(), reported: chat.reportedModel, requested: nil, prices: book).nanoUSD
                == 200 * 150 + 800 * 10_000 + 100 * 600 + 400 * 20_000)
        let gemini = tapped(.gemini, #"data: {"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":1300,"promptTokensDetails":[{"modality":"TEXT","tokenCount":100}],"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":10},{"modality":"IMAGE","tokenCount":1290}]},"modelVersion":"gemini-2.5-flash-image"}"# + "\r\n\r\n")
        #expect(gemini.usage().imageCompletion == 1290 && gemini.usage().audioPrompt == nil)
        #expect(ExchangeCost(gemini.usage(), reported: gemini.reportedModel, requested: nil, prices: book).nanoUSD
                == 100 * 300 + 10 * 2_500 + 1290 * 30_000)
        let usage = Usage(prompt: 100, completion: 10, audioPrompt: 60, audioCompletion: 5, imageCompletion: 5, source: .provider)
        #expect(ExchangeCost(usage, reported: "plain", requested: nil, prices: book).nanoUSD == 100 * 1_000 + 10 * 2_000,
                "no audio or image prices: the text ones")
        #expect(t.price(for: "gpt-4o-mini-audio-preview")?.pricesAudio == true)
        #expect(t.price(for: "plain")?.pricesAudio == false)
    }

    /// Under a dollar budget a request that brings or asks for audio needs its model's audio prices: priced as text,
    /// it would cost 8 to 66 times less than its bill. A token budget, or a model with audio prices, admits it.
    @Test func anAudioRequestNeedsAudioPricesUnderADollarBudget() throws {
        let book = PriceBook(table: try table(#"{"gpt-4o-audio*": {"input": 2.5, "output": 10, "audioInput": 40, "audioOutput": 80}, "# +
                                              #""gpt-4o-mini*": {"input": 0.15, "output": 0.60}}"#))
        let dollars = BudgetConfiguration(perIdentity: BudgetLimits(nanoUSDPerDay: 1_000_000_000))
        let tokens = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000))
        let reservation = RequestBodyPlan.Reservation(tokens: 100, promptTokens: 10, hasCeiling: true)
        func charge(_ model: String, _ budgets: BudgetConfiguration, audio: Bool) -> RelayError? {
            BudgetCharge.of(reservation, budgetKey: "k", budgets: budgets, model: model, prices: book, audio: audio).failure
        }
        #expect(charge("gpt-4o-mini-audio-preview", dollars, audio: true) == .modalityNotPriced)
        #expect(charge("gpt-4o-mini-audio-preview", dollars, audio: false) == nil)
        #expect(charge("gpt-4o-audio-preview", dollars, audio: true) == nil)
        #expect(charge("gpt-4o-mini-audio-preview", tokens, audio: true) == nil)
        #expect(charge("unknown", dollars, audio: true) == .modelNotPriced)
        // Held as if every token were audio: 10 prompt at $40, 90 output at $80 per million.
        let held = try BudgetCharge.of(reservation, budgetKey: "k", budgets: dollars, model: "gpt-4o-audio-preview", prices: book,
                                       audio: true).get()
        #expect(held.charge?.nanoUSD == 10 * 40_000 + 90 * 80_000)
        #expect(held.price?.output == 80_000_000_000, "the guard's steps at the audio output price")
        let text = try BudgetCharge.of(reservation, budgetKey: "k", budgets: dollars, model: "gpt-4o-audio-preview", prices: book).get()
        #expect(text.charge?.nanoUSD == 10 * 2_500 + 90 * 10_000)
    }

    /// Which tokens of a cancelled audio stream were audio is unknown: the estimate counts them all as audio. Past a
    /// long-context threshold, the audio prices the long-context entry lacks are the entry's own.
    @Test func anAudioEstimateIsAllAudioAndLongContextKeepsTheAudioPrices() throws {
        let body = Array(#"{"model":"gpt-4o-audio-preview","stream":true,"modalities":["text","audio"],"audio":{"voice":"alloy"},"messages":[{"role":"user","content":"abcdefgh"}]}"#.utf8)
        let plan = try RequestBodyPlan.make(body, path: "/v1/chat/completions", settings: .init(
            endpoint: .openAIChat, policy: BodyPolicy(), injectsUsage: false, budgets: .init(routeMaxTokens: nil, defaultReserveTokens: 10))).get()
        #expect(plan.usesAudio)
        var meter = UsageMeter(settings: .init())
        meter.requestPlanned(plan, path: "/v1/chat/completions")
        let usage = meter.usage(callReachedProvider: true, outputFloor: 50)
        // 22 characters of strings (the message, "text", "audio", "alloy"): 6 tokens.
        #expect(usage == Usage(prompt: 6, completion: 50, audioPrompt: 6, audioCompletion: 50, source: .estimate))
        let t = try table(#"{"m": {"input": 1, "output": 2, "audioInput": 10, "audioOutput": 20, "longContext": {"above": 100, "input": 3, "output": 4}}}"#)
        let long = Usage(prompt: 200, completion: 10, audioPrompt: 50, audioCompletion: 10, source: .provider)
        #expect(ExchangeCost(long, reported: "m", requested: nil, prices: PriceBook(table: t)).nanoUSD == 150 * 3_000 + 50 * 10_000 + 10 * 20_000)
    }

    /// Which bodies bring or ask for audio, in every provider's shape; never the app's own names.
    @Test func whatCountsAsAnAudioRequest() throws {
        func finds(_ json: String) throws -> Bool { AudioRequest.find(in: try JSONDocument(parsing: Array(json.utf8))) }
        for json in [
            #"{"model":"gpt-4o-audio-preview","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}}"#,
            #"{"modalities":["AUDIO"]}"#, #"{"audio":{"voice":"alloy"}}"#,
            #"{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"mp3"}}]}]}"#,
            #"{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/ogg","data":"AAAA"}}]}]}"#,
            #"{"contents":[{"parts":[{"inline_data":{"mime_type":"Audio/wav","data":"AAAA"}}]}]}"#,
            #"{"contents":[],"generationConfig":{"responseModalities":["AUDIO"]}}"#,
            #"{"contents":[],"generation_config":{"speech_config":{"voice_config":{}}}}"#,
        ] {
            #expect(try finds(json), "\(json)")
        }
        for json in [
            #"{"model":"gpt-4o","messages":[{"role":"user","content":"audio"}]}"#, #"{"modalities":["text"],"audio":null}"#,
            #"{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}],"generationConfig":{"responseModalities":["TEXT","IMAGE"]}}"#,
            #"{"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"input_audio":{}}}}}]}"#,
            #"{"metadata":{"input_audio":"x"}}"#,
            #"{"contents":[{"parts":[{"functionCall":{"name":"f","args":{"input_audio":"x"}}}]}]}"#,
            #"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"input_audio":{"data":"x"}}}]}]}"#,
        ] {
            #expect(try !finds(json), "\(json)")
        }
    }

    /// The tier a body asks for: standard for none and for the values billed at most at standard rates; priority for
    /// `priority` and for anything the relay does not know; read only on the endpoints that take it.
    @Test func theServiceTierABodyAsksFor() throws {
        func tier(_ json: String, _ endpoint: Endpoint = .openAIChat) throws -> ServiceTier {
            RequestBodyPlan.serviceTier(try JSONDocument(parsing: Array(json.utf8)), endpoint: endpoint)
        }
        for value in [#""auto""#, #""default""#, #""flex""#, #""scale""#, #""standard_only""#, "null"] {
            #expect(try tier(#"{"service_tier":\#(value)}"#) == .standard, "\(value)")
        }
        for value in [#""priority""#, #""PRIORITY""#, #""fast""#, "1", "true", #"{"tier":"default"}"#, #""priority""#] {
            #expect(try tier(#"{"service_tier":\#(value)}"#) == .priority, "\(value)")
        }
        #expect(try tier(#"{"model":"m"}"#) == .standard)
        #expect(try tier(#"{"service_tier":"priority"}"#, .openAIResponses) == .priority)
        #expect(try tier(#"{"service_tier":"priority"}"#, .anthropicMessages) == .priority)
        #expect(try tier(#"{"service_tier":"priority"}"#, .free) == .standard)
        #expect(try tier(#"{"a":{"service_tier":"priority"}}"#) == .standard, "only the top level")
        // Gemini reads either spelling; any one that asks for more counts.
        #expect(try tier(#"{"serviceTier":"priority"}"#, .geminiGenerate) == .priority)
        #expect(try tier(#"{"service_tier":"priority"}"#, .geminiGenerate) == .priority)
        #expect(try tier(#"{"serviceTier":"standard","service_tier":"priority"}"#, .geminiGenerate) == .priority)
        #expect(try tier(#"{"serviceTier":"flex"}"#, .geminiGenerate) == .standard)
        #expect(try tier(#"{"serviceTier":"priority"}"#) == .standard, "only Gemini reads serviceTier")
        // Anthropic's fast mode and US-only inference have no price; their standard values (or null) do.
        #expect(try tier(#"{"speed":"fast"}"#, .anthropicMessages) == .unpriced)
        #expect(try tier(#"{"inference_geo":"us"}"#, .anthropicMessages) == .unpriced)
        #expect(try tier(#"{"speed":"standard","inference_geo":"global","service_tier":"auto"}"#, .anthropicMessages) == .standard)
        #expect(try tier(#"{"speed":null,"inference_geo":null}"#, .anthropicMessages) == .standard)
        #expect(try tier(#"{"speed":"fast"}"#, .openAIChat) == .standard, "only Anthropic reads speed")
        #expect(try tier(#"{"service_tier":"priority","speed":"fast"}"#, .anthropicMessages) == .unpriced)
    }

    /// A non-streaming chat completion: 1 234 prompt, 567 completion at 2.50 / 10: 3 085 + 5 670 = 8 755 $/M.
    /// The request's model is the fallback when the body names none.
    @Test func nonStreamingJSONAnswer() throws {
        let t = try table(#"{"gpt-4o": {"input": 2.50, "output": 10}}"#)
        let tap = tapped(.openai, contentType: "application/json",
                         #"{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":567}}"#)
        #expect(tap.reportedModel == "gpt-4o")
        #expect(ExchangeCost(tap.usage(), reported: tap.reportedModel, requested: "x", prices: PriceBook(table: t)).nanoUSD == 8_755_000)
        let nameless = tapped(.openai, contentType: "application/json", #"{"usage":{"prompt_tokens":1234,"completion_tokens":567}}"#)
        #expect(nameless.reportedModel == nil)
        #expect(ExchangeCost(nameless.usage(), reported: nil, requested: "gpt-4o", prices: PriceBook(table: t)).nanoUSD == 8_755_000)
    }

    /// The Responses API names its model in `response.completed`; Azure's first chat chunk (its prompt-filter
    /// results) names an empty one, which is passed over for the next chunk's.
    @Test func theResponsesAPIAndAzuresEmptyFirstModel() {
        let responses = tapped(.openai, "event: response.output_text.delta\n" + #"data: {"type":"response.output_text.delta","delta":"Hi"}"# + "\n\n"
                               + "event: response.completed\n" + #"data: {"type":"response.completed","response":{"id":"r","model":"o3-2025-04-16","usage":{"input_tokens":5,"output_tokens":7}}}"# + "\n\n")
        #expect(responses.reportedModel == "o3-2025-04-16")
        let azure = tapped(.azureOpenAI, #"data: {"choices":[],"model":"","prompt_filter_results":[]}"# + "\n\n"
                           + #"data: {"choices":[{"index":0,"delta":{"content":"Hi"}}],"model":"gpt-4o-2024-11-20"}"# + "\n\n")
        #expect(azure.reportedModel == "gpt-4o-2024-11-20")
        let escaped = tapped(.openai, contentType: "application/json", #"{"model":"gpt\u002d4o","usage":{"prompt_tokens":1,"completion_tokens":1}}"#)
        #expect(escaped.reportedModel == nil, "an escaped name is not read (the request's model prices it)")
    }

    /// The client names the model, the provider reports its dated snapshot, and the table prices the two by
    /// different entries: `o1` exactly, the snapshot only by the cheap default. 1 000 prompt and 1 000 completion
    /// at o1's 15 / 60 = 75 000 $/M = 75 000 000 n$; at the default's 0.10 / 0.40 it would be 500 000 n$. The
    /// higher applies, whichever name it belongs to; a reported model priced above the request still wins.
    @Test func aReportedModelPricedLowerThanTheRequestedOneNeverLowersTheCost() throws {
        let t = try table(#"{"o1": {"input": 15, "output": 60}, "*": {"input": 0.10, "output": 0.40}}"#)
        let usage = Usage(prompt: 1_000, completion: 1_000, source: .provider)
        let book = PriceBook(table: t)
        #expect(ExchangeCost(usage, reported: "o1-2024-12-17", requested: "o1", prices: book)
                == ExchangeCost(nanoUSD: 75_000_000, source: .provider, model: "o1"))
        #expect(ExchangeCost(usage, reported: "o1-2024-12-17", requested: "gpt-4o-mini", prices: book)
                == ExchangeCost(nanoUSD: 500_000, source: .provider, model: "o1-2024-12-17"))
        #expect(ExchangeCost(usage, reported: "o1", requested: "o1-mini", prices: book)
                == ExchangeCost(nanoUSD: 75_000_000, source: .provider, model: "o1"))
        #expect(BudgetAmount.settled(usage, cost: ExchangeCost(usage, reported: "o1-2024-12-17", requested: "o1", prices: book),
                                     admittedPrice: t.price(for: "o1")).nanoUSD == 75_000_000)
    }

    @Test func anUnknownPriceIsUnknownNeverFreeAndCostsRoundUp() throws {
        let t = try table(#"{"cheap": {"input": 0.000001, "output": 0.000001}}"#)
        let usage = Usage(prompt: 3, completion: 0, source: .estimate)
        // 3 tokens × 0.000001 $/M = 3 × 10⁻¹⁵ $: rounded up to one nano-dollar, never down to zero.
        #expect(ExchangeCost(usage, reported: nil, requested: "cheap", prices: PriceBook(table: t)) == ExchangeCost(nanoUSD: 1, source: .estimate, model: "cheap"))
        let unknown = ExchangeCost(usage, reported: "other", requested: "other-too", prices: PriceBook(table: t))
        #expect(unknown.nanoUSD == nil && unknown.source == .none)
        #expect(unknown.logFields.map(\.0) == ["cost_source"], "no cost_usd for an unknown cost")
        let book = PriceBook(table: t)
        #expect(book.firstWarning(for: "other") && !book.firstWarning(for: "other"), "warned once per model")
        #expect(Cost.nanoUSD([(Int.max, 100_000_000_000_000)]) == Int.max, "saturates, never wraps")
    }

    @Test func pricingAndDollarLimitsLoadExactly() throws {
        let c = try relayConfig(#", "pricing": {"gpt-4o-mini": {"input": 0.15, "cachedInput": 0.075, "output": 0.6}}, "#
                                + #""budgets": {"perIdentity": {"usdPerDay": 0.3, "tokensPerDay": 1000}, "total": {"usdPerMonth": 1234.000000001}}"#)
        #expect(c.pricing.table.price(for: "gpt-4o-mini") == ModelPrice(input: 150_000_000, cachedInput: 75_000_000, output: 600_000_000))
        #expect(c.budgets?.perIdentity == BudgetLimits(tokensPerDay: 1000, nanoUSDPerDay: 300_000_000))
        #expect(c.budgets?.total == BudgetLimits(nanoUSDPerMonth: 1_234_000_000_001))
        let fromFile = try relayConfig(#", "pricingFile": "/p.json""#, files: ["/p.json": #"{"m*": {"input": 1, "output": 2}}"#])
        #expect(fromFile.pricing.file == "/p.json" && fromFile.pricing.table.price(for: "m1")?.output == 2_000_000_000)
    }

    @Test func badPricesAreStartUpErrorsWithTheirKeyPaths() {
        #expect(Set(problemPaths(#", "pricing": {"a": {"input": -0.1, "output": 1}, "b": {"input": "NaN", "output": 1}, "# +
                                 #""c": {"input": "0.1", "output": 1}, "d": {"input": 1, "output": 1, "discount": 0.5}, "gpt-*-mini": {"input": 1, "output": 1}, "# +
                                 #""e": {"input": 1}, "f": {"input": 0.0000000001, "output": 1}, "g": {"input": 1e300, "output": 1}, "h": 5, "**": {"input": 1, "output": 1}}"#))
                == ["pricing.a.input", "pricing.b.input", "pricing.c.input", "pricing.d.discount", "pricing.gpt-*-mini",
                    "pricing.e.output", "pricing.f.input", "pricing.g.input", "pricing.h", "pricing.**"])
        #expect(problemPaths(#", "pricing": [1]"#) == ["pricing"])
        #expect(Set(problemPaths(#", "pricing": {"a": {"input": 1, "output": 1, "longContext": {"input": 2, "output": 2}}, "# +
                                 #""b": {"input": 1, "output": 1, "longContext": {"above": 0, "input": 2, "output": 2}}, "# +
                                 #""c": {"input": 1, "output": 1, "longContext": {"above": 1.5, "input": 2, "output": 2}}, "# +
                                 #""d": {"input": 1, "output": 1, "longContext": {"above": 10, "input": 2}}, "# +
                                 #""e": {"input": 1, "output": 1, "longContext": {"above": 10, "input": 2, "output": 2, "longContext": {}}}, "# +
                                 #""f": {"input": 1, "output": 1, "longContext": 5}, "# +
                                 #""g": {"input": 1, "output": 1, "longContext": {"above": 20000000, "input": 2, "output": 2}}, "# +
                                 #""h": {"input": 1, "output": 1, "priority": {"input": 2}}, "# +
                                 #""i": {"input": 1, "output": 1, "priority": {"input": 2, "output": 2, "priority": {}}}, "# +
                                 #""j": {"input": 1, "output": 1, "priority": {"input": 2, "output": 2, "longContext": {"input": 3, "output": 3}}}, "# +
                                 #""k": {"input": 1, "output": 1, "priority": {"input": 2, "output": 2}, "priority": {"input": 2, "output": 2}}}"#))
                == ["pricing.a.longContext.above", "pricing.b.longContext.above", "pricing.c.longContext.above",
                    "pricing.d.longContext.output", "pricing.e.longContext.longContext", "pricing.f.longContext",
                    "pricing.g.longContext.above", "pricing.h.priority.output", "pricing.i.priority.priority",
                    "pricing.j.priority.longContext.above", "pricing.k.priority"])
        #expect(problemPaths(#", "pricingFile": "/p.json""#, files: ["/p.json": #"{"m": {"input": NaN, "output": 1}}"#]) == ["pricingFile"],
                "a bare NaN is not JSON")
        #expect(problemPaths(#", "pricingFile": "/p.json""#, files: ["/p.json": #"{"m": {"input": 1, "output": -2}}"#]) == ["pricingFile.m.output"])
        #expect(problemPaths(#", "pricingFile": "/nowhere""#) == ["pricingFile"])
        #expect(problemPaths(#", "pricing": {}, "pricingFile": "/p.json""#) == ["pricingFile"])
        #expect(Set(problemPaths(#", "pricing": {"m": {"input": 1, "output": 1}}, "budgets": {"perIdentity": {"usdPerDay": -1, "usdPerMonth": "5"}, "total": {"usdPerDay": 2000000}}"#))
                == ["budgets.perIdentity.usdPerDay", "budgets.perIdentity.usdPerMonth", "budgets.total.usdPerDay", "budgets"])
        #expect(problemPaths(#", "budgets": {"perIdentity": {"usdPerDay": 5}}"#) == ["budgets"], "dollar limits need prices")
    }

    @Test func aReloadReplacesTheTableAndABadFileKeepsTheOldOne() {
        let file = Files(["/p.json": #"{"m": {"input": 1, "output": 2}}"#])
        let book = PriceBook(table: PriceTable(), file: "/p.json", readFile: { file.read($0) })
        #expect(book.price(for: "m") == nil)
        guard case .success(1) = book.reload() else { Issue.record("reload failed"); return }
        #expect(book.price(for: "m")?.output == 2_000_000_000)
        file.set("/p.json", #"{"m": {"input": 1, "output": 3}, "n*": {"input": 5, "output": 5}}"#)
        _ = book.reload()
        #expect(book.price(for: "m")?.output == 3_000_000_000, "a changed file is read again")
        #expect(book.price(for: "n-1")?.input == 5_000_000_000)
        file.set("/p.json", #"{"m": {"input": 1, "output": "free"}}"#)
        guard case .failure(let error) = book.reload() else { Issue.record("a bad file was accepted"); return }
        #expect(error.problems == ["pricingFile.m.output: must be a number of US dollars per million tokens, from 0 to 100000"])
        #expect(book.price(for: "m")?.output == 3_000_000_000, "the old table stays in force")
        file.set("/p.json", nil)
        guard case .failure = book.reload() else { Issue.record("a missing file was accepted"); return }
        #expect(book.price(for: "n-2")?.input == 5_000_000_000)
    }

    /// A price reload removed the model while its request ran: the budget is charged at the admitted price
    /// (`BudgetAmount.settled`), and the cost the log and metrics show is that same amount, not "none".
    @Test func aModelRemovedByAReloadIsPricedAtItsAdmittedPrice() {
        let usage = Usage(prompt: 1_000, completion: 500, source: .provider)
        let admitted = ModelPrice(input: 2_500_000_000, output: 10_000_000_000)   // $2.50 and $10 per million
        let empty = PriceBook(table: PriceTable())
        let cost = ExchangeCost(usage, reported: "gpt-4o-2024-08-06", requested: "gpt-4o", prices: empty, admitted: admitted)
        #expect(cost == ExchangeCost(nanoUSD: 7_500_000, source: .provider, model: "gpt-4o"))
        #expect(BudgetAmount.settled(usage, cost: cost, admittedPrice: admitted).nanoUSD == 7_500_000)
        #expect(ExchangeCost(usage, reported: "gpt-4o", requested: "gpt-4o", prices: empty).source == .none,
                "without an admitted price, still unknown: never free")
    }
}

/// A file system of a few files, changed between reloads.
final class Files: @unchecked Sendable {
    // Invariant: touched under `lock` only.
    private let lock = NSLock()
    private var files: [String: String]
    init(_ files: [String: String]) { self.files = files }
    func set(_ path: String, _ text: String?) { lock.lock(); files[path] = text; lock.unlock() }
    func read(_ path: String) -> [UInt8]? { lock.lock(); defer { lock.unlock() }; return files[path].map { Array($0.utf8) } }
}
