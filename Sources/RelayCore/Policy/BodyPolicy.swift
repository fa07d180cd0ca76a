import JSON

/// What to do with a request body: forward it (byte for byte, or with a clamped token limit) or answer an error.
package enum BodyDecision: Equatable, Sendable {
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
package struct BodyPolicy: Equatable, Sendable {
    /// The cap on output tokens a request may ask for.
    package struct MaxTokens: Equatable, Sendable {
        /// What happens to a value above the limit.
        package enum Mode: Equatable, Sendable {
            /// A value above the limit is a 400 `max_tokens_exceeded`.
            case reject
            /// A value above the limit is rewritten to the limit, and the request goes on.
            case clamp
        }

        /// The largest value allowed; a negative limit acts as 0 (configuration validation should reject it).
        package var limit: Int
        package var mode: Mode

        package init(limit: Int, mode: Mode) {
            self.limit = limit
            self.mode = mode
        }
    }

    /// The token-limit keys this policy reads, in the order they are checked.
    package static let maxTokensKeys = ["max_tokens", "max_completion_tokens"]

    /// Models a request may name, matched exactly (code point for code point, after JSON unescaping). `nil`: no
    /// check. An empty list denies every request.
    package var models: [String]?
    package var maxTokens: MaxTokens?

    package init(models: [String]? = nil, maxTokens: MaxTokens? = nil) {
        self.models = models
        self.maxTokens = maxTokens
    }

    /// Whether any check is configured (and so whether the body must be valid JSON).
    package var isActive: Bool { models != nil || maxTokens != nil }

    /// The checks on a body read strictly (`JSONDocument`, the only reader): forward (with the clamp's edits) or
    /// refuse. `ceiling` says which fields are the endpoint's token ceiling: the cap applies to exactly the fields
    /// the endpoint honours (chat's `max_tokens` and `max_completion_tokens`, Responses' `max_output_tokens`,
    /// Gemini's `generationConfig.maxOutputTokens`, Anthropic's `max_tokens`).
    ///
    /// `pathModel`: on an endpoint that names its model in the path (Gemini, an Azure deployment), `.some` with what
    /// the path names (`Endpoint.geminiModel`, `Endpoint.azureDeployment`): that is the model the provider runs, so it is the one checked, and a body `model`
    /// must be allowed too (it can name no other model past the check).
    func check(_ d: JSONDocument, ceiling: OutputCeiling, pathModel: String?? = nil, into edits: inout JSONEdits) -> RelayError? {
        if let models {
            func allowed(_ model: String) -> Bool { models.contains(where: { $0.utf8.elementsEqual(model.utf8) }) }
            let bodyModel = d.member("model", of: JSONDocument.root)
            if let pathModel {
                guard let model = pathModel, allowed(model) else { return .modelNotAllowed }
                if let bodyModel, !(d.string(bodyModel).map(allowed) ?? false) { return .modelNotAllowed }
            } else {
                guard let bodyModel, let model = d.string(bodyModel) else { return .modelMissing }
                guard allowed(model) else { return .modelNotAllowed }
            }
        }
        guard let maxTokens else { return nil }
        let limit = max(0, maxTokens.limit)
        let object: Int
        switch ceiling.holder(in: d) {
        case .success(nil): return nil
        case .success(let o?): object = o
        case .failure(let e): return e
        }
        for spellings in ceiling.ceilings {
            let member: Int
            switch ceiling.field(spellings, in: d, object: object) {
            case .success(nil): continue
            case .success(let m?): member = m
            case .failure(let e): return e
            }
            let key = spellings[0]
            if d.kind(of: member) == .null { continue }
            guard d.kind(of: member) == .number else { return .invalidMaxTokens(key) }
            let exceeds: Bool
            switch d.integer(member) {
            case .value(let n) where n < 0: return .invalidMaxTokens(key)
            case .value(let n): exceeds = n > limit
            case .outOfRange(negative: false): exceeds = true
            case .outOfRange(negative: true), .notAnInteger: return .invalidMaxTokens(key)
            }
            guard exceeds else { continue }
            switch maxTokens.mode {
            case .reject: return .maxTokensExceeded(key, limit: limit)
            case .clamp: edits.replace(d.range(of: member), with: Array(String(limit).utf8))
            }
        }
        return nil
    }

    /// The same checks on raw bytes, for an OpenAI chat body: parsed strictly first (`ambiguous_body`,
    /// `invalid_json`). With nothing configured the body is not read.
    package func evaluate(_ body: [UInt8]) -> BodyDecision {
        guard isActive else { return .forward(body: body, changed: false) }
        let d: JSONDocument
        switch RequestBodyPlan.read(body) {
        case .success(let read): d = read
        case .failure(let error): return .reject(error)
        }
        var edits = JSONEdits()
        if let error = check(d, ceiling: OutputCeiling(endpoint: .openAIChat, path: "/v1/chat/completions"), into: &edits) {
            return .reject(error)
        }
        return edits.isEmpty ? .forward(body: body, changed: false) : .forward(body: edits.applied(to: body), changed: true)
    }
}

extension RelayError {
    /// 400 `invalid_json`: a body check is configured and the body is not exactly one JSON object.
    package static let invalidJSON = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_json",
        message: "The request body must be a single valid JSON object.")

    /// 400 `invalid_request`: a model allowlist is configured and the body has no string `"model"`.
    package static let modelMissing = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_request",
        message: "The request body must name a model as a string in \"model\".")

    /// 403 `model_not_allowed`. Never names the model: nothing from the request is echoed.
    package static let modelNotAllowed = RelayError(
        status: 403, type: "invalid_request_error", code: "model_not_allowed",
        message: "This model is not allowed on this relay.")

    /// 400 `ambiguous_body`: a body some parser could read differently from the relay's strict reader: a key given
    /// twice in any object (after decoding escapes), malformed UTF-8, a lone surrogate escape, a byte order mark,
    /// anything after the top-level value, or two spellings of one field. Nothing from the body is echoed.
    package static let ambiguousBody = RelayError(
        status: 400, type: "invalid_request_error", code: "ambiguous_body",
        message: "The request body could be read in more than one way (a duplicated key, invalid UTF-8, a lone surrogate, or data after the JSON value).")

    /// 415 `unsupported_content_encoding`: a compressed request body on a route that reads bodies.
    package static let unsupportedContentEncoding = RelayError(
        status: 415, type: "invalid_request_error", code: "unsupported_content_encoding",
        message: "Request bodies must not be compressed on this route (Content-Encoding: identity only).")

    /// 415 `unsupported_media_type`: a body with a `Content-Type` other than JSON on a route that reads bodies.
    /// The relay reads it as JSON; a provider that went by the type could read another request in the same bytes.
    package static let unsupportedMediaType = RelayError(
        status: 415, type: "invalid_request_error", code: "unsupported_media_type",
        message: "Request bodies on this route must be JSON (Content-Type: application/json).")

    /// 400 `input_not_metered`: a request whose input the relay cannot count (`ReferencedInput`: a stored
    /// conversation, a file by id or URL) on a route with budgets that does not accept it.
    package static let inputNotMetered = RelayError(
        status: 400, type: "invalid_request_error", code: "input_not_metered",
        message: "Input by reference (previous_response_id, conversation, item references, files by id or URL) and inline documents or video are not available on this relay: they cannot be metered.")

    /// 403 `tool_not_metered`: a request that turns on a tool the provider runs (`ProviderTools`: a web search, a
    /// file search, code execution…), billed per call and never in the counts, on a route with budgets that does
    /// not accept it.
    package static let toolNotMetered = RelayError(
        status: 403, type: "invalid_request_error", code: "tool_not_metered",
        message: "Tools the provider runs (web search, file search, code execution, image generation…) are not available on this relay: their cost cannot be metered.")

    /// 403 `background_not_metered`: a Responses request with `"background": true` on a route with budgets. Its
    /// usage never comes in the answer the relay relays, so it cannot be charged.
    package static let backgroundNotMetered = RelayError(
        status: 403, type: "invalid_request_error", code: "background_not_metered",
        message: "Background responses are not available on this relay: their usage cannot be metered.")

    /// 403 `endpoint_not_metered`: a route with budgets reaches an endpoint whose cost the relay cannot count.
    package static let endpointNotMetered = RelayError(
        status: 403, type: "invalid_request_error", code: "endpoint_not_metered",
        message: "This endpoint is not available on this relay: its usage cannot be metered.")

    /// 400 `invalid_max_tokens`: the value is not a non-negative integer (or null).
    package static func invalidMaxTokens(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "invalid_max_tokens",
                   message: "\"\(key)\" must be a non-negative integer.")
    }

    /// 400 `invalid_count`: a ceiling or a number of choices written as anything but a non-negative JSON number (a
    /// provider may read a string as the number it spells: `OutputCeiling.named`).
    package static func invalidCount(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "invalid_count",
                   message: "\"\(key)\" must be a non-negative integer written as a JSON number.")
    }

    /// 400 `invalid_count` for an output ceiling of 0 (or a fraction that rounds up to it): it would reserve nothing.
    package static func ceilingBelowOne(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "invalid_count",
                   message: "\"\(key)\" must be at least 1.")
    }

    /// 400 `max_tokens_exceeded`; states the configured limit, not the requested value.
    package static func maxTokensExceeded(_ key: String, limit: Int) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "max_tokens_exceeded",
                   message: "\"\(key)\" may not exceed \(limit) on this relay.")
    }
}
