// include_usage injection, through the body plan on an injecting route: one minimal byte edit, none at all, or a
// refusal when the body could be read two ways (issue 18: a nested duplicate once turned usage off).
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing

@Suite struct IncludeUsageInjectionTests {
    enum Outcome: Sendable, Equatable {
        case edited(String)
        case untouched
        case refused(String)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var body: String
        var outcome: Outcome
        var testDescription: String { body }
    }

    static let cases: [Case] = [
        Case(body: #"{"model":"gpt-4o","stream":true,"messages":[]}"#,
             outcome: .edited(#"{"model":"gpt-4o","stream":true,"messages":[],"stream_options":{"include_usage":true}}"#)),
        Case(body: "{\n  \"stream\" : true ,\n  \"messages\": [ ]\n}\n",
             outcome: .edited("{\n  \"stream\" : true ,\n  \"messages\": [ ],\"stream_options\":{\"include_usage\":true}\n}\n")),
        Case(body: #"{"stream":true,"stream_options":null}"#, outcome: .edited(#"{"stream":true,"stream_options":{"include_usage":true}}"#)),
        Case(body: #"{"stream":true,"stream_options":{}}"#, outcome: .edited(#"{"stream":true,"stream_options":{"include_usage":true}}"#)),
        Case(body: #"{"stream":true,"stream_options":{ }}"#, outcome: .edited(#"{"stream":true,"stream_options":{"include_usage":true }}"#)),
        Case(body: #"{"stream_options":{"include_obfuscation":false},"stream":true}"#,
             outcome: .edited(#"{"stream_options":{"include_usage":true,"include_obfuscation":false},"stream":true}"#)),
        Case(body: #"{"stream":true,"stream_options":{"include_usage": false}}"#,
             outcome: .edited(#"{"stream":true,"stream_options":{"include_usage": true}}"#)),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":null}}"#,
             outcome: .edited(#"{"stream":true,"stream_options":{"include_usage":true}}"#)),
        // Escaped key names are the same keys: the provider reads `stream_options.include_usage: false`.
        Case(body: #"{"stre\u0061m":true,"stream_opti\u006fns":{"include_\u0075sage":false}}"#,
             outcome: .edited(#"{"stre\u0061m":true,"stream_opti\u006fns":{"include_\u0075sage":true}}"#)),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":true}}"#, outcome: .untouched),
        Case(body: #"{"stream":false,"messages":[]}"#, outcome: .untouched),
        Case(body: #"{"messages":[]}"#, outcome: .untouched),
        Case(body: #"{"stream":true,"metadata":{"stream_options":null}}"#,
             outcome: .edited(#"{"stream":true,"metadata":{"stream_options":null},"stream_options":{"include_usage":true}}"#)),
        // Refused: what a provider could read differently, or a switch that is not a boolean.
        Case(body: #"{"stream":"true"}"#, outcome: .refused("invalid_stream_option")),
        Case(body: #"{"stream":true,"stream_options":"x"}"#, outcome: .refused("invalid_stream_option")),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":1}}"#, outcome: .refused("invalid_stream_option")),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":"false"}}"#, outcome: .refused("invalid_stream_option")),
        Case(body: #"{"stream":true,"stream":true}"#, outcome: .refused("ambiguous_body")),
        Case(body: #"{"stream":true,"stream_options":{},"stream_options":{}}"#, outcome: .refused("ambiguous_body")),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":true,"include_usage":false}}"#, outcome: .refused("ambiguous_body")),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":true,"include_\u0075sage":false}}"#, outcome: .refused("ambiguous_body")),
        Case(body: #"{"stream":true,"#, outcome: .refused("invalid_json")),
        Case(body: #"{"stream":true} {"stream":false}"#, outcome: .refused("ambiguous_body")),
    ]

    static func plan(_ body: String, path: String = "/v1/chat/completions") -> Result<RequestBodyPlan, RelayError> {
        RequestBodyPlan.make(Array(body.utf8), path: path, settings: .init(
            endpoint: Endpoint(method: "POST", path: path), policy: BodyPolicy(), injectsUsage: true, budgets: nil))
    }

    @Test(arguments: cases)
    func edits(_ c: Case) throws {
        switch (Self.plan(c.body), c.outcome) {
        case (.success(let plan), .edited(let expected)):
            #expect(String(decoding: plan.body, as: UTF8.self) == expected)
            #expect(plan.injected)
        case (.success(let plan), .untouched):
            #expect(plan.body == Array(c.body.utf8))
            #expect(!plan.injected)
        case (.failure(let error), .refused(let code)):
            #expect(error.code == code)
            #expect(error.status == 400)
        case (let got, let want):
            Issue.record("got \(got), want \(want)")
        }
    }

    /// Injection is chosen by the endpoint's shape: OpenAI chat on any preset's path, with or without a trailing slash.
    @Test(arguments: [("/v1/chat/completions", true), ("/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", true),
                      ("/v1beta/openai/chat/completions", true), ("/v1/chat/completions/", true),
                      ("/v1/completions", true), ("/v1/responses", false), ("/v1/messages", false), ("/v1/models", false),
                      ("/v1/chat/completions/x", false)])
    func paths(_ c: (String, Bool)) throws {
        let plan = try Self.plan(#"{"stream":true}"#, path: c.0).get()
        #expect(plan.injected == c.1)
    }
}

@Suite struct UsageLabelsTests {
    @Test(arguments: [
        ("gpt-4o", ["gpt-4o", "gpt-4o-mini"], "gpt-4o"), ("gpt-5", ["gpt-4o"], "other"), (nil, ["gpt-4o"], "other"),
        ("gpt-4o", nil, "other"), ("gpt-4o", [], "other"), ("K", ["\u{212A}"], "other"),
    ] as [(String?, [String]?, String)])
    func modelLabelIsTheAllowlistOrOther(_ c: (String?, [String]?, String)) {
        #expect(UsageLabels.model(c.0, allowlist: c.1) == c.2)
    }

    @Test(arguments: [
        (#"{"model":"gpt-4o","stream":true}"#, "/v1/chat/completions", "gpt-4o"),
        (#"{"m\u006fdel":"gpt-4o"}"#, "/v1/chat/completions", "gpt-4o"),
        (#"{"model":7}"#, "/v1/chat/completions", nil),
        (#"{"contents":[]}"#, "/v1beta/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash"),
    ] as [(String, String, String?)])
    func requestedModel(_ c: (String, String, String?)) throws {
        let plan = try IncludeUsageInjectionTests.plan(c.0, path: c.1).get()
        #expect((plan.model ?? UsageLabels.requestedModel(path: c.1)) == c.2)
    }

    @Test func aGeminiPathNamesItsModel() {
        #expect(UsageLabels.requestedModel(path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse") == "gemini-2.5-flash")
        #expect(UsageLabels.requestedModel(path: "/v1/models") == nil)
    }
}
