import JSON

/// Whether a request body brings input the relay never sees: content the provider fetches or keeps by reference, and
/// bills as input tokens. Pure.
///
/// Why it matters: the provider's prompt count is the only measure of such input, and an OpenAI stream reports it
/// only at its end. A client that cancels after the first byte leaves the relay its own estimate, which counts the
/// body's text (`PromptEstimate`): a `previous_response_id` naming a long conversation, or a 500-page PDF by URL, is
/// billed in full and charged a few tokens, again on every cancelled request. So on a route with budgets such a
/// request is refused (400 `input_not_metered`) unless the route accepts the risk (`referencedInput`).
///
/// What counts (keys compared after decoding escapes; a `null` value is none):
/// - at the top level, the Responses API's stored state: `previous_response_id` and `conversation`;
/// - at any depth, files by id or URL: `file_id` (OpenAI's chat `file` part and Responses `input_file` /
///   `input_image`, Anthropic's `file` source), `file_url` (Responses), Gemini's `fileUri` / `file_uri`
///   (`fileData`); and Anthropic's URL sources: a `source` object whose `type` is `url` or `file`.
/// Not inside a schema or `tools` (an app's function may well take a `file_id` argument) or `metadata` (its keys are
/// the app's). Images by URL are not here: each is billed at a bounded number of tokens (a few thousand at most).
package enum ReferencedInput {
    static let topLevelKeys = ["previous_response_id", "conversation"]
    static let keys = ["file_id", "file_url", "fileUri", "file_uri"]
    /// Subtrees whose keys are the app's own names, not the provider's fields.
    static let skipped = ["tools", "functions", "response_format", "parameters", "input_schema", "schema", "responseSchema",
                          "response_schema", "json_schema", "metadata"]

    package static func find(in d: JSONDocument) -> Bool {
        guard d.kind(of: JSONDocument.root) == .object else { return false }
        for member in d.children(of: JSONDocument.root) where d.kind(of: member) != .null {
            if topLevelKeys.contains(where: { d.hasKey(member, $0) }) { return true }
        }
        return found(in: d, JSONDocument.root)
    }

    private static func found(in d: JSONDocument, _ node: Int) -> Bool {
        for child in d.children(of: node) {
            if d.kind(of: node) == .object {
                if skipped.contains(where: { d.hasKey(child, $0) }) { continue }
                if d.kind(of: child) != .null, keys.contains(where: { d.hasKey(child, $0) }) { return true }
                if d.hasKey(child, "source"), let type = d.member("type", of: child).flatMap(d.string), type == "url" || type == "file" {
                    return true
                }
            }
            if d.kind(of: child) == .object || d.kind(of: child) == .array, found(in: d, child) { return true }
        }
        return false
    }
}
