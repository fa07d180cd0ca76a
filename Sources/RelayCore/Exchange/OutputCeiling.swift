import JSON
import Usage

/// Where a request names its output ceiling and its number of choices, as the endpoint it goes to reads them, and
/// the one edit the relay makes so that a request the budget guard cannot watch is still bounded. Pure: read from
/// the body's `JSONDocument`, edits out; chosen by the endpoint's shape (`Endpoint`), whatever the route's preset.
///
/// | endpoint | ceiling | choices | written when the request names none |
/// |---|---|---|---|
/// | OpenAI chat completions (any preset) | `max_tokens`, `max_completion_tokens` (the larger) | `n` | `max_completion_tokens` (o-series models reject `max_tokens`) |
/// | legacy completions | `max_tokens`, `max_completion_tokens` | `n` | nothing (the API's default is 16) |
/// | OpenAI Responses API (`…/responses`) | `max_output_tokens` | — | `max_output_tokens` |
/// | Anthropic Messages | `max_tokens` | — | nothing (the API requires `max_tokens`) |
/// | Gemini `generateContent`, `streamGenerateContent` | `generationConfig.maxOutputTokens` | `generationConfig.candidateCount` | `generationConfig.maxOutputTokens` |
///
/// Only the keys the endpoint honours count as a ceiling: a key it ignores would reserve little and bound nothing.
/// Gemini's snake_case spellings (`generation_config`, `max_output_tokens`, `candidate_count`, which Google's JSON
/// parser also accepts) are the same fields; both spellings in one body are ambiguous and refused.
///
/// The edit (`bound`) applies to a request whose answer is not an event stream the guard watches: without
/// `"stream": true`, or a Gemini request other than `streamGenerateContent` with `alt=sse`. It is minimal: one
/// member inserted after the object's last one (or into `generationConfig`), or a `null` ceiling replaced; every
/// other byte stays.
package struct OutputCeiling: Sendable, Equatable {
    /// The member names of the object that holds the keys, any spelling (empty: the top level).
    package let parent: [String]
    /// Each ceiling field, as its spellings.
    package let ceilings: [[String]]
    /// The choices field, as its spellings (empty: the endpoint answers one choice).
    package let choices: [String]
    /// The key written into a request without a ceiling; nil: never written.
    package let written: String?
    /// Gemini decides streaming by the path (`alt=sse`), the others by the body's `stream`.
    package let streamsByPath: Bool
    /// Legacy completions' `best_of`: the provider generates that many answers, bills them all, and returns `n`;
    /// what is reserved is the larger of the two.
    package let generated: String?

    package init(endpoint: Endpoint, path: String) {
        switch endpoint {
        case .openAIResponses:
            self.init(parent: [], ceilings: [["max_output_tokens"]], choices: [], written: "max_output_tokens")
        case .anthropicMessages:
            self.init(parent: [], ceilings: [["max_tokens"]], choices: [], written: nil)
        case .geminiGenerate:
            self.init(parent: ["generationConfig", "generation_config"], ceilings: [["maxOutputTokens", "max_output_tokens"]],
                      choices: ["candidateCount", "candidate_count"], written: "maxOutputTokens", streamsByPath: true)
        case .openAIChat, .free, .unmetered:
            let chat = endpoint == .openAIChat && Endpoint.isChatCompletions(path)
            self.init(parent: [], ceilings: [["max_tokens"], ["max_completion_tokens"]], choices: ["n"],
                      written: chat ? "max_completion_tokens" : nil, generated: "best_of")
        }
    }

    private init(parent: [String], ceilings: [[String]], choices: [String], written: String?, streamsByPath: Bool = false,
                 generated: String? = nil) {
        self.parent = parent
        self.ceilings = ceilings
        self.choices = choices
        self.written = written
        self.streamsByPath = streamsByPath
        self.generated = generated
    }


    /// What a body names.
    package struct Named: Sendable, Equatable {
        /// The largest ceiling (nil: none, `null`, or not a count).
        var ceiling: Int?
        /// The choices asked for (at least 1).
        var choices = 1
    }

    /// The object holding the fields (the top level, or the one `parent` member); nil when absent or not an object.
    /// Refuses both spellings of the parent.
    package func holder(in d: JSONDocument) -> Result<Int?, RelayError> {
        guard !parent.isEmpty else { return .success(JSONDocument.root) }
        let found = parent.compactMap { d.member($0, of: JSONDocument.root) }
        guard found.count <= 1 else { return .failure(.ambiguousBody) }
        guard let object = found.first, d.kind(of: object) == .object else { return .success(nil) }
        return .success(object)
    }

    /// The member for `field` (one of its spellings) in `object`; both spellings given is ambiguous.
    package func field(_ spellings: [String], in d: JSONDocument, object: Int) -> Result<Int?, RelayError> {
        let found = spellings.compactMap { d.member($0, of: object) }
        return found.count <= 1 ? .success(found.first) : .failure(.ambiguousBody)
    }

    /// The ceiling and choices the body names, each read with `count` (nil: not a count). Anything but a JSON
    /// number or `null` there is refused (400 `invalid_count`): Gemini reads `"candidateCount": "8"` as 8 (proto3's
    /// JSON takes integers written as strings), and a count the relay did not read would reserve one default answer
    /// for eight long ones. So is a ceiling below 1.
    package func named(in d: JSONDocument, count: (Int) -> Int?) -> Result<Named, RelayError> {
        let object: Int?
        switch holder(in: d) {
        case .success(let o): object = o
        case .failure(let e): return .failure(e)
        }
        var named = Named()
        guard let object else { return .success(named) }
        for spellings in ceilings + (choices.isEmpty ? [] : [choices]) {
            let member: Int?
            switch field(spellings, in: d, object: object) {
            case .success(let m): member = m
            case .failure(let e): return .failure(e)
            }
            guard let member, d.kind(of: member) != .null else { continue }
            guard d.kind(of: member) == .number, let n = count(member) else { return .failure(.invalidCount(spellings[0])) }
            if spellings == choices {
                named.choices = max(named.choices, n)
            } else {
                // 0 reserves nothing, and Gemini reads an explicit 0 as unset (proto3's default): no ceiling at all.
                // OpenAI and Anthropic refuse it themselves.
                guard n >= 1 else { return .failure(.ceilingBelowOne(spellings[0])) }
                named.ceiling = max(named.ceiling ?? 0, n)
            }
        }
        if let generated, let member = d.member(generated, of: object), d.kind(of: member) != .null {
            guard d.kind(of: member) == .number, let n = count(member) else { return .failure(.invalidCount(generated)) }
            named.choices = max(named.choices, n)
        }
        return .success(named)
    }

    /// Whether the answer will be an event stream of the answer's parts (which the guard watches). For Gemini only
    /// `streamGenerateContent` with `alt=sse`: `generateContent` answers in one piece, also when `alt=sse` frames it
    /// as an event, which the guard could cut only after all of it.
    package func streams(_ d: JSONDocument, path: String) -> Bool {
        streamsByPath ? Endpoint.isGeminiStreamMethod(path) && Self.asksForEventStream(path)
            : d.member("stream", of: JSONDocument.root).map(d.isTrue) ?? false
    }

    /// The edit for a request that names no ceiling and reserved `ceiling` tokens per choice: the ceiling written in
    /// (inserted, or replacing a `null`); nothing when the endpoint takes no written ceiling or its answer streams
    /// (the budget guard watches a stream).
    package func bound(_ d: JSONDocument, path: String, ceiling: Int, into edits: inout JSONEdits) {
        guard let written, !streams(d, path: path) else { return }
        let value = Array(String(ceiling).utf8)
        guard !parent.isEmpty else {
            Self.set(written, to: value, inObject: JSONDocument.root, of: d, into: &edits)
            return
        }
        let found = parent.compactMap { d.member($0, of: JSONDocument.root) }
        guard let object = found.first else {
            let member = Array(#""\#(parent[0])":{"\#(written)":"#.utf8) + value + [UInt8(ascii: "}")]
            Self.insert(member, inObject: JSONDocument.root, of: d, into: &edits)
            return
        }
        switch d.kind(of: object) {
        case .null:
            edits.replace(d.range(of: object), with: Array(#"{"\#(written)":"#.utf8) + value + [UInt8(ascii: "}")])
        case .object:
            Self.set(written, to: value, inObject: object, of: d, into: &edits)
        default:
            break   // not an object: the provider refuses the request itself
        }
    }

    /// `key` set to `value` in `object`: inserted when absent (no other spelling either), its `null` replaced; any
    /// other value is left to the provider.
    private static func set(_ key: String, to value: [UInt8], inObject object: Int, of d: JSONDocument, into edits: inout JSONEdits) {
        guard let member = d.member(key, of: object) else {
            insert(Array(#""\#(key)":"#.utf8) + value, inObject: object, of: d, into: &edits)
            return
        }
        if d.kind(of: member) == .null { edits.replace(d.range(of: member), with: value) }
    }

    /// `member` added after the object's last member (with a comma), or right after the `{` of an empty object.
    package static func insert(_ member: [UInt8], inObject object: Int, of d: JSONDocument, into edits: inout JSONEdits) {
        var last: Int?
        for child in d.children(of: object) { last = child }
        guard let last else {
            edits.insert(member, at: d.range(of: object).lowerBound + 1)
            return
        }
        edits.insert([UInt8(ascii: ",")] + member, at: d.range(of: last).upperBound)
    }

    /// Gemini answers an event stream only for `alt=sse`: an event stream here means exactly one parameter named
    /// `alt` or `$alt`, read as Google reads names (percent-decoded, any case: `%61lt`, `ALT`), whose value decodes
    /// to `sse`. Anything else (two `alt`s, whichever Google keeps; a value spelled otherwise) is judged no stream, so
    /// the ceiling is written: a stream with one is only bounded, an answer taken for a stream without one would not
    /// be.
    package static func asksForEventStream(_ path: String) -> Bool {
        guard let question = path.firstIndex(of: "?") else { return false }
        let values = QueryParameters.values(named: ["alt", "$alt"], in: String(path[path.index(after: question)...]))
        return values.count == 1 && values[0] == Array("sse".utf8)
    }
}
