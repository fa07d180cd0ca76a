#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CByteSearch

/// The JSON module's lenient mode (`JSONDocument` is the strict one): an allocation-free reader of the JSON
/// providers send: it finds a member, skips a value, reads a
/// non-negative integer, without decoding anything else. Used on the few events that carry usage, so the usage
/// tap never decodes a whole chunk.
///
/// Lenient on purpose: it reads what a provider wrote, not what a client may smuggle (request bodies the relay
/// forwards are read by the strict `JSONDocument`). Malformed or truncated input yields `nil`, never
/// a trap; nesting is capped at `maxDepth` so hostile input costs bounded stack. Keys are compared as raw bytes
/// (providers never escape the ASCII key names read here); a key that appears twice resolves to the last one, as in
/// JavaScript's and Python's parsers.
public struct JSONPeek {
    public static let maxDepth = 64
    public let bytes: UnsafeBufferPointer<UInt8>

    public init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    public func skipWhitespace(_ i: Int) -> Int {
        var i = i
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return i
            }
        }
        return i
    }

    /// The first non-whitespace index, where the top-level value starts.
    public var root: Int { skipWhitespace(0) }

    public func byte(at i: Int) -> UInt8? { i >= 0 && i < bytes.count ? bytes[i] : nil }

    /// The index after the closing quote of the string whose opening quote is at `i`.
    public func endOfString(at i: Int) -> Int? {
        guard byte(at: i) == Self.quote, let base = bytes.baseAddress else { return nil }
        var j = i + 1
        // memchr to each quote, then the parity of the backslash run before it says whether it is escaped.
        while j < bytes.count, let found = memchr(base + j, Int32(Self.quote), bytes.count - j) {
            let q = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var k = q - 1
            while k > i && bytes[k] == Self.backslash { k -= 1 }
            if (q - 1 - k) % 2 == 0 { return q + 1 }
            j = q + 1
        }
        return nil
    }

    /// The index after the value starting at `i` (no leading whitespace).
    public func endOfValue(at i: Int, depth: Int = 1) -> Int? {
        guard let c = byte(at: i) else { return nil }
        switch c {
        case Self.quote:
            return endOfString(at: i)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth <= Self.maxDepth else { return nil }
            let close = c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            var j = skipWhitespace(i + 1)
            if byte(at: j) == close { return j + 1 }
            while j < bytes.count {
                if c == UInt8(ascii: "{") {
                    guard let keyEnd = endOfString(at: j) else { return nil }
                    j = skipWhitespace(keyEnd)
                    guard byte(at: j) == UInt8(ascii: ":") else { return nil }
                    j = skipWhitespace(j + 1)
                }
                guard let valueEnd = endOfValue(at: j, depth: depth + 1) else { return nil }
                j = skipWhitespace(valueEnd)
                guard let next = byte(at: j) else { return nil }
                if next == close { return j + 1 }
                guard next == UInt8(ascii: ",") else { return nil }
                j = skipWhitespace(j + 1)
            }
            return nil
        default:
            // A number or literal: everything up to the next delimiter.
            var j = i
            while j < bytes.count {
                switch bytes[j] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D:
                    return j == i ? nil : j
                default: j += 1
                }
            }
            return j == i ? nil : j
        }
    }

    /// Where the value of `key` starts in the object at `object`, or nil (no such member, not an object, malformed).
    public func member(_ key: String, inObjectAt object: Int) -> Int? {
        var found: Int?
        forEachMember(inObjectAt: object) { name, value in
            if Self.keyMatches(key, name) { found = value }
        }
        return found
    }

    /// Calls `body` with each member's raw name (between its quotes) and where its value starts, in order, in one
    /// pass over the object at `object`; stops quietly at malformed input. Several members are read with one walk.
    public func forEachMember(inObjectAt object: Int, _ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: Int) -> Void) {
        guard byte(at: object) == UInt8(ascii: "{") else { return }
        var j = skipWhitespace(object + 1)
        if byte(at: j) == UInt8(ascii: "}") { return }
        while j < bytes.count {
            guard let keyEnd = endOfString(at: j) else { return }
            let name = UnsafeBufferPointer(rebasing: bytes[(j + 1)..<(keyEnd - 1)])
            j = skipWhitespace(keyEnd)
            guard byte(at: j) == UInt8(ascii: ":") else { return }
            j = skipWhitespace(j + 1)
            body(name, j)
            guard let valueEnd = endOfValue(at: j, depth: 2) else { return }
            j = skipWhitespace(valueEnd)
            guard byte(at: j) == UInt8(ascii: ",") else { return }
            j = skipWhitespace(j + 1)
        }
    }

    /// Follows `first`, then `second`, from the object at `start`.
    public func path(_ first: String, _ second: String, from start: Int) -> Int? {
        member(first, inObjectAt: start).flatMap { member(second, inObjectAt: $0) }
    }

    /// The raw key bytes are `key`'s: lengths first, then the bytes in place (no iterator over the String).
    public static func keyMatches(_ key: String, _ raw: UnsafeBufferPointer<UInt8>) -> Bool {
        guard key.utf8.count == raw.count else { return false }
        return key.utf8.withContiguousStorageIfAvailable { k in
            k.count == 0 || memcmp(k.baseAddress!, raw.baseAddress!, k.count) == 0
        } ?? key.utf8.elementsEqual(raw)
    }

    /// A non-negative integer written at `i` (token counts); nil for null, fractions, negatives, anything else.
    public func integer(at i: Int) -> Int? {
        var j = i
        var value = 0
        while let c = byte(at: j), c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int(c - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            value = sum
            j += 1
        }
        guard j > i else { return nil }
        if let c = byte(at: j), c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { return nil }
        return value
    }

    public func isObject(at i: Int) -> Bool { byte(at: i) == UInt8(ascii: "{") }

    public func isEmptyArray(at i: Int) -> Bool {
        byte(at: i) == UInt8(ascii: "[") && byte(at: skipWhitespace(i + 1)) == UInt8(ascii: "]")
    }

    /// The start of every element of the array at `i`, in order (stops quietly at malformed input).
    public func elements(ofArrayAt i: Int) -> [Int] {
        guard byte(at: i) == UInt8(ascii: "[") else { return [] }
        var out: [Int] = []
        var j = skipWhitespace(i + 1)
        if byte(at: j) == UInt8(ascii: "]") { return [] }
        while j < bytes.count {
            out.append(j)
            guard let end = endOfValue(at: j, depth: 2) else { return out }
            j = skipWhitespace(end)
            guard byte(at: j) == UInt8(ascii: ",") else { return out }
            j = skipWhitespace(j + 1)
        }
        return out
    }

    /// False only when no member named `quotedKey` (the name with its quotes, as raw bytes) can have a non-empty
    /// string value anywhere in the bytes, as `scanKeys` judges it: such a member needs these bytes followed by
    /// optional whitespace, a colon, optional whitespace, a quote and a byte that is not a quote, and `scanKeys`
    /// compares names as raw bytes. A true answer proves nothing (the bytes may sit inside a string, or be malformed):
    /// ask `scanKeys` then. A `memchr` for the name's first letter instead of a walk over every string of the value.
    public func mayHaveNonEmptyString(quotedKey: StaticString) -> Bool {
        let key = quotedKey.utf8Start, keyCount = quotedKey.utf8CodeUnitCount
        guard let base = bytes.baseAddress, keyCount > 2 else { return false }
        let count = bytes.count
        // memchr for the name's first letter (rare in a chunk, unlike the quote), then the quotes and the name.
        var from = 1
        while from < count, let found = memchr(base + from, Int32(key[1]), count - from) {
            let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self)) - 1
            if base[at] == Self.quote, at + keyCount <= count, memcmp(base + at, key, keyCount) == 0 {
                var v = skipWhitespace(at + keyCount)
                if byte(at: v) == UInt8(ascii: ":") {
                    v = skipWhitespace(v + 1)
                    if byte(at: v) == Self.quote, let next = byte(at: v + 1), next != Self.quote { return true }
                }
            }
            from = at + 2
        }
        return false
    }

    /// Member names to look for with `scanKeys`, as bytes (at most 64), made once: laid out flat (every name's
    /// bytes in one array, each name's start and length in another) and indexed by length, so the scan compares a
    /// member name only with the names of its length and touches no nested array (whose retain and release per
    /// comparison cost more than the comparison).
    public struct KeySet: Sendable {
        public let keys: [[UInt8]]
        /// Every name's bytes, one after the other.
        let bytes: [UInt8]
        /// Name i is `bytes[starts[i] ..< starts[i] + lengths[i]]`.
        let starts: [Int]
        let lengths: [Int]
        /// Entry n: the names n bytes long, bit i for name i (entry 63: every name of 63 bytes or more).
        let byLength: [UInt64]

        public init(_ names: [String]) {
            precondition(names.count <= 64)
            keys = names.map { Array($0.utf8) }
            bytes = Array(keys.joined()) + [0]   // never empty, so its buffer always has a base address
            var starts: [Int] = [], offset = 0
            var byLength = [UInt64](repeating: 0, count: 64)
            for (i, key) in keys.enumerated() {
                starts.append(offset)
                offset += key.count
                byLength[min(key.count, 63)] |= 1 << UInt64(i)
            }
            self.starts = starts
            lengths = keys.map(\.count)
            self.byLength = byLength
        }
    }

    /// The index of the next quote at or after `i`; `count` when there is none (`i` is at most `count`). Sixteen
    /// bytes at a time where SSE2 is (`cbytesearch_next`, inlined): most quotes in a chunk are a few bytes after the
    /// last, where a call to `memchr` costs more than the search. Elsewhere the next 16 bytes a word at a time (a
    /// word has a quote byte when `x ^ 0x22…` has a zero byte, and the lowest such byte is the first quote), then
    /// `memchr`.
    @inline(__always)
    private static func nextQuote(_ base: UnsafePointer<UInt8>, from i: Int, _ count: Int) -> Int {
        #if arch(x86_64)
        return cbytesearch_next(base, i, count, quote)
        #else
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let raw = UnsafeRawPointer(base)
        var at = i
        if at &+ 16 <= count {
            for _ in 0..<2 {
                let x = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt64.self)) ^ (ones &* 0x22)
                let zeros = (x &- ones) & ~x & highs
                if zeros != 0 { return at &+ zeros.trailingZeroBitCount &>> 3 }
                at &+= 8
            }
        }
        guard at < count, let p = memchr(base + at, Int32(quote), count &- at) else { return count }
        return base.distance(to: p.assumingMemoryBound(to: UInt8.self))
        #endif
    }

    @inline(__always)
    private static func isSpace(_ c: UInt8) -> Bool { c <= 0x20 && (c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D) }

    /// Which of `keys` appear anywhere as a member name (`present`, bit i for key i), which have a string value that
    /// is not empty (`nonEmptyString`) and which an object value (`object`); and `measured`, the bytes between the
    /// quotes of the string values of the keys in `measuring` (as written: an escape counts its bytes), every
    /// occurrence summed. One pass: strings are skipped whole, so text inside a value can never pose as a key. This
    /// runs on every event of a stream, so it stays a tight loop: no allocation, names compared by length first.
    public func scanKeys(_ set: KeySet, measuring: UInt64 = 0)
        -> (present: UInt64, nonEmptyString: UInt64, object: UInt64, measured: Int) {
        guard let base = bytes.baseAddress else { return (0, 0, 0, 0) }
        let count = bytes.count
        // The set's arrays are borrowed once for the whole scan: no reference counting inside its loop.
        return set.bytes.withUnsafeBufferPointer { names in
            set.starts.withUnsafeBufferPointer { starts in
                set.lengths.withUnsafeBufferPointer { lengths in
                    set.byLength.withUnsafeBufferPointer { byLength in
                        Self.scanKeys(base, count, names: names.baseAddress!, starts: starts, lengths: lengths,
                                      byLength: byLength, measuring: measuring)
                    }
                }
            }
        }
    }

    private static func scanKeys(_ base: UnsafePointer<UInt8>, _ count: Int, names: UnsafePointer<UInt8>,
                                 starts: UnsafeBufferPointer<Int>, lengths: UnsafeBufferPointer<Int>,
                                 byLength: UnsafeBufferPointer<UInt64>,
                                 measuring: UInt64) -> (present: UInt64, nonEmptyString: UInt64, object: UInt64, measured: Int) {
        var present: UInt64 = 0
        var nonEmpty: UInt64 = 0
        var object: UInt64 = 0
        var measured = 0
        /// Where the string value of a measured key opens: the next string the loop skips.
        var measuredValue = -1
        // Indices stay within 0...count (a buffer's count is far from Int.max), so the arithmetic wraps unchecked.
        var i = 0
        while i < count {
            // The quotes are all that matter between keys.
            let open = nextQuote(base, from: i, count)
            if open == count { break }
            // The string's closing quote: the next quote not escaped (preceded by an even run of backslashes).
            var close = nextQuote(base, from: open &+ 1, count)
            while close < count && base[close &- 1] == backslash {
                var slashes = 1
                while close &- 1 &- slashes > open && base[close &- 1 &- slashes] == backslash { slashes &+= 1 }
                if slashes & 1 == 0 { break }
                close = nextQuote(base, from: close &+ 1, count)
            }
            if close == count { break }
            i = open
            let j = close
            let nameStart = i &+ 1, nameCount = j &- i &- 1
            if i == measuredValue { measured &+= nameCount }
            var after = j &+ 1
            while after < count && isSpace(base[after]) { after &+= 1 }
            if after < count && base[after] == UInt8(ascii: ":") {
                // Only the names of this length, one bit each.
                var candidates = byLength[min(nameCount, 63)]
                while candidates != 0 {
                    let k = candidates.trailingZeroBitCount
                    candidates &= candidates &- 1
                    guard lengths[k] == nameCount, memcmpBytes(base + nameStart, names + starts[k], nameCount) else { continue }
                    present |= 1 << k
                    var v = after + 1
                    while v < count && isSpace(base[v]) { v += 1 }
                    if v + 1 < count && base[v] == quote && base[v + 1] != quote {
                        nonEmpty |= 1 << k
                        if measuring & (1 << k) != 0 { measuredValue = v }
                    } else if v < count && base[v] == UInt8(ascii: "{") {
                        object |= 1 << k
                    }
                    break
                }
            }
            i = j &+ 1
        }
        return (present, nonEmpty, object, measured)
    }
}

/// Byte equality of two buffers of `count` bytes.
@inline(__always)
private func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    var i = 0
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}
