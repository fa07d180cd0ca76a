import JSON

/// Whether a request body asks the provider to run a tool of its own. Pure.
///
/// Why it matters: the app's own tools (functions) cost only the tokens of their definitions, calls and results,
/// all in the provider's counts. A tool the provider runs is billed apart, per call or per container, and never in
/// those counts: a web search ($10 to $35 per 1 000 on OpenAI, Anthropic and Gemini's grounding), a file search,
/// a code interpreter's container, an image generation (at image-output prices). A client could make one cheap
/// request cost dollars. So on a route with budgets such a request is refused (403 `tool_not_metered`) unless the
/// route accepts those costs (`providerTools`).
///
/// What counts (keys compared after decoding escapes; a `null` value is none):
/// - at the top level: OpenAI's `web_search_options` (chat with a search model), Anthropic's `mcp_servers`, and
///   Azure OpenAI's `data_sources` ("on your data": a search the provider runs, its results billed as input);
/// - a `model` whose name says `search` (OpenAI's `gpt-4o-search-preview`, `gpt-5-search-api`: a web search on
///   every call, billed per call);
/// - each entry of the top-level `tools`: with a `type`, anything but the app's own kinds (`function`, `custom`) and
///   the tools the app itself carries out (OpenAI's `computer_use_preview`, `local_shell`, `apply_patch`;
///   Anthropic's `bash_…`, `text_editor_…`, `computer_…`, `memory_…`); without one (Anthropic's custom tools,
///   Gemini's tool objects), any key but a custom tool's or Gemini's `functionDeclarations`: `googleSearch`,
///   `codeExecution`, `urlContext`, a key the relay does not know. An unknown tool is never taken for a free one.
package enum ProviderTools {
    /// Types of tools the app carries out itself.
    static let clientTypes: Set<String> = ["function", "custom", "computer_use_preview", "local_shell", "apply_patch"]
    /// Anthropic's versioned tools the app carries out (`bash_20250124`, `text_editor_20250728`, …).
    static let clientTypePrefixes = ["bash_", "text_editor_", "computer_", "memory_"]
    /// The keys of a tool without a `type` that the app carries out: an Anthropic custom tool's, Gemini's functions.
    static let clientKeys: Set<String> = ["name", "description", "input_schema", "cache_control", "strict", "input_examples",
                                          "defer_loading", "allowed_callers", "functionDeclarations", "function_declarations"]
    /// Top-level fields: `tools` (0), `model` (1), and those that turn on a provider's own tool (2...).
    static let topLevel = JSONDocument.KeyNames(["tools", "model", "web_search_options", "mcp_servers", "data_sources", "dataSources"])

    package static func find(in d: JSONDocument) -> Bool {
        guard d.kind(of: JSONDocument.root) == .object else { return false }
        let topLevel = Self.topLevel   // loaded once, not once per member
        for member in d.children(of: JSONDocument.root) where d.kind(of: member) != .null {
            switch d.key(member, in: topLevel) {
            case nil: continue
            case 0:
                if d.kind(of: member) != .array || d.children(of: member).contains(where: { runsAtProvider(d, $0) }) { return true }
            case 1:
                if d.kind(of: member) == .string, saysSearch(d, member) { return true }
            default: return true
            }
        }
        return false
    }

    /// Whether the string `node` contains `search` in any ASCII case. A byte scan of the body where the string has
    /// no escape (Foundation's `lowercased().contains` cost 6 k instructions per request, callgrind), its decoded
    /// bytes where it has.
    static func saysSearch(_ d: JSONDocument, _ node: Int) -> Bool {
        let range = d.range(of: node)
        if !d.bytes[range].contains(UInt8(ascii: "\\")) { return contains(d.bytes[range]) }
        return d.string(node).map { contains(Array($0.utf8)[...]) } ?? false
    }

    private static func contains(_ bytes: ArraySlice<UInt8>) -> Bool {
        let needle = Self.search
        guard bytes.count >= needle.count else { return false }
        var start = bytes.startIndex
        while start <= bytes.endIndex - needle.count {
            var i = 0
            while i < needle.count && (bytes[start + i] | 0x20) == needle[i] { i += 1 }
            if i == needle.count { return true }
            start += 1
        }
        return false
    }
    private static let search = Array("search".utf8)

    /// One entry of `tools`.
    static func runsAtProvider(_ d: JSONDocument, _ tool: Int) -> Bool {
        guard d.kind(of: tool) == .object else { return d.kind(of: tool) != .null }
        if let typeNode = d.member("type", of: tool), d.kind(of: typeNode) != .null {
            guard let type = d.string(typeNode) else { return true }
            return !(clientTypes.contains(type) || clientTypePrefixes.contains { type.hasPrefix($0) })
        }
        return d.children(of: tool).contains { member in
            d.kind(of: member) != .null && !(d.key(of: member).map(clientKeys.contains) ?? false)
        }
    }
}
