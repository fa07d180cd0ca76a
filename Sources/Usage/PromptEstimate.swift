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
    static let notText = ["model", "role", "type", "id", "tool_call_id", "tool_use_id", "call_id", "detail", "mimeType",
                          "mime_type", "data", "url", "file_id", "file_url", "fileUri", "file_uri", "signature"]
    /// Keys whose subtrees are schemas or the app's own JSON (function arguments and results): their keys are
    /// tokenized too, and nothing in them is a media item.
    /// The one list of these: the request checks (`ReferencedInput`, `AudioRequest`) skip the same subtrees.
    public static let schemas = ["tools", "functions", "response_format", "parameters", "input_schema", "schema",
                                 "responseSchema", "response_schema", "json_schema", "functionCall", "function_call",
                                 "functionResponse", "function_response"]
    /// Keys whose value is one media item: an image, an audio clip or an inline file (`source` only as an object).
    /// Their string values are not text either.
    static let media = ["image_url", "inlineData", "inline_data", "input_audio", "file_data", "source"]

    /// Every key the walk looks at, found with one `JSONDocument.key(_:in:)` per member (no string made, nothing
    /// hashed: a `Set<String>` per key cost 7 k instructions per request), and what each is (`Role`). `input` is
    /// the app's JSON only as an object (an Anthropic `tool_use`'s arguments; the Responses `input` never is).
    static let keys = JSONDocument.KeyNames(notText + schemas + media + ["input"])
    static let roles: [Role] = notText.map { _ in .notText } + schemas.map { _ in .schema } + media.map { _ in .media } + [.inputObject]

    /// `source`'s index in `keys`: a media item only as an object, text otherwise.
    static let sourceIndex = notText.count + schemas.count + media.firstIndex(of: "source")!

    enum Role { case notText, schema, media, inputObject }

    /// The estimated prompt tokens of a request body, or nil when it is not a JSON object (read with duplicate keys
    /// allowed: the dev fake provider answers whatever it gets).
    public static func tokens(requestBody: [UInt8]) -> Int? {
        guard let document = try? JSONDocument(parsing: requestBody, duplicates: .allowed) else { return nil }
        return tokens(document)
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
        let keys = Self.keys   // loaded once, not once per member
        for child in d.children(of: node) {
            var schema = inSchema
            let kind = d.kind(of: child)
            if inObject {
                if inSchema { total += d.keyTextWeight(of: child) }
                if let index = d.key(child, in: keys) {
                    switch roles[index] {
                    case .media where index == Self.sourceIndex && kind != .object:
                        break
                    case .media where !inSchema:
                        let payload = (payloadWeight(d, child) + 3) / 4
                        let (sum, overflow) = media.addingReportingOverflow(max(payload, mediaTokens))
                        media = overflow ? Int.max : sum
                        continue
                    case .media:
                        break
                    case .notText:
                        if kind == .string && !inSchema { continue }
                    case .schema:
                        schema = true
                    case .inputObject:
                        if kind == .object { schema = true }
                    }
                }
            }
            switch kind {
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
