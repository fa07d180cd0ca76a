import Foundation

/// A streaming OpenAI chat completion request (`POST /v1/chat/completions` with `"stream": true`).
public struct ChatRequest: Sendable, Encodable, Equatable {
    public var model: String
    public var messages: [ChatMessage]
    public var temperature: Double?
    public var maxTokens: Int?
    /// Asks the provider for a final chunk with `usage` (`stream_options.include_usage`). On by default: the
    /// snapshot stream surfaces it.
    public var includeUsage: Bool

    public init(model: String, messages: [ChatMessage], temperature: Double? = nil, maxTokens: Int? = nil,
                includeUsage: Bool = true) {
        self.model = model
        self.messages = messages
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.includeUsage = includeUsage
    }

    private enum Keys: String, CodingKey {
        case model, messages, temperature, stream
        case maxTokens = "max_tokens"
        case streamOptions = "stream_options"
    }

    private struct StreamOptions: Encodable {
        var include_usage: Bool
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(model, forKey: .model)
        try c.encode(messages, forKey: .messages)
        try c.encode(true, forKey: .stream)
        try c.encodeIfPresent(temperature, forKey: .temperature)
        try c.encodeIfPresent(maxTokens, forKey: .maxTokens)
        if includeUsage { try c.encode(StreamOptions(include_usage: true), forKey: .streamOptions) }
    }
}

public struct ChatMessage: Sendable, Codable, Equatable {
    public var role: String
    public var content: String

    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }

    public static func user(_ content: String) -> ChatMessage { ChatMessage(role: "user", content: content) }
    public static func system(_ content: String) -> ChatMessage { ChatMessage(role: "system", content: content) }
    public static func assistant(_ content: String) -> ChatMessage { ChatMessage(role: "assistant", content: content) }
}

/// One `chat.completion.chunk`: a delta, not the answer so far. Append `text` to what came before, or use the
/// snapshot stream, which does that once, correctly.
public struct ChatChunk: Sendable, Decodable, Equatable {
    public struct Choice: Sendable, Decodable, Equatable {
        public var index: Int
        public var delta: Delta
        public var finishReason: String?

        enum CodingKeys: String, CodingKey {
            case index, delta
            case finishReason = "finish_reason"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            index = try c.decodeIfPresent(Int.self, forKey: .index) ?? 0
            delta = try c.decodeIfPresent(Delta.self, forKey: .delta) ?? Delta()
            finishReason = try c.decodeIfPresent(String.self, forKey: .finishReason)
        }

        public init(index: Int, delta: Delta, finishReason: String? = nil) {
            self.index = index
            self.delta = delta
            self.finishReason = finishReason
        }
    }

    public struct Delta: Sendable, Decodable, Equatable {
        public var role: String?
        public var content: String?
        public var refusal: String?

        public init(role: String? = nil, content: String? = nil, refusal: String? = nil) {
            self.role = role
            self.content = content
            self.refusal = refusal
        }
    }

    public var id: String?
    public var model: String?
    public var choices: [Choice]
    public var usage: ChatUsage?

    public init(id: String? = nil, model: String? = nil, choices: [Choice], usage: ChatUsage? = nil) {
        self.id = id
        self.model = model
        self.choices = choices
        self.usage = usage
    }

    /// The first choice's new text, if this chunk carries any.
    public var text: String? { choices.first { $0.index == 0 }?.delta.content }
}

/// Token counts, from the final chunk (`stream_options.include_usage`) or injected by the relay.
public struct ChatUsage: Sendable, Decodable, Equatable {
    public var promptTokens: Int
    public var completionTokens: Int
    public var totalTokens: Int

    enum CodingKeys: String, CodingKey {
        case promptTokens = "prompt_tokens"
        case completionTokens = "completion_tokens"
        case totalTokens = "total_tokens"
    }

    public init(promptTokens: Int, completionTokens: Int, totalTokens: Int) {
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.totalTokens = totalTokens
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        promptTokens = try c.decodeIfPresent(Int.self, forKey: .promptTokens) ?? 0
        completionTokens = try c.decodeIfPresent(Int.self, forKey: .completionTokens) ?? 0
        totalTokens = try c.decodeIfPresent(Int.self, forKey: .totalTokens) ?? promptTokens + completionTokens
    }
}

/// What `chat(_:)` yields: every decoded chunk, then one `finished` as the last element of a complete answer.
public enum ChatEvent: Sendable, Equatable {
    case chunk(ChatChunk)
    case finished(ChatSummary)
}

/// How a chat stream ended.
public struct ChatSummary: Sendable, Equatable {
    /// The `X-Request-Id` of the attempt that produced the answer.
    public var requestID: String
    public var finishReason: String?
    public var usage: ChatUsage?
    /// Chunks that were not valid JSON (or not a chunk) and were skipped rather than ending the answer.
    public var skippedChunks: Int

    public init(requestID: String, finishReason: String?, usage: ChatUsage?, skippedChunks: Int) {
        self.requestID = requestID
        self.finishReason = finishReason
        self.usage = usage
        self.skippedChunks = skippedChunks
    }
}

/// What `chatSnapshots(_:)` yields: the complete answer so far, every time. A view sets its text to `text`
/// (never appends), so it cannot show a duplicated "AABABC".
public struct ChatSnapshot: Sendable, Equatable {
    public var text: String
    /// The `X-Request-Id` of the attempt: a view model that started a newer request ignores older ones.
    public var requestID: String
    /// True on the last snapshot of a complete answer (after `[DONE]`).
    public var isComplete: Bool
    public var finishReason: String?
    public var usage: ChatUsage?
    public var skippedChunks: Int

    public init(text: String, requestID: String, isComplete: Bool = false, finishReason: String? = nil,
                usage: ChatUsage? = nil, skippedChunks: Int = 0) {
        self.text = text
        self.requestID = requestID
        self.isComplete = isComplete
        self.finishReason = finishReason
        self.usage = usage
        self.skippedChunks = skippedChunks
    }
}
