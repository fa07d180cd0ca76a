#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request body read once, strictly, into a flat list of its values: the one JSON reader behind every decision the
/// relay makes about a body (model allowlist, ceilings, usage injection, the prompt estimate, the reservation).
/// Pure and immutable once built; safe to share.
///
/// Strict where parsers disagree, so the relay never reads a body differently from the provider (RFC 8259 §4, §8;
/// the "duplicate key" and "lone surrogate" request-smuggling classes): a byte order mark, malformed UTF-8, a lone
/// surrogate escape and anything after the top-level value are errors; only space, tab, LF and CR are whitespace;
/// nesting is capped at `maxDepth`. With `duplicates: .refused`, a key given twice in any object, compared after
/// decoding its escapes (`"m\u0065ssages"` is `"messages"`), is an error too: providers keep the last one, a reader
/// that keeps the first would judge another request.
///
/// Layout: values in document order (pre-order), each with its byte range, its key's range when it is an object
/// member, and the index of its next sibling; a container's first child is the value right after it. Lookups
/// compare decoded keys, so escapes cannot hide a member from the relay. Each value costs 24 bytes; the count is
/// capped at `maxNodes`.
public struct JSONDocument: Sendable {
    /// What to do with a key given twice in one object.
    public enum Duplicates: Sendable {
        /// An error (`duplicateKey`): what every decision about a forwarded body uses.
        case refused
        /// Kept, in order (`JSONTopLevel.scan` lists them all).
        case allowed
    }

    /// The deepest nesting accepted; the top-level object is depth 1.
    public static let maxDepth = 64
    /// The most values one document holds (24 bytes each: 48 MiB at most, reached only by a 4 MiB body of `[0,0,…]`).
    public static let maxNodes = 2_000_000
    /// The top-level object.
    public static let root = 0

    struct Node {
        var start: Int32
        var end: Int32
        /// The key's contents (between its quotes) for an object member; -1 otherwise.
        var keyStart: Int32
        var keyEnd: Int32
        /// The next sibling's index; -1 for the last child.
        var next: Int32
        var kind: JSONKind
        var keyEscaped: Bool
        var stringEscaped: Bool
        var hasChildren: Bool
    }

    public let bytes: [UInt8]
    private(set) var nodes: [Node]

    /// Reads `bytes`, which must be exactly one JSON object.
    public init(parsing bytes: [UInt8], duplicates: Duplicates = .refused) throws(JSONScanError) {
        #if DEBUG
        JSONParseCount.note(bytes)
        #endif
        var scanner = JSONScanner(bytes)
        scanner.refuseDuplicates = duplicates == .refused
        try scanner.document()
        self.bytes = bytes
        self.nodes = scanner.nodes
    }

    /// The number of values (the top-level object included).
    public var count: Int { nodes.count }

    public func kind(of node: Int) -> JSONKind { nodes[node].kind }

    /// The value's bytes (a string with its quotes).
    public func range(of node: Int) -> Range<Int> { Int(nodes[node].start)..<Int(nodes[node].end) }

    /// The children of an object or array, in order.
    public func children(of node: Int) -> Children { Children(nodes: nodes, first: nodes[node].hasChildren ? node + 1 : -1) }

    public struct Children: Sequence, IteratorProtocol {
        let nodes: [Node]
        var current: Int
        init(nodes: [Node], first: Int) {
            self.nodes = nodes
            self.current = first
        }
        public mutating func next() -> Int? {
            guard current >= 0 else { return nil }
            defer { current = Int(nodes[current].next) }
            return current
        }
    }

    /// The member of the object at `object` whose decoded key is `name` (the first one, when duplicates were
    /// allowed), or nil.
    public func member(_ name: String, of object: Int) -> Int? {
        guard nodes[object].kind == .object else { return nil }
        var name = name
        return name.withUTF8 { wanted in
            for child in children(of: object) where keyEquals(child, wanted) { return child }
            return nil
        }
    }

    /// The member reached by following `names` from `node`, each an object member.
    public func member(path names: [String], from node: Int = JSONDocument.root) -> Int? {
        var current = node
        for name in names {
            guard let next = member(name, of: current) else { return nil }
            current = next
        }
        return current
    }

    /// Whether `node` is an object member whose decoded key is exactly `name` (UTF-8 bytes, no normalisation).
    public func hasKey(_ node: Int, _ name: String) -> Bool {
        var name = name
        return name.withUTF8 { keyEquals(node, $0) }
    }

    /// The decoded key of an object member.
    public func key(of node: Int) -> String? {
        let n = nodes[node]
        guard n.keyStart >= 0 else { return nil }
        let scanner = JSONScanner(bytes)
        return scanner.decode(JSONScanner.StringToken(contents: Int(n.keyStart)..<Int(n.keyEnd), hasEscapes: n.keyEscaped))
    }

    /// The decoded text of a string value, or nil when `node` is not a string.
    public func string(_ node: Int) -> String? {
        let n = nodes[node]
        guard n.kind == .string else { return nil }
        let scanner = JSONScanner(bytes)
        return scanner.decode(JSONScanner.StringToken(contents: Int(n.start) + 1..<Int(n.end) - 1, hasEscapes: n.stringEscaped))
    }

    /// Whether `node` is the literal `true`.
    public func isTrue(_ node: Int) -> Bool { nodes[node].kind == .bool && bytes[Int(nodes[node].start)] == UInt8(ascii: "t") }

    /// The integer a number value writes (`JSONTopLevel.integer`).
    public func integer(_ node: Int) -> JSONInteger {
        guard nodes[node].kind == .number else { return .notAnInteger }
        return JSONTopLevel.integer(in: bytes, at: range(of: node))
    }

    /// A string value's weight for a token estimate, in quarter tokens (0 for anything else), after decoding escapes:
    /// 1 for each ASCII character (English runs about four to a token), 4 for each UTF-8 byte of any other
    /// character (a token a byte: the most a byte-level tokenizer spends, which text in a rare script costs).
    public func textWeight(of node: Int) -> Int {
        let n = nodes[node]
        guard n.kind == .string else { return 0 }
        return Self.weight(bytes, Int(n.start) + 1, Int(n.end) - 1, escaped: n.stringEscaped)
    }

    /// `textWeight(of:)` for an object member's key; 0 for a value that is not a member.
    public func keyTextWeight(of node: Int) -> Int {
        let n = nodes[node]
        guard n.keyStart >= 0 else { return 0 }
        return Self.weight(bytes, Int(n.keyStart), Int(n.keyEnd), escaped: n.keyEscaped)
    }

    private static func weight(_ bytes: [UInt8], _ start: Int, _ end: Int, escaped: Bool) -> Int {
        var weight = 0
        var j = start
        while j < end {
            let c = bytes[j]
            if escaped && c == UInt8(ascii: "\\") {
                if bytes[j + 1] == UInt8(ascii: "u") {
                    // The scanner validated pairs: a high surrogate's escape is followed by its low half (4 bytes).
                    let unit = JSONScanner.hex4Unchecked(bytes, j)
                    let pair = unit >= 0xD800 && unit <= 0xDBFF
                    weight += pair ? 16 : unit < 0x80 ? 1 : unit < 0x800 ? 8 : 12
                    j += pair ? 12 : 6
                } else {
                    weight += 1
                    j += 2
                }
            } else {
                weight += c < 0x80 ? 1 : 4
                j += 1
            }
        }
        return weight
    }

    /// Member names to look for with `key(_:in:)`, made once: their bytes, and the set of their lengths.
    public struct KeyNames: Sendable {
        let names: [[UInt8]]
        /// Bit n set when some name is n bytes long (64 or more: bit 63).
        let lengths: UInt64

        public init(_ names: [String]) {
            self.names = names.map { Array($0.utf8) }
            lengths = self.names.reduce(0) { $0 | 1 << UInt64(min($1.count, 63)) }
        }
    }

    /// Whether some member at any depth below `node`, whose key is one of `names`, passes `test(index in names,
    /// member)`: true ends the search; false looks inside that member too; nil skips its subtree (a subtree whose
    /// keys are the app's own, not the provider's fields). Members with other keys, and array elements, are looked
    /// inside.
    public func anyMember(below node: Int, named names: KeyNames, _ test: (Int, Int) -> Bool?) -> Bool {
        let isObject = kind(of: node) == .object
        for child in children(of: node) {
            if isObject, let name = key(child, in: names) {
                switch test(name, child) {
                case true?: return true
                case nil: continue
                case false?: break
                }
            }
            let k = kind(of: child)
            if k == .object || k == .array, anyMember(below: child, named: names, test) { return true }
        }
        return false
    }

    /// The index in `names` of the decoded key of the member `node`, or nil (not a member, or none of them). An
    /// unescaped key no name is as long as costs one test; only an escaped key is decoded.
    public func key(_ node: Int, in names: KeyNames) -> Int? {
        let n = nodes[node]
        guard n.keyStart >= 0 else { return nil }
        let start = Int(n.keyStart), end = Int(n.keyEnd)
        if !n.keyEscaped {
            guard names.lengths & 1 << UInt64(min(end - start, 63)) != 0 else { return nil }
            return bytes.withUnsafeBufferPointer { b in
                names.names.firstIndex { $0.count == end - start && ($0.isEmpty || memcmp(b.baseAddress! + start, $0, $0.count) == 0) }
            }
        }
        let decoded = JSONScanner(bytes).decodedBytes(start..<end)
        return names.names.firstIndex { $0.elementsEqual(decoded) }
    }

    func keyEquals(_ node: Int, _ wanted: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = nodes[node]
        guard n.keyStart >= 0 else { return false }
        let start = Int(n.keyStart), end = Int(n.keyEnd)
        if !n.keyEscaped {
            guard end - start == wanted.count else { return false }
            return bytes.withUnsafeBufferPointer { b in
                wanted.count == 0 || memcmp(b.baseAddress! + start, wanted.baseAddress!, wanted.count) == 0
            }
        }
        return JSONScanner(bytes).decodedBytes(start..<end).elementsEqual(wanted)
    }
}

/// The cursor behind `JSONDocument` (and `JSONTopLevel.string`): one pass over the bytes, recursive descent bounded
/// by `JSONDocument.maxDepth`. A value type used by one call at a time; never shared.
struct JSONScanner {
    /// A validated string token: the bytes between its quotes, and whether any escape needs decoding.
    struct StringToken {
        var contents: Range<Int>
        var hasEscapes: Bool
    }

    let bytes: [UInt8]
    var index: Int
    var refuseDuplicates = true
    var nodes: [JSONDocument.Node] = []

    init(_ bytes: [UInt8], from index: Int = 0) {
        self.bytes = bytes
        self.index = index
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    private func fail(_ kind: JSONScanError.Kind, at offset: Int? = nil) -> JSONScanError {
        JSONScanError(kind, at: offset ?? index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The current byte, or `unexpectedEnd`.
    private func peek() throws(JSONScanError) -> UInt8 {
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    /// The whole body: exactly one object, surrounded by whitespace only.
    mutating func document() throws(JSONScanError) {
        guard bytes.count < Int(Int32.max) else { throw fail(.tooManyValues, at: 0) }
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail(.byteOrderMark, at: 0)
        }
        skipWhitespace()
        guard index < bytes.count else { throw fail(.empty) }
        nodes.reserveCapacity(min(bytes.count / 8 + 8, 4096))
        let start = index
        let kind = try value(depth: 1, keyStart: -1, keyEnd: -1, keyEscaped: false)
        guard kind == .object else { throw fail(.notAnObject, at: start) }
        skipWhitespace()
        guard index == bytes.count else { throw fail(.trailingData) }
    }

    /// Scans one value starting exactly at `index` (no leading whitespace) and records it; `depth` is the depth a
    /// container starting here would have. Returns its kind.
    @discardableResult
    private mutating func value(depth: Int, keyStart: Int, keyEnd: Int, keyEscaped: Bool) throws(JSONScanError) -> JSONKind {
        guard nodes.count < JSONDocument.maxNodes else { throw fail(.tooManyValues) }
        let me = nodes.count
        let start = index
        nodes.append(JSONDocument.Node(start: Int32(start), end: 0, keyStart: Int32(keyStart), keyEnd: Int32(keyEnd), next: -1,
                                       kind: .null, keyEscaped: keyEscaped, stringEscaped: false, hasChildren: false))
        let kind: JSONKind
        switch try peek() {
        case Self.quote:
            nodes[me].stringEscaped = try string().hasEscapes
            kind = .string
        case UInt8(ascii: "{"):
            nodes[me].hasChildren = try container(depth: depth, close: UInt8(ascii: "}"), keyed: true)
            kind = .object
        case UInt8(ascii: "["):
            nodes[me].hasChildren = try container(depth: depth, close: UInt8(ascii: "]"), keyed: false)
            kind = .array
        case UInt8(ascii: "t"):
            try literal("true")
            kind = .bool
        case UInt8(ascii: "f"):
            try literal("false")
            kind = .bool
        case UInt8(ascii: "n"):
            try literal("null")
            kind = .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            kind = .number
        default:
            throw fail(.unexpectedByte)
        }
        nodes[me].kind = kind
        nodes[me].end = Int32(index)
        return kind
    }

    /// An object (`keyed`) or array, starting at its opening bracket. Returns whether it has children; links them.
    private mutating func container(depth: Int, close: UInt8, keyed: Bool) throws(JSONScanError) -> Bool {
        guard depth <= JSONDocument.maxDepth else { throw fail(.tooDeep) }
        index += 1
        skipWhitespace()
        if try peek() == close {
            index += 1
            return false
        }
        var previous = -1
        var members = 0
        let first = nodes.count
        while true {
            skipWhitespace()
            var keyStart = -1, keyEnd = -1, keyEscaped = false
            if keyed {
                guard try peek() == Self.quote else { throw fail(.unexpectedByte) }
                let key = try string()
                keyStart = key.contents.lowerBound
                keyEnd = key.contents.upperBound
                keyEscaped = key.hasEscapes
                skipWhitespace()
                guard try peek() == UInt8(ascii: ":") else { throw fail(.unexpectedByte) }
                index += 1
                skipWhitespace()
            }
            let child = nodes.count
            if previous >= 0 { nodes[previous].next = Int32(child) }
            previous = child
            try value(depth: depth + 1, keyStart: keyStart, keyEnd: keyEnd, keyEscaped: keyEscaped)
            members += 1
            skipWhitespace()
            let c = try peek()
            index += 1
            if c == close { break }
            guard c == UInt8(ascii: ",") else { throw fail(.unexpectedByte, at: index - 1) }
        }
        if keyed && refuseDuplicates && members > 1 { try checkDuplicates(firstChild: first, count: members) }
        return true
    }

    /// Refuses an object whose members (starting at `firstChild`) repeat a key, compared after decoding.
    private func checkDuplicates(firstChild: Int, count: Int) throws(JSONScanError) {
        var keys: [(hash: UInt64, node: Int)] = []
        keys.reserveCapacity(count)
        var child = firstChild
        while child >= 0 {
            keys.append((hash: keyHash(child), node: child))
            child = Int(nodes[child].next)
        }
        keys.sort { $0.hash < $1.hash || ($0.hash == $1.hash && $0.node < $1.node) }
        var i = 1
        while i < keys.count {
            if keys[i].hash == keys[i - 1].hash && decodedKey(keys[i].node) == decodedKey(keys[i - 1].node) {
                throw fail(.duplicateKey, at: Int(nodes[max(keys[i].node, keys[i - 1].node)].keyStart))
            }
            i += 1
        }
    }

    private func decodedKey(_ node: Int) -> [UInt8] {
        let n = nodes[node]
        let range = Int(n.keyStart)..<Int(n.keyEnd)
        return n.keyEscaped ? decodedBytes(range) : Array(bytes[range])
    }

    /// FNV-1a of the decoded key's bytes.
    private func keyHash(_ node: Int) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        let n = nodes[node]
        if n.keyEscaped {
            for b in decodedBytes(Int(n.keyStart)..<Int(n.keyEnd)) { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        } else {
            for i in Int(n.keyStart)..<Int(n.keyEnd) { h = (h ^ UInt64(bytes[i])) &* 0x100_0000_01b3 }
        }
        return h
    }

    private mutating func literal(_ word: StaticString) throws(JSONScanError) {
        for expected in UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount) {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            guard bytes[index] == expected else { throw fail(.unexpectedByte) }
            index += 1
        }
    }

    private func isDigit(_ i: Int) -> Bool {
        i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9")
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    private mutating func number() throws(JSONScanError) {
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { throw fail(index < bytes.count ? .invalidNumber : .unexpectedEnd) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { throw fail(.invalidNumber) }
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { throw fail(index < bytes.count ? .invalidNumber : .unexpectedEnd) }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                index += 1
            }
            guard isDigit(index) else { throw fail(index < bytes.count ? .invalidNumber : .unexpectedEnd) }
            while isDigit(index) { index += 1 }
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// The four hex digits after a `\u` at `at` (the backslash), already validated.
    static func hex4Unchecked(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in at + 2..<at + 6 { v = v << 4 | (hexValue(bytes[i]) ?? 0) }
        return v
    }

    /// The four hex digits after a `\u` at `at` (which points at the backslash).
    private func hex4(at: Int) throws(JSONScanError) -> UInt32 {
        guard at + 6 <= bytes.count else { throw fail(.unexpectedEnd, at: bytes.count) }
        var v: UInt32 = 0
        for i in at + 2..<at + 6 {
            guard let h = Self.hexValue(bytes[i]) else { throw fail(.invalidEscape, at: at) }
            v = v << 4 | h
        }
        return v
    }

    /// Validates one string token starting at its opening quote; leaves `index` after the closing quote.
    mutating func string() throws(JSONScanError) -> StringToken {
        index += 1
        let start = index
        var hasEscapes = false
        while true {
            // Plain ASCII runs dominate: skip them without the escape and UTF-8 checks.
            while index < bytes.count, bytes[index] >= 0x20, bytes[index] < 0x80, bytes[index] != Self.quote,
                  bytes[index] != Self.backslash {
                index += 1
            }
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            let c = bytes[index]
            if c == Self.quote {
                index += 1
                return StringToken(contents: start..<index - 1, hasEscapes: hasEscapes)
            } else if c == Self.backslash {
                hasEscapes = true
                guard index + 1 < bytes.count else { throw fail(.unexpectedEnd, at: bytes.count) }
                switch bytes[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 2
                case UInt8(ascii: "u"):
                    let unit = try hex4(at: index)
                    if unit >= 0xD800 && unit <= 0xDBFF {
                        let next = index + 6
                        guard next + 1 < bytes.count, bytes[next] == Self.backslash, bytes[next + 1] == UInt8(ascii: "u")
                        else { throw fail(.loneSurrogate) }
                        let low = try hex4(at: next)
                        guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(.loneSurrogate) }
                        index += 12
                    } else if unit >= 0xDC00 && unit <= 0xDFFF {
                        throw fail(.loneSurrogate)
                    } else {
                        index += 6
                    }
                default:
                    throw fail(.invalidEscape)
                }
            } else if c < 0x20 {
                throw fail(.controlCharacter)
            } else {
                index += try utf8SequenceLength(at: index)
            }
        }
    }

    /// Length of the well-formed UTF-8 sequence at `i` (Unicode Table 3-7), else `invalidUTF8`.
    private func utf8SequenceLength(at i: Int) throws(JSONScanError) -> Int {
        let c = bytes[i]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch c {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw fail(.invalidUTF8, at: i)
        }
        guard i + length <= bytes.count else { throw fail(.invalidUTF8, at: i) }
        guard bytes[i + 1] >= low && bytes[i + 1] <= high else { throw fail(.invalidUTF8, at: i) }
        for j in i + 2..<i + length where bytes[j] < 0x80 || bytes[j] > 0xBF {
            throw fail(.invalidUTF8, at: i)
        }
        return length
    }

    /// The text of a token `string()` validated.
    func decode(_ token: StringToken) -> String {
        guard token.hasEscapes else { return String(decoding: bytes[token.contents], as: UTF8.self) }
        return String(decoding: decodedBytes(token.contents), as: UTF8.self)
    }

    /// The UTF-8 bytes a validated string's contents decode to.
    func decodedBytes(_ contents: Range<Int>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(contents.count)
        var i = contents.lowerBound
        while i < contents.upperBound {
            let c = bytes[i]
            guard c == Self.backslash else {
                out.append(c)
                i += 1
                continue
            }
            let e = bytes[i + 1]
            switch e {
            case UInt8(ascii: "b"): out.append(0x08); i += 2
            case UInt8(ascii: "f"): out.append(0x0C); i += 2
            case UInt8(ascii: "n"): out.append(0x0A); i += 2
            case UInt8(ascii: "r"): out.append(0x0D); i += 2
            case UInt8(ascii: "t"): out.append(0x09); i += 2
            case UInt8(ascii: "u"):
                var scalar = Self.hex4Unchecked(bytes, i)
                i += 6
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    let low = Self.hex4Unchecked(bytes, i)
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: (Unicode.Scalar(scalar) ?? "\u{FFFD}").utf8)
            default: out.append(e); i += 2   // " \ /
            }
        }
        return out
    }
}

/// Edits to a body, applied in one pass: each replaces a range (an insertion is an empty range) with new bytes;
/// every other byte stays where it was. Ranges must not overlap; insertions at one offset keep their order.
public struct JSONEdits: Sendable, Equatable {
    public private(set) var edits: [(range: Range<Int>, bytes: [UInt8])] = []

    public init() {}

    public var isEmpty: Bool { edits.isEmpty }

    public mutating func replace(_ range: Range<Int>, with bytes: [UInt8]) { edits.append((range, bytes)) }

    public mutating func insert(_ bytes: [UInt8], at offset: Int) { edits.append((offset..<offset, bytes)) }

    public func applied(to body: [UInt8]) -> [UInt8] {
        guard !edits.isEmpty else { return body }
        if edits.count == 1 {
            // The common case (one usage request, one ceiling): no sort, the three parts copied in place.
            let edit = edits[0]
            let lower = edit.range.lowerBound, upper = edit.range.upperBound
            return body.withUnsafeBufferPointer { b in
                edit.bytes.withUnsafeBufferPointer { e in
                    [UInt8](unsafeUninitializedCapacity: b.count - (upper - lower) + e.count) { out, count in
                        func put(_ part: UnsafeBufferPointer<UInt8>) {
                            guard part.count > 0 else { return }
                            _ = UnsafeMutableBufferPointer(rebasing: out[count..<(count + part.count)]).initialize(from: part)
                            count += part.count
                        }
                        put(UnsafeBufferPointer(rebasing: b[..<lower]))
                        put(e)
                        put(UnsafeBufferPointer(rebasing: b[upper...]))
                    }
                }
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(body.count + edits.reduce(0) { $0 + $1.bytes.count })
        var cursor = 0
        let ordered = edits.enumerated().sorted { a, b in
            a.element.range.lowerBound < b.element.range.lowerBound
                || (a.element.range.lowerBound == b.element.range.lowerBound && a.offset < b.offset)
        }
        for (_, edit) in ordered {
            out.append(contentsOf: body[cursor..<edit.range.lowerBound])
            out.append(contentsOf: edit.bytes)
            cursor = max(cursor, edit.range.upperBound)
        }
        out.append(contentsOf: body[cursor...])
        return out
    }

    public static func == (a: JSONEdits, b: JSONEdits) -> Bool {
        a.edits.count == b.edits.count && zip(a.edits, b.edits).allSatisfy { $0.range == $1.range && $0.bytes == $1.bytes }
    }
}
