import Testing
@testable import RelayCore

/// `Endpoint(method:path:)` judges a path by its bytes up to the query, one trailing `/` ignored, `%3A` read as
/// `:`: each rule and its edges.
@Suite struct EndpointShapeTests {
    @Test(arguments: [
        ("POST", "/v1/chat/completions", Endpoint.openAIChat),
        ("POST", "/v1/chat/completions/", .openAIChat),
        ("POST", "/v1/chat/completions?stream=1", .openAIChat),
        ("POST", "/v1/chat/completions/?a=/responses", .openAIChat),
        ("POST", "/v1/completions", .openAIChat),
        ("POST", "/v1/chat/completions//", .unmetered),
        ("POST", "/v1/responses", .openAIResponses),
        ("POST", "/v1/responses/input_tokens", .free),
        ("POST", "/v1/messages", .anthropicMessages),
        ("POST", "/v1/messages/count_tokens/", .free),
        ("POST", "/v1beta/models/gemini:generateContent", .geminiGenerate),
        ("POST", "/v1beta/models/gemini%3AstreamGenerateContent?alt=sse", .geminiGenerate),
        ("POST", "/v1beta/models/gemini%3agenerateContent", .geminiGenerate),
        ("POST", "/v1beta/models/gemini%3AcountTokens", .free),
        ("POST", "/v1beta/models/gemini%3BgenerateContent", .unmetered),
        ("POST", "/v1/embeddings", .unmetered),
        ("POST", "/", .unmetered),
        ("POST", "", .unmetered),
        ("POST", "?/v1/chat/completions", .unmetered),
        ("PUT", "/v1/chat/completions", .openAIChat),
        ("GET", "/v1/chat/completions", .free),
        ("DELETE", "/v1/responses", .free),
    ])
    func shape(_ method: String, _ path: String, _ expected: Endpoint) {
        #expect(Endpoint(method: method, path: path) == expected, "\(method) \(path)")
    }

    @Test(arguments: [
        ("/v1/chat/completions", true), ("/v1/chat/completions/", true), ("/v1/chat/completions?x=1", true),
        ("/v1/completions", false), ("/chat/completions//", false), ("/", false), ("", false),
    ])
    func chatCompletions(_ path: String, _ expected: Bool) {
        #expect(Endpoint.isChatCompletions(path) == expected, "\(path)")
    }
}
