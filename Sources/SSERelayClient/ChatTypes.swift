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
    /// Top-level fields this type does not model (`tools`, `tool_choice`, `response_format`, `seed`, a provider's
    /// own), sent after the modelled ones, in name order, each value byte for byte as given. The names the type
    /// models (`model`, `messages`, `stream`, `temperature`, `max_tokens`, `stream_options`) are refused when the
    /// body is built (`EncodingError.invalidValue`): set those through their properties.
    public var additionalFields: [String: RawJSON]

    public init(model: String, messages: [ChatMessage], temperature: Double? = nil, maxTokens: Int? = nil,
                includeUsage: Bool = true, additionalFields: [String: RawJSON] = [:]) {
        self.model = model
        self.messages = messages
        self.temperature = temperature
        self.maxTokens = maxTokens
        self.includeUsage = includeUsage
        self.additionalFields = additionalFields
    }

    /// The names of the fields the type writes itself.
    public static let modelledFields: Set<String> = ["model", "messages", "stream", "temperature", "max_tokens", "stream_options"]

    /// The request body the client sends: the modelled fields (sorted by name, as `JSONEncoder` writes them),
    /// then `additionalFields` with their values' bytes unchanged.
    public func jsonBody() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var body = try encoder.encode(Modelled(request: self))
        guard !additionalFields.isEmpty else { return body }
        // `{…}` with no trailing space: the members go before its closing brace. The modelled part is never empty.
        body.removeLast()
        for name in try additionalNames() {
            body.append(UInt8(ascii: ","))
            body.append(try encoder.encode(name))
            body.append(UInt8(ascii: ":"))
            body.append(contentsOf: additionalFields[name]!.bytes)
        }
        body.append(UInt8(ascii: "}"))
        return body
    }

    /// Writes the modelled fields and the additional ones as plain JSON values (their bytes may change form:
    /// `1.50` becomes `1.5`); `jsonBody()` sends them unchanged.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldName.self)
        try encodeModelled(into: &c)
        for name in try additionalNames() {
            try c.encode(try additionalFields[name]!.value(), forKey: FieldName(name))
        }
    }

    private func encodeModelled(into c: inout KeyedEncodingContainer<FieldName>) throws {
        try c.encode(model, forKey: FieldName("model"))
        try c.encode(messages, forKey: FieldName("messages"))
        try c.encode(true, forKey: FieldName("stream"))
        try c.encodeIfPresent(temperature, forKey: FieldName("temperature"))
        try c.encodeIfPresent(maxTokens, forKey: FieldName("max_tokens"))
        if includeUsage { try c.encode(["include_usage": true], forKey: FieldName("stream_options")) }
    }

    private func additionalNames() throws -> [String] {
        let names = additionalFields.keys.sorted()
        if let taken = names.first(where: { Self.modelledFields.contains($0) }) {
            throw EncodingError.invalidValue(additionalFields[taken]!, EncodingError.Context(
                codingPath: [FieldName(taken)], debugDescription: "\(taken) is a field ChatRequest models; set its property"))
        }
        return names
    }

    private struct Modelled: Encodable {
        let request: ChatRequest
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: FieldName.self)
            try request.encodeModelled(into: &c)
        }
    }

    struct FieldName: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// One JSON value as bytes, sent exactly as given (`ChatRequest.additionalFields`): what the library does not
/// model reaches the provider unchanged, numbers and spacing included.
public struct RawJSON: Sendable, Hashable {
    public let bytes: [UInt8]

    /// `json` must be one JSON value (object, array, string, number, `true`, `false` or `null`), as Foundation's
    /// `JSONSerialization` reads it (on Linux it lets a trailing comma through; the provider will not).
    public init(_ json: String) throws {
        try self.init(bytes: Array(json.utf8))
    }

    public init(bytes: [UInt8]) throws {
        do {
            _ = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: "not one JSON value",
                                                                    underlyingError: error))
        }
        self.bytes = bytes
    }

    /// The JSON `JSONEncoder` writes for `value`.
    public init<T: Encodable>(encoding value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        bytes = Array(try encoder.encode(value))
    }

    /// The value, for an `Encoder` that cannot take bytes.
    func value() throws -> JSONValue { try JSONDecoder().decode(JSONValue.self, from: Data(bytes)) }
}

/// A JSON value read back from `RawJSON`, so that `ChatRequest`'s `Encodable` conformance can write it.
enum JSONValue: Codable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .integer(i) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .integer(let i): try c.encode(i)
        case .number(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
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
/// An enum complete on purpose (an app's `switch` needs no `default`): another kind of element would come as
/// another stream, never as a new case here.
public enum ChatEvent: Sendable, Equatable {
    case chunk(ChatChunk)
    case finished(ChatSummary)
}

extension ChatEvent {
    /// What this value holds while it waits for the app (`Configuration.maxBufferedBytes`): its strings' bytes.
    var heldBytes: Int {
        switch self {
        case .chunk(let chunk):
            var n = (chunk.id?.utf8.count ?? 0) + (chunk.model?.utf8.count ?? 0)
            for choice in chunk.choices {
                n += (choice.delta.role?.utf8.count ?? 0) + (choice.delta.content?.utf8.count ?? 0)
                    + (choice.delta.refusal?.utf8.count ?? 0) + (choice.finishReason?.utf8.count ?? 0)
            }
            return n
        case .finished(let summary):
            return summary.requestID.utf8.count + (summary.finishReason?.utf8.count ?? 0)
        }
    }
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
