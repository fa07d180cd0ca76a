// The reservation a request asks for: what a client can write in its body must never crash the relay or buy
// more output than it reserves.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing
import JSON
import Usage

@Suite struct ExchangeAdmissionTests {
    static let chat = "/v1/chat/completions"

    static func body(_ members: String) -> [UInt8] {
        Array(#"{"model":"gpt-4o",\#(members),"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
    }

    /// The plan of a request to `path` with budgets (10 tokens by default).
    static func plan(_ body: [UInt8], path: String = chat, routeMaxTokens: Int? = nil,
                     policy: BodyPolicy = BodyPolicy()) -> Result<RequestBodyPlan, RelayError> {
        RequestBodyPlan.make(body, path: path, settings: .init(
            endpoint: Endpoint(method: "POST", path: path), policy: policy, injectsUsage: false,
            budgets: .init(routeMaxTokens: routeMaxTokens, defaultReserveTokens: 10)))
    }

    static func reservation(_ body: [UInt8], path: String = chat, routeMaxTokens: Int? = nil) -> RequestBodyPlan.Reservation {
        switch plan(body, path: path, routeMaxTokens: routeMaxTokens) {
        case .success(let p): return p.reservation
        case .failure(let e):
            Issue.record("refused: \(e.code)")
            return .init(tokens: 0, promptTokens: 0, hasCeiling: false)
        }
    }

    /// `max_tokens` at Int.max plus the prompt estimate once trapped on overflow: one request from any client
    /// took the whole relay down (every stream of every user with it).
    @Test(arguments: ["9223372036854775807", "9223372036854775806", "99999999999999999999"])
    func aHugeCeilingSaturatesInsteadOfTrapping(_ ceiling: String) {
        let r = Self.reservation(Self.body(#""max_tokens":\#(ceiling)"#))
        #expect(r.hasCeiling)
        #expect(r.tokens >= RequestBodyPlan.maxReservation && r.tokens > 1_000_000_000_000, "still refused by any budget")
        #expect(r.tokens <= 2 * RequestBodyPlan.maxReservation, "with room left for extensions and sums")
    }

    /// OpenAI's `n` asks for n choices, each up to the ceiling, and bills them all: the reservation covers n of them.
    @Test func nChoicesReserveNTimesTheCeiling() {
        let one = Self.reservation(Self.body(#""max_tokens":100"#))
        let eight = Self.reservation(Self.body(#""max_tokens":100,"n":8"#))
        #expect(eight.outputTokens == 8 * one.outputTokens)
        #expect(eight.hasCeiling)
        let noCeiling = Self.reservation(Self.body(#""n":4"#), routeMaxTokens: 50)
        #expect(noCeiling.outputTokens == 4 * 50, "the route's limit is per choice too")
        let huge = Self.reservation(Self.body(#""max_tokens":4611686018427387903,"n":128"#))
        #expect(huge.tokens >= RequestBodyPlan.maxReservation && huge.tokens <= 2 * RequestBodyPlan.maxReservation)
    }

    /// Legacy completions' `best_of` has the provider generate (and bill) that many answers to return `n`: the
    /// reservation covers the larger of the two.
    @Test func bestOfReservesWhatIsGenerated() {
        let path = "/v1/completions"
        func legacy(_ members: String) -> RequestBodyPlan.Reservation {
            Self.reservation(Array(#"{"model":"gpt-3.5-turbo-instruct","prompt":"hi",\#(members)}"#.utf8), path: path)
        }
        #expect(legacy(#""max_tokens":100,"best_of":20"#).outputTokens == 20 * 100)
        #expect(legacy(#""max_tokens":100,"best_of":3,"n":2"#).outputTokens == 3 * 100)
        #expect(legacy(#""max_tokens":100,"best_of":1,"n":4"#).outputTokens == 4 * 100)
        #expect(legacy(#""max_tokens":100"#).outputTokens == 100)
    }

    /// Each endpoint's own ceiling and choices keys are reserved (here 10 per choice is the default): the Responses
    /// API's `max_output_tokens` and Gemini's `generationConfig.maxOutputTokens` × `candidateCount` once went
    /// unread, reserving the default while the provider was allowed far more. A key the endpoint ignores is no
    /// ceiling: it would reserve little and bound nothing.
    @Test func eachEndpointsCeilingKeysAreReserved() {
        func output(_ body: String, _ provider: Provider, _ path: String) -> (Int, Bool) {
            let r = Self.reservation(Array(body.utf8), path: path)
            return (r.outputTokens, r.hasCeiling)
        }
        let gemini = "/v1beta/models/gemini-2.5-flash:generateContent"
        #expect(output(#"{"model":"o3","input":"Hi","max_output_tokens":700}"#, .openai, "/v1/responses") == (700, true))
        #expect(output(#"{"model":"o3","input":"Hi","max_output_tokens":700}"#, .azureOpenAI, "/openai/responses?api-version=preview") == (700, true))
        #expect(output(#"{"contents":[],"generationConfig":{"maxOutputTokens":300,"candidateCount":2}}"#, .gemini, gemini) == (600, true))
        #expect(output(#"{"contents":[],"generation_config":{"max_output_tokens":300,"candidate_count":3}}"#, .gemini, gemini) == (900, true))
        #expect(output(#"{"contents":[],"generationConfig":{"candidateCount":4}}"#, .gemini, gemini) == (40, false))
        #expect(output(#"{"model":"gpt-4o","max_output_tokens":1,"messages":[]}"#, .openai, Self.chat) == (10, false), "chat ignores it")
        #expect(output(#"{"model":"o3","max_tokens":1,"input":"Hi"}"#, .openai, "/v1/responses") == (10, false), "Responses ignores it")
        #expect(output(#"{"contents":[],"maxOutputTokens":5}"#, .gemini, gemini) == (10, false), "not inside generationConfig")
        #expect(output(#"{"model":"claude","max_tokens":900,"max_completion_tokens":1,"messages":[]}"#, .anthropic, "/v1/messages") == (900, true))
    }

    /// Gemini reads an integer written as a string (proto3's JSON): `"candidateCount": "8"` is eight answers. Such a
    /// count once went unread, reserving one default answer for eight of up to 65 536 tokens. Anything but a JSON
    /// number or `null` in a ceiling or choices key is refused, on every endpoint.
    @Test func aCountWrittenAsAStringIsRefused() {
        let gemini = "/v1beta/models/gemini-2.5-pro:generateContent"
        for (body, key) in [(#"{"contents":[],"generationConfig":{"candidateCount":"8","maxOutputTokens":100}}"#, "candidateCount"),
                            (#"{"contents":[],"generationConfig":{"maxOutputTokens":"65536"}}"#, "maxOutputTokens"),
                            (#"{"contents":[],"generation_config":{"candidate_count":"8"}}"#, "candidateCount"),
                            (#"{"contents":[],"generationConfig":{"candidateCount":true}}"#, "candidateCount"),
                            (#"{"contents":[],"generationConfig":{"maxOutputTokens":-1}}"#, "maxOutputTokens")] {
            #expect(Self.plan(Array(body.utf8), path: gemini).failure == .invalidCount(key), "\(body)")
        }
        #expect(Self.plan(Self.body(#""n":"2""#)).failure == .invalidCount("n"))
        #expect(Self.plan(Self.body(#""max_tokens":"100""#)).failure == .invalidCount("max_tokens"))
        #expect(Self.plan(Array(#"{"model":"m","prompt":"hi","best_of":"20"}"#.utf8), path: "/v1/completions").failure == .invalidCount("best_of"))
        #expect(Self.plan(Array(#"{"contents":[],"generationConfig":{"candidateCount":null,"maxOutputTokens":null}}"#.utf8), path: gemini).failure == nil)
        #expect(Self.plan(Self.body(#""n":2,"max_tokens":100"#)).failure == nil)
    }

    /// A ceiling of 0 would reserve no output, and Gemini reads an explicit 0 as no ceiling at all (proto3's
    /// default): such a stream once spent 60 000 tokens against a reservation of the prompt alone.
    @Test func aCeilingBelowOneIsRefused() {
        let gemini = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        for (body, key) in [(#"{"contents":[],"generationConfig":{"maxOutputTokens":0}}"#, "maxOutputTokens"),
                            (#"{"contents":[],"generation_config":{"max_output_tokens":0.0}}"#, "maxOutputTokens")] {
            #expect(Self.plan(Array(body.utf8), path: gemini).failure == .ceilingBelowOne(key), "\(body)")
        }
        #expect(Self.plan(Self.body(#""max_tokens":0"#)).failure == .ceilingBelowOne("max_tokens"))
        #expect(Self.plan(Self.body(#""max_completion_tokens":0,"max_tokens":50"#)).failure == .ceilingBelowOne("max_completion_tokens"))
        #expect(Self.plan(Array(#"{"model":"o3","input":"hi","max_output_tokens":0}"#.utf8), path: "/v1/responses").failure
                == .ceilingBelowOne("max_output_tokens"))
        #expect(Self.plan(Array(#"{"model":"c","max_tokens":0,"messages":[]}"#.utf8), path: "/v1/messages").failure == .ceilingBelowOne("max_tokens"))
        #expect(Self.plan(Self.body(#""max_tokens":1"#)).failure == nil)
        #expect(Self.plan(Self.body(#""n":0,"max_tokens":5"#)).failure == nil, "no choices asked is one choice")
    }

    /// A ceiling or choices key given twice (at any depth, or as two spellings of one field): the provider reads one
    /// (often the last, maybe `null`), the relay cannot know which, so the request is refused rather than reserved
    /// for the smaller.
    @Test func aDuplicatedCeilingKeyIsRefused() {
        let gemini = "/v1beta/models/m:generateContent"
        #expect(Self.plan(Self.body(#""max_tokens":10,"max_tokens":null"#)).failure == .ambiguousBody)
        #expect(Self.plan(Self.body(#""n":1,"n":64"#)).failure == .ambiguousBody)
        #expect(Self.plan(Array(#"{"generationConfig":{},"generation_config":{"maxOutputTokens":9}}"#.utf8), path: gemini).failure == .ambiguousBody)
        #expect(Self.plan(Array(#"{"generationConfig":{"maxOutputTokens":9,"max_output_tokens":null}}"#.utf8), path: gemini).failure == .ambiguousBody)
        #expect(Self.plan(Self.body(#""max_tokens":10,"max_completion_tokens":20"#)).failure == nil)
    }

    /// Gemini runs the model its path names, whatever the body says. A generate path whose model the relay cannot
    /// read (a tuned model, a Vertex endpoint) once fell back to the body's `model`: a client wrote the cheapest
    /// priced name there and was reserved and charged at its price for whatever the path ran. Such a request names
    /// no model, so a dollar budget refuses it (403 `model_not_priced`).
    @Test func aGeminiPathWithoutAReadableModelIsNeverPricedByTheBody() throws {
        let body = Array(#"{"model":"gemini-2.0-flash-lite","contents":[{"parts":[{"text":"hi"}]}]}"#.utf8)
        var table = PriceTable()
        table.add("gemini-2.0-flash-lite", ModelPrice(input: 75_000_000, output: 300_000_000))
        let budgets = BudgetConfiguration(perIdentity: BudgetLimits(nanoUSDPerDay: 1_000_000_000))
        for path in ["/v1beta/tunedModels/my-tune:generateContent",
                     "/v1/projects/p/locations/us-central1/endpoints/123:streamGenerateContent"] {
            let plan = try Self.plan(body, path: path).get()
            #expect(plan.model == nil, "\(path)")
            let charge = BudgetCharge.of(plan.reservation, budgetKey: "k", budgets: budgets, model: plan.model,
                                         prices: PriceBook(table: table))
            #expect(charge.failure == .modelNotPriced, "\(path)")
        }
        #expect(try Self.plan(body, path: "/v1beta/models/gemini-2.5-pro:generateContent").get().model == "gemini-2.5-pro")
    }

    /// The body's bytes ÷ 4 is the least a request reserves; an inline image's payload counts in the prompt (its
    /// characters ÷ 4, at least `budgets.mediaTokens`).
    @Test func theReservationNeverGoesBelowTheBodysBytesOverFour() {
        let image = String(repeating: "A", count: 40_000)
        let body = Array(#"{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,\#(image)"}}]}]}"#.utf8)
        let r = Self.reservation(body)
        #expect(r.promptTokens == (22 + 40_000 + 3) / 4, "the data URL's characters ÷ 4")
        #expect(r.tokens == (body.count + 3) / 4)
    }

    /// An image by URL is a few bytes in the body and hundreds to tens of thousands of tokens at the provider: the
    /// reservation counts it at `budgets.mediaTokens` (default 2 000), as a stream cancelled before the counts is.
    @Test func anImageByURLReservesTheMediaAllowance() {
        let body = Array(#"{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}"#.utf8)
        let r = Self.reservation(body)
        #expect(r.promptTokens == 1 + BudgetConfiguration.defaultMediaTokens)
        #expect(r.tokens == 5 + 1 + BudgetConfiguration.defaultMediaTokens)
    }

    /// The ceiling written into a request the guard cannot watch, byte for byte: inserted after the last member (or
    /// into `generationConfig`), a `null` replaced, everything else untouched; event streams and endpoints that take
    /// no such key are left alone.
    @Test(arguments: [
        // OpenAI chat, not streaming: max_completion_tokens (o-series models reject max_tokens).
        (Provider.openai, "/v1/chat/completions", #"{"model":"o3","messages":[] }"#, #"{"model":"o3","messages":[],"max_completion_tokens":64 }"#),
        (.openai, "/v1/chat/completions", #"{"model":"o3","max_tokens":null,"stream":false}"#, #"{"model":"o3","max_tokens":null,"stream":false,"max_completion_tokens":64}"#),
        (.openai, "/v1/chat/completions", #"{"max_completion_tokens":null,"model":"o3"}"#, #"{"max_completion_tokens":64,"model":"o3"}"#),
        (.openai, "/v1/chat/completions", " {} ", #" {"max_completion_tokens":64} "#),
        (.azureOpenAI, "/openai/deployments/d/chat/completions?api-version=2024-10-21", #"{"messages":[]}"#, #"{"messages":[],"max_completion_tokens":64}"#),
        (.openai, "/v1/responses", #"{"model":"o3","input":"Hi"}"#, #"{"model":"o3","input":"Hi","max_output_tokens":64}"#),
        // Gemini: generationConfig.maxOutputTokens, created, merged or replacing null.
        (.gemini, "/v1beta/models/m:generateContent", #"{"contents":[]}"#, #"{"contents":[],"generationConfig":{"maxOutputTokens":64}}"#),
        (.gemini, "/v1beta/models/m:generateContent", #"{"contents":[],"generationConfig":{"temperature":0.2}}"#, #"{"contents":[],"generationConfig":{"temperature":0.2,"maxOutputTokens":64}}"#),
        (.gemini, "/v1beta/models/m:generateContent", #"{"generation_config":{ },"contents":[]}"#, #"{"generation_config":{"maxOutputTokens":64 },"contents":[]}"#),
        (.gemini, "/v1beta/models/m:generateContent", #"{"generationConfig":null}"#, #"{"generationConfig":{"maxOutputTokens":64}}"#),
        (.gemini, "/v1beta/models/m:streamGenerateContent", #"{"contents":[]}"#, #"{"contents":[],"generationConfig":{"maxOutputTokens":64}}"#),
        (.gemini, "/v1beta/models/m:streamGenerateContent?alt=json", #"{"contents":[]}"#, #"{"contents":[],"generationConfig":{"maxOutputTokens":64}}"#),
        // generateContent answers in one piece, as one event with alt=sse: a cut could come only after all of it.
        (.gemini, "/v1beta/models/m:generateContent?alt=sse", #"{"contents":[]}"#, #"{"contents":[],"generationConfig":{"maxOutputTokens":64}}"#),
        (.gemini, "/v1beta/models/m%3AgenerateContent?alt=sse", #"{"contents":[]}"#, #"{"contents":[],"generationConfig":{"maxOutputTokens":64}}"#),
        // Left alone: event streams (the guard watches them), endpoints without the key, values the provider refuses.
        (.openai, "/v1/chat/completions", #"{"model":"o3","stream":true}"#, #"{"model":"o3","stream":true}"#),
        (.openai, "/v1/responses", #"{"model":"o3","stream":true}"#, #"{"model":"o3","stream":true}"#),
        (.gemini, "/v1beta/models/m:streamGenerateContent?alt=sse", #"{"contents":[]}"#, #"{"contents":[]}"#),
        (.gemini, "/v1beta/models/m%3astreamGenerateContent?alt=sse", #"{"contents":[]}"#, #"{"contents":[]}"#),
        (.anthropic, "/v1/messages", #"{"model":"claude","messages":[]}"#, #"{"model":"claude","messages":[]}"#),
        (.openai, "/v1/embeddings", #"{"model":"e","input":"Hi"}"#, #"{"model":"e","input":"Hi"}"#),
        (.openai, "/v1/completions", #"{"model":"i","prompt":"Hi"}"#, #"{"model":"i","prompt":"Hi"}"#),
        (.gemini, "/v1beta/models/m:countTokens", #"{"contents":[]}"#, #"{"contents":[]}"#),
        (.openai, "/v1/chat/completions", #"{"max_completion_tokens":"9"}"#, #"{"max_completion_tokens":"9"}"#),
        (.gemini, "/v1beta/models/m:generateContent", #"{"generationConfig":[]}"#, #"{"generationConfig":[]}"#),
    ])
    func theReservedCeilingIsWrittenIntoRequestsTheGuardCannotWatch(_ provider: Provider, _ path: String, _ body: String, _ bounded: String) {
        let d = try! JSONDocument(parsing: Array(body.utf8))
        var edits = JSONEdits()
        OutputCeiling(endpoint: Endpoint(method: "POST", path: path), path: path).bound(d, path: path, ceiling: 64, into: &edits)
        #expect(edits.applied(to: Array(body.utf8)) == Array(bounded.utf8))
        _ = provider
    }

    /// A body the relay cannot edit unambiguously is refused rather than sent on without a ceiling.
    @Test func anUneditableBodyIsRefused() {
        #expect(Self.plan(Array("{\"model\":\"o3\"".utf8)).failure == .invalidJSON)
        #expect(Self.plan([0xEF, 0xBB, 0xBF] + Array("{}".utf8)).failure == .ambiguousBody)
        #expect(Self.plan(Array(#"{"generationConfig":{},"generationConfig":{}}"#.utf8), path: "/v1beta/models/m:generateContent").failure
                == .ambiguousBody)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
