import Foundation
import SSE
@testable import SSERelayClient
import Testing

/// The pure parts of the client: chunk decoding, error mapping, snapshots, the request body. No I/O.
@Suite("Client decoding")
struct ChatStreamDecoderTests {
    static func chunk(_ text: String, finish: String? = nil) -> String {
        let reason = finish.map { "\"\($0)\"" } ?? "null"
        return #"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":\#(jsonQuote(text))},"finish_reason":\#(reason)}]}"#
    }

    static func jsonQuote(_ s: String) -> String {
        String(decoding: try! JSONEncoder().encode(s), as: UTF8.self)
    }

    @Test("[DONE] is recognised before JSON decoding; chunks decode; usage and finish reason are kept")
    func decodesChunks() throws {
        var decoder = ChatStreamDecoder(requestID: "r1")
        #expect(try decoder.decode(SSEEvent(data: Self.chunk("Hel"))) == .chunk(ChatChunk(id: "c1", model: "m", choices: [.init(index: 0, delta: .init(content: "Hel"))])))
        _ = try decoder.decode(SSEEvent(data: Self.chunk("lo", finish: "stop")))
        #expect(decoder.finishReason == "stop")
        _ = try decoder.decode(SSEEvent(data: #"{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#))
        #expect(decoder.usage == ChatUsage(promptTokens: 3, completionTokens: 2, totalTokens: 5))
        #expect(try decoder.decode(SSEEvent(data: "[DONE]")) == .done)
        #expect(decoder.sawDone && decoder.isComplete)
        #expect(decoder.skippedChunks == 0)
    }

    /// What a server sends after `[DONE]` is not the answer's: text appended there would show words the model
    /// never said in this answer (a hostile or broken server, or a resume that overran the end).
    @Test("nothing after [DONE] counts: no chunk, no error, no finish reason")
    func nothingAfterDone() throws {
        var decoder = ChatStreamDecoder()
        _ = try decoder.decode(SSEEvent(data: Self.chunk("A")))
        #expect(try decoder.decode(SSEEvent(data: "[DONE]")) == .done)
        #expect(try decoder.decode(SSEEvent(data: Self.chunk("AFTER", finish: "length"))) == .none)
        #expect(try decoder.decode(SSEEvent(data: #"{"error":{"message":"late","code":"x"}}"#)) == .none)
        #expect(try decoder.decode(SSEEvent(event: "error", data: "{}")) == .none)
        #expect(try decoder.decode(SSEEvent(data: "[DONE]")) == .none)
        #expect(decoder.finishReason == nil && decoder.isComplete && decoder.skippedChunks == 0)
    }

    @Test("a malformed chunk is skipped and counted, not fatal")
    func skipsMalformed() throws {
        var decoder = ChatStreamDecoder()
        for bad in ["{not json", "", "42", #"{"id":"x"}"#, "[DONE"] {
            #expect(try decoder.decode(SSEEvent(data: bad)) == .none)
        }
        #expect(decoder.skippedChunks == 5)
        #expect(try decoder.decode(SSEEvent(data: Self.chunk("ok"))) != .none)
        #expect(!decoder.isComplete)
    }

    @Test("an error event mid-stream throws a typed error without a status: budget_exhausted")
    func midStreamError() throws {
        var decoder = ChatStreamDecoder(requestID: "r9")
        let event = SSEEvent(data: #"{"error":{"message":"Monthly budget used up.","type":"insufficient_quota","code":"budget_exhausted"}}"#)
        #expect(throws: RelayAPIError(status: nil, type: "insufficient_quota", code: "budget_exhausted", message: "Monthly budget used up.", requestID: "r9")) {
            try decoder.decode(event)
        }
        #expect((try? decoder.decode(event)) == nil)
        do {
            _ = try decoder.decode(event)
        } catch let error as RelayAPIError {
            #expect(error.kind == .budgetExhausted)
        }
        // Anthropic's shape, under `event: error`.
        #expect(throws: RelayAPIError(status: nil, type: "overloaded_error", code: nil, message: "Overloaded", requestID: "r9")) {
            try decoder.decode(SSEEvent(event: "error", data: #"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#))
        }
        // Other event names are not OpenAI chunks and are not counted as malformed.
        #expect(try decoder.decode(SSEEvent(event: "ping", data: "{}")) == .none)
        #expect(decoder.skippedChunks == 0)
    }

    @Test("error answers become typed errors with status, code and Retry-After")
    func errorResponses() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let limited = RelayAPIError.response(
            status: 429, headers: ["retry-after": "7", "X-Request-Id": "req-1"],
            body: Array(#"{"error":{"message":"Too many requests","type":"rate_limit_error","code":"rate_limit_exceeded"}}"#.utf8),
            requestID: "mine", now: now)
        #expect(limited == RelayAPIError(status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", message: "Too many requests",
                                         retryAfter: 7, requestID: "req-1"))
        #expect(limited.kind == .rateLimited)
        let dated = RelayAPIError.response(status: 503, headers: ["Retry-After": "Tue, 14 Nov 2023 22:13:27 GMT"], body: [], requestID: nil, now: now)
        #expect(dated.retryAfter == 7)
        #expect(dated.kind == .serverError)
        let expired = RelayAPIError.response(status: 401, headers: [:], body: Array(#"{"error":{"message":"expired","type":"invalid_request_error","code":"token_expired"}}"#.utf8), requestID: "a")
        #expect(expired.isTokenExpired && expired.kind == .tokenExpired && expired.requestID == "a")
        let model = RelayAPIError.response(status: 403, headers: [:], body: Array(#"{"error":{"message":"no","type":"invalid_request_error","code":"model_not_allowed"}}"#.utf8), requestID: nil)
        #expect(model.kind == .modelNotAllowed)
        let numericCode = RelayAPIError.response(status: 400, headers: [:], body: Array(#"{"error":{"message":"bad","code":400}}"#.utf8), requestID: nil)
        #expect(numericCode.code == "400" && numericCode.kind == .rejected)
        let html = RelayAPIError.response(status: 502, headers: [:], body: Array("<html>Bad gateway</html>".utf8), requestID: nil)
        #expect(html.message == "<html>Bad gateway</html>" && html.code == nil && html.kind == .serverError)
    }

    @Test("a Retry-After too large for any clock is capped: the error, its description and a sleep on it never trap",
          arguments: ["99999999999999999999999", String(repeating: "9", count: 400), "Fri, 31 Dec 9999 23:59:59 GMT"])
    func hugeRetryAfter(value: String) {
        let error = RelayAPIError.response(status: 429, headers: ["Retry-After": value], body: [], requestID: nil,
                                           now: Date(timeIntervalSince1970: 1_700_000_000))
        #expect(error.retryAfter == 86400)
        #expect(error.description.hasSuffix("(retry after 86400 s)"))
        #expect(UInt64(error.retryAfter! * 1e9) > 0)
    }

    @Test("snapshots replace, deltas append: the text is never duplicated")
    func accumulator() {
        var a = ChatTextAccumulator()
        #expect(a.apply(.delta("A")) == "A")
        #expect(a.apply(.delta("B")) == "AB")
        // An adapter that already yields snapshots: forwarded unchanged, not appended ("ABAB").
        #expect(a.apply(.snapshot("ABC")) == "ABC")
        #expect(a.apply(.delta("D")) == "ABCD")
    }

    @Test("the request body asks for a stream and for usage")
    func requestBody() throws {
        let body = try JSONEncoder().encode(ChatRequest(model: "gpt-4o-mini", messages: [.user("hi")], maxTokens: 50))
        let json = try JSONSerialization.jsonObject(with: body) as? [String: Any]
        #expect(json?["stream"] as? Bool == true)
        #expect(json?["max_tokens"] as? Int == 50)
        #expect((json?["stream_options"] as? [String: Any])?["include_usage"] as? Bool == true)
        #expect(json?["temperature"] == nil)
    }

    @Test("URLSession's idle timeout is the configured one, never the 60 s default")
    func sessionConfiguration() throws {
        var configuration = SSERelayClient.Configuration(baseURL: URL(string: "http://127.0.0.1:1")!)
        #expect(configuration.sessionConfiguration().timeoutIntervalForRequest == 310)
        configuration.idleTimeout = 42
        #expect(configuration.sessionConfiguration().timeoutIntervalForRequest == 42)
    }

    @Test("URLSession's cancellation (-999) becomes CancellationError")
    func cancellationMapping() {
        #expect(EventStreamTask.map(URLError(.cancelled)) is CancellationError)
        #expect(EventStreamTask.map(NSError(domain: NSURLErrorDomain, code: NSURLErrorCancelled)) is CancellationError)
        #expect(EventStreamTask.map(URLError(.timedOut)) is URLError)
    }
}
