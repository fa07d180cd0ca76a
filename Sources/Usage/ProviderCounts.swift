import JSON
/// Token counts a provider reported, possibly partial (a stream cut before its last usage event).
struct ProviderCounts: Sendable, Equatable {
    var prompt: Int?
    var completion: Int?
    var cached: Int?
    var reasoning: Int?
    var cacheCreation: Int?
    /// Anthropic's `cache_creation.ephemeral_1h_input_tokens`: the part of `cacheCreation` written for an hour.
    var cacheCreationOneHour: Int?
    /// The audio part of `prompt` and of `completion`, the image part of `completion` (`Usage`).
    var audioPrompt: Int?
    var audioCompletion: Int?
    var imageCompletion: Int?
    /// Anthropic's `input_tokens` (uncached input only), kept so a later event can update one part of `prompt`.
    var uncachedInput: Int?
    /// The provider's final counts arrived (the usage chunk, `response.completed`, `message_delta`, the last
    /// `usageMetadata` beside a `finishReason`, a JSON body's usage).
    var final = false

    var isEmpty: Bool { prompt == nil && completion == nil }
}

/// Where each provider writes its usage, read with `JSONPeek` from the object that holds the counts.
enum UsageReaders {
    /// The OpenAI usage names `openAI` reads, chat's and the Responses API's.
    private static let openAINames = ["prompt_tokens", "input_tokens", "completion_tokens", "output_tokens", "prompt_tokens_details",
                                      "input_tokens_details", "completion_tokens_details", "output_tokens_details", "total_tokens"]

    /// OpenAI's usage object: chat completions (`prompt_tokens`, `completion_tokens`, `…_details`) or the Responses
    /// API (`input_tokens`, `output_tokens`, `…_details`); both name the same counts. A `total_tokens` above prompt and
    /// completion counts the rest as output, as Gemini's total does: OpenAI-compatible servers (gateways, other
    /// providers' compatible endpoints) have left billed thinking out of `completion_tokens` and kept it in the total.
    static func openAI(_ p: JSONPeek, usageAt u: Int, into c: inout ProviderCounts) {
        guard p.isObject(at: u) else { return }
        // One walk of the usage object for its nine names (the last of a repeated name counts, as in `member`).
        // Where each value starts, -1 for none, on the stack (an array here was an allocation per response).
        withUnsafeTemporaryAllocation(of: Int.self, capacity: openAINames.count) { at in
            at.initialize(repeating: -1)
            p.forEachMember(inObjectAt: u) { name, value in
                for (i, key) in openAINames.enumerated() where JSONPeek.keyMatches(key, name) { at[i] = value }
            }
            read(p, at, into: &c)
        }
    }

    /// The counts of an OpenAI usage object whose members start at `at` (`openAINames`' order; -1: absent).
    private static func read(_ p: JSONPeek, _ at: UnsafeMutableBufferPointer<Int>, into c: inout ProviderCounts) {
        func int(_ i: Int) -> Int? { at[i] < 0 ? nil : p.integer(at: at[i]) }
        func int(_ i: Int, _ inner: String) -> Int? {
            at[i] < 0 ? nil : p.member(inner, inObjectAt: at[i]).flatMap { p.integer(at: $0) }
        }
        let prompt = int(0) ?? int(1)
        var completion = int(2) ?? int(3)
        if let total = int(8), let known = completion, total > (prompt ?? 0).addingSaturated(known) {
            completion = total - (prompt ?? 0)
        }
        c.prompt = prompt ?? c.prompt
        c.completion = completion ?? c.completion
        c.cached = int(4, "cached_tokens") ?? int(5, "cached_tokens") ?? c.cached
        c.reasoning = int(6, "reasoning_tokens") ?? int(7, "reasoning_tokens") ?? c.reasoning
        c.audioPrompt = int(4, "audio_tokens") ?? int(5, "audio_tokens") ?? c.audioPrompt
        c.audioCompletion = int(6, "audio_tokens") ?? int(7, "audio_tokens") ?? c.audioCompletion
        if prompt != nil && completion != nil { c.final = true }
    }

    /// Anthropic's usage object (`message_start`'s `message.usage`, `message_delta`'s `usage`, a Messages body's
    /// `usage`). Anthropic counts uncached input, cache reads and cache writes apart; `prompt` is their sum.
    /// `message_delta` counts are cumulative, and recent API versions repeat the input counts there too.
    static func anthropic(_ p: JSONPeek, usageAt u: Int, into c: inout ProviderCounts, final: Bool) {
        guard p.isObject(at: u) else { return }
        let input = int(p, u, "input_tokens")
        let cacheRead = int(p, u, "cache_read_input_tokens")
        let cacheWrite = int(p, u, "cache_creation_input_tokens")
        // The writes by lifetime: a one-hour write is billed above a five-minute one, and the client chooses it.
        let oneHour = p.path("cache_creation", "ephemeral_1h_input_tokens", from: u).flatMap { p.integer(at: $0) }
        if input != nil || cacheRead != nil || cacheWrite != nil || oneHour != nil {
            c.uncachedInput = input ?? c.uncachedInput
            c.cached = cacheRead ?? c.cached
            c.cacheCreation = cacheWrite ?? c.cacheCreation
            c.cacheCreationOneHour = oneHour ?? c.cacheCreationOneHour
            c.prompt = (c.uncachedInput ?? 0).addingSaturated(c.cached ?? 0).addingSaturated(c.cacheCreation ?? 0)
        }
        if let output = int(p, u, "output_tokens") {
            c.completion = output
            if final { c.final = true }
        }
    }

    /// Gemini's `usageMetadata`. `candidatesTokenCount` leaves out thinking, billed as output: `completion` adds
    /// `thoughtsTokenCount`. What tools fetched (`toolUsePromptTokenCount`: URL context, search results, code
    /// execution) is billed as input: `prompt` adds it. A `totalTokenCount` above the parts counts the rest as
    /// output, so a count Gemini adds later is never free.
    static func gemini(_ p: JSONPeek, usageAt u: Int, into c: inout ProviderCounts, final: Bool) {
        guard p.isObject(at: u) else { return }
        let prompt = int(p, u, "promptTokenCount")
        let toolUse = int(p, u, "toolUsePromptTokenCount")
        let candidates = int(p, u, "candidatesTokenCount")
        let thoughts = int(p, u, "thoughtsTokenCount")
        if prompt != nil || toolUse != nil { c.prompt = (prompt ?? c.prompt ?? 0).addingSaturated(toolUse ?? 0) }
        if candidates != nil || thoughts != nil { c.completion = (candidates ?? 0).addingSaturated(thoughts ?? 0) }
        if let total = int(p, u, "totalTokenCount") {
            let parts = (c.prompt ?? 0).addingSaturated(c.completion ?? 0)
            if total > parts { c.completion = (c.completion ?? 0).addingSaturated(total - parts) }
        }
        c.cached = int(p, u, "cachedContentTokenCount") ?? c.cached
        c.reasoning = thoughts ?? c.reasoning
        c.audioPrompt = modality("AUDIO", in: p, p.member("promptTokensDetails", inObjectAt: u)) ?? c.audioPrompt
        let candidatesDetails = p.member("candidatesTokensDetails", inObjectAt: u)
        c.audioCompletion = modality("AUDIO", in: p, candidatesDetails) ?? c.audioCompletion
        c.imageCompletion = modality("IMAGE", in: p, candidatesDetails) ?? c.imageCompletion
        if final && prompt != nil { c.final = true }
    }

    /// A complete non-streaming JSON body.
    static func body(_ p: JSONPeek, provider: Provider, into c: inout ProviderCounts) {
        let root = p.root
        switch provider {
        case .openai, .azureOpenAI:
            if let u = p.member("usage", inObjectAt: root) { openAI(p, usageAt: u, into: &c) }
        case .anthropic:
            if let u = p.member("usage", inObjectAt: root) { anthropic(p, usageAt: u, into: &c, final: true) }
        case .gemini:
            // `generateContent` answers one object; `streamGenerateContent` without `alt=sse` a JSON array of them.
            if p.byte(at: root) == UInt8(ascii: "[") {
                for element in p.elements(ofArrayAt: root) {
                    if let u = p.member("usageMetadata", inObjectAt: element) { gemini(p, usageAt: u, into: &c, final: true) }
                }
            } else if let u = p.member("usageMetadata", inObjectAt: root) {
                gemini(p, usageAt: u, into: &c, final: true)
            }
        }
    }

    /// The tokens of `name` in a Gemini list of counts by modality (`[{"modality": "AUDIO", "tokenCount": 12}]`),
    /// summed; nil without a list or an entry for it.
    private static func modality(_ name: String, in p: JSONPeek, _ list: Int?) -> Int? {
        guard let list, p.byte(at: list) == UInt8(ascii: "[") else { return nil }
        var total: Int?
        for entry in p.elements(ofArrayAt: list) {
            guard let m = p.member("modality", inObjectAt: entry), let end = p.endOfString(at: m),
                  p.bytes[(m + 1)..<(end - 1)].elementsEqual(name.utf8) else { continue }
            total = (total ?? 0).addingSaturated(int(p, entry, "tokenCount") ?? 0)
        }
        return total
    }

    private static func int(_ p: JSONPeek, _ object: Int, _ key: String) -> Int? {
        p.member(key, inObjectAt: object).flatMap { p.integer(at: $0) }
    }
}

private extension Int {
    /// The sum, or `Int.max` past it: counts come from the provider's bytes, and a sum of two must not trap.
    func addingSaturated(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
