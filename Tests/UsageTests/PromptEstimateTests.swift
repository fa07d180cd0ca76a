import Testing
@testable import Usage

@Suite("PromptEstimate")
struct PromptEstimateTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var provider: Provider
        var body: String
        var characters: Int?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "OpenAI chat: strings and text parts", provider: .openai, body: #"""
            {"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},
             {"role":"user","content":[{"type":"text","text":"Hi \u00e9\n"},{"type":"image_url","image_url":{"url":"data:xx"}}]},
             {"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{}"}}]}],"stream":true}
            """#, characters: 9 + 5),
        Case(name: "OpenAI Responses: instructions and input items", provider: .openai, body: #"""
            {"model":"gpt-4.1","instructions":"abc","input":[{"role":"user","content":"hello"},
             {"role":"user","content":[{"type":"input_text","text":"xy"}]}]}
            """#, characters: 3 + 5 + 2),
        Case(name: "OpenAI Responses: input as a string", provider: .azureOpenAI, body: #"{"input":"four"}"#, characters: 4),
        Case(name: "Anthropic: system blocks, messages, tool results", provider: .anthropic, body: #"""
            {"model":"claude","system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"abcd"},
             {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"res"}]},
             {"type":"text","text":"ok"}]}],"max_tokens":10}
            """#, characters: 3 + 4 + 3 + 2),
        Case(name: "Anthropic: system as a string", provider: .anthropic, body: #"{"system":"12345","messages":[]}"#, characters: 5),
        Case(name: "Gemini: contents and systemInstruction", provider: .gemini, body: #"""
            {"systemInstruction":{"parts":[{"text":"ab"}]},"contents":[{"role":"user","parts":[{"text":"cde"},
             {"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},{"role":"model","parts":[{"text":"f"}]}]}
            """#, characters: 2 + 3 + 1),
        Case(name: "Not JSON", provider: .openai, body: "hello", characters: nil),
        Case(name: "Truncated JSON", provider: .openai, body: #"{"messages":[{"content":"abc"}"#, characters: nil),
        Case(name: "A JSON array", provider: .openai, body: "[1]", characters: nil),
        Case(name: "No messages", provider: .openai, body: #"{"model":"x"}"#, characters: 0),
    ]

    @Test(arguments: cases)
    func characters(_ c: Case) {
        #expect(PromptEstimate.characters(requestBody: Array(c.body.utf8), provider: c.provider) == c.characters)
    }

    @Test(arguments: [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (401, 101)])
    func tokensAreCharactersOverFourRoundedUp(_ c: (Int, Int)) {
        let body = #"{"messages":[{"content":""# + String(repeating: "a", count: c.0) + #""}]}"#
        #expect(PromptEstimate.tokens(requestBody: Array(body.utf8), provider: .openai) == c.1)
    }
}
