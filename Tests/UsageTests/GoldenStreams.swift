import Testing

// Response bodies in each provider's shape, written from the providers' API references (OpenAI "Streaming" and
// "Responses streaming events", Anthropic "Streaming Messages", Gemini "streamGenerateContent" with alt=sse), each
// with its usage at the end, and variants without it.

/// One body and what the tap must read from it, however it is split.
struct Golden: Sendable, CustomTestStringConvertible {
    var name: String
    var provider: ProviderName
    var contentType: String
    var body: [UInt8]
    var expected: ExpectedUsage
    var testDescription: String { name }
}

/// `Provider` and `Usage` mirrored as plain values so the fixtures need no import (the tests map them).
enum ProviderName: Sendable { case openai, anthropic, gemini, azure }

struct ExpectedUsage: Sendable, Equatable {
    var prompt: Int
    var completion: Int
    var cached: Int? = nil
    var reasoning: Int? = nil
    var cacheCreation: Int? = nil
    var source: String
    var contentEvents: Int
}

enum GoldenStreams {
    static func sse(_ events: [String], lineEnd: String = "\n") -> [UInt8] {
        Array(events.map { $0.replacingLineEnds(with: lineEnd) + lineEnd + lineEnd }.joined().utf8)
    }

    // MARK: OpenAI chat completions

    static let chatHead = #""id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb""#
    static let chatFirst = #"data: {\#(chatHead),"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#
    static func chatDelta(_ text: String) -> String {
        #"data: {\#(chatHead),"choices":[{"index":0,"delta":{"content":"\#(text)"},"logprobs":null,"finish_reason":null}],"usage":null}"#
    }
    static let chatFinish = #"data: {\#(chatHead),"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#
    static let chatUsage = #"data: {\#(chatHead),"choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#
    static let done = "data: [DONE]"
    /// A delta whose text mentions usage, to prove that text inside a string is never read as a key.
    static let chatTricky = chatDelta(#"\"usage\":{\"prompt_tokens\":999}, \"finish_reason\":\"stop\""#)

    static let chatEventsWithUsage = [chatFirst, chatDelta("Hello"), chatDelta("!"), chatTricky, chatDelta(" How"),
                                      chatFinish, chatUsage, done]
    static let chatEventsWithoutUsage = [chatFirst, chatDelta("Hello"), chatDelta("!"), chatTricky, chatDelta(" How"),
                                         chatFinish, done]

    // MARK: OpenAI Responses API

    static let responsesEvents = [
        "event: response.created\n" + #"data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1","output":[],"usage":null}}"#,
        "event: response.output_item.added\n" + #"data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
        "event: response.output_text.delta\n" + #"data: {"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#,
        "event: response.output_text.delta\n" + #"data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" there"}"#,
        "event: response.output_text.done\n" + #"data: {"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi there"}"#,
        "event: response.completed\n" + #"data: {"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4.1","output":[{"id":"msg_1","type":"message","content":[{"type":"output_text","text":"Hi there"}]}],"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":8},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":21},"total_tokens":123}}}"#,
    ]

    // MARK: Anthropic Messages

    static let anthropicEvents = [
        "event: message_start\n" + #"data: {"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}"#,
        "event: content_block_start\n" + #"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "event: ping\n" + #"data: {"type": "ping"}"#,
        "event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        "event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
        "event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" usage"}}"#,
        "event: content_block_stop\n" + #"data: {"type":"content_block_stop","index":0}"#,
        "event: message_delta\n" + #"data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        "event: message_stop\n" + #"data: {"type":"message_stop"}"#,
    ]

    // MARK: Gemini streamGenerateContent?alt=sse

    static let geminiEvents = [
        #"data: {"candidates": [{"content": {"parts": [{"text": "The"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash","responseId": "r1"}"#,
        #"data: {"candidates": [{"content": {"parts": [{"text": " sky is"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-flash","responseId": "r1"}"#,
        #"data: {"candidates": [{"content": {"parts": [{"text": " blue."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 12,"totalTokenCount": 25,"cachedContentTokenCount": 2,"thoughtsTokenCount": 5,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 8}]},"modelVersion": "gemini-2.5-flash","responseId": "r1"}"#,
    ]

    // MARK: Non-streaming bodies

    static let chatBody = #"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \"usage\": {}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#
    static let responsesBody = #"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}}"#
    static let anthropicBody = #"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi!"}],"model":"claude-sonnet-4-5","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"output_tokens":503,"cache_read_input_tokens":10,"cache_creation_input_tokens":0}}"#
    static let geminiBody = """
    {
      "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "finishReason": "STOP", "index": 0}],
      "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 9, "totalTokenCount": 13},
      "modelVersion": "gemini-2.0-flash"
    }
    """
    static let geminiArrayBody = "[" + #"{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"}}],"usageMetadata": {"promptTokenCount": 4,"totalTokenCount": 4}}"# + ",\r\n" + #"{"candidates": [{"content": {"parts": [{"text": " there"}],"role": "model"},"finishReason": "STOP"}],"usageMetadata": {"promptTokenCount": 4,"candidatesTokenCount": 2,"totalTokenCount": 6}}"# + "]"

    static let all: [Golden] = [
        Golden(name: "OpenAI chat, include_usage (LF)", provider: .openai, contentType: "text/event-stream; charset=utf-8",
               body: sse(chatEventsWithUsage),
               expected: ExpectedUsage(prompt: 19, completion: 10, cached: 3, reasoning: 4, source: "provider", contentEvents: 4)),
        Golden(name: "OpenAI chat, include_usage (CRLF)", provider: .openai, contentType: "text/event-stream",
               body: sse(chatEventsWithUsage, lineEnd: "\r\n"),
               expected: ExpectedUsage(prompt: 19, completion: 10, cached: 3, reasoning: 4, source: "provider", contentEvents: 4)),
        Golden(name: "Azure OpenAI chat, include_usage (CR)", provider: .azure, contentType: "text/event-stream",
               body: sse(chatEventsWithUsage, lineEnd: "\r"),
               expected: ExpectedUsage(prompt: 19, completion: 10, cached: 3, reasoning: 4, source: "provider", contentEvents: 4)),
        Golden(name: "OpenAI chat, no usage: estimate from deltas", provider: .openai, contentType: "text/event-stream",
               body: sse(chatEventsWithoutUsage),
               // 71 bytes of delta text (the tricky one's 61 as written, escapes included) / 4: more than the 4 events.
               expected: ExpectedUsage(prompt: 0, completion: 17, source: "estimate", contentEvents: 4)),
        Golden(name: "OpenAI chat, cut before the usage chunk", provider: .openai, contentType: "text/event-stream",
               body: sse(Array(chatEventsWithUsage.prefix(3))),
               expected: ExpectedUsage(prompt: 0, completion: 2, source: "estimate", contentEvents: 2)),
        Golden(name: "OpenAI Responses API", provider: .openai, contentType: "text/event-stream",
               body: sse(responsesEvents),
               expected: ExpectedUsage(prompt: 36, completion: 87, cached: 8, reasoning: 21, source: "provider", contentEvents: 2)),
        Golden(name: "OpenAI Responses API, cut before response.completed", provider: .openai, contentType: "text/event-stream",
               body: sse(Array(responsesEvents.prefix(5))),
               expected: ExpectedUsage(prompt: 0, completion: 2, source: "estimate", contentEvents: 2)),
        Golden(name: "Anthropic Messages", provider: .anthropic, contentType: "text/event-stream",
               body: sse(anthropicEvents),
               expected: ExpectedUsage(prompt: 2125, completion: 15, cached: 2000, cacheCreation: 100, source: "provider",
                                       contentEvents: 3)),
        Golden(name: "Anthropic Messages (CRLF)", provider: .anthropic, contentType: "text/event-stream",
               body: sse(anthropicEvents, lineEnd: "\r\n"),
               expected: ExpectedUsage(prompt: 2125, completion: 15, cached: 2000, cacheCreation: 100, source: "provider",
                                       contentEvents: 3)),
        Golden(name: "Anthropic, cut before message_delta: provider prompt, estimated completion", provider: .anthropic,
               contentType: "text/event-stream", body: sse(Array(anthropicEvents.prefix(6))),
               expected: ExpectedUsage(prompt: 2125, completion: 3, cached: 2000, cacheCreation: 100, source: "estimate",
                                       contentEvents: 3)),
        Golden(name: "Gemini alt=sse (CRLF, as Google sends)", provider: .gemini, contentType: "text/event-stream",
               body: sse(geminiEvents, lineEnd: "\r\n"),
               expected: ExpectedUsage(prompt: 8, completion: 17, cached: 2, reasoning: 5, source: "provider", contentEvents: 3)),
        Golden(name: "Gemini, cut before finishReason: latest partial counts", provider: .gemini, contentType: "text/event-stream",
               body: sse(Array(geminiEvents.prefix(2)), lineEnd: "\r\n"),
               expected: ExpectedUsage(prompt: 8, completion: 3, source: "estimate", contentEvents: 2)),
        Golden(name: "OpenAI chat completion JSON", provider: .openai, contentType: "application/json",
               body: Array(chatBody.utf8),
               expected: ExpectedUsage(prompt: 12, completion: 7, cached: 0, reasoning: 0, source: "provider", contentEvents: 0)),
        Golden(name: "OpenAI Responses JSON", provider: .openai, contentType: "application/json; charset=utf-8",
               body: Array(responsesBody.utf8),
               expected: ExpectedUsage(prompt: 36, completion: 87, cached: 0, reasoning: 0, source: "provider", contentEvents: 0)),
        Golden(name: "Anthropic message JSON", provider: .anthropic, contentType: "application/json",
               body: Array(anthropicBody.utf8),
               expected: ExpectedUsage(prompt: 2105, completion: 503, cached: 10, cacheCreation: 0, source: "provider",
                                       contentEvents: 0)),
        Golden(name: "Gemini generateContent JSON", provider: .gemini, contentType: "application/json",
               body: Array(geminiBody.utf8),
               expected: ExpectedUsage(prompt: 4, completion: 9, source: "provider", contentEvents: 0)),
        Golden(name: "Gemini streamGenerateContent JSON array", provider: .gemini, contentType: "application/json",
               body: Array(geminiArrayBody.utf8),
               expected: ExpectedUsage(prompt: 4, completion: 2, source: "provider", contentEvents: 0)),
        Golden(name: "Truncated JSON: nothing read", provider: .openai, contentType: "application/json",
               body: Array(chatBody.utf8.prefix(120)),
               expected: ExpectedUsage(prompt: 0, completion: 0, source: "none", contentEvents: 0)),
        Golden(name: "Plain text body: ignored", provider: .openai, contentType: "text/plain",
               body: Array(chatBody.utf8),
               expected: ExpectedUsage(prompt: 0, completion: 0, source: "none", contentEvents: 0)),
    ]
}

extension String {
    func replacingLineEnds(with lineEnd: String) -> String {
        split(separator: "\n", omittingEmptySubsequences: false).joined(separator: lineEnd)
    }
}
