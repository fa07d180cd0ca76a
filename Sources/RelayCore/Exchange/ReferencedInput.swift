import JSON
import Usage

/// Whether a request body brings input the relay cannot count: content the provider fetches or keeps by reference,
/// or an inline document or video whose tokens its bytes do not bound, all billed as input tokens. Pure.
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
/// - an item of the Responses `input` by reference: `{"type": "item_reference", "id": …}`, or an item with an `id`
///   and neither `type` nor `role` (the type is optional), which the provider replaces with the stored item (any
///   earlier input or output, up to the context window); and a `reasoning` item with an `id` but no
///   `encrypted_content`, whose reasoning the provider loads by that id and bills as input;
/// - at any depth, an earlier answer's audio by id (chat's assistant `audio: {"id": …}`, billed as audio input),
///   and Gemini's context cache (`cachedContent` / `cached_content`: a cached prompt of any size, billed at the
///   cached rate);
/// - at any depth, files by id or URL: `file_id` (OpenAI's chat `file` part and Responses `input_file` /
///   `input_image`, Anthropic's `file` source), `file_url` (Responses), Gemini's `fileUri` / `file_uri`
///   (`fileData`); and Anthropic's URL sources: a `source` object whose `type` is `url` or `file`;
/// - at any depth, inline documents and video: OpenAI's `file_data` (a PDF, or a .docx: a zip whose 2.5 kB held
///   72 000 tokens of text), Gemini's `inlineData` / `inline_data` of any type but `image/…` and `audio/…` (a PDF's
///   pages, a video's seconds, each a fixed count however few bytes they take), an Anthropic `base64` source of any
///   type but an image. An image's tokens are bounded by its size in pixels, which the provider caps, and audio's
///   by its length, which its bytes bound: those count in the estimate (`PromptEstimate`, `budgets.mediaTokens`).
/// Not inside a schema or `tools` (an app's function may well take a `file_id` argument), `metadata`, a function
/// call's arguments or its result (Anthropic's `tool_use` `input`, Gemini's `functionCall` and `functionResponse`):
/// their keys are the app's. Images by URL are not here: each is billed a bounded number of tokens (by the model: tens of thousands
/// for a large image on gpt-4o-mini), estimated at `budgets.mediaTokens` each on a stream cancelled before the
/// provider's counts (`PromptEstimate`).
package enum ReferencedInput {
    /// At the top level only: stored state (0, 1), a stored prompt as an object (2), and the Responses `input` (3),
    /// whose items may be references.
    static let topLevel = JSONDocument.KeyNames(["previous_response_id", "conversation", "prompt", "input"])
    /// At any depth, but in the subtrees below: a file by reference or inline (0...4), an Anthropic source (5),
    /// Gemini's inline data (6, 7), audio by id (8), Gemini's context cache (9, 10), and the subtrees whose keys are
    /// the app's own names, not the provider's fields: `input` as an object (11: an Anthropic `tool_use`'s
    /// arguments; the Responses `input` is an array or a string), schemas, `metadata`, and Gemini's function calls
    /// and their results (12...).
    static let names = JSONDocument.KeyNames(["file_id", "file_url", "fileUri", "file_uri", "file_data", "source", "inlineData",
                                              "inline_data", "audio", "cachedContent", "cached_content", "input", "metadata"]
                                             + PromptEstimate.schemas)

    package static func find(in d: JSONDocument) -> Bool {
        guard d.kind(of: JSONDocument.root) == .object else { return false }
        let topLevel = Self.topLevel, names = Self.names   // loaded once, not once per member
        for member in d.children(of: JSONDocument.root) where d.kind(of: member) != .null {
            switch d.key(member, in: topLevel) {
            case 0, 1: return true
            case 2: if d.kind(of: member) == .object { return true }
            case 3: if d.kind(of: member) == .array, d.children(of: member).contains(where: { isItemReference(d, $0) }) { return true }
            default: continue
            }
        }
        return d.anyMember(below: JSONDocument.root, named: names) { name, member in
            let kind = d.kind(of: member)
            switch name {
            case 0...4:
                return kind != .null
            case 5:
                guard kind == .object, let type = d.member("type", of: member).flatMap(d.string) else { return false }
                return type == "url" || type == "file"
                    || (type == "base64" && !isMediaType(d, d.member("media_type", of: member), allowingAudio: false))
            case 6, 7:
                return kind != .null && !isMediaType(d, d.member("mimeType", of: member) ?? d.member("mime_type", of: member),
                                                     allowingAudio: true)
            case 8:
                // An audio part the request carries has `data`; an answer's audio named by its `id` is fetched.
                return kind == .object && d.member("id", of: member).map { d.kind(of: $0) != .null } == true
            case 9, 10:
                return kind != .null
            case 11:
                return kind == .object ? nil : false
            default:
                return nil
            }
        }
    }

    /// Whether `node` is a string naming an image type (or, `allowingAudio`, an audio type): media whose tokens the
    /// estimate bounds.
    static func isMediaType(_ d: JSONDocument, _ node: Int?, allowingAudio: Bool) -> Bool {
        guard let node, let type = d.string(node)?.lowercased() else { return false }
        return type.hasPrefix("image/") || (allowingAudio && type.hasPrefix("audio/"))
    }

    /// An item of the Responses `input` that names a stored item instead of carrying one.
    static func isItemReference(_ d: JSONDocument, _ item: Int) -> Bool {
        guard d.kind(of: item) == .object else { return false }
        let type = d.member("type", of: item).flatMap { d.kind(of: $0) == .null ? nil : $0 }
        if let type {
            switch d.string(type) {
            case "item_reference": return true
            case "reasoning":
                // Reasoning handed back carries its tokens only as `encrypted_content`; without it (or with an empty
                // one) the id is a lookup.
                let id = d.member("id", of: item).flatMap { d.kind(of: $0) == .null ? nil : $0 }
                let carried = d.member("encrypted_content", of: item).flatMap { d.string($0) }.map { !$0.isEmpty } ?? false
                return id != nil && !carried
            default: return false
            }
        }
        let id = d.member("id", of: item).flatMap { d.kind(of: $0) == .null ? nil : $0 }
        let role = d.member("role", of: item).flatMap { d.kind(of: $0) == .null ? nil : $0 }
        return id != nil && role == nil
    }
}
