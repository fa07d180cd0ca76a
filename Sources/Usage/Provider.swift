/// The API family an upstream speaks (`upstreams.NAME.provider`). It decides how the key is sent (the preset in
/// the relay's configuration) and how usage is read from responses (`UsageTap`).
public enum Provider: String, Sendable, CaseIterable, Equatable {
    /// OpenAI and any OpenAI-compatible API: chat completions and the Responses API.
    case openai
    /// Anthropic Messages.
    case anthropic
    /// Google Gemini (`generateContent`, `streamGenerateContent?alt=sse`).
    case gemini
    /// Azure OpenAI: OpenAI's wire format behind Azure's `api-key` header.
    case azureOpenAI = "azure-openai"

    /// OpenAI's wire format (chat chunks, Responses events, `stream_options.include_usage`).
    public var speaksOpenAI: Bool { self == .openai || self == .azureOpenAI }
}
