import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An error the relay or the provider answered, in the OpenAI shape every SDK knows,
/// `{"error":{"message":…,"type":…,"code":…}}` (Anthropic's `{"type":"error","error":{"type":…,"message":…}}`
/// is read too). It arrives either as a non-2xx response (`status` set) or as an error event inside a 200
/// stream (`status` nil), the way a budget that runs out mid-answer is reported.
public struct RelayAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the app can do about it, from `code` first (the relay's codes are stable), then `status`.
    ///
    /// A struct with constants, not an enum, on purpose: a later version may add kinds, and an app's `switch` over
    /// `kind` has a `default`, so a new kind never breaks its build (an enum's new case would).
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// 401 `token_expired`: the client already refreshed the token once and retried (see `TokenProvider`).
        public static let tokenExpired = Kind(rawValue: "token_expired")
        /// Any other 401: sign in again.
        public static let unauthorized = Kind(rawValue: "unauthorized")
        /// 403 `model_not_allowed`: the relay's route does not allow this model.
        public static let modelNotAllowed = Kind(rawValue: "model_not_allowed")
        /// `budget_exhausted`, before the stream or as a mid-stream error event.
        public static let budgetExhausted = Kind(rawValue: "budget_exhausted")
        /// 429: wait `retryAfter` seconds (when given) before asking again.
        public static let rateLimited = Kind(rawValue: "rate_limited")
        /// Any other 4xx: the request itself is wrong.
        public static let rejected = Kind(rawValue: "rejected")
        /// 5xx, or an error event with no better code: retrying later may help.
        public static let serverError = Kind(rawValue: "server_error")
    }

    /// The HTTP status, or nil when the error came as an event inside a 200 stream.
    public var status: Int?
    public var type: String?
    public var code: String?
    public var message: String
    /// `Retry-After` in seconds (delta-seconds or an HTTP date, RFC 9110 §10.2.3), when the answer had one; at most
    /// `maxRetryAfter`.
    public var retryAfter: TimeInterval?
    /// The longest `Retry-After` kept: a day. The header's digits have no bound (`99999999999999999999999`, or
    /// 400 nines, which is infinity), and such a value traps wherever it becomes an integer (`Int(…)`, a
    /// `Task.sleep` in nanoseconds); an answer asking for more than a day means "not today" all the same.
    public static let maxRetryAfter: TimeInterval = 24 * 3600
    /// The `X-Request-Id` of the attempt (the relay logs it), for support requests.
    public var requestID: String?

    public init(status: Int?, type: String?, code: String?, message: String, retryAfter: TimeInterval? = nil,
                requestID: String? = nil) {
        self.status = status
        self.type = type
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.requestID = requestID
    }

    public var kind: Kind {
        switch code {
        case "token_expired": return .tokenExpired
        case "model_not_allowed": return .modelNotAllowed
        case "budget_exhausted": return .budgetExhausted
        default: break
        }
        switch status {
        case 401: return .unauthorized
        case 429: return .rateLimited
        case .some(400..<500): return .rejected
        default: return .serverError
        }
    }

    public var isTokenExpired: Bool { status == 401 && code == "token_expired" }

    public var description: String {
        let where_ = status.map { "HTTP \($0)" } ?? "stream error"
        var text = "\(where_) \(code ?? type ?? "error"): \(message)"
        if let retryAfter, retryAfter >= 0 {
            text += " (retry after \(Int(min(retryAfter, Self.maxRetryAfter).rounded(.up))) s)"
        }
        return text
    }

    /// Builds the error for a non-2xx answer from its status, headers and (bounded) body. A body that is not
    /// the JSON shape still gives a typed error; its text is kept short.
    static func response(status: Int, headers: [AnyHashable: Any], body: [UInt8], requestID: String?,
                         now: Date = Date()) -> RelayAPIError {
        let retryAfter = header("Retry-After", in: headers).flatMap { parseRetryAfter($0, now: now) }.map { min($0, maxRetryAfter) }
        let replyID = header("X-Request-Id", in: headers) ?? requestID
        if let payload = ErrorPayload.decode(body) {
            return RelayAPIError(status: status, type: payload.type, code: payload.code,
                                 message: payload.message ?? "HTTP \(status)", retryAfter: retryAfter, requestID: replyID)
        }
        let text = String(decoding: body.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return RelayAPIError(status: status, type: nil, code: nil,
                             message: text.isEmpty ? HTTPURLResponse.localizedString(forStatusCode: status) : text,
                             retryAfter: retryAfter, requestID: replyID)
    }

    /// An error event inside a stream (`data: {"error":{…}}`), or nil if the payload is not one.
    static func event(_ payload: ErrorPayload, requestID: String?) -> RelayAPIError {
        RelayAPIError(status: nil, type: payload.type, code: payload.code, message: payload.message ?? "stream error",
                      requestID: requestID)
    }

    /// RFC 9110 §10.2.3: `Retry-After: delta-seconds / HTTP-date`.
    static func parseRetryAfter(_ value: String, now: Date) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return TimeInterval(trimmed)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    static func header(_ name: String, in headers: [AnyHashable: Any]) -> String? {
        for (key, value) in headers {
            if let key = key as? String, key.caseInsensitiveCompare(name) == .orderedSame { return value as? String }
        }
        return nil
    }
}

/// The `error` object of an error body or event. `code` may be a string, a number or null in the wild.
struct ErrorPayload: Decodable, Equatable {
    var message: String?
    var type: String?
    var code: String?

    private struct Envelope: Decodable { var error: ErrorPayload? }

    private enum Keys: String, CodingKey { case message, type, code }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        message = try? c.decodeIfPresent(String.self, forKey: .message)
        type = try? c.decodeIfPresent(String.self, forKey: .type)
        if let s = try? c.decodeIfPresent(String.self, forKey: .code) {
            code = s
        } else if let n = try? c.decodeIfPresent(Int.self, forKey: .code) {
            code = String(n)
        }
    }

    /// The `error` object of `{"error":{…}}`, or nil if the bytes are not that shape.
    static func decode(_ bytes: [UInt8]) -> ErrorPayload? {
        guard let first = bytes.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), first == 0x7B else { return nil }
        return (try? JSONDecoder().decode(Envelope.self, from: Data(bytes)))?.error
    }
}

/// Failures that are not an answer from the relay or provider, told apart by `code`.
///
/// Shaped like Foundation's `URLError`, and a struct on purpose: a later version may add codes, and a new code
/// never breaks an app's build (an enum's new case would break every exhaustive `switch`). Match a code in a
/// `catch` (`catch SSERelayClientError.streamEndedEarly`) or `switch error.code` with a `default`.
public struct SSERelayClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A 2xx answer that is not `text/event-stream` (a captive portal, a misrouted request); `status` and
        /// `contentType` say what came.
        public static let notAnEventStream = Code(rawValue: "not_an_event_stream")
        /// The chat stream closed cleanly without `[DONE]` or a finish reason: the answer may be cut short.
        public static let streamEndedEarly = Code(rawValue: "stream_ended_early")
        /// One event grew past the parser's bound (`limit`, `Configuration.maxEventBytes`).
        public static let eventTooLarge = Code(rawValue: "event_too_large")
        /// The app fell more than `limit` events (`Configuration.maxBufferedEvents`), or `byteLimit` bytes
        /// (`Configuration.maxBufferedBytes`), behind the stream, which was ended rather than held in memory. The
        /// events before the error were all delivered.
        public static let consumerTooSlow = Code(rawValue: "consumer_too_slow")

        /// `catch SSERelayClientError.streamEndedEarly { … }`.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? SSERelayClientError)?.code == code
        }
    }

    public var code: Code
    /// `notAnEventStream`: the status answered.
    public var status: Int?
    /// `notAnEventStream`: the `Content-Type` answered, if any.
    public var contentType: String?
    /// `eventTooLarge` (bytes) and `consumerTooSlow` (events): the bound that was passed.
    public var limit: Int?
    /// `consumerTooSlow`: the bound on bytes held that was passed, when that one was (`limit` is nil then).
    public var byteLimit: Int?

    public init(code: Code, status: Int? = nil, contentType: String? = nil, limit: Int? = nil, byteLimit: Int? = nil) {
        self.code = code
        self.status = status
        self.contentType = contentType
        self.limit = limit
        self.byteLimit = byteLimit
    }

    public static var notAnEventStream: Code { .notAnEventStream }
    public static var streamEndedEarly: Code { .streamEndedEarly }
    public static var eventTooLarge: Code { .eventTooLarge }
    public static var consumerTooSlow: Code { .consumerTooSlow }

    public var description: String {
        switch code {
        case .notAnEventStream: return "HTTP \(status ?? 0) answered \(contentType ?? "no content type"), not an event stream"
        case .streamEndedEarly: return "the stream ended before the answer was complete"
        case .eventTooLarge: return "an event passed \(limit ?? 0) bytes"
        case .consumerTooSlow:
            if let byteLimit { return "the app fell \(byteLimit) bytes behind the stream" }
            return "the app fell \(limit ?? 0) events behind the stream"
        default: return code.rawValue
        }
    }
}
