import Support
import Usage

/// What one exchange cost in dollars, as the access log (`cost_usd`, `cost_source`) and the metrics
/// (`sse_relay_cost_usd_total`) say it, and what its dollar budget is charged. A plain value (README, "Usage and cost").
///
/// The price is the higher of the reported model's (the one the provider says answered) and the requested
/// model's, or the one of them that is priced; with neither priced the cost is unknown (`none`), never zero.
package struct ExchangeCost: Sendable, Equatable, LogFields {
    package enum Source: String, Sendable {
        /// Priced from the provider's own counts.
        case provider
        /// Priced from counts at least one of which the relay estimated.
        case estimate
        /// No price for the model (or nothing counted): the cost is unknown.
        case none
    }

    /// Nano-dollars; nil when unknown.
    package var nanoUSD: Int?
    package var source: Source
    /// The model whose price applied, or (unpriced) the one that was looked up.
    package var model: String?

    package init(nanoUSD: Int?, source: Source, model: String?) {
        self.nanoUSD = nanoUSD
        self.source = source
        self.model = model
    }

    /// `usage` priced by `prices`, for the model the provider reported (`reported`) and the request's: the higher
    /// of the two costs when both are priced. The client writes the requested name and the table's patterns may
    /// price the reported one (a dated snapshot) by a cheaper entry (`*`, a shorter pattern) than the exact name
    /// the request was admitted at: the cost is never below either. With neither priced now (a price reload removed
    /// the model while the request ran), `admitted`, the price it was admitted at, prices it: what its dollar budget
    /// is charged (`BudgetAmount.settled`), so the log and the metrics say the same.
    /// `tier` is the processing the request asked for: its prices (`ModelPrice.forTier`; a model without priority
    /// prices has no price for a priority request).
    package init(_ usage: Usage, reported: String?, requested: String?, prices: PriceBook?, admitted: ModelPrice? = nil,
                 tier: ServiceTier = .standard) {
        let model = reported ?? requested
        guard usage.source != .none else {
            self.init(nanoUSD: nil, source: .none, model: model)
            return
        }
        var priced: (nanoUSD: Int, model: String)?
        for candidate in [reported, requested] {
            if let name = candidate, let price = prices?.price(for: name)?.forTier(tier) {
                let nano = Cost.nanoUSD(usage, price: price)
                if nano > priced?.nanoUSD ?? -1 { priced = (nano, name) }
            }
        }
        if priced == nil, let admitted, let name = requested ?? reported { priced = (Cost.nanoUSD(usage, price: admitted), name) }
        guard let priced else {
            self.init(nanoUSD: nil, source: .none, model: model)
            return
        }
        self.init(nanoUSD: priced.nanoUSD, source: usage.source == .provider ? .provider : .estimate, model: priced.model)
    }

    /// `cost_usd` (only when known) and `cost_source`.
    package func writeLogFields<W: LogFieldWriting>(to out: inout W) {
        if let nanoUSD { out.field("cost_usd", .string(Cost.decimalString(nanoUSD: nanoUSD))) }
        out.field("cost_source", .string(source.rawValue))
    }

    /// The same as a list.
    package var logFields: [(String, LogValue)] { collectedLogFields }
}

extension BudgetCharge {
    /// The budget charge of a request: its token reservation, and the same priced at the requested model's price
    /// (`Cost.reservation`: the prompt estimate at the input price, the output ceiling at the output price). A
    /// metered request (it reserves tokens) whose model has no price is refused when a budget is in dollars
    /// (403 `model_not_priced`): an unknown price must never mean free. The price found is returned for the
    /// extensions and the settle.
    /// A priority request (`tier`) is priced at the model's priority prices; without them, under a dollar budget, it
    /// is refused (403 `service_tier_not_priced`); so is a request with audio (`audio`) whose model has no audio
    /// prices (403 `modality_not_priced`).
    package static func of(_ reservation: RequestBodyPlan.Reservation, budgetKey: String?, budgets: BudgetConfiguration?, model: String?,
                           prices: PriceBook?, tier: ServiceTier = .standard,
                           audio: Bool = false) -> Result<(charge: BudgetCharge?, price: ModelPrice?), RelayError> {
        guard let key = budgetKey else { return .success((nil, nil)) }
        let standard = prices?.price(for: model)
        var price = standard?.forTier(tier)
        if reservation.tokens > 0, budgets?.hasDollarLimits == true {
            if price == nil { return .failure(standard == nil ? .modelNotPriced : .serviceTierNotPriced) }
            if audio, price?.pricesAudio != true { return .failure(.modalityNotPriced) }
        }
        // A request with audio is held, and its steps priced, as if every token were audio (`ModelPrice.forAudio`).
        if audio { price = price?.forAudio }
        let nano = price.map {
            Cost.reservation(promptTokens: reservation.promptTokens, outputTokens: reservation.tokens - reservation.promptTokens, price: $0)
        } ?? 0
        return .success((BudgetCharge(key: key, tokens: reservation.tokens, nanoUSD: BudgetAmount.bounded(nano)), price))
    }
}

extension BudgetAmount {
    /// What an exchange that ended settles: its tokens, and its cost in nano-dollars (the reported model's price,
    /// else the price it was admitted at; never less than nothing).
    package static func settled(_ usage: Usage?, cost: ExchangeCost?, admittedPrice: ModelPrice?) -> BudgetAmount {
        guard let usage else { return BudgetAmount(tokens: 0) }
        let nano = cost?.nanoUSD ?? admittedPrice.map { Cost.nanoUSD(usage, price: $0) } ?? 0
        return BudgetAmount(tokens: usage.prompt + usage.completion, nanoUSD: bounded(nano))
    }

    /// One guard step: `tokens` of output, priced at the admitted output price (its long-context price when the
    /// request's prompt, `promptTokens` as reserved, is past the threshold).
    package static func step(_ tokens: Int, price: ModelPrice?, promptTokens: Int) -> BudgetAmount {
        BudgetAmount(tokens: tokens, nanoUSD: bounded(price.map {
            Cost.nanoUSD([(tokens, $0.forPrompt(promptTokens).output)])
        } ?? 0))
    }

    /// The most one charge, extension or settle counts: 2⁵² nano-dollars (about 4.5 million dollars), above any dollar
    /// limit (at most 10¹⁵), so a request priced beyond it is still refused, and every amount handed to Redis stays
    /// exact in Lua's doubles (a `max_tokens` of 10¹⁸ at a high price would otherwise saturate at `Int.max`).
    static let maxNanoUSD = 1 << 52

    static func bounded(_ nano: Int) -> Int { min(max(0, nano), maxNanoUSD) }
}
