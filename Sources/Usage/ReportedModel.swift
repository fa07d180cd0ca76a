import JSON
/// Where each provider names the model that answered (issue 23: prices follow the model the provider reports,
/// which may be a dated version of the one asked for). Read with `JSONPeek`, like the usage counts:
/// - OpenAI / Azure chat chunks and bodies: the top-level `model`; Responses API: `response.model`;
/// - Anthropic: `message_start`'s `message.model`, a Messages body's `model`;
/// - Gemini: `modelVersion` (each chunk, each element of a JSON array).
enum ReportedModel {
    /// The longest model name kept; a longer one is not a model name anyone prices.
    static let maxBytes = 256
    /// OpenAI chat chunks looked at for a model before giving up (Azure's first chunk, its prompt-filter result,
    /// names none).
    static let maxChatChunks = 4

    /// The model a complete JSON body names.
    static func body(_ p: JSONPeek, provider: Provider) -> String? {
        let root = p.root
        switch provider {
        case .openai, .azureOpenAI, .anthropic:
            return p.member("model", inObjectAt: root).flatMap { p.shortString(at: $0) }
        case .gemini:
            if p.byte(at: root) == UInt8(ascii: "[") {
                return p.elements(ofArrayAt: root).reversed().lazy
                    .compactMap { p.member("modelVersion", inObjectAt: $0).flatMap { p.shortString(at: $0) } }.first
            }
            return p.member("modelVersion", inObjectAt: root).flatMap { p.shortString(at: $0) }
        }
    }
}

extension JSONPeek {
    /// The contents of a short string value without escapes (a model name), or nil: not a string, empty, escaped,
    /// longer than `ReportedModel.maxBytes`, or not printable ASCII (every provider's model names are; this also
    /// keeps `String(validating:)`, macOS 15, out of the client-facing floor).
    func shortString(at i: Int) -> String? {
        guard byte(at: i) == UInt8(ascii: "\""), let end = endOfString(at: i) else { return nil }
        let contents = UnsafeBufferPointer(rebasing: bytes[(i + 1)..<(end - 1)])
        guard !contents.isEmpty, contents.count <= ReportedModel.maxBytes,
              !contents.contains(UInt8(ascii: "\\")), contents.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: contents, as: UTF8.self)
    }
}
