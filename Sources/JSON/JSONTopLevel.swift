/// The JSON type of a value, from its first byte.
public typealias JSONKind = JSONMember.Kind

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
        /// A key given twice in one object, at any depth (compared after decoding escapes): parsers disagree on
        /// which one wins. Only when `JSONDocument` is asked to refuse duplicates.
        case duplicateKey
        /// More values than `JSONDocument.maxNodes`.
        case tooManyValues
    }

    /// A body some parser could read differently from ours (rather than one every parser refuses): a byte order
    /// mark, malformed UTF-8, a lone surrogate, data after the value, a duplicate key.
    public var isAmbiguous: Bool {
        switch kind {
        case .byteOrderMark, .invalidUTF8, .loneSurrogate, .trailingData, .duplicateKey: true
        default: false
        }
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

    /// Every top-level member, in body order, duplicates included (read by `JSONDocument`, the one strict reader,
    /// with duplicates allowed).
    public static func scan(_ body: [UInt8]) throws(JSONScanError) -> [JSONMember] {
        let document = try JSONDocument(parsing: body, duplicates: .allowed)
        var members: [JSONMember] = []
        members.reserveCapacity(8)
        for child in document.children(of: JSONDocument.root) {
            members.append(JSONMember(key: document.key(of: child) ?? "", valueRange: document.range(of: child),
                                      kind: document.kind(of: child)))
        }
        return members
    }

    /// The decoded value of the JSON string token at exactly `range` (quotes included), or nil when `range` does
    /// not hold exactly one valid string token.
    public static func string(in body: [UInt8], at range: Range<Int>) -> String? {
        guard range.lowerBound >= 0, range.upperBound <= body.count, range.lowerBound < range.upperBound,
              body[range.lowerBound] == UInt8(ascii: "\"")
        else { return nil }
        var scanner = JSONScanner(body, from: range.lowerBound)
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

