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
/// - at the top level, the Responses API's stored state: `previous_response_id` and `conversation`, and a stored
///   prompt template (`prompt` as an object: `{"id": "pmpt_…"}`; a string `prompt` is a completion's own text);
/// - at any depth, files by id or URL: `file_id` (OpenAI's chat `file` part and Responses `input_file` /
///   `input_image`, Anthropic's `file` source), `file_url` (Responses), Gemini's `fileUri` / `file_uri`
///   (`fileData`); and Anthropic's URL sources: a `source` object whose `type` is `url` or `file`.
/// Not inside a schema or `tools` (an app's function may well take a `file_id` argument) or `metadata` (its keys are
/// the app's). Images by URL are not here: each is billed a bounded number of tokens (by the model: tens of thousands
/// for a large image on gpt-4o-mini), estimated at `budgets.mediaTokens` each on a stream cancelled before the
/// provider's counts (`PromptEstimate`).
package enum ReferencedInput {
    /// At the top level only: stored state (0, 1) and, as an object, a stored prompt (2).
    static let topLevel = JSONDocument.KeyNames(["previous_response_id", "conversation", "prompt"])
    /// At any depth, but in the subtrees below: a file by reference (0...3), an Anthropic source (4), and the
    /// subtrees whose keys are the app's own names, not the provider's fields (5...).
    static let names = JSONDocument.KeyNames(["file_id", "file_url", "fileUri", "file_uri", "source", "tools", "functions",
                                              "response_format", "parameters", "input_schema", "schema", "responseSchema",
                                              "response_schema", "json_schema", "metadata"])

    package static func find(in d: JSONDocument) -> Bool {
        guard d.kind(of: JSONDocument.root) == .object else { return false }
        let topLevel = Self.topLevel, names = Self.names   // loaded once, not once per member
        for member in d.children(of: JSONDocument.root) where d.kind(of: member) != .null {
            if let name = d.key(member, in: topLevel), name < 2 || d.kind(of: member) == .object { return true }
        }
        return found(in: d, JSONDocument.root, names)
    }

    private static func found(in d: JSONDocument, _ node: Int, _ names: JSONDocument.KeyNames) -> Bool {
        let isObject = d.kind(of: node) == .object
        for child in d.children(of: node) {
            let kind = d.kind(of: child)
            if isObject, let name = d.key(child, in: names) {
                switch name {
                case 0...3:
                    if kind != .null { return true }
                case 4:
                    if let type = d.member("type", of: child).flatMap(d.string), type == "url" || type == "file" { return true }
                default:
                    continue
                }
            }
            if kind == .object || kind == .array, found(in: d, child, names) { return true }
        }
        return false
    }
}
