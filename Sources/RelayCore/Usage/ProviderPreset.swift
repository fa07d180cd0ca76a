import Usage

/// What each provider preset (`upstreams.NAME.provider`) supplies. The key header and prefix stay overridable
/// (`keyHeader`, `keyPrefix`); the fixed headers are added only when the client sent none of that name.
extension Provider {
    /// The header that carries the provider key. Gemini's goes in `x-goog-api-key`, never in the `?key=` query
    /// parameter: URLs end up in logs (the relay's, proxies', the provider's).
    package var keyHeader: String {
        switch self {
        case .openai: "Authorization"
        case .anthropic: "x-api-key"
        case .gemini: "x-goog-api-key"
        case .azureOpenAI: "api-key"
        }
    }

    /// The key's prefix in `header`: `Bearer ` for `Authorization` (RFC 6750 §2.1), nothing for the API-key fields.
    package static func keyPrefix(forHeader header: String) -> String {
        header.lowercased() == "authorization" ? "Bearer " : ""
    }

    /// Fields the provider requires on every request, each added only if the client did not send it. Anthropic
    /// rejects a request without `anthropic-version`; a client that pins another version keeps its own.
    package var defaultHeaders: [(name: String, value: String)] {
        switch self {
        case .anthropic: [("anthropic-version", "2023-06-01")]
        case .openai, .gemini, .azureOpenAI: []
        }
    }

    /// Whether a route on this provider adds `stream_options.include_usage` to streaming chat requests unless its
    /// `usage.inject` says otherwise. Only OpenAI's wire format needs asking; the others always send usage.
    package var injectsUsageByDefault: Bool { speaksOpenAI }
}
