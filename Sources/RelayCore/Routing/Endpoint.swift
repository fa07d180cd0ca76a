import Usage

/// What kind of provider endpoint a request reaches, judged by the path's shape and the method, whatever the route's
/// preset: a Gemini route can reach Gemini's OpenAI-compatible `/v1beta/openai/chat/completions`, an Anthropic
/// route Anthropic's OpenAI-compatible `/v1/chat/completions`, and each must be read (usage, ceiling, prompt) as the
/// shape it is. Pure.
///
/// | shape | paths (bare, query removed, one trailing `/` ignored) | method |
/// |---|---|---|
/// | `openAIChat` | `…/chat/completions`, legacy `…/completions` | POST |
/// | `openAIResponses` | `…/responses` | POST |
/// | `anthropicMessages` | `…/messages` | POST |
/// | `geminiGenerate` | `…/models/NAME:generateContent`, `…:streamGenerateContent` (`:` also as `%3A`) | POST |
/// | `free` | any GET, HEAD, OPTIONS or DELETE (model lists, retrievals, deletions); token counting: `…/messages/count_tokens`, `…:countTokens`, `…/responses/input_tokens` | |
/// | `unmetered` | any other POST, PUT or PATCH (embeddings, images, audio, batches, files, cached contents, fine-tuning…) | |
///
/// On a route with budgets, `unmetered` is refused (403 `endpoint_not_metered`) unless the route says
/// `"unmetered": true`: the relay cannot count what such an endpoint costs, and an unknown count never means free.
package enum Endpoint: String, Sendable, Equatable {
    case openAIChat = "openai_chat"
    case openAIResponses = "openai_responses"
    case anthropicMessages = "anthropic_messages"
    case geminiGenerate = "gemini_generate"
    case free
    case unmetered

    package init(method: String, path: String) {
        switch method {
        case "GET", "HEAD", "OPTIONS", "DELETE":
            self = .free
            return
        default:
            break
        }
        // Compared as bytes (String's suffix tests compare grapheme clusters: about 30 000 instructions a request),
        // on the string's own storage: only a path with a `%` is copied.
        self = Self.withBare(path) { bare in
            // Gemini's method separator, as sent or percent-encoded (a reserved character: left encoded by the path
            // rules, and read as `:` by Google's front end).
            guard bare.contains(UInt8(ascii: "%")) else { return Self.shape(bare) }
            return Self.decodingColons(bare).withUnsafeBufferPointer { Self.shape($0) }
        }
    }

    /// The shape of a bare path (`withBare`), by its ending.
    private static func shape(_ bare: UnsafeBufferPointer<UInt8>) -> Endpoint {
        func ends(_ suffix: StaticString) -> Bool { hasSuffix(bare, suffix) }
        if ends("/completions") {   // chat and legacy completions alike
            return .openAIChat
        } else if ends("/responses") {
            return .openAIResponses
        } else if ends("/messages") {
            return .anthropicMessages
        } else if ends(":generateContent") || ends(":streamGenerateContent") {
            return .geminiGenerate
        } else if ends("/messages/count_tokens") || ends(":countTokens") || ends("/responses/input_tokens") {
            return .free
        } else {
            return .unmetered
        }
    }

    /// Whether `path` (query and one trailing `/` ignored) calls Gemini's `streamGenerateContent` (`:` also as
    /// `%3A`), the method that answers in parts.
    static func isGeminiStreamMethod(_ path: String) -> Bool {
        withBare(path) { bare in
            guard bare.contains(UInt8(ascii: "%")) else { return hasSuffix(bare, ":streamGenerateContent") }
            return Self.decodingColons(bare).withUnsafeBufferPointer { hasSuffix($0, ":streamGenerateContent") }
        }
    }

    /// Whether `path` (query and one trailing `/` ignored) is chat completions rather than legacy completions.
    static func isChatCompletions(_ path: String) -> Bool {
        withBare(path) { hasSuffix($0, "/chat/completions") }
    }

    /// `body` on the bytes of `path` up to its first `?`, without one trailing `/` (a path longer than "/").
    static func withBare<R>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var path = path
        return path.withUTF8 { all in
            var end = 0
            while end < all.count && all[end] != UInt8(ascii: "?") { end += 1 }
            if end > 1 && all[end - 1] == UInt8(ascii: "/") { end -= 1 }
            return body(UnsafeBufferPointer(rebasing: all[..<end]))
        }
    }

    /// Whether the relay reads this endpoint's answers for usage and reserves for its requests.
    package var isMetered: Bool { wireFormat != nil }

    /// The wire format whose readers (usage, ceiling, closing event) apply: nil for free and unmetered endpoints.
    package var wireFormat: Provider? {
        switch self {
        case .openAIChat, .openAIResponses: .openai
        case .anthropicMessages: .anthropic
        case .geminiGenerate: .gemini
        case .free, .unmetered: nil
        }
    }
}

extension Endpoint {
    /// The model a Gemini generate path names, as Google routes it: the last segment is `NAME:method` (`:` also as
    /// `%3A`) and the one before it is `models` (`/v1beta/models/gemini-2.5-flash:streamGenerateContent`). Nil for
    /// any other shape (a tuned model, nested `models/` segments): a model allowlist then refuses the request.
    package static func geminiModel(_ path: String) -> String? {
        withBare(path) { bare -> String? in
            let decoded = decodingColons(bare)
            guard let slash = decoded.lastIndex(of: UInt8(ascii: "/")) else { return nil }
            let last = decoded[(slash + 1)...]
            guard let colon = last.firstIndex(of: UInt8(ascii: ":")), colon > last.startIndex else { return nil }
            let parent = decoded[..<slash]
            guard parent.count >= 7, parent.suffix(7).elementsEqual("/models".utf8) else { return nil }
            return String(decoding: last[..<colon], as: UTF8.self)
        }
    }

    /// Azure OpenAI's deployment, the model Azure runs whatever the body's `model` says: in a path
    /// `…/openai/deployments/NAME/…` (those two segments in any case), `.some(NAME)`; `.some(nil)` when a
    /// `deployments` segment follows `openai` without a name and an operation after it; nil for any other path (Azure's
    /// `/openai/v1/…` API takes the deployment from the body's `model`).
    package static func azureDeployment(_ path: String) -> String?? {
        withBare(path) { bare -> String?? in
            // Every request on a strict route asks this, so the bytes are walked in place (no segments array).
            func segment(_ at: Int, is name: StaticString) -> Bool {
                let n = name.utf8CodeUnitCount
                guard at + n <= bare.count, at + n == bare.count || bare[at + n] == UInt8(ascii: "/") else { return false }
                for i in 0..<n where bare[at + i] | 0x20 != name.utf8Start[i] { return false }
                return true
            }
            var start = 1   // the first segment's first byte (the path starts with `/`)
            while start < bare.count {
                var end = start
                while end < bare.count && bare[end] != UInt8(ascii: "/") { end += 1 }
                if segment(start, is: "openai"), end + 1 < bare.count, segment(end + 1, is: "deployments") {
                    let name = end + 1 + 11 + 1
                    var nameEnd = name
                    while nameEnd < bare.count && bare[nameEnd] != UInt8(ascii: "/") { nameEnd += 1 }
                    guard nameEnd > name, nameEnd + 1 < bare.count else { return .some(nil) }
                    return .some(String(decoding: UnsafeBufferPointer(rebasing: bare[name..<nameEnd]), as: UTF8.self))
                }
                start = end + 1
            }
            return nil
        }
    }

    /// `path` with every `%3A` / `%3a` read as `:`.
    static func decodingColons(_ b: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(b.count)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "%"), i + 2 < b.count, b[i + 1] == UInt8(ascii: "3"), b[i + 2] | 0x20 == UInt8(ascii: "a") {
                out.append(UInt8(ascii: ":"))
                i += 3
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return out
    }
}

extension Endpoint {
    /// Whether `bytes` ends with `suffix`, compared byte by byte (no generic sequence machinery on the request path).
    static func hasSuffix(_ bytes: UnsafeBufferPointer<UInt8>, _ suffix: StaticString) -> Bool {
        let n = suffix.utf8CodeUnitCount
        guard bytes.count >= n else { return false }
        let start = bytes.count - n
        let tail = suffix.utf8Start
        for i in 0..<n where bytes[start + i] != tail[i] { return false }
        return true
    }
}
