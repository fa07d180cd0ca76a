import JSON

/// One model's prices, in nano-dollars per million tokens (US dollars per million × 10⁹): integers, so a price
/// written with at most nine decimals is held exactly and every cost is integer arithmetic (README, "Usage and cost").
package struct ModelPrice: Sendable, Equatable {
    /// Fresh (uncached) input.
    package var input: Int
    /// Input read from the provider's prompt cache; the input price when the table gives none.
    package var cachedInput: Int
    /// Output, reasoning included.
    package var output: Int
    /// Input written to the cache (Anthropic's cache creation); the input price when the table gives none.
    package var cacheWrite: Int
    /// Input written to the cache for an hour (Anthropic's `"ttl": "1h"`, which the client chooses); when the table
    /// gives none, twice the input price (Anthropic's rate), and never below `cacheWrite`.
    package var cacheWriteOneHour: Int
    /// The prices of a request whose prompt is longer (`longContext` in the table): Gemini 2.5 Pro and Claude's
    /// long context bill every token of such a request, input and output, at higher rates.
    package var longContext: LongContextPrice?
    /// The prices of a request that asks for priority processing (`"service_tier": "priority"`), which OpenAI bills
    /// at higher rates per token (`priority` in the table); nil when the table gives none.
    package var priority: PriorityPrice?
    /// Audio input and output (OpenAI's audio models, Gemini's audio in and speech out), billed well above text
    /// (8 to 66 times): a request with audio under a dollar budget needs both (403 `modality_not_priced`).
    package var audioInput: Int?
    package var audioOutput: Int?
    /// Image output (Gemini's image models: $30 per million against $2.50 for text); `output` when not given.
    package var imageOutput: Int?

    package init(input: Int, cachedInput: Int? = nil, output: Int, cacheWrite: Int? = nil, cacheWriteOneHour: Int? = nil,
                 longContext: LongContextPrice? = nil, priority: PriorityPrice? = nil, audioInput: Int? = nil,
                 audioOutput: Int? = nil, imageOutput: Int? = nil) {
        self.input = input
        self.cachedInput = cachedInput ?? input
        self.output = output
        self.cacheWrite = cacheWrite ?? input
        self.cacheWriteOneHour = cacheWriteOneHour ?? max(self.cacheWrite, 2 * input)
        self.longContext = longContext
        self.priority = priority
        self.audioInput = audioInput
        self.audioOutput = audioOutput
        self.imageOutput = imageOutput
    }

    /// Both audio prices are given.
    package var pricesAudio: Bool { audioInput != nil && audioOutput != nil }

    /// The prices a request with audio is reserved and extended at: every token at the higher of its text and audio
    /// price, since which of them will be audio is unknown until the provider's counts.
    package var forAudio: ModelPrice {
        var audio = self
        audio.input = max(input, audioInput ?? input)
        audio.output = max(output, audioOutput ?? output)
        if let long = longContext {
            let inherited = ModelPrice(input: long.price.input, cachedInput: long.price.cachedInput, output: long.price.output,
                                       audioInput: long.price.audioInput ?? audioInput, audioOutput: long.price.audioOutput ?? audioOutput)
            audio.longContext = LongContextPrice(above: long.above, price: inherited.forAudio)
        }
        return audio
    }

    /// The prices of a request in `tier`: these for the standard tier; for priority, the priority prices, or nil
    /// when the table has none (an unknown price: never the standard one, which would make the difference free);
    /// nil for an option no table prices.
    package func forTier(_ tier: ServiceTier) -> ModelPrice? {
        switch tier {
        case .standard: self
        case .priority: priority?.price
        case .unpriced: nil
        }
    }

    /// The prices that apply to a request with `promptTokens` of input (every input token, cached and
    /// cache-written ones too: `Usage.prompt`): the long-context ones above their threshold, else these.
    package func forPrompt(_ promptTokens: Int) -> ModelPrice {
        guard let longContext, promptTokens > longContext.above else { return self }
        return longContext.price
    }

    /// Nano-dollars per million tokens of a price written in US dollars per million (`0.15` → 150 000 000).
    package static func nano(usdPerMillion: Double) -> Int { Int((usdPerMillion * 1e9).rounded()) }
}

/// How a request asked to be processed, as far as the price goes (`RequestBodyPlan.serviceTier`): the standard
/// rates; priority (OpenAI's and Gemini's `service_tier`), at the model's `priority` prices; or an option the table
/// has no prices for at all (Anthropic's fast mode, a US-only `inference_geo`), which has no price.
package enum ServiceTier: Int, Sendable, Equatable, Comparable {
    case standard
    case priority
    case unpriced

    package static func < (a: ServiceTier, b: ServiceTier) -> Bool { a.rawValue < b.rawValue }
}

/// A model's priority prices, flat or with long-context prices of their own. A class for the reason
/// `LongContextPrice` is one.
package final class PriorityPrice: Sendable, Equatable {
    /// Without priority prices of its own.
    package let price: ModelPrice

    package init(_ price: ModelPrice) {
        var flat = price
        flat.priority = nil
        self.price = flat
    }

    package static func == (a: PriorityPrice, b: PriorityPrice) -> Bool { a.price == b.price }
}

/// A model's long-context prices: for a request whose prompt is more than `above` tokens. A class only to hold a
/// `ModelPrice` inside one (a struct cannot contain itself); immutable, so shared freely.
package final class LongContextPrice: Sendable, Equatable {
    package let above: Int
    /// Without long-context prices of its own.
    package let price: ModelPrice

    package init(above: Int, price: ModelPrice) {
        self.above = above
        var flat = price
        flat.longContext = nil
        flat.priority = nil
        self.price = flat
    }

    package static func == (a: LongContextPrice, b: LongContextPrice) -> Bool { a.above == b.above && a.price == b.price }
}

/// `pricing` (or the `pricingFile`): prices by model name, exact names and patterns that end in one `*` (a prefix:
/// `claude-sonnet-4*` covers the dated names). The longest match wins; an exact name beats a pattern of the same
/// length. Pure and immutable; `PriceBook` holds the current one.
package struct PriceTable: Sendable, Equatable {
    /// Exact names.
    private var exact: [String: ModelPrice] = [:]
    /// Patterns as prefixes (without the `*`), longest first.
    private var prefixes: [(prefix: String, price: ModelPrice)] = []

    package init() {}

    package var isEmpty: Bool { exact.isEmpty && prefixes.isEmpty }
    /// Names and patterns in the table.
    package var count: Int { exact.count + prefixes.count }

    /// The price of `model`: its exact entry, else the longest pattern it starts with, else nil (not priced).
    package func price(for model: String?) -> ModelPrice? {
        guard let model else { return nil }
        if let price = exact[model] { return price }
        return prefixes.first { model.utf8.starts(with: $0.prefix.utf8) }?.price
    }

    /// Adds one entry (`name` as written in the table: `*` last for a pattern). The caller has checked the name.
    package mutating func add(_ name: String, _ price: ModelPrice) {
        if name.hasSuffix("*") {
            let prefix = String(name.dropLast())
            prefixes.removeAll { $0.prefix == prefix }
            prefixes.append((prefix, price))
            prefixes.sort { $0.prefix.utf8.count > $1.prefix.utf8.count }
        } else {
            exact[name] = price
        }
    }

    package static func == (a: PriceTable, b: PriceTable) -> Bool {
        a.exact == b.exact && a.prefixes.map(\.prefix) == b.prefixes.map(\.prefix) && a.prefixes.map(\.price) == b.prefixes.map(\.price)
    }

    // MARK: Reading

    /// The most a price may be: 100 000 US dollars per million tokens (far above any model's; it bounds the
    /// arithmetic: a million tokens at that price is 10¹⁷ nano-dollars, well inside Int64 and Redis's integers).
    package static let maxUSDPerMillion = 100_000
    /// The longest model name or pattern.
    package static let maxNameBytes = 256
    static let fields = ["input", "cachedInput", "output", "cacheWrite", "cacheWriteOneHour", "audioInput", "audioOutput", "imageOutput"]
    /// The longest threshold `longContext.above` takes: ten million tokens, beyond any model's context.
    static let maxLongContextAbove = 10_000_000

    /// Reads the table at `node` of `document` (an object: model or pattern → `{"input", "cachedInput", "output",
    /// "cacheWrite", "cacheWriteOneHour", "longContext", "priority"}`, `longContext` being `{"above"}` and the same
    /// prices, `priority` the same prices with a `longContext` of their own), each
    /// price from the number's own text, so no binary floating point ever rounds it. Every problem is named by its
    /// key path under `path` (`pricing.gpt-4o.input`); nil with problems when any.
    package static func read(_ document: JSONDocument, at node: Int, path: String) -> (table: PriceTable?, problems: [String]) {
        var problems: [String] = []
        guard document.kind(of: node) == .object else { return (nil, ["\(path): must be an object of model name → prices"]) }
        var table = PriceTable()
        var seen = Set<String>()
        for member in document.children(of: node) {
            let name = document.key(of: member) ?? ""
            let at = "\(path).\(name)"
            if !seen.insert(name).inserted { problems.append("\(at): given twice"); continue }
            if let problem = nameProblem(name) { problems.append("\(at): \(problem)"); continue }
            if let price = readPrice(document, member, at: at, nested: ["longContext", "priority"], into: &problems) { table.add(name, price) }
        }
        return problems.isEmpty ? (table, []) : (nil, problems)
    }

    /// One model's prices at `node` (problems named under `at`), with the nested entries `nested` allows
    /// (`longContext` and `priority` at the top; `longContext` inside `priority`; none inside `longContext`, which
    /// takes `above` instead); nil after a problem.
    private static func readPrice(_ document: JSONDocument, _ node: Int, at: String, nested: Set<String>,
                                  into problems: inout [String]) -> ModelPrice? {
        guard document.kind(of: node) == .object else {
            problems.append("\(at): must be an object with \"input\" and \"output\" (and \"cachedInput\", \"cacheWrite\")")
            return nil
        }
        var values: [String: Int] = [:]
        var long: LongContextPrice?
        var priority: PriorityPrice?
        var seenNested = Set<String>()
        var fieldProblem = false
        let isLongContext = nested.isEmpty
        for field in document.children(of: node) {
            let key = document.key(of: field) ?? ""
            if nested.contains(key) {
                guard seenNested.insert(key).inserted else { problems.append("\(at).\(key): given twice"); fieldProblem = true; continue }
                if key == "longContext" {
                    guard let read = readLongContext(document, field, at: "\(at).\(key)", into: &problems) else { fieldProblem = true; continue }
                    long = read
                } else {
                    guard let read = readPrice(document, field, at: "\(at).\(key)", nested: ["longContext"], into: &problems) else {
                        fieldProblem = true
                        continue
                    }
                    priority = PriorityPrice(read)
                }
                continue
            }
            if isLongContext && key == "above" { continue }
            guard fields.contains(key) else {
                let known = ((isLongContext ? ["above"] : []) + fields + nested.sorted()).joined(separator: ", ")
                problems.append("\(at).\(key): unknown key (known: \(known))")
                fieldProblem = true
                continue
            }
            guard values[key] == nil else { problems.append("\(at).\(key): given twice"); fieldProblem = true; continue }
            switch nanoPerMillion(document, field) {
            case .success(let v): values[key] = v
            case .failure(let p):
                problems.append("\(at).\(key): \(p.text)")
                fieldProblem = true
            }
        }
        for required in ["input", "output"] where values[required] == nil && !fieldProblem {
            problems.append("\(at).\(required): is required")
            fieldProblem = true
        }
        guard !fieldProblem, let input = values["input"], let output = values["output"] else { return nil }
        return ModelPrice(input: input, cachedInput: values["cachedInput"], output: output, cacheWrite: values["cacheWrite"],
                          cacheWriteOneHour: values["cacheWriteOneHour"], longContext: long, priority: priority,
                          audioInput: values["audioInput"], audioOutput: values["audioOutput"], imageOutput: values["imageOutput"])
    }

    /// `longContext`: `above` (whole tokens, 1 to `maxLongContextAbove`) and the prices past it.
    private static func readLongContext(_ document: JSONDocument, _ node: Int, at: String,
                                        into problems: inout [String]) -> LongContextPrice? {
        guard document.kind(of: node) == .object else {
            problems.append("\(at): must be an object with \"above\" (tokens), \"input\" and \"output\"")
            return nil
        }
        let aboveNode = document.member("above", of: node)
        let above = aboveNode.flatMap { document.kind(of: $0) == .number ? decimal(document.bytes[document.range(of: $0)], scale: 0) : nil }
        guard let above, above >= 1, above <= maxLongContextAbove else {
            problems.append("\(at).above: \(aboveNode == nil ? "is required" : "must be a whole number of tokens from 1 to \(maxLongContextAbove)")")
            return nil
        }
        guard let price = readPrice(document, node, at: at, nested: [], into: &problems) else { return nil }
        return LongContextPrice(above: above, price: price)
    }

    /// Why `name` cannot be a table entry, or nil.
    static func nameProblem(_ name: String) -> String? {
        if name.isEmpty { return "a model name must not be empty" }
        if name.utf8.count > maxNameBytes { return "a model name is at most \(maxNameBytes) bytes" }
        if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "a model name must not hold control characters" }
        if let star = name.firstIndex(of: "*"), star != name.index(before: name.endIndex) {
            return "a pattern takes one \"*\", at its end (\"claude-sonnet-4*\")"
        }
        return nil
    }

    struct Problem: Error { var text: String }

    /// A JSON number's text as nano-dollars per million tokens, exactly: `0.075` → 75 000 000. Refused: anything
    /// but a number, a negative, more than nine decimals (not a whole nano-dollar per million), above the maximum.
    static func nanoPerMillion(_ document: JSONDocument, _ node: Int) -> Result<Int, Problem> {
        let must = "must be a number of US dollars per million tokens, from 0 to \(maxUSDPerMillion)"
        guard document.kind(of: node) == .number else { return .failure(Problem(text: must)) }
        let text = document.bytes[document.range(of: node)]
        guard let value = decimal(text, scale: 9) else {
            return .failure(Problem(text: "\(must), with at most nine decimals"))
        }
        guard value >= 0, value <= maxUSDPerMillion * 1_000_000_000 else { return .failure(Problem(text: must)) }
        return .success(value)
    }

    /// The JSON number `text` (RFC 8259 §6 grammar) times 10^`scale`, when that is a whole number that fits; nil
    /// otherwise. Only digits are handled: no floating point.
    static func decimal<C: Collection>(_ text: C, scale: Int) -> Int? where C.Element == UInt8 {
        var bytes = Array(text)[...]
        var negative = false
        if bytes.first == UInt8(ascii: "-") { negative = true; bytes = bytes.dropFirst() }
        var digits: [UInt8] = []
        var fractionDigits = 0
        var exponent = 0
        var inFraction = false
        while let c = bytes.first, c != UInt8(ascii: "e"), c != UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if c == UInt8(ascii: ".") { inFraction = true; continue }
            guard c >= 0x30 && c <= 0x39 else { return nil }
            digits.append(c - 0x30)
            if inFraction { fractionDigits += 1 }
        }
        if !bytes.isEmpty {
            bytes = bytes.dropFirst()
            var expNegative = false
            if bytes.first == UInt8(ascii: "-") { expNegative = true; bytes = bytes.dropFirst() } else if bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
            guard !bytes.isEmpty, bytes.count <= 4 else { return nil }
            for c in bytes {
                guard c >= 0x30 && c <= 0x39 else { return nil }
                exponent = exponent * 10 + Int(c - 0x30)
            }
            if expNegative { exponent = -exponent }
        }
        // Drop leading zeros; the shift moves the decimal point.
        while digits.first == 0 { digits.removeFirst() }
        var shift = scale + exponent - fractionDigits
        while shift < 0, digits.last == 0 { digits.removeLast(); shift += 1 }
        if digits.isEmpty { return 0 }
        guard shift >= 0, digits.count + shift <= 18 else { return nil }
        var value = 0
        for d in digits { value = value * 10 + Int(d) }
        for _ in 0..<shift { value *= 10 }
        return negative ? -value : value
    }
}
