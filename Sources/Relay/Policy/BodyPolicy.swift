/// What to do with a request body: forward it (byte for byte, or with a clamped token limit) or answer an error.
public enum BodyDecision: Equatable, Sendable {
    /// Send `body` upstream. `changed` is false only when `body` is the very bytes received; when true the caller
    /// must frame the new length (Content-Length) itself.
    case forward(body: [UInt8], changed: Bool)
    /// Answer the client with this error; the provider is not called.
    case reject(RelayError)
}

/// Per-route checks on a JSON request body before the provider is called: a model allowlist and a cap on the
/// number of output tokens requested. Pure configuration plus one pure function; no state, safe from any thread.
///
/// Only the top-level object is read (a `"model"` nested in `"metadata"` is not the model). A key the policy reads
/// that appears twice is an error, because parsers disagree on which one wins. With nothing configured the body is
/// not even parsed: any bytes, JSON or not, are forwarded unchanged.
///
/// Token cap rules, for each of `"max_tokens"` and `"max_completion_tokens"` (either or both may be present):
/// absent or `null` → left alone (the policy bounds what a client asks for; it never adds a key, because some
/// providers reject keys they do not know, and `null` means "not given" to the OpenAI API); a non-negative integer
/// at most the limit → passes; above the limit (including integers too large for `Int`) → rejected or clamped by
/// `mode`; anything else (negative, fraction, exponent, string, bool, array, object) → 400. Clamping rewrites
/// exactly the number's bytes to the limit's decimal digits and leaves every other byte of the body as it was.
public struct BodyPolicy: Equatable, Sendable {
    /// The cap on output tokens a request may ask for.
    public struct MaxTokens: Equatable, Sendable {
        /// What happens to a value above the limit.
        public enum Mode: Equatable, Sendable {
            /// A value above the limit is a 400 `max_tokens_exceeded`.
            case reject
            /// A value above the limit is rewritten to the limit, and the request goes on.
            case clamp
        }

        /// The largest value allowed; a negative limit acts as 0 (configuration validation should reject it).
        public var limit: Int
        public var mode: Mode

        public init(limit: Int, mode: Mode) {
            self.limit = limit
            self.mode = mode
        }
    }

    /// The token-limit keys this policy reads, in the order they are checked.
    public static let maxTokensKeys = ["max_tokens", "max_completion_tokens"]

    /// Models a request may name, matched exactly (code point for code point, after JSON unescaping). `nil`: no
    /// check. An empty list denies every request.
    public var models: [String]?
    public var maxTokens: MaxTokens?

    public init(models: [String]? = nil, maxTokens: MaxTokens? = nil) {
        self.models = models
        self.maxTokens = maxTokens
    }

    /// Whether any check is configured (and so whether the body must be valid JSON).
    public var isActive: Bool { models != nil || maxTokens != nil }

    public func evaluate(_ body: [UInt8]) -> BodyDecision {
        guard isActive else { return .forward(body: body, changed: false) }
        let members: [JSONMember]
        do {
            members = try JSONTopLevel.scan(body)
        } catch {
            return .reject(.invalidJSON)
        }

        if let models {
            let found = members.filter { $0.hasKey("model") }
            guard found.count <= 1 else { return .reject(.duplicateKey("model")) }
            guard let member = found.first, member.kind == .string,
                  let model = JSONTopLevel.string(in: body, at: member.valueRange)
            else { return .reject(.modelMissing) }
            guard models.contains(where: { $0.utf8.elementsEqual(model.utf8) }) else {
                return .reject(.modelNotAllowed)
            }
        }

        guard let maxTokens else { return .forward(body: body, changed: false) }
        let limit = max(0, maxTokens.limit)
        var clamps: [Range<Int>] = []
        for key in Self.maxTokensKeys {
            let found = members.filter { $0.hasKey(key) }
            guard found.count <= 1 else { return .reject(.duplicateKey(key)) }
            guard let member = found.first, member.kind != .null else { continue }
            guard member.kind == .number else { return .reject(.invalidMaxTokens(key)) }
            let exceeds: Bool
            switch JSONTopLevel.integer(in: body, at: member.valueRange) {
            case .value(let n) where n < 0: return .reject(.invalidMaxTokens(key))
            case .value(let n): exceeds = n > limit
            case .outOfRange(negative: false): exceeds = true
            case .outOfRange(negative: true), .notAnInteger: return .reject(.invalidMaxTokens(key))
            }
            guard exceeds else { continue }
            switch maxTokens.mode {
            case .reject: return .reject(.maxTokensExceeded(key, limit: limit))
            case .clamp: clamps.append(member.valueRange)
            }
        }
        guard !clamps.isEmpty else { return .forward(body: body, changed: false) }
        return .forward(body: Self.replacing(clamps, in: body, with: Array(String(limit).utf8)), changed: true)
    }

    /// `body` with each range (disjoint) replaced by `replacement`, every other byte kept in place.
    static func replacing(_ ranges: [Range<Int>], in body: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + ranges.count * replacement.count)
        var cursor = 0
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            out.append(contentsOf: body[cursor..<range.lowerBound])
            out.append(contentsOf: replacement)
            cursor = range.upperBound
        }
        out.append(contentsOf: body[cursor...])
        return out
    }
}

extension RelayError {
    /// 400 `invalid_json`: a body check is configured and the body is not exactly one JSON object.
    public static let invalidJSON = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_json",
        message: "The request body must be a single valid JSON object.")

    /// 400 `invalid_request`: a model allowlist is configured and the body has no string `"model"`.
    public static let modelMissing = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_request",
        message: "The request body must name a model as a string in \"model\".")

    /// 403 `model_not_allowed`. Never names the model: nothing from the request is echoed.
    public static let modelNotAllowed = RelayError(
        status: 403, type: "invalid_request_error", code: "model_not_allowed",
        message: "This model is not allowed on this relay.")

    /// 400 `duplicate_key`: a key the relay checks appears twice at the top level. `key` is one of the relay's
    /// own key names, never request text.
    public static func duplicateKey(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "duplicate_key",
                   message: "The request body has more than one \"\(key)\".")
    }

    /// 400 `invalid_max_tokens`: the value is not a non-negative integer (or null).
    public static func invalidMaxTokens(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "invalid_max_tokens",
                   message: "\"\(key)\" must be a non-negative integer.")
    }

    /// 400 `max_tokens_exceeded`; states the configured limit, not the requested value.
    public static func maxTokensExceeded(_ key: String, limit: Int) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "max_tokens_exceeded",
                   message: "\"\(key)\" may not exceed \(limit) on this relay.")
    }
}
