import Usage

/// Where a request names its output ceiling and its number of choices, as the endpoint it goes to reads them, and
/// the one edit the relay makes so that a request the budget guard cannot watch is still bounded. Pure: bytes in,
/// bytes out; built per request from the provider and the path.
///
/// | endpoint | ceiling | choices | written when the request names none |
/// |---|---|---|---|
/// | OpenAI / Azure chat completions | `max_tokens`, `max_completion_tokens` (the larger) | `n` | `max_completion_tokens` (o-series models reject `max_tokens`) |
/// | other OpenAI paths (legacy completions, …) | `max_tokens`, `max_completion_tokens` | `n` | nothing |
/// | OpenAI Responses API (`…/responses`) | `max_output_tokens` | — | `max_output_tokens` |
/// | Anthropic Messages | `max_tokens` | — | nothing (the API requires `max_tokens`) |
/// | Gemini `generateContent`, `streamGenerateContent` | `generationConfig.maxOutputTokens` | `generationConfig.candidateCount` | `generationConfig.maxOutputTokens` |
///
/// Only the keys the endpoint honours count as a ceiling: a key it ignores (an OpenAI-compatible server may ignore
/// `max_output_tokens` on chat) would reserve little and bound nothing. Gemini's snake_case spellings
/// (`generation_config`, `max_output_tokens`, `candidate_count`, which Google's JSON parser also accepts) are the
/// same fields.
///
/// The edit (`bound`) applies to a request whose answer is not an event stream the guard watches: without
/// `"stream": true` (OpenAI, Responses), or a Gemini path without `alt=sse`. Like the usage injection, it is
/// minimal: one member inserted after the object's last one (or into `generationConfig`), or a `null` ceiling
/// replaced; every other byte stays. A body it cannot edit unambiguously is refused rather than forwarded unbounded:
/// not strictly one JSON object (400 `invalid_json`; an empty body goes on, the provider refuses it), or
/// `generationConfig` given twice (400 `duplicate_key`).
struct OutputCeiling: Sendable, Equatable {
    /// The member names of the object that holds the keys, any spelling (empty: the top level).
    let parent: [String]
    /// Each ceiling field, as its spellings.
    let ceilings: [[String]]
    /// The choices field, as its spellings (empty: the endpoint answers one choice).
    let choices: [String]
    /// The key written into a request without a ceiling; nil: never written.
    let written: String?
    /// Gemini decides streaming by the path (`alt=sse`), the others by the body's `stream`.
    let streamsByPath: Bool

    init(provider: Provider, path: String) {
        let bare = Self.bare(path)
        switch provider {
        case .openai, .azureOpenAI:
            if bare.hasSuffix("/responses") {
                self.init(parent: [], ceilings: [["max_output_tokens"]], choices: [], written: "max_output_tokens")
            } else {
                self.init(parent: [], ceilings: [["max_tokens"], ["max_completion_tokens"]], choices: ["n"],
                          written: bare.hasSuffix("/chat/completions") ? "max_completion_tokens" : nil)
            }
        case .anthropic:
            self.init(parent: [], ceilings: [["max_tokens"]], choices: [], written: nil)
        case .gemini:
            let generates = [":generateContent", ":streamGenerateContent", "%3AgenerateContent", "%3AstreamGenerateContent",
                             "%3agenerateContent", "%3astreamGenerateContent"].contains { bare.hasSuffix($0) }
            self.init(parent: ["generationConfig", "generation_config"], ceilings: [["maxOutputTokens", "max_output_tokens"]],
                      choices: ["candidateCount", "candidate_count"], written: generates ? "maxOutputTokens" : nil,
                      streamsByPath: true)
        }
    }

    private init(parent: [String], ceilings: [[String]], choices: [String], written: String?, streamsByPath: Bool = false) {
        self.parent = parent
        self.ceilings = ceilings
        self.choices = choices
        self.written = written
        self.streamsByPath = streamsByPath
    }

    /// What a body names.
    struct Named: Sendable, Equatable {
        /// The largest ceiling (nil: none, `null`, or not a JSON object).
        var ceiling: Int?
        /// The choices asked for (at least 1).
        var choices = 1
        /// A field read here given twice: providers read one of them, the relay cannot know which.
        var duplicatedKey: String?
    }

    /// The ceiling and choices `body` names, each read with `count` (nil: not a count).
    func named(in body: [UInt8], count: (Range<Int>) -> Int?) -> Named {
        guard let top = try? JSONTopLevel.scan(body) else { return Named() }
        var members = top
        var offset = 0
        if !parent.isEmpty {
            let found = top.filter { m in parent.contains { m.hasKey($0) } }
            guard found.count <= 1 else { return Named(duplicatedKey: parent[0]) }
            guard let object = found.first, object.kind == .object,
                  let inner = try? JSONTopLevel.scan(Array(body[object.valueRange]))
            else { return Named() }
            members = inner
            offset = object.valueRange.lowerBound
        }
        var named = Named()
        for field in ceilings + (choices.isEmpty ? [] : [choices]) {
            let found = members.filter { m in field.contains { m.hasKey($0) } }
            guard found.count <= 1 else { return Named(duplicatedKey: field[0]) }
            guard let member = found.first, member.kind == .number,
                  let n = count((member.valueRange.lowerBound + offset)..<(member.valueRange.upperBound + offset))
            else { continue }
            if field == choices {
                named.choices = max(1, n)
            } else {
                named.ceiling = max(named.ceiling ?? 0, n)
            }
        }
        return named
    }

    /// The body to forward for a request that names no ceiling and reserved `ceiling` tokens per choice: with the
    /// ceiling written in, when its answer is not an event stream the guard watches; else unchanged.
    func bound(_ body: [UInt8], path: String, ceiling: Int) -> Result<[UInt8], RelayError> {
        guard let written else { return .success(body) }
        let top: [JSONMember]
        do {
            top = try JSONTopLevel.scan(body)
        } catch {
            // An empty body asks for nothing a provider would answer; anything else might be read as JSON by a
            // more lenient parser than ours, and answered without a ceiling.
            return error.kind == .empty ? .success(body) : .failure(.invalidJSON)
        }
        if streamsByPath ? Self.asksForEventStream(path) : Self.asksForStream(body, top) { return .success(body) }
        let value = Array(String(ceiling).utf8)
        guard !parent.isEmpty else {
            return .success(Self.setting(written, to: value, inObjectAt: Self.objectStart(body), members: top, of: body))
        }
        let found = top.filter { m in parent.contains { m.hasKey($0) } }
        guard found.count <= 1 else { return .failure(.duplicateKey(parent[0])) }
        guard let object = found.first else {
            let member = Array(#""\#(parent[0])":{"\#(written)":"#.utf8) + value + [UInt8(ascii: "}")]
            return .success(Self.inserting(member, inObjectAt: Self.objectStart(body), after: top.last, of: body))
        }
        switch object.kind {
        case .null:
            return .success(Self.splice(body, at: object.valueRange, Array(#"{"\#(written)":"#.utf8) + value + [UInt8(ascii: "}")]))
        case .object:
            guard let inner = try? JSONTopLevel.scan(Array(body[object.valueRange])) else { return .success(body) }
            let shifted = inner.map { m in
                JSONMember(key: m.key, valueRange: (m.valueRange.lowerBound + object.valueRange.lowerBound)..<(m.valueRange.upperBound + object.valueRange.lowerBound),
                           kind: m.kind)
            }
            return .success(Self.setting(written, to: value, inObjectAt: object.valueRange.lowerBound, members: shifted, of: body))
        default:
            return .success(body)   // not an object: the provider refuses the request itself
        }
    }

    /// `key` set to `value` in the object opening at `open` whose members are `members` (absolute ranges): inserted
    /// when absent, its `null` replaced; any other value is left to the provider.
    private static func setting(_ key: String, to value: [UInt8], inObjectAt open: Int, members: [JSONMember],
                                of body: [UInt8]) -> [UInt8] {
        let found = members.filter { $0.hasKey(key) }
        guard let member = found.first else {
            return inserting(Array(#""\#(key)":"#.utf8) + value, inObjectAt: open, after: members.last, of: body)
        }
        guard found.count == 1, member.kind == .null else { return body }
        return splice(body, at: member.valueRange, value)
    }

    /// `member` added after the last member's value (with a comma), or right after the `{` of an empty object.
    private static func inserting(_ member: [UInt8], inObjectAt open: Int, after last: JSONMember?, of body: [UInt8]) -> [UInt8] {
        guard let last else { return splice(body, at: (open + 1)..<(open + 1), member) }
        let end = last.valueRange.upperBound
        return splice(body, at: end..<end, [UInt8(ascii: ",")] + member)
    }

    private static func splice(_ body: [UInt8], at range: Range<Int>, _ bytes: [UInt8]) -> [UInt8] {
        var out = body
        out.replaceSubrange(range, with: bytes)
        return out
    }

    /// The top-level `{` (the scan passed, so it is the first byte that is not whitespace).
    private static func objectStart(_ body: [UInt8]) -> Int {
        body.firstIndex { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D } ?? 0
    }

    /// Exactly one top-level `"stream": true`: the answer is an event stream, which the guard watches.
    private static func asksForStream(_ body: [UInt8], _ members: [JSONMember]) -> Bool {
        let stream = members.filter { $0.hasKey("stream") }
        return stream.count == 1 && stream[0].kind == .bool && body[stream[0].valueRange.lowerBound] == UInt8(ascii: "t")
    }

    /// Gemini answers an event stream only for `alt=sse` (given once, and no other `alt`).
    private static func asksForEventStream(_ path: String) -> Bool {
        guard let question = path.firstIndex(of: "?") else { return false }
        let alts = path[path.index(after: question)...].split(separator: "&")
            .filter { $0.hasPrefix("alt=") || $0.hasPrefix("$alt=") }
        return alts.count == 1 && (alts[0] == "alt=sse" || alts[0] == "$alt=sse")
    }

    private static func bare(_ path: String) -> Substring {
        path[..<(path.firstIndex(of: "?") ?? path.endIndex)]
    }
}
