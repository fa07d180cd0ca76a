import JSON

/// Adds `"stream_options":{"include_usage":true}` to a streaming OpenAI-shaped chat request (`Endpoint.openAIChat`,
/// on any preset) so the provider ends the stream with its token counts (OpenAI sends usage in a stream only when
/// asked). Pure: the body's `JSONDocument` in, edits out.
///
/// The edit is minimal, like the max-tokens clamp: only the bytes of one insertion or one replaced value change; key
/// order, spacing and every other byte stay. The body was read strictly (duplicate keys at any depth, escapes
/// decoded), so what is read here is what the provider reads.
///
/// | request | result |
/// |---|---|
/// | no `"stream": true` | untouched |
/// | no `stream_options` | `,"stream_options":{"include_usage":true}` inserted after the last member |
/// | `"stream_options": null` | the `null` replaced by `{"include_usage":true}` |
/// | `stream_options` an object without `include_usage` (or with `null`) | `"include_usage":true` added inside |
/// | `"include_usage": true` | untouched: the client asked, the client gets the usage event |
/// | `"include_usage": false` | rewritten to `true` (see below) |
/// | `stream_options` not an object, `include_usage` or `stream` not a boolean | refused (`check`): a lenient provider might read `"false"` or `0` as false and send no usage |
///
/// An explicit `false` is overridden, and the usage event is removed from the client's stream like an injected
/// one: the client still sees the stream it asked for, and a client cannot blind the relay's accounting (and the
/// budgets built on it) by asking for no usage.
enum IncludeUsageInjection {
    /// A body whose streaming switches are not plain booleans: 400 before anything is sent.
    static func check(_ d: JSONDocument) -> RelayError? {
        if let stream = d.member("stream", of: JSONDocument.root), d.kind(of: stream) != .bool, d.kind(of: stream) != .null {
            return .invalidStreamOption("stream")
        }
        guard let options = d.member("stream_options", of: JSONDocument.root) else { return nil }
        switch d.kind(of: options) {
        case .null: return nil
        case .object: break
        default: return .invalidStreamOption("stream_options")
        }
        if let include = d.member("include_usage", of: options), d.kind(of: include) != .bool, d.kind(of: include) != .null {
            return .invalidStreamOption("include_usage")
        }
        return nil
    }

    /// Adds the edits that ask for usage; returns whether the relay asked for usage the client did not (the
    /// exchange then strips the usage-only event from the client's stream).
    static func inject(_ d: JSONDocument, into edits: inout JSONEdits) -> Bool {
        guard let stream = d.member("stream", of: JSONDocument.root), d.isTrue(stream) else { return false }
        guard let options = d.member("stream_options", of: JSONDocument.root) else {
            OutputCeiling.insert(Array(#""stream_options":{"include_usage":true}"#.utf8), inObject: JSONDocument.root, of: d, into: &edits)
            return true
        }
        switch d.kind(of: options) {
        case .null:
            edits.replace(d.range(of: options), with: Array(#"{"include_usage":true}"#.utf8))
            return true
        case .object:
            guard let include = d.member("include_usage", of: options) else {
                let open = d.range(of: options).lowerBound + 1
                let empty = d.children(of: options).first(where: { _ in true }) == nil
                edits.insert(Array((empty ? #""include_usage":true"# : #""include_usage":true,"#).utf8), at: open)
                return true
            }
            if d.isTrue(include) { return false }
            edits.replace(d.range(of: include), with: Array("true".utf8))
            return true
        default:
            return false
        }
    }
}

extension RelayError {
    /// 400 `invalid_stream_option`: `stream`, `stream_options` or `include_usage` is not of its documented type.
    static func invalidStreamOption(_ key: String) -> RelayError {
        RelayError(status: 400, type: "invalid_request_error", code: "invalid_stream_option",
                   message: "\"\(key)\" must be a boolean (stream_options an object).")
    }
}
