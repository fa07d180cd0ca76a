import JSON

/// The prompt-token estimate: the characters of every string the provider will tokenize, divided by four and
/// rounded up (OpenAI's rule of thumb for English: one token ≈ 4 characters). Used for the budget reservation, and
/// for the usage of a stream that ended without the provider's counts. It must never under-count: a client chooses
/// the body, and whatever the estimate misses is spent for free.
///
/// What counts, read from the body as the one strict reader (`JSONDocument`) decoded it, so `"m\u0065ssages"` is
/// `messages` and no escape hides text:
/// - every string value anywhere in the body (messages and their parts, `system`, `instructions`, `input`,
///   `prompt`, Gemini's `contents` and `systemInstruction`, tool calls' and function calls' `arguments`, tool
///   results, descriptions, enum values, stop sequences…), whatever the provider or endpoint;
/// - the keys inside tool definitions and output schemas (`tools`, `functions`, `response_format`, `parameters`,
///   `input_schema`, `schema`, `responseSchema`), which providers serialise into the prompt;
/// - not: the `model` name, structural tags (`role`, `type`, ids), and binary payloads (`data`, `image_url`, `url`,
///   `file_data`, …): images, files and audio are billed by their own rules, which the relay cannot compute; the
///   reservation covers them with its floor of the body's bytes ÷ 4 (README, "Budgets").
///
/// Characters are Unicode scalars after unescaping; text in languages that need more tokens per character is still
/// undercounted, so the estimate is labelled `estimate`, never passed off as the provider's figure.
public enum PromptEstimate {
    /// Keys whose string values are not text the model reads as words.
    static let notText: Set<String> = [
        "model", "role", "type", "id", "tool_call_id", "tool_use_id", "call_id", "detail", "mimeType", "mime_type",
        "data", "image_url", "url", "file_data", "file_id", "file_url", "fileUri", "file_uri", "signature",
    ]
    /// Keys whose subtrees are schemas: their keys are tokenized too.
    static let schemas: Set<String> = [
        "tools", "functions", "response_format", "parameters", "input_schema", "schema", "responseSchema",
        "response_schema", "json_schema",
    ]

    /// The estimated prompt tokens of a request body, or nil when it is not a JSON object (read with duplicate keys
    /// allowed: the dev fake provider answers whatever it gets).
    public static func tokens(requestBody: [UInt8]) -> Int? {
        guard let document = try? JSONDocument(parsing: requestBody, duplicates: .allowed) else { return nil }
        return tokens(document)
    }

    /// The estimated prompt tokens of a body already read.
    public static func tokens(_ document: JSONDocument) -> Int { (characters(document) + 3) / 4 }

    /// The characters of tokenized text in a body already read.
    public static func characters(_ document: JSONDocument) -> Int {
        count(document, JSONDocument.root, inSchema: false, depth: 0)
    }

    private static func count(_ d: JSONDocument, _ node: Int, inSchema: Bool, depth: Int) -> Int {
        var total = 0
        for child in d.children(of: node) {
            var schema = inSchema
            if d.kind(of: node) == .object {
                if inSchema { total += d.keyCharacterCount(of: child) }
                if let key = d.key(of: child) {
                    if d.kind(of: child) == .string && !inSchema && notText.contains(key) { continue }
                    if key == "image_url" || key == "inlineData" || key == "inline_data" || key == "input_audio" { continue }
                    if schemas.contains(key) { schema = true }
                }
            }
            switch d.kind(of: child) {
            case .string: total += d.characterCount(of: child)
            case .object, .array: total += count(d, child, inSchema: schema, depth: depth + 1)
            default: break
            }
        }
        return total
    }
}
