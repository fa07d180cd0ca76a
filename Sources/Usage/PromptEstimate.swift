import JSON

/// The prompt-token estimate: the text of every string the provider will tokenize, weighed by
/// `JSONDocument.textWeight` (an ASCII character a quarter token, OpenAI's rule of thumb for English; any other
/// character a token per UTF-8 byte, the most a byte-level tokenizer spends: 50 000 Linear B characters cost 200 000
/// tokens, and counted four to a token they were 16 times under), divided by four and rounded up. Used for the
/// budget reservation, and for the usage of a stream that ended without the provider's counts. It must never
/// under-count: a client chooses the body, and whatever the estimate misses is spent for free. Non-English text is
/// over-counted (Chinese about 2 to 3 times, Cyrillic, Greek, Arabic or Hindi 5 to 8): the price of a bound that
/// holds for every script outside ASCII. Inside ASCII four characters a token is not a bound: digits and random
/// strings run 1.5 to 2.5 characters a token (a known gap, for a stream cancelled before the provider's counts).
///
/// What counts, read from the body as the one strict reader (`JSONDocument`) decoded it, so `"m\u0065ssages"` is
/// `messages` and no escape hides text:
/// - every string value anywhere in the body (messages and their parts, `system`, `instructions`, `input`,
///   `prompt`, Gemini's `contents` and `systemInstruction`, tool calls' and function calls' `arguments`, tool
///   results, descriptions, enum values, stop sequences…), whatever the provider or endpoint;
/// - the keys inside tool definitions and output schemas (`tools`, `functions`, `response_format`, `parameters`,
///   `input_schema`, `schema`, `responseSchema`), which providers serialise into the prompt;
/// - not: the `model` name, structural tags (`role`, `type`, ids), and binary payloads (`data`, `image_url`, `url`,
///   `file_data`, …): images, files and audio are billed by their own rules, which the relay cannot compute.
///
/// Media (`tokens(_:mediaTokens:)`): each image, audio clip or inline file (an `image_url`, `input_audio`,
/// `file_data`, Gemini's `inlineData`, an Anthropic `source`) counts the larger of its payload's weight ÷ 4 and
/// `mediaTokens`, so neither a small, highly compressible image nor one by URL is free when the provider's count
/// never comes (a stream cancelled before OpenAI's usage event). An Anthropic plain-text document (`source` of
/// type `text`) is text the model reads; it is counted here too, at least as its weight ÷ 4. The estimate is
/// labelled `estimate`, never passed off as the provider's figure.
public enum PromptEstimate {
    /// Keys whose string values are not text the model reads as words.
    static let notText: Set<String> = [
        "model", "role", "type", "id", "tool_call_id", "tool_use_id", "call_id", "detail", "mimeType", "mime_type",
        "data", "image_url", "url", "file_data", "file_id", "file_url", "fileUri", "file_uri", "signature",
    ]
    /// Keys whose subtrees are schemas or the app's own JSON (function arguments and results): their keys are
    /// tokenized too, and nothing in them is a media item.
    static let schemas: Set<String> = [
        "tools", "functions", "response_format", "parameters", "input_schema", "schema", "responseSchema",
        "response_schema", "json_schema", "functionCall", "function_call", "functionResponse", "function_response",
    ]

    /// The estimated prompt tokens of a request body, or nil when it is not a JSON object (read with duplicate keys
    /// allowed: the dev fake provider answers whatever it gets).
    public static func tokens(requestBody: [UInt8]) -> Int? {
        guard let document = try? JSONDocument(parsing: requestBody, duplicates: .allowed) else { return nil }
        return tokens(document)
    }

    /// Whether `key`'s value is one media item: an image, an audio clip or an inline file (`source` only as an
    /// object). Compared by `switch`, not looked up in a set: every key of every body passes here, and hashing each
    /// cost 7 k instructions per request (callgrind).
    static func isMediaKey(_ key: String) -> Bool {
        switch key {
        case "image_url", "inlineData", "inline_data", "input_audio", "file_data", "source": true
        default: false
        }
    }

    /// The estimated prompt tokens of a body already read: its text alone (the dev fake provider's count).
    public static func tokens(_ document: JSONDocument) -> Int { (weight(document) + 3) / 4 }

    /// The estimated prompt tokens of a body already read, media included: the text's, plus for each media item
    /// the larger of its payload's weight ÷ 4 and `mediaTokens`. Saturating.
    public static func tokens(_ document: JSONDocument, mediaTokens: Int) -> Int {
        var media = 0
        let text = count(document, JSONDocument.root, inSchema: false, mediaTokens: mediaTokens, media: &media)
        let (sum, overflow) = ((text + 3) / 4).addingReportingOverflow(media)
        return overflow ? Int.max : sum
    }

    /// The weight of tokenized text in a body already read, in quarter tokens (`JSONDocument.textWeight`).
    public static func weight(_ document: JSONDocument) -> Int {
        var media = 0
        return count(document, JSONDocument.root, inSchema: false, mediaTokens: 0, media: &media)
    }

    private static func count(_ d: JSONDocument, _ node: Int, inSchema: Bool, mediaTokens: Int, media: inout Int) -> Int {
        var total = 0
        let inObject = d.kind(of: node) == .object
        for child in d.children(of: node) {
            var schema = inSchema
            if inObject {
                if inSchema { total += d.keyTextWeight(of: child) }
                if let key = d.key(of: child) {
                    if !inSchema && isMediaKey(key) && (key != "source" || d.kind(of: child) == .object) {
                        let payload = (payloadWeight(d, child) + 3) / 4
                        let (sum, overflow) = media.addingReportingOverflow(max(payload, mediaTokens))
                        media = overflow ? Int.max : sum
                        continue
                    }
                    if d.kind(of: child) == .string && !inSchema && notText.contains(key) { continue }
                    // A function call's arguments and result are the app's JSON, serialized into the prompt like a
                    // schema (an Anthropic `tool_use` `input` is an object; the Responses `input` never is).
                    if schemas.contains(key) || (key == "input" && d.kind(of: child) == .object) { schema = true }
                }
            }
            switch d.kind(of: child) {
            case .string: total += d.textWeight(of: child)
            case .object, .array: total += count(d, child, inSchema: schema, mediaTokens: mediaTokens, media: &media)
            default: break
            }
        }
        return total
    }

    /// Every string's weight in a media item (its base64 data, its URL, a text document's text).
    private static func payloadWeight(_ d: JSONDocument, _ node: Int) -> Int {
        switch d.kind(of: node) {
        case .string: return d.textWeight(of: node)
        case .object, .array: return d.children(of: node).reduce(0) { $0 + payloadWeight(d, $1) }
        default: return 0
        }
    }
}
