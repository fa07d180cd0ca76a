/// One member of a request body's top-level JSON object: its decoded key, and where its value sits in the body.
///
/// `valueRange` covers exactly the value's bytes in the original buffer (no surrounding whitespace): a string
/// includes its quotes, a number is just its characters. Keys are kept exactly as their code points; compare them
/// with `hasKey(_:)`, which compares UTF-8 bytes (Swift's `==` on `String` uses canonical equivalence, which no
/// JSON parser downstream does, so `"\u212A"` would "equal" `"K"`).
public struct JSONMember: Equatable, Sendable {
    /// The JSON type of a value, from its first byte.
    public enum Kind: Equatable, Sendable {
        case string, number, object, array, bool, null
    }

    public var key: String
    public var valueRange: Range<Int>
    public var kind: Kind

    public init(key: String, valueRange: Range<Int>, kind: Kind) {
        self.key = key
        self.valueRange = valueRange
        self.kind = kind
    }

    /// True when the key is exactly `name`, code point for code point.
    public func hasKey(_ name: String) -> Bool { key == name && key.utf8.elementsEqual(name.utf8) }
}

/// Why a body is not exactly one well-formed JSON object, and the byte offset where the scanner gave up.
/// Meant for logs and tests; the client is only ever told "not valid JSON", never the offending bytes.
public struct JSONScanError: Error, Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        /// The body is empty or only whitespace.
        case empty
        /// The body starts with a UTF-8 byte order mark. RFC 8259 §8.1 lets a parser either skip or reject it;
        /// parsers disagree, so the relay rejects rather than guess which one the provider uses.
        case byteOrderMark
        /// The top-level value is valid JSON but not an object (an array, a string, a number…).
        case notAnObject
        /// A byte that cannot start or continue the expected token.
        case unexpectedByte
        /// The body ends in the middle of a value.
        case unexpectedEnd
        /// A backslash followed by something other than `" \ / b f n r t u`, or `\u` without four hex digits.
        case invalidEscape
        /// A `\u` escape naming half of a surrogate pair without its other half.
        case loneSurrogate
        /// Bytes inside a string that are not well-formed UTF-8 (overlong, surrogate, above U+10FFFF, truncated).
        case invalidUTF8
        /// An unescaped control character (below U+0020) inside a string.
        case controlCharacter
        /// A number that breaks the grammar: leading zero, `-` or `.` without digits, empty exponent.
        case invalidNumber
        /// Arrays and objects nested deeper than `JSONTopLevel.maxDepth`.
        case tooDeep
        /// Anything but whitespace after the object: garbage, or a second value.
        case trailingData
    }

    public var kind: Kind
    public var offset: Int

    public init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }
}

/// What `JSONTopLevel.integer(in:at:)` found in a number value.
public enum JSONInteger: Equatable, Sendable {
    /// An integer that fits in `Int` (`-0` is 0).
    case value(Int)
    /// An integer written without fraction or exponent, but outside `Int`'s range.
    case outOfRange(negative: Bool)
    /// A fraction, an exponent, or not a JSON number at all.
    case notAnInteger
}

/// Validates that a request body is exactly one JSON object (RFC 8259, strictly) and lists its top-level members.
/// Pure and stateless: it reads the buffer once, front to back, allocating only the member list and the keys.
///
/// Strict where parsers disagree, so the relay never reads a body differently from the provider (request
/// smuggling): a leading byte order mark, lone surrogates in `\u` escapes and malformed UTF-8 are all errors;
/// only space, tab, LF and CR count as whitespace. Nesting is capped at `maxDepth` so hostile input costs at most
/// that many stack frames. Duplicate keys are valid JSON and are all returned, in order; callers that read a key
/// must treat a duplicate as an error (see `duplicateKeys(in:)`).
public enum JSONTopLevel {
    /// The deepest nesting accepted; the top-level object is depth 1.
    public static let maxDepth = 64

    /// Every top-level member, in body order, duplicates included.
    public static func scan(_ body: [UInt8]) throws(JSONScanError) -> [JSONMember] {
        var scanner = JSONByteScanner(body)
        return try scanner.topLevelObject()
    }

    /// The decoded value of the JSON string token at exactly `range` (quotes included), or nil when `range` does
    /// not hold exactly one valid string token.
    public static func string(in body: [UInt8], at range: Range<Int>) -> String? {
        guard range.lowerBound >= 0, range.upperBound <= body.count, range.lowerBound < range.upperBound,
              body[range.lowerBound] == UInt8(ascii: "\"")
        else { return nil }
        var scanner = JSONByteScanner(body, from: range.lowerBound)
        guard let token = try? scanner.string(), scanner.index == range.upperBound else { return nil }
        return scanner.decode(token)
    }

    /// The integer written at exactly `range`: `-?(0|[1-9][0-9]*)`. A fraction or exponent (even `1.0`, `1e2`)
    /// is `.notAnInteger`; digits past `Int`'s range are `.outOfRange`.
    public static func integer(in body: [UInt8], at range: Range<Int>) -> JSONInteger {
        guard range.lowerBound >= 0, range.upperBound <= body.count, !range.isEmpty else { return .notAnInteger }
        var i = range.lowerBound
        let negative = body[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < range.upperBound else { return .notAnInteger }
        if body[i] == UInt8(ascii: "0") && range.upperBound - i > 1 { return .notAnInteger }
        var value = 0   // accumulated negatively, so Int.min is reachable
        var overflow = false
        while i < range.upperBound {
            let c = body[i]
            guard c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") else { return .notAnInteger }
            if !overflow {
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = times10.subtractingReportingOverflow(Int(c - UInt8(ascii: "0")))
                if o1 || o2 { overflow = true } else { value = next }
            }
            i += 1
        }
        if overflow { return .outOfRange(negative: negative) }
        if negative { return .value(value) }
        return value == Int.min ? .outOfRange(negative: false) : .value(-value)
    }

    /// Keys that occur more than once, each once, in order of their first occurrence (compared code point for
    /// code point).
    public static func duplicateKeys(in members: [JSONMember]) -> [String] {
        var seen: [[UInt8]: Int] = [:]
        var out: [String] = []
        for member in members {
            let bytes = Array(member.key.utf8)
            let count = seen[bytes, default: 0] + 1
            seen[bytes] = count
            if count == 2 { out.append(member.key) }
        }
        return out
    }
}

/// The cursor behind `JSONTopLevel`: one pass over the bytes, recursive descent bounded by `maxDepth`.
/// A value type used by one call at a time; never shared.
struct JSONByteScanner {
    /// A validated string token: the bytes between its quotes, and whether any escape needs decoding.
    struct StringToken {
        var contents: Range<Int>
        var hasEscapes: Bool
    }

    let bytes: [UInt8]
    var index: Int

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

    mutating func topLevelObject() throws(JSONScanError) -> [JSONMember] {
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail(.byteOrderMark, at: 0)
        }
        skipWhitespace()
        guard index < bytes.count else { throw fail(.empty) }
        guard bytes[index] == UInt8(ascii: "{") else {
            let start = index
            _ = try value(depth: 1)   // a well-formed non-object is `notAnObject`; garbage keeps its own error
            throw fail(.notAnObject, at: start)
        }
        var members: [JSONMember] = []
        members.reserveCapacity(8)   // a chat request has a handful of members: one allocation, no regrowth
        index += 1
        skipWhitespace()
        if try peek() == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard try peek() == Self.quote else { throw fail(.unexpectedByte) }
                let key = decode(try string())
                skipWhitespace()
                guard try peek() == UInt8(ascii: ":") else { throw fail(.unexpectedByte) }
                index += 1
                skipWhitespace()
                let start = index
                let kind = try value(depth: 2)
                members.append(JSONMember(key: key, valueRange: start..<index, kind: kind))
                skipWhitespace()
                let c = try peek()
                index += 1
                if c == UInt8(ascii: "}") { break }
                guard c == UInt8(ascii: ",") else { throw fail(.unexpectedByte, at: index - 1) }
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw fail(.trailingData) }
        return members
    }

    /// Scans one value starting exactly at `index` (no leading whitespace); `depth` is the depth a container
    /// starting here would have.
    private mutating func value(depth: Int) throws(JSONScanError) -> JSONMember.Kind {
        switch try peek() {
        case Self.quote:
            _ = try string()
            return .string
        case UInt8(ascii: "{"):
            try container(depth: depth, close: UInt8(ascii: "}"), keyed: true)
            return .object
        case UInt8(ascii: "["):
            try container(depth: depth, close: UInt8(ascii: "]"), keyed: false)
            return .array
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            return .number
        default:
            throw fail(.unexpectedByte)
        }
    }

    /// A nested object (`keyed`) or array, starting at its opening bracket.
    private mutating func container(depth: Int, close: UInt8, keyed: Bool) throws(JSONScanError) {
        guard depth <= JSONTopLevel.maxDepth else { throw fail(.tooDeep) }
        index += 1
        skipWhitespace()
        if try peek() == close {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            if keyed {
                guard try peek() == Self.quote else { throw fail(.unexpectedByte) }
                _ = try string()
                skipWhitespace()
                guard try peek() == UInt8(ascii: ":") else { throw fail(.unexpectedByte) }
                index += 1
                skipWhitespace()
            }
            _ = try value(depth: depth + 1)
            skipWhitespace()
            let c = try peek()
            index += 1
            if c == close { return }
            guard c == UInt8(ascii: ",") else { throw fail(.unexpectedByte, at: index - 1) }
        }
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
            } else if c < 0x80 {
                index += 1
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
        var out: [UInt8] = []
        out.reserveCapacity(token.contents.count)
        var i = token.contents.lowerBound
        while i < token.contents.upperBound {
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
                var scalar = (try? hex4(at: i)) ?? 0xFFFD
                i += 6
                if scalar >= 0xD800 && scalar <= 0xDBFF {
                    let low = (try? hex4(at: i)) ?? 0xDC00
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: (Unicode.Scalar(scalar) ?? "\u{FFFD}").utf8)
            default: out.append(e); i += 2   // " \ /
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
