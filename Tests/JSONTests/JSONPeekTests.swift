import Testing
import TestSupportCore
@testable import JSON

@Suite("JSONPeek")
struct JSONPeekTests {
    func peek<T>(_ text: String, _ body: (JSONPeek) -> T) -> T {
        Array(text.utf8).withUnsafeBufferPointer { body(JSONPeek($0)) }
    }

    @Test func findsNestedMembersSkippingEveryKindOfValue() {
        let text = #" {"a": [1, {"x": "}"}, "\"]"], "b" : null, "c": -1.5e3, "usage": {"n": 42, "m": 7}} "#
        #expect(peek(text) { p in p.path("usage", "n", from: p.root).flatMap { p.integer(at: $0) } } == 42)
        #expect(peek(text) { p in p.path("usage", "m", from: p.root).flatMap { p.integer(at: $0) } } == 7)
        #expect(peek(text) { p in p.member("b", inObjectAt: p.root).map { p.integer(at: $0) } } == .some(nil))
        #expect(peek(text) { p in p.member("x", inObjectAt: p.root) } == nil)
    }

    /// The stripper's pre-check may say "maybe" too often but never "no" where the full scan finds a non-empty string
    /// for the key: random sequences of the tokens that matter (the name, escapes, quotes, whitespace, values).
    @Test func thePreCheckNeverRulesOutWhatTheScanFinds() {
        let tokens = [#""finish_reason""#, "finish_reason", ":", " ", "\n", "\t", #""stop""#, #""""#, "null", #"\""#, #"\"#,
                      "{", "}", ",", "[", "]", #""x""#, #"""#, "0", #"\\"#, "f", #""finish_reason":"#, #""s"#]
        let keys = JSONPeek.KeySet(["finish_reason"])
        var rng = SplitMix64(seed: 24)
        var scanned = 0, ruledOut = 0
        for _ in 0..<40_000 {
            let text = (0..<Int.random(in: 1...14, using: &rng)).map { _ in tokens.randomElement(using: &rng)! }.joined()
            let (scan, may) = peek(text) { p in
                (p.scanKeys(keys).nonEmptyString != 0, p.mayHaveNonEmptyString(quotedKey: #""finish_reason""#))
            }
            #expect(!scan || may, "ruled out what the scan finds: \(text)")
            if scan { scanned += 1 }
            if !may { ruledOut += 1 }
        }
        #expect(scanned > 1_000 && ruledOut > 10_000, "the generator reaches both answers: \(scanned) found, \(ruledOut) ruled out")
    }

    @Test(arguments: [
        (#"{"choices":[{"delta":{"content":"a"},"finish_reason":null}]}"#, false),
        (#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#, true),
        ("{\"finish_reason\" :\n \"length\"}", true),
        (#"{"finish_reason":""}"#, false),
        (#"{"content":"say \"finish_reason\":\"stop\""}"#, false),
        (#"{"finish_reason":null,"x":"finish_reason"}"#, false),
        (#"{"finish_reason":"#, false),
        (#"finish_reason":"stop"}"#, false),
    ])
    func thePreCheckOnChatChunks(_ text: String, _ may: Bool) {
        #expect(peek(text) { $0.mayHaveNonEmptyString(quotedKey: #""finish_reason""#) } == may)
    }

    @Test func theLastOfTwoEqualKeysWins() {
        #expect(peek(#"{"n": 1, "n": 2}"#) { p in p.member("n", inObjectAt: p.root).flatMap { p.integer(at: $0) } } == 2)
    }

    @Test(arguments: ["", "{", #"{"a""#, #"{"a":"#, #"{"a":1"#, #"{"a":[1,"#, #"["#, "nul", #"{"a":"x}"#])
    func malformedOrTruncatedInputIsNilNeverATrap(_ text: String) {
        let found = peek(text) { p in p.member("a", inObjectAt: p.root).flatMap { p.integer(at: $0) } }
        #expect(found == nil || found == 1)
        _ = peek(text) { p in p.endOfValue(at: p.root) }
        _ = peek(text) { p in p.scanKeys(JSONPeek.KeySet(["a"])) }
    }

    @Test func nestingIsBounded() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(peek(deep) { p in p.endOfValue(at: p.root) } == nil)
    }

    @Test(arguments: [("12", 12), ("0", 0), ("1.0", nil), ("-1", nil), ("1e3", nil), ("null", nil),
                      ("99999999999999999999999", nil)] as [(String, Int?)])
    func integers(_ c: (String, Int?)) {
        #expect(peek(c.0) { $0.integer(at: 0) } == c.1)
    }

    @Test func keyScanSkipsStringValuesWhole() {
        let text = #"{"content":"\"usage\": {\"a\":1}","usage":null,"x":{"usage":{}}}"#
        let keys = peek(text) { $0.scanKeys(JSONPeek.KeySet(["content", "usage", "missing"])) }
        #expect(keys.present == 0b011)
        #expect(keys.nonEmptyString == 0b001)
        #expect(keys.object == 0b010)   // the nested usage object
        #expect(peek(#"{"content":""}"#) { $0.scanKeys(JSONPeek.KeySet(["content"])) }.nonEmptyString == 0)
        // Runs of backslashes before a quote: odd escapes it, even ends the string.
        #expect(peek(#"{"a":"x\\","content":"y"}"#) { $0.scanKeys(JSONPeek.KeySet(["content"])) }.nonEmptyString == 1)
        #expect(peek(#"{"a":"x\\\"content\":\"y"}"#) { $0.scanKeys(JSONPeek.KeySet(["content"])) }.present == 0)
        #expect(peek(#"{"a":"\\\\","content":"y"}"#) { $0.scanKeys(JSONPeek.KeySet(["content"])) }.nonEmptyString == 1)
    }

    /// The key scan jumps from quote to quote (memchr) and looks back for the backslashes before each: against a
    /// byte-by-byte reading of the same rules, on drawn chunks with escapes, names with and without their colon,
    /// quotes at every distance, and bytes next to the quote's value (`#`, `¢`, 0x01, 0x80).
    @Test func keyScanFindsEveryQuoteAsAByteLoopDoes() {
        let names = ["content", "usage", "model", "finish_reason", "a"]
        let set = JSONPeek.KeySet(names)
        let tokens = [#""content""#, #""usage""#, #""model""#, #""finish_reason""#, #""a""#, ":", " ", "\n", #"\"#, #"\""#,
                      #"""#, "{", "}", ",", "[", "]", "#", "¢", "\u{01}", "\u{80}", "x", "xxxxxxx", "abcdefghijklmnopq",
                      #""v""#, #""""#, "null", "0", #""content":"#, #""usage":"#, #""model": "#, #""a":"#]
        var rng = SplitMix64(seed: 8)
        var found = 0
        for _ in 0..<30_000 {
            let text = (0..<Int.random(in: 0...24, using: &rng)).map { _ in tokens.randomElement(using: &rng)! }.joined()
            var bytes = Array(text.utf8)
            if Bool.random(using: &rng) { bytes.append(0x80) }
            let measuring = UInt64.random(in: 0...0b11111, using: &rng)
            let scan = bytes.withUnsafeBufferPointer { JSONPeek($0).scanKeys(set, measuring: measuring) }
            let expected = Self.keyScanByteByByte(bytes, names.map { Array($0.utf8) }, measuring: measuring)
            #expect(scan == expected, "\(text)")
            if scan.present != 0 { found += 1 }
        }
        #expect(found > 10_000, "the generator makes chunks with keys: \(found)")
    }

    /// What a user can make a model write lands inside a string value: escaped quotes and backslash runs at every
    /// offset of a long content string, across the scan's 16 bytes read a word at a time and the `memchr` after
    /// them, with a key name posed inside the text. The counted content bytes and the keys found must be the
    /// byte-by-byte reading's, so no text can hide or fake a key, or shorten what is metered.
    @Test func keyScanAcrossTheWordWindowMatchesAByteLoop() {
        let names = ["content", "usage", "finish_reason"]
        let set = JSONPeek.KeySet(names)
        let inserts = [#"""#, #"\"#, #"\""#, #"\\"#, #"","usage":{"#, #""content":"x"#]
        var compared = 0
        for insert in inserts {
            for at in 0...40 {
                for tail in [#"","usage":{"a":1}}"#, #""}"#, #"","finish_reason":"stop"}"#] {
                    let text = String(repeating: "a", count: at) + insert + String(repeating: "b", count: 40 - at)
                    let chunk = Array((#"{"id":"c","delta":{"content":""# + text + tail).utf8)
                    for cut in [chunk.count, chunk.count - 1, chunk.count - 9] {
                        let bytes = Array(chunk[..<cut])
                        let scan = bytes.withUnsafeBufferPointer { JSONPeek($0).scanKeys(set, measuring: 0b1) }
                        let expected = Self.keyScanByteByByte(bytes, names.map { Array($0.utf8) }, measuring: 0b1)
                        #expect(scan == expected, "\(String(decoding: bytes, as: UTF8.self))")
                        compared += 1
                    }
                }
            }
        }
        #expect(compared == 6 * 41 * 3 * 3)
    }

    /// What a client can steer a model into writing (quotes, backslashes, colons and key names in its text), at
    /// random places across the 16-byte blocks of the quote search: the keys found and the content bytes metered
    /// must be the byte-by-byte reading's, so no output can hide or fake a key or shorten what is metered. Fixed
    /// seeds, so a failure replays.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func keyScanOfAdversarialChunksMatchesAByteLoop(seed: UInt64) {
        let names = ["content", "usage", "finish_reason"]
        let set = JSONPeek.KeySet(names)
        let pieces: [[UInt8]] = [#"""#, #"\"#, ":", " ", "{", "}", "a", "bb", "content", "usage", #""content":"#,
                                 #""usage":{"#, #""finish_reason":"stop""#, #"\""#, #"\\"#, "0123456789abcdef"].map { Array($0.utf8) }
        var rng = SplitMix64(seed: seed)
        var compared = 0
        for _ in 0..<3000 {
            var bytes: [UInt8] = Array(#"{"delta":{"content":""#.utf8)
            for _ in 0..<Int.random(in: 0...40, using: &rng) { bytes += pieces[Int.random(in: 0..<pieces.count, using: &rng)] }
            let scan = bytes.withUnsafeBufferPointer { JSONPeek($0).scanKeys(set, measuring: 0b1) }
            let expected = Self.keyScanByteByByte(bytes, names.map { Array($0.utf8) }, measuring: 0b1)
            #expect(scan == expected, "seed \(seed): \(String(decoding: bytes, as: UTF8.self))")
            compared += 1
        }
        #expect(compared == 3000)
    }

    /// `scanKeys`'s rules read one byte at a time: the next quote opens a string, which a quote not escaped by an
    /// odd run of backslashes closes; a name is a string followed (after whitespace) by a colon.
    static func keyScanByteByByte(_ b: [UInt8], _ names: [[UInt8]], measuring: UInt64)
        -> (present: UInt64, nonEmptyString: UInt64, object: UInt64, measured: Int) {
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
        var present: UInt64 = 0, nonEmpty: UInt64 = 0, object: UInt64 = 0, measured = 0, measuredValue = -1
        var i = 0
        while i < b.count {
            guard b[i] == 0x22 else { i += 1; continue }
            var j = i + 1
            while j < b.count && b[j] != 0x22 { j += b[j] == 0x5C ? 2 : 1 }
            guard j < b.count else { break }
            let name = Array(b[(i + 1)..<j])
            if i == measuredValue { measured += name.count }
            var after = j + 1
            while after < b.count && isSpace(b[after]) { after += 1 }
            if after < b.count && b[after] == 0x3A, let k = names.firstIndex(of: name) {
                present |= 1 << k
                var v = after + 1
                while v < b.count && isSpace(b[v]) { v += 1 }
                if v + 1 < b.count && b[v] == 0x22 && b[v + 1] != 0x22 {
                    nonEmpty |= 1 << k
                    if measuring & (1 << k) != 0 { measuredValue = v }
                } else if v < b.count && b[v] == 0x7B {
                    object |= 1 << k
                }
            }
            i = j + 1
        }
        return (present, nonEmpty, object, measured)
    }

    /// Names of one length are told apart by their bytes; an empty name, names of 63 bytes and more (which share
    /// the length mask's last bit) and names longer than any member are matched exactly; bits follow the set's
    /// order; measured values are summed over every occurrence.
    @Test func keyScanMatchesNamesExactly() {
        let long = String(repeating: "k", count: 70), longer = String(repeating: "k", count: 63)
        let set = JSONPeek.KeySet(["model", "usage", "", long, longer, "absent_and_longer_than_any_member_name"])
        let text = #"{"model":"m","index":0,"delta":{"":"e","usage":{}},"\#(long)":"v","model":"mm"}"#
        let keys = peek(text) { $0.scanKeys(set, measuring: 0b1) }
        #expect(keys.present == 0b01111)
        #expect(keys.nonEmptyString == 0b01101)
        #expect(keys.object == 0b00010)
        #expect(keys.measured == 3)
        #expect(peek(#"{"a":1}"#) { $0.scanKeys(JSONPeek.KeySet([])) } == (0, 0, 0, 0))
    }
}
