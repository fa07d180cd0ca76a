/// The prompt-token estimate used when a provider gave no usage: the characters of the request's message text
/// divided by four, rounded up (OpenAI's rule of thumb for English: one token ≈ 4 characters).
///
/// Characters are Unicode scalars after JSON unescaping. Only message text counts, read from the request body:
/// - OpenAI / Azure OpenAI: `messages[].content` (a string, or the `text` of each part); the Responses API's
///   `instructions` and `input` (a string, or items whose `content` is a string or parts with `text`); a legacy
///   completion's `prompt` string.
/// - Anthropic: `system` (a string or text blocks) and `messages[].content` (a string or blocks: `text`, and the
///   `content` of tool results).
/// - Gemini: `contents[].parts[].text` and `systemInstruction.parts[].text` (also spelled `system_instruction`).
///
/// Images, audio, tool definitions and per-message overhead are not counted, and text in languages that need more
/// tokens per character is undercounted: the estimate is a floor, labelled `estimate`, never passed off as the
/// provider's figure.
public enum PromptEstimate {
    /// Nesting followed into content parts (a tool result's blocks, a Responses item's parts).
    static let maxContentDepth = 4

    /// The estimated prompt tokens of a request body, or nil when it is not a JSON object.
    public static func tokens(requestBody: [UInt8], provider: Provider) -> Int? {
        characters(requestBody: requestBody, provider: provider).map { ($0 + 3) / 4 }
    }

    /// The characters of message text in a request body, or nil when it is not a JSON object.
    public static func characters(requestBody: [UInt8], provider: Provider) -> Int? {
        requestBody.withUnsafeBufferPointer { buffer -> Int? in
            let p = JSONPeek(buffer)
            let root = p.root
            guard p.isObject(at: root), p.endOfValue(at: root) != nil else { return nil }
            var total = 0
            switch provider {
            case .openai, .azureOpenAI:
                for key in ["instructions", "input", "prompt"] {
                    if let v = p.member(key, inObjectAt: root) { total += content(p, v, depth: 0) }
                }
                total += messages(p, root)
            case .anthropic:
                if let v = p.member("system", inObjectAt: root) { total += content(p, v, depth: 0) }
                total += messages(p, root)
            case .gemini:
                for key in ["systemInstruction", "system_instruction"] {
                    if let v = p.member(key, inObjectAt: root) { total += parts(p, v) }
                }
                if let contents = p.member("contents", inObjectAt: root) {
                    for c in p.elements(ofArrayAt: contents) { total += parts(p, c) }
                }
            }
            return total
        }
    }

    private static func messages(_ p: JSONPeek, _ root: Int) -> Int {
        guard let list = p.member("messages", inObjectAt: root) else { return 0 }
        var total = 0
        for m in p.elements(ofArrayAt: list) {
            if let c = p.member("content", inObjectAt: m) { total += content(p, c, depth: 0) }
        }
        return total
    }

    /// A string, or a list of strings and parts (a part's `text`, and its own `content`, followed `maxContentDepth`).
    private static func content(_ p: JSONPeek, _ v: Int, depth: Int) -> Int {
        if let n = p.characterCount(ofStringAt: v) { return n }
        guard depth < maxContentDepth else { return 0 }
        var total = 0
        for e in p.elements(ofArrayAt: v) {
            if let n = p.characterCount(ofStringAt: e) {
                total += n
            } else if p.isObject(at: e) {
                if let t = p.member("text", inObjectAt: e) { total += p.characterCount(ofStringAt: t) ?? 0 }
                if let c = p.member("content", inObjectAt: e) { total += content(p, c, depth: depth + 1) }
            }
        }
        return total
    }

    /// Gemini's `{"parts": [{"text": …}]}`.
    private static func parts(_ p: JSONPeek, _ v: Int) -> Int {
        guard let list = p.member("parts", inObjectAt: v) else { return 0 }
        var total = 0
        for part in p.elements(ofArrayAt: list) {
            if let t = p.member("text", inObjectAt: part) { total += p.characterCount(ofStringAt: t) ?? 0 }
        }
        return total
    }
}
