import Usage

/// Money in integer nano-dollars (10⁻⁹ US dollar): what one exchange cost and what a dollar budget reserves. Pure.
///
/// Arithmetic: prices are nano-dollars per million tokens (`ModelPrice`), so tokens × price is a whole number of
/// 10⁻¹⁵ dollars; the parts are summed exactly and divided by a million once, rounded UP to the next
/// nano-dollar (a cost is never rounded down to less than it is; an unpriced model has no cost at all, never a
/// zero one). The result saturates at `Int.max`.
package enum Cost {
    /// What `usage` costs at `price`: fresh input at `input`, cache reads at `cachedInput`, cache writes at
    /// `cacheWrite` (those for an hour at `cacheWriteOneHour`), output (reasoning included: `Usage.completion` holds
    /// it) at `output`; the audio parts of input and output at `audioInput` and `audioOutput`, the image part of the
    /// output at `imageOutput` (each the text price when not given; an audio request under a dollar budget is
    /// admitted only with both audio prices: `BudgetCharge.of`). Fresh input is the prompt less its cached and cache-written parts (`Usage`'s counting rules,
    /// the same for every provider). A prompt past the model's long-context threshold prices every part at its
    /// long-context prices (`ModelPrice.forPrompt`).
    package static func nanoUSD(_ usage: Usage, price: ModelPrice) -> Int {
        // Borrowed, not copied (a copy retains the long-context and priority prices).
        if let long = price.longContext, usage.prompt > long.above {
            // Audio and image prices the long-context entry does not give are the entry's own (never the text ones).
            guard (usage.audioPrompt ?? 0) > 0 || (usage.audioCompletion ?? 0) > 0 || (usage.imageCompletion ?? 0) > 0 else {
                return rated(usage, long.price)
            }
            var inherited = long.price
            inherited.audioInput = inherited.audioInput ?? price.audioInput
            inherited.audioOutput = inherited.audioOutput ?? price.audioOutput
            inherited.imageOutput = inherited.imageOutput ?? price.imageOutput
            return rated(usage, inherited)
        }
        return rated(usage, price)
    }

    private static func rated(_ usage: Usage, _ price: ModelPrice) -> Int {
        let cached = max(0, usage.cached ?? 0)
        let written = max(0, usage.cacheCreation ?? 0)
        let oneHour = min(written, max(0, usage.cacheCreationOneHour ?? 0))
        let fresh = max(0, usage.prompt - cached - written)
        let audioIn = min(fresh, max(0, usage.audioPrompt ?? 0))
        let completion = max(0, usage.completion)
        let audioOut = min(completion, max(0, usage.audioCompletion ?? 0))
        let imageOut = min(completion - audioOut, max(0, usage.imageCompletion ?? 0))
        return nanoUSD([(fresh - audioIn, price.input), (audioIn, price.audioInput ?? price.input), (cached, price.cachedInput),
                        (written - oneHour, price.cacheWrite), (oneHour, price.cacheWriteOneHour),
                        (completion - audioOut - imageOut, price.output), (audioOut, price.audioOutput ?? price.output),
                        (imageOut, price.imageOutput ?? price.output)])
    }

    /// A reservation's price: the prompt estimate at the input price, the output ceiling at the output price (the
    /// long-context prices past the threshold, by the prompt estimate).
    package static func reservation(promptTokens: Int, outputTokens: Int, price: ModelPrice) -> Int {
        var (input, output) = (price.input, price.output)
        if let long = price.longContext, promptTokens > long.above { (input, output) = (long.price.input, long.price.output) }
        return nanoUSD([(max(0, promptTokens), input), (max(0, outputTokens), output)])
    }

    /// Σ tokens × nano-dollars-per-million, / 10⁶ rounded up, exactly: each price splits into whole nano-dollars
    /// per token and the rest (below 10⁶ per million), so no product needs more than 64 bits (Int128 is not on every
    /// platform the package names); any overflow saturates.
    static func nanoUSD(_ parts: [(tokens: Int, perMillion: Int)]) -> Int {
        var whole = 0
        var rest = 0
        var overflow = false
        for part in parts {
            let (w, o1) = part.tokens.multipliedReportingOverflow(by: part.perMillion / 1_000_000)
            let (r, o2) = part.tokens.multipliedReportingOverflow(by: part.perMillion % 1_000_000)
            let (w2, o3) = whole.addingReportingOverflow(w)
            let (r2, o4) = rest.addingReportingOverflow(r)
            (whole, rest) = (w2, r2)
            overflow = overflow || o1 || o2 || o3 || o4
        }
        let (total, o5) = whole.addingReportingOverflow(rest / 1_000_000 + (rest % 1_000_000 > 0 ? 1 : 0))
        return overflow || o5 ? Int.max : total
    }

    /// `nano` as a decimal string of dollars with nine decimals: 172 500 → `"0.000172500"`. Digits written last
    /// first into a buffer on the stack, then made a string (inline, without an allocation, up to 15 bytes): every
    /// priced exchange's log line has one, and built from interpolated strings and a padding string it cost 3.9 k
    /// instructions.
    package static func decimalString(nanoUSD nano: Int) -> String {
        var rest = nano.magnitude
        // At most a sign, 10 integer digits (Int.min's magnitude over 10⁹), a point and 9 decimals: 21 bytes.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { out in
            var i = out.count
            var place = 0
            repeat {
                if place == 9 {
                    i -= 1
                    out[i] = UInt8(ascii: ".")
                }
                i -= 1
                out[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
                place += 1
            } while rest > 0 || place <= 9
            if nano < 0 {
                i -= 1
                out[i] = UInt8(ascii: "-")
            }
            return String(decoding: UnsafeBufferPointer(rebasing: out[i...]), as: UTF8.self)
        }
    }

    /// US dollars (a configuration limit) as nano-dollars; the configuration reads them from their text exactly.
    package static let nanoPerDollar = 1_000_000_000
}
