import Foundation
import SSE

/// Turns the events of one OpenAI chat stream into chunks. A plain value: events in, chunks out.
///
/// - `[DONE]` is recognised before any JSON decoding (it is not JSON), and ends the answer: events after it (from
///   a server that goes on, or a resume that overran it) are ignored, so no text that is not the answer's shows.
/// - An error event (`data: {"error":{…}}`, or `event: error`) ends the stream with a `RelayAPIError` whose
///   `status` is nil: that is how a budget that runs out mid-answer arrives.
/// - A chunk that is not valid JSON, or not a chunk, is skipped and counted: one bad line must not cost the
///   user the whole answer.
/// - Events with another `event:` name (not OpenAI's) are ignored.
public struct ChatStreamDecoder: Sendable {
    /// Complete on purpose, like `ChatEvent`: what one event can mean to a chat does not grow.
    public enum Output: Sendable, Equatable {
        case chunk(ChatChunk)
        /// `[DONE]`: the answer is complete.
        case done
        /// Nothing for the app (a skipped chunk, another event type).
        case none
    }

    public private(set) var skippedChunks = 0
    public private(set) var sawDone = false
    public private(set) var usage: ChatUsage?
    public private(set) var finishReason: String?
    /// The attempt's `X-Request-Id`, copied into errors.
    public let requestID: String

    public init(requestID: String = "") {
        self.requestID = requestID
    }

    /// The stream ended in a way that proves the answer complete: `[DONE]`, or at least a finish reason.
    public var isComplete: Bool { sawDone || finishReason != nil }

    public mutating func decode(_ event: SSEEvent) throws -> Output {
        if sawDone { return .none }
        if event.event == "error" {
            let payload = ErrorPayload.decode(Array(event.data.utf8))
            throw RelayAPIError(status: nil, type: payload?.type, code: payload?.code,
                                message: payload?.message ?? event.data, requestID: requestID)
        }
        guard event.event == "message" else { return .none }
        if event.data == "[DONE]" || event.data.trimmingCharacters(in: .whitespaces) == "[DONE]" {
            sawDone = true
            return .done
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(event.data.utf8))
        } catch {
            skippedChunks += 1
            return .none
        }
        if let error = wire.error {
            throw RelayAPIError.event(error, requestID: requestID)
        }
        guard let choices = wire.choices else {
            if let usage = wire.usage {
                self.usage = usage
                return .chunk(ChatChunk(id: wire.id, model: wire.model, choices: [], usage: usage))
            }
            skippedChunks += 1
            return .none
        }
        if let usage = wire.usage { self.usage = usage }
        if let reason = choices.first(where: { $0.index == 0 })?.finishReason { finishReason = reason }
        return .chunk(ChatChunk(id: wire.id, model: wire.model, choices: choices, usage: wire.usage))
    }

    /// A chunk or an error object; everything optional so that an error event decodes in the same pass.
    private struct Wire: Decodable {
        var id: String?
        var model: String?
        var choices: [ChatChunk.Choice]?
        var usage: ChatUsage?
        var error: ErrorPayload?
    }
}

/// The answer so far, built from deltas or taken from an adapter that already produces whole snapshots. A view
/// that shows `text` replaces its content each time and never shows a delta twice.
public struct ChatTextAccumulator: Sendable, Equatable {
    public enum Update: Sendable, Equatable {
        /// New text to append (OpenAI chunks).
        case delta(String)
        /// The whole answer so far (an adapter that yields snapshots): forwarded unchanged.
        case snapshot(String)
    }

    public private(set) var text = ""

    public init() {}

    @discardableResult
    public mutating func apply(_ update: Update) -> String {
        switch update {
        case .delta(let piece): text += piece
        case .snapshot(let whole): text = whole
        }
        return text
    }
}
