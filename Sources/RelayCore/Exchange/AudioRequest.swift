import JSON
import Usage

/// Whether a request body brings or asks for audio, which providers bill at their own, higher rates (OpenAI's audio
/// models 8 to 66 times their text rates; Gemini's audio input about three times). Under a dollar budget such a
/// request needs the model's audio prices (`ModelPrice.pricesAudio`), or it is refused (403 `modality_not_priced`):
/// priced as text it would cost a fraction of its bill. Pure.
///
/// What counts (keys compared after decoding escapes; a `null` value is none): OpenAI's `modalities` naming
/// `audio` and its `audio` output settings at the top level; Gemini's `responseModalities` naming `AUDIO` (any case)
/// or `speechConfig` in `generationConfig`; at any depth, an `input_audio` part and Gemini inline data of an
/// `audio/…` type. Not inside a schema, `tools`, `metadata` or a function call's arguments or result, whose keys
/// are the app's.
package enum AudioRequest {
    /// At any depth: audio input (0), Gemini's inline data (1, 2), the generation settings (3, 4), `input` as an object
    /// (5: a `tool_use`'s arguments), and subtrees whose keys are the app's (6...: as in `ReferencedInput`).
    static let names = JSONDocument.KeyNames(["input_audio", "inlineData", "inline_data", "generationConfig", "generation_config",
                                              "input", "metadata"] + PromptEstimate.schemas)
    /// In a Gemini generation config: the answer's modalities (0, 1) and speech settings (2, 3).
    static let generation = JSONDocument.KeyNames(["responseModalities", "response_modalities", "speechConfig", "speech_config"])

    package static func find(in d: JSONDocument) -> Bool {
        guard d.kind(of: JSONDocument.root) == .object else { return false }
        if let modalities = d.member("modalities", of: JSONDocument.root), names(d, modalities, include: "audio") { return true }
        if let audio = d.member("audio", of: JSONDocument.root), d.kind(of: audio) != .null { return true }
        let generation = Self.generation
        return d.anyMember(below: JSONDocument.root, named: names) { name, member in
            switch name {
            case 0:
                return d.kind(of: member) != .null
            case 1, 2:
                let type = d.member("mimeType", of: member) ?? d.member("mime_type", of: member)
                return type.flatMap(d.string)?.lowercased().hasPrefix("audio/") == true
            case 3, 4:
                return d.kind(of: member) == .object && asksForAudio(d, member, generation)
            case 5:
                return d.kind(of: member) == .object ? nil : false
            default:
                return nil
            }
        }
    }

    /// Whether the array `node` holds a string equal to `name`, ignoring case.
    static func names(_ d: JSONDocument, _ node: Int, include name: String) -> Bool {
        d.kind(of: node) == .array && d.children(of: node).contains { d.string($0)?.lowercased() == name }
    }

    private static func asksForAudio(_ d: JSONDocument, _ config: Int, _ generation: JSONDocument.KeyNames) -> Bool {
        d.children(of: config).contains { member in
            switch d.key(member, in: generation) {
            case 0, 1: names(d, member, include: "audio")
            case 2, 3: d.kind(of: member) != .null
            default: false
            }
        }
    }
}
