// include_usage injection: one minimal byte edit of the top-level object, or none at all.
import Relay
import Testing

@Suite struct IncludeUsageInjectionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var body: String
        var expected: String?   // nil: untouched
        var testDescription: String { body }
    }

    static let cases: [Case] = [
        Case(body: #"{"model":"gpt-4o","stream":true,"messages":[]}"#,
             expected: #"{"model":"gpt-4o","stream":true,"messages":[],"stream_options":{"include_usage":true}}"#),
        Case(body: "{\n  \"stream\" : true ,\n  \"messages\": [ ]\n}\n",
             expected: "{\n  \"stream\" : true ,\n  \"messages\": [ ],\"stream_options\":{\"include_usage\":true}\n}\n"),
        Case(body: #"{"stream":true,"stream_options":null}"#, expected: #"{"stream":true,"stream_options":{"include_usage":true}}"#),
        Case(body: #"{"stream":true,"stream_options":{}}"#, expected: #"{"stream":true,"stream_options":{"include_usage":true}}"#),
        Case(body: #"{"stream":true,"stream_options":{ }}"#, expected: #"{"stream":true,"stream_options":{"include_usage":true }}"#),
        Case(body: #"{"stream_options":{"include_obfuscation":false},"stream":true}"#,
             expected: #"{"stream_options":{"include_usage":true,"include_obfuscation":false},"stream":true}"#),
        Case(body: #"{"stream":true,"stream_options":{"include_usage": false}}"#,
             expected: #"{"stream":true,"stream_options":{"include_usage": true}}"#),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":null}}"#,
             expected: #"{"stream":true,"stream_options":{"include_usage":true}}"#),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":true}}"#, expected: nil),
        Case(body: #"{"stream":false,"messages":[]}"#, expected: nil),
        Case(body: #"{"messages":[]}"#, expected: nil),
        Case(body: #"{"stream":"true"}"#, expected: nil),
        Case(body: #"{"stream":true,"stream":true}"#, expected: nil),
        Case(body: #"{"stream":true,"stream_options":"x"}"#, expected: nil),
        Case(body: #"{"stream":true,"stream_options":{},"stream_options":{}}"#, expected: nil),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":1}}"#, expected: nil),
        Case(body: #"{"stream":true,"stream_options":{"include_usage":false,"include_usage":false}}"#, expected: nil),
        Case(body: #"{"stream":true,"#, expected: nil),
        Case(body: #"{"stream":true,"metadata":{"stream_options":null}}"#,
             expected: #"{"stream":true,"metadata":{"stream_options":null},"stream_options":{"include_usage":true}}"#),
    ]

    @Test(arguments: cases)
    func edits(_ c: Case) throws {
        let result = IncludeUsageInjection.apply(to: Array(c.body.utf8))
        #expect(String(decoding: result.body, as: UTF8.self) == (c.expected ?? c.body))
        #expect(result.injected == (c.expected != nil))
        if c.expected != nil {
            // Still exactly one valid JSON object.
            #expect(throws: Never.self) { try JSONTopLevel.scan(result.body) }
        }
    }

    @Test(arguments: [("/v1/chat/completions", true), ("/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", true),
                      ("/v1/completions", true), ("/v1/responses", false), ("/v1/messages", false), ("/v1/models", false),
                      ("/v1/chat/completions/x", false)])
    func paths(_ c: (String, Bool)) {
        #expect(IncludeUsageInjection.applies(toPath: c.0) == c.1)
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
        (#"{"model":"a","model":"b"}"#, "/v1/chat/completions", nil),
        (#"{"model":7}"#, "/v1/chat/completions", nil),
        ("", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-2.5-flash"),
        (#"{"contents":[]}"#, "/v1beta/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash"),
        ("", "/v1/models", nil),
    ] as [(String, String, String?)])
    func requestedModel(_ c: (String, String, String?)) {
        #expect(UsageLabels.requestedModel(body: Array(c.0.utf8), path: c.1) == c.2)
    }
}
