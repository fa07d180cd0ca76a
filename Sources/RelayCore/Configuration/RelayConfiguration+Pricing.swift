import Foundation
import JSON

/// `pricing` (inline) or `pricingFile` (the same JSON in its own file, read again on SIGHUP): US dollars per million
/// tokens per model or pattern (README, "Usage and cost").
package struct PricingConfiguration: Sendable, Equatable {
    /// The table read at start-up (from `pricing` or `pricingFile`); empty when neither is given.
    package var table = PriceTable()
    /// `pricingFile`, re-read on SIGHUP.
    package var file: String?

    package init(table: PriceTable = PriceTable(), file: String? = nil) {
        self.table = table
        self.file = file
    }
}

/// The prices a relay error names.
extension RelayError {
    /// 403 for a request on a route with a dollar budget whose model has no price: the relay cannot tell what it
    /// would cost, and an unknown price must never mean free. Never names the model.
    package static let modelNotPriced = RelayError(
        status: 403, type: "invalid_request_error", code: "model_not_priced",
        message: "This model has no price on the relay, and the relay enforces a budget in dollars.")

    /// 403 `modality_not_priced`: the request brings or asks for audio (`AudioRequest`), which its model has no
    /// audio prices for (`audioInput`, `audioOutput`), under a budget in dollars.
    package static let modalityNotPriced = RelayError(
        status: 403, type: "invalid_request_error", code: "modality_not_priced",
        message: "This request brings or asks for audio, which has no price on the relay for this model, and the relay enforces a budget in dollars.")

    /// 403 `service_tier_not_priced`: the request asks for processing (`"service_tier": "priority"`, Anthropic's
    /// `speed` or `inference_geo`) its model has no price for, under a budget in dollars.
    package static let serviceTierNotPriced = RelayError(
        status: 403, type: "invalid_request_error", code: "service_tier_not_priced",
        message: "The processing this request asks for (service tier, speed or region) has no price on the relay for this model, and the relay enforces a budget in dollars.")
}

extension ConfigReader {
    /// The configuration's own bytes, read again as a `JSONDocument` so that prices and dollar limits come from
    /// their number text (JSONSerialization would have turned `0.075` into the nearest binary double). Nil when
    /// the document does not parse strictly (a problem is noted once).
    mutating func exactDocument() -> JSONDocument? {
        if let cached = exactCache { return cached }
        do {
            let document = try JSONDocument(parsing: rawJSON, duplicates: .allowed)
            exactCache = document
            return document
        } catch {
            problem("(root)", "prices and dollar limits need strict JSON (\(error))")
            return nil
        }
    }

    /// `pricing` and `pricingFile`.
    mutating func readPricing(_ object: [String: Any], into config: inout RelayConfiguration) {
        let inline = object["pricing"] != nil
        if inline && object["pricingFile"] != nil {
            problem("pricingFile", "give either pricing or pricingFile, not both")
            return
        }
        if inline {
            guard let document = exactDocument(), let node = document.member("pricing", of: JSONDocument.root) else { return }
            let (table, found) = PriceTable.read(document, at: node, path: "pricing")
            for p in found { problems.append(p) }
            if let table { config.pricing.table = table }
        } else if let file = string(object, "pricingFile", "pricingFile") {
            let read = sources.readFile
            switch PriceBook.load(file: file, readFile: { read($0).map { Array($0.utf8) } }) {
            case .success(let table): config.pricing = PricingConfiguration(table: table, file: file)
            case .failure(let error): problems.append(contentsOf: error.problems)
            }
        }
    }

    /// The most a dollar limit may be: a million dollars a day or a month (10¹⁵ nano-dollars, below 2⁵³, so the
    /// Redis scripts' Lua numbers hold every sum exactly).
    static let maxUSDLimit = 1_000_000

    /// `budgets.<which>.usdPerDay` / `usdPerMonth`, in nano-dollars, from the number's text.
    mutating func usdLimit(_ which: String, _ key: String) -> Int? {
        guard let document = exactDocument(),
              let node = document.member(path: ["budgets", which, key]) else { return nil }
        let path = "budgets.\(which).\(key)"
        let must = "must be a number of US dollars above 0 and at most \(Self.maxUSDLimit), with at most nine decimals"
        guard document.kind(of: node) == .number,
              let nano = PriceTable.decimal(document.bytes[document.range(of: node)], scale: 9),
              nano > 0, nano <= Self.maxUSDLimit * Cost.nanoPerDollar else {
            problem(path, must)
            return nil
        }
        return nano
    }

    /// Dollar budgets need prices: checked once both are read.
    mutating func checkPricedBudgets(_ config: RelayConfiguration) {
        guard let budgets = config.budgets, budgets.hasDollarLimits, config.pricing.table.isEmpty else { return }
        problem("budgets", "has a dollar limit (usdPerDay or usdPerMonth) but no prices: give pricing or pricingFile")
    }
}
