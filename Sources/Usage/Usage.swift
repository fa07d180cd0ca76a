/// What one exchange cost in tokens, and where the numbers come from.
///
/// The meaning of each count is the same for every provider, so budgets and metrics can add them up:
/// - `prompt`: every input token the provider processed, cached or not. OpenAI's `prompt_tokens` /
///   `input_tokens`; Anthropic's `input_tokens + cache_read_input_tokens + cache_creation_input_tokens` (Anthropic
///   counts those three apart); Gemini's `promptTokenCount`.
/// - `completion`: every output token billed, reasoning included. OpenAI's `completion_tokens` / `output_tokens`;
///   Anthropic's `output_tokens`; Gemini's `candidatesTokenCount + thoughtsTokenCount` (Gemini counts thoughts apart).
/// - `cached`: the part of `prompt` read from the provider's prompt cache (`cached_tokens`,
///   `cache_read_input_tokens`, `cachedContentTokenCount`), when the provider said.
/// - `reasoning`: the part of `completion` spent on reasoning (`reasoning_tokens`, `thoughtsTokenCount`), when said.
/// - `cacheCreation`: Anthropic only, the part of `prompt` written to the cache (billed above the base rate).
/// - `cacheCreationOneHour`: Anthropic only, the part of `cacheCreation` written for an hour
///   (`cache_creation.ephemeral_1h_input_tokens`), billed above the five-minute rate.
public struct Usage: Sendable, Equatable, CustomStringConvertible {
    /// Where the counts come from, as `usage_source` in the access log and `source` in metrics.
    public enum Source: String, Sendable, Equatable {
        /// The provider's own counts, complete.
        case provider
        /// At least one count is the relay's estimate (`UsageTap`'s and `PromptEstimate`'s rules): the stream ended
        /// before the provider's final usage (client cancelled, provider died, timeout), or it never sends one.
        case estimate
        /// Nothing to count: no usage and nothing to estimate from.
        case none
    }

    public var prompt: Int
    public var completion: Int
    public var cached: Int?
    public var reasoning: Int?
    public var cacheCreation: Int?
    public var cacheCreationOneHour: Int?
    /// The audio part of `prompt` and of `completion`, and the image part of `completion` (OpenAI's `audio_tokens`
    /// details, Gemini's counts by modality): billed at their own, higher rates (`ModelPrice.audioInput`…).
    public var audioPrompt: Int?
    public var audioCompletion: Int?
    public var imageCompletion: Int?
    public var source: Source

    public init(prompt: Int, completion: Int, cached: Int? = nil, reasoning: Int? = nil, cacheCreation: Int? = nil,
                cacheCreationOneHour: Int? = nil, audioPrompt: Int? = nil, audioCompletion: Int? = nil,
                imageCompletion: Int? = nil, source: Source) {
        self.prompt = prompt
        self.completion = completion
        self.cached = cached
        self.reasoning = reasoning
        self.cacheCreation = cacheCreation
        self.cacheCreationOneHour = cacheCreationOneHour
        self.audioPrompt = audioPrompt
        self.audioCompletion = audioCompletion
        self.imageCompletion = imageCompletion
        self.source = source
    }

    public static let none = Usage(prompt: 0, completion: 0, source: .none)

    public var description: String {
        var s = "\(source.rawValue): prompt \(prompt), completion \(completion)"
        if let cached { s += ", cached \(cached)" }
        if let reasoning { s += ", reasoning \(reasoning)" }
        if let cacheCreation { s += ", cache creation \(cacheCreation)" }
        return s
    }
}
