import JSON
import Usage

/// The one decision about a request body, made once the body is whole, from one strict read of it
/// (`JSONDocument`): forward or refuse, the edits (max-tokens clamp, usage request, written ceiling) applied in one
/// pass, and what the accounting needs (the model, the prompt estimate, the reservation). Pure: bytes and settings
/// in, a plan or an error out; `RelayExchange.requestEnd` carries it out.
///
/// Strict reading applies on a route that meters, limits or rewrites bodies (`Settings.isStrict`): a body a
/// provider could read differently is refused (400 `ambiguous_body`: a key given twice at any depth after decoding
/// escapes, invalid UTF-8, a lone surrogate escape, a byte order mark, data after the value), and so is one that is
/// not a JSON object (400 `invalid_json`). Elsewhere the body is forwarded as received, and read (duplicates
/// allowed) only for the access log's model and the usage estimate.
package struct RequestBodyPlan: Sendable {
    package struct Settings: Sendable, Equatable {
        package var endpoint: Endpoint
        package var policy: BodyPolicy
        /// The route asks for usage in OpenAI-shaped streams (`usage.inject`, default on).
        package var injectsUsage: Bool
        /// The reservation's sizes, when budgets apply to this request; nil: nothing reserved, no ceiling written.
        package var budgets: Budgets?
        /// The route lets input the relay never sees through under budgets (`Route.referencedInput`).
        package var allowsReferencedInput = false
        /// The route lets requests that turn on a provider's own tools through under budgets (`Route.providerTools`).
        package var allowsProviderTools = false

        package struct Budgets: Sendable, Equatable {
            /// The route's `maxTokens.limit`: the ceiling of a request that names none.
            package var routeMaxTokens: Int?
            package var defaultReserveTokens: Int
            /// `budgets.mediaTokens`: what each image, audio clip or inline file adds to the prompt at least.
            package var mediaTokens: Int

            package init(routeMaxTokens: Int?, defaultReserveTokens: Int,
                         mediaTokens: Int = BudgetConfiguration.defaultMediaTokens) {
                self.routeMaxTokens = routeMaxTokens
                self.defaultReserveTokens = defaultReserveTokens
                self.mediaTokens = mediaTokens
            }
        }

        package init(endpoint: Endpoint, policy: BodyPolicy, injectsUsage: Bool, budgets: Budgets?) {
            self.endpoint = endpoint
            self.policy = policy
            self.injectsUsage = injectsUsage
            self.budgets = budgets
        }

        /// Whether the body decides anything: a policy, a reservation or a usage request reads it.
        var isStrict: Bool {
            policy.isActive || (endpoint.isMetered && (budgets != nil || (injectsUsage && endpoint == .openAIChat)))
        }
    }

    /// What one request reserves.
    package struct Reservation: Sendable, Equatable {
        /// Ceiling times choices, plus the prompt estimate; never below the body's bytes ÷ 4.
        package var tokens: Int
        package var promptTokens: Int
        /// The request named its own ceiling: no guard needed, nothing written.
        package var hasCeiling: Bool
        /// The ceiling reserved per choice: the request's, else the route's limit, else `defaultReserveTokens`.
        package var outputCeiling = 0
        /// The output part: the ceiling times the choices.
        package var outputTokens = 0

        package init(tokens: Int, promptTokens: Int, hasCeiling: Bool, outputCeiling: Int = 0, outputTokens: Int = 0) {
            self.tokens = tokens
            self.promptTokens = promptTokens
            self.hasCeiling = hasCeiling
            self.outputCeiling = outputCeiling
            self.outputTokens = outputTokens
        }

        /// The least output charged to a stream that ended without the provider's counts (`budgets.
        /// cancelFloorTokensPerSecond`): `tokensPerSecond` for every second since the call to the provider started
        /// (rounded up), capped by the output this request reserved, `reservedTokens` (the grant's, extensions
        /// included) less the prompt part. The time a reasoning model spends silent is billed, and visible text
        /// alone cannot show it; the cap keeps the charge within what the admission already set aside.
        package func outputFloor(secondsSinceCall: Double, tokensPerSecond: Int, reservedTokens: Int) -> Int {
            let cap = max(0, reservedTokens - promptTokens)
            guard secondsSinceCall > 0, tokensPerSecond > 0, cap > 0 else { return 0 }
            let floor = (secondsSinceCall * Double(tokensPerSecond)).rounded(.up)
            return floor >= Double(cap) ? cap : Int(floor)
        }
    }

    /// The bytes to send.
    package var body: [UInt8]
    /// The relay asked for usage the client did not: the usage-only event leaves the client's stream.
    package var injected = false
    /// The model the body names (client text: logged through the logger's escaping only).
    package var model: String?
    /// The body as read, for the prompt estimate when the provider gives no count; nil when not a JSON object.
    package var document: JSONDocument?
    /// The processing the request asked for (`serviceTier(_:endpoint:)`): what its prices are.
    package var serviceTier = ServiceTier.standard
    /// The request brings or asks for audio (`AudioRequest`), read only with budgets: its model needs audio prices
    /// under a dollar budget.
    package var usesAudio = false
    /// What to reserve; a request without budgets reserves nothing.
    package var reservation = Reservation(tokens: 0, promptTokens: 0, hasCeiling: true)

    /// The most one request reserves for its output, or for its prompt: 2⁴⁰, above any token budget (at most 10¹²,
    /// so refused). A budget in dollars only has no token limit, and its windows sum every open reservation
    /// unchecked: at 2⁴⁰ millions of them stay inside 64 bits (`BudgetLedger`, Redis's HINCRBY) and exact in Lua's
    /// doubles. At `Int.max / 4` a few requests overflowed them: a trap in memory, a failed script in Redis.
    package static let maxReservation = 1 << 40

    /// Reads `body` strictly: the document, or the error a client gets.
    package static func read(_ body: [UInt8]) -> Result<JSONDocument, RelayError> {
        do {
            return .success(try JSONDocument(parsing: body, duplicates: .refused))
        } catch {
            return .failure(error.isAmbiguous ? .ambiguousBody : .invalidJSON)
        }
    }

    /// `path` is the endpoint, `query` the request's (or `path` may carry it, after a `?`): Gemini chooses an event
    /// stream by `alt=sse`; the two are joined only there.
    package static func make(_ body: [UInt8], path: String, query: String? = nil, settings: Settings) -> Result<RequestBodyPlan, RelayError> {
        let path = settings.endpoint == .geminiGenerate ? query.map { path + "?" + $0 } ?? path : path
        var plan = RequestBodyPlan(body: body)
        guard settings.isStrict else {
            plan.document = try? JSONDocument(parsing: body, duplicates: .allowed)
            plan.model = (settings.endpoint == .geminiGenerate ? Endpoint.geminiModel(path) : Endpoint.azureDeployment(path) ?? nil)
                ?? plan.document.flatMap(modelName)
            plan.serviceTier = plan.document.map { serviceTier($0, endpoint: settings.endpoint) } ?? .standard
            return .success(plan)
        }
        // An empty body asks for nothing a provider answers: it goes on (and is refused there) unless a policy
        // must read a model or a ceiling from it.
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) && !settings.policy.isActive {
            if let budgets = settings.budgets { plan.reservation = reservation(nil, body: body, budgets: budgets, policy: settings.policy, ceiling: nil) }
            return .success(plan)
        }
        let d: JSONDocument
        switch read(body) {
        case .success(let read): d = read
        case .failure(let error): return .failure(error)
        }
        plan.document = d
        plan.serviceTier = serviceTier(d, endpoint: settings.endpoint)
        // Gemini runs the model its path names, whatever the body says, and Azure the deployment its path names: that
        // one is checked, priced and reserved. A path whose model cannot be read (a tuned model, a Vertex endpoint,
        // `deployments/` without a name) names none, never the body's, which a client would fill with the cheapest
        // priced name: a dollar budget refuses it (`model_not_priced`).
        let pathModel: String?? = settings.endpoint == .geminiGenerate ? .some(Endpoint.geminiModel(path)) : Endpoint.azureDeployment(path)
        plan.model = pathModel ?? modelName(d)
        let ceiling = OutputCeiling(endpoint: settings.endpoint, path: path)
        var edits = JSONEdits()
        if let error = settings.policy.check(d, ceiling: ceiling, pathModel: pathModel, into: &edits) { return .failure(error) }
        if settings.endpoint == .openAIChat || settings.endpoint == .openAIResponses {
            if let error = IncludeUsageInjection.check(d) { return .failure(error) }
        }
        if settings.injectsUsage && settings.endpoint == .openAIChat {
            plan.injected = IncludeUsageInjection.inject(d, into: &edits)
        }
        if let budgets = settings.budgets, settings.endpoint.isMetered {
            if !settings.allowsReferencedInput, ReferencedInput.find(in: d) { return .failure(.inputNotMetered) }
            if !settings.allowsProviderTools, ProviderTools.find(in: d) { return .failure(.toolNotMetered) }
            plan.usesAudio = AudioRequest.find(in: d)
            let named: OutputCeiling.Named
            switch ceiling.named(in: d, count: { count(in: d, $0) }) {
            case .success(let n): named = n
            case .failure(let error): return .failure(error)
            }
            plan.reservation = reservation(d, body: body, budgets: budgets, policy: settings.policy, ceiling: named)
            // A Responses request with `"background": true` answers at once (`queued`, without usage) while the
            // model runs on at the provider, and its counts come only to later GETs the relay does not charge:
            // neither its output nor its prompt (a `previous_response_id`'s whole history, a file by URL) is ever
            // seen. Anything but `false` (a lenient reader could take a non-boolean for true) is refused.
            if settings.endpoint == .openAIResponses, let background = d.member("background", of: JSONDocument.root),
               !(d.kind(of: background) == .null || d.kind(of: background) == .bool && !d.isTrue(background)) {
                return .failure(.backgroundNotMetered)
            }
            // A request without a ceiling whose answer the guard cannot watch (not an event stream, or one whose
            // generation a cut would not stop) carries the ceiling it reserved, so the provider stops where the
            // reservation ends.
            if !plan.reservation.hasCeiling {
                ceiling.bound(d, path: path, ceiling: plan.reservation.outputCeiling, into: &edits)
            }
        }
        plan.body = edits.applied(to: body)
        return .success(plan)
    }

    /// The processing a body asks for, as far as its price goes, from its top-level fields (every one that applies;
    /// the dearest wins):
    /// - `service_tier` (OpenAI chat and Responses, Anthropic Messages; Gemini also reads `serviceTier`): standard
    ///   for none and for the values billed at most at the standard rates (`auto`, `default`, `flex`, `scale`,
    ///   `standard_only`, Gemini's `standard`); priority for `priority` and for any other value (one the relay does
    ///   not know could cost more, so it is never taken for standard);
    /// - Anthropic's `speed` other than `standard` (fast mode, about six times the rates) and `inference_geo` other
    ///   than `global` (US-only inference, 1.1 times on the newer models): unpriced.
    package static func serviceTier(_ d: JSONDocument, endpoint: Endpoint) -> ServiceTier {
        let names: [String]
        switch endpoint {
        case .openAIChat, .openAIResponses, .anthropicMessages: names = Self.serviceTierNames
        case .geminiGenerate: names = Self.geminiServiceTierNames
        case .free, .unmetered: return .standard
        }
        // A string value, `nil` for a `null`, a string no tier has for any other value; absent: not asked.
        func value(_ name: String) -> String?? {
            guard let node = d.member(name, of: JSONDocument.root) else { return nil }
            return .some(d.kind(of: node) == .null ? nil : d.string(node) ?? "\u{0}not a string")
        }
        var tier = ServiceTier.standard
        for name in names {
            guard case .some(let asked) = value(name), let asked else { continue }
            if !Self.standardTiers.contains(asked.lowercased()) { tier = max(tier, .priority) }
        }
        if endpoint == .anthropicMessages {
            if case .some(.some(let speed)) = value("speed"), speed != "standard" { tier = .unpriced }
            if case .some(.some(let geo)) = value("inference_geo"), geo != "global" { tier = .unpriced }
        }
        return tier
    }

    private static let serviceTierNames = ["service_tier"]
    private static let geminiServiceTierNames = ["service_tier", "serviceTier"]
    /// The `service_tier` values billed at most at the standard rates (compared lowercased).
    private static let standardTiers: Set<String> = ["auto", "default", "flex", "scale", "standard_only", "standard",
                                                     "service_tier_standard", "service_tier_flex", "service_tier_unspecified"]

    /// The reservation: the named ceiling (after a clamp), else the route's limit, else `defaultReserveTokens`;
    /// times the choices (each may reach the ceiling, all are billed); plus the prompt estimate; and never less than
    /// the body's bytes ÷ 4, for what the estimate cannot count (images, files, audio). Saturates at `maxReservation`.
    private static func reservation(_ d: JSONDocument?, body: [UInt8], budgets: Settings.Budgets, policy: BodyPolicy,
                                    ceiling named: OutputCeiling.Named?) -> Reservation {
        var ceiling = named?.ceiling
        if let cap = policy.maxTokens, cap.mode == .clamp, let c = ceiling { ceiling = min(c, max(0, cap.limit)) }
        let prompt = min(d.map { PromptEstimate.tokens($0, mediaTokens: budgets.mediaTokens) } ?? 0, maxReservation)
        let perChoice = min(ceiling ?? budgets.routeMaxTokens ?? budgets.defaultReserveTokens, maxReservation)
        let (output, overflow) = perChoice.multipliedReportingOverflow(by: named?.choices ?? 1)
        let saturated = overflow ? maxReservation : min(output, maxReservation)
        let floor = (body.count + 3) / 4
        return Reservation(tokens: max(saturated + prompt, floor), promptTokens: prompt, hasCeiling: ceiling != nil,
                           outputCeiling: perChoice, outputTokens: saturated)
    }

    /// The top-level `"model"` string.
    package static func modelName(_ d: JSONDocument) -> String? {
        d.member("model", of: JSONDocument.root).flatMap(d.string)
    }

    /// A non-negative count, saturated at `maxReservation`; nil when negative or not a number. A number written as
    /// a fraction or with an exponent (`8.0`, `1e3`) counts rounded up, as a lenient provider would read it.
    package static func count(in d: JSONDocument, _ node: Int) -> Int? {
        switch d.integer(node) {
        case .value(let n): return n >= 0 ? min(n, maxReservation) : nil
        case .outOfRange(negative: let negative): return negative ? nil : maxReservation
        case .notAnInteger:
            guard let v = Double(String(decoding: d.bytes[d.range(of: node)], as: UTF8.self)), v >= 0, !v.isNaN else { return nil }
            return v >= Double(maxReservation) ? maxReservation : Int(v.rounded(.up))
        }
    }
}
