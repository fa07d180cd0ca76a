import Testing
import JSON
@testable import Usage

@Suite("PromptEstimate")
struct PromptEstimateTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var provider: Provider
        var body: String
        var weight: Int?
        /// The media cases: text weight ÷ 4 plus each media item's tokens, at `mediaTokens` 1 000.
        var tokens = 0
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "OpenAI chat: strings and text parts", provider: .openai, body: #"""
            {"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},
             {"role":"user","content":[{"type":"text","text":"Hi \u00e9\n"},{"type":"image_url","image_url":{"url":"data:xx"}}]},
             {"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{}"}}]}],"stream":true}
            """#, weight: 9 + (3 + 8 + 1) + 2),
        Case(name: "OpenAI Responses: instructions and input items", provider: .openai, body: #"""
            {"model":"gpt-4.1","instructions":"abc","input":[{"role":"user","content":"hello"},
             {"role":"user","content":[{"type":"input_text","text":"xy"}]}]}
            """#, weight: 3 + 5 + 2),
        Case(name: "OpenAI Responses: input as a string", provider: .azureOpenAI, body: #"{"input":"four"}"#, weight: 4),
        Case(name: "Anthropic: system blocks, messages, tool results", provider: .anthropic, body: #"""
            {"model":"claude","system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"abcd"},
             {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"res"}]},
             {"type":"text","text":"ok"}]}],"max_tokens":10}
            """#, weight: 3 + 4 + 3 + 2),
        // The attacks of issue 18: escaped key names, and text outside `messages`.
        Case(name: "Escaped keys are read as the provider reads them", provider: .openai,
             body: #"{"m\u0065ssages":[{"role":"user","c\u006fntent":"abcd"}],"\u006dodel":"gpt-4o"}"#, weight: 4),
        Case(name: "Tools: names, descriptions and every key of the schema", provider: .openai, body: #"""
            {"tools":[{"type":"function","function":{"name":"get_weather","description":"Get it",
             "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}
            """#, weight: (4 + 8 + 4 + 11 + 10 + 4 + 10 + 4 + 4) + (8 + 11 + 6 + 6 + 6)),
        Case(name: "Function call arguments and tool results", provider: .openai, body: #"""
            {"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
             {"role":"tool","tool_call_id":"c1","content":"42"}]}
            """#, weight: 1 + 7 + 2),
        Case(name: "Anthropic: system as a string", provider: .anthropic, body: #"{"system":"12345","messages":[]}"#, weight: 5),
        Case(name: "Gemini: contents and systemInstruction", provider: .gemini, body: #"""
            {"systemInstruction":{"parts":[{"text":"ab"}]},"contents":[{"role":"user","parts":[{"text":"cde"},
             {"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},{"role":"model","parts":[{"text":"f"}]}]}
            """#, weight: 2 + 3 + 1),
        Case(name: "Not JSON", provider: .openai, body: "hello", weight: nil),
        Case(name: "Truncated JSON", provider: .openai, body: #"{"messages":[{"content":"abc"}"#, weight: nil),
        Case(name: "A JSON array", provider: .openai, body: "[1]", weight: nil),
        Case(name: "No messages", provider: .openai, body: #"{"model":"x"}"#, weight: 0),
    ]

    @Test(arguments: cases)
    func weights(_ c: Case) {
        let document = try? JSONDocument(parsing: Array(c.body.utf8))
        #expect(document.map(PromptEstimate.weight) == c.weight)
    }

    /// Text outside ASCII counts a token per UTF-8 byte, the most a byte-level tokenizer spends: 1 000 Linear B
    /// characters (4 bytes each) are 4 000 tokens in cl100k, and counted four characters to a token they were 250.
    @Test(arguments: [("\u{10000}", 1_000, 4_000), ("中", 100, 300), ("é", 10, 20), ("a", 8, 2)] as [(String, Int, Int)])
    func textOutsideASCIICountsATokenPerByte(_ c: (String, Int, Int)) {
        let body = #"{"messages":[{"role":"user","content":""# + String(repeating: c.0, count: c.1) + #""}]}"#
        #expect(PromptEstimate.tokens(requestBody: Array(body.utf8)) == c.2)
    }

    @Test(arguments: [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (401, 101)])
    func tokensAreCharactersOverFourRoundedUp(_ c: (Int, Int)) {
        let body = #"{"messages":[{"content":""# + String(repeating: "a", count: c.0) + #""}]}"#
        #expect(PromptEstimate.tokens(requestBody: Array(body.utf8)) == c.1)
    }

    /// Each image, audio clip or inline file counts at least `mediaTokens`, or its payload's weight ÷ 4 when
    /// that is more: a stream cancelled before OpenAI's usage event is charged this, so a small, highly
    /// compressible image (or one by URL) is not free.
    static let mediaCases: [Case] = [
        Case(name: "OpenAI chat: an image by URL and a tiny inline one, each at least mediaTokens", provider: .openai, body: #"""
            {"messages":[{"role":"user","content":[{"type":"text","text":"abcd"},
             {"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}},
             {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}
            """#, tokens: 1 + 1_000 + 1_000),
        Case(name: "OpenAI chat: a large inline image counts its payload ÷ 4", provider: .openai,
             body: #"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,"#
                 + String(repeating: "A", count: 8_000 - 22) + #""}}]}]}"#, tokens: 2_000),
        Case(name: "OpenAI: audio and an inline file (chat and Responses)", provider: .openai, body: #"""
            {"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},
             {"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,AAAA"}}]}],
             "input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA"}]}]}
            """#, tokens: 2 + 3_000),
        Case(name: "Anthropic: an image, a PDF and a plain-text document, each a source", provider: .anthropic, body: #"""
            {"messages":[{"role":"user","content":[
             {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
             {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AAAA"}},
             {"type":"document","source":{"type":"text","media_type":"text/plain","data":"\#(String(repeating: "w", count: 9_000))"}}]}]}
            """#, tokens: 1_000 + 1_000 + (4 + 10 + 9_000 + 3) / 4),
        Case(name: "Gemini: inline data in either spelling", provider: .gemini, body: #"""
            {"contents":[{"role":"user","parts":[{"text":"ab"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}},
             {"inline_data":{"mime_type":"audio/wav","data":"AAAA"}}]}]}
            """#, tokens: 1 + 2_000),
        Case(name: "A schema's property named source is text, not an image", provider: .openai, body: #"""
            {"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
             "properties":{"source":{"type":"string"}}}}}],"metadata":{"source":"app"}}
            """#, tokens: (4 + 8 + 8 + 4 + 1 + 10 + 4 + 6 + 10 + 6 + 4 + 6 + 3 + 3) / 4),
    ]

    @Test(arguments: mediaCases)
    func mediaCountsAtLeastItsAllowance(_ c: Case) throws {
        let document = try JSONDocument(parsing: Array(c.body.utf8))
        #expect(PromptEstimate.tokens(document, mediaTokens: 1_000) == c.tokens)
    }

    /// A function call's arguments are the app's JSON: a key named `source` or `image_url` there is no image, and
    /// its keys are tokenized (`{"source":{"lang":"en"}}`: source, lang, en = 12 characters).
    @Test func functionArgumentsAreTextNotMedia() throws {
        let anthropic = try JSONDocument(parsing: Array(#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"source":{"lang":"en"}}}]}]}"#.utf8))
        #expect(PromptEstimate.tokens(anthropic, mediaTokens: 1_000) == (1 + 6 + 4 + 2 + 3) / 4)
        let gemini = try JSONDocument(parsing: Array(#"{"contents":[{"parts":[{"functionCall":{"name":"f","args":{"image_url":"u"}}}]}]}"#.utf8))
        #expect(PromptEstimate.tokens(gemini, mediaTokens: 1_000) == (4 + 1 + 4 + 9 + 1 + 3) / 4)
    }

    @Test("without media the estimate is the text's alone, whatever mediaTokens is")
    func noMediaNoAllowance() throws {
        let document = try JSONDocument(parsing: Array(#"{"messages":[{"role":"user","content":"abcdefgh"}]}"#.utf8))
        #expect(PromptEstimate.tokens(document, mediaTokens: 1_000) == 2)
        #expect(PromptEstimate.tokens(document) == 2)
    }
}
