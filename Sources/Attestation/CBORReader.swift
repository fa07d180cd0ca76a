/// Why a byte string is not a CBOR item this reader accepts.
package enum CBORError: Error, Equatable, Sendable {
    /// The input ends inside an item, or a length or count is larger than the bytes left (a "huge length").
    case truncated
    /// Indefinite-length strings, arrays and maps (additional information 31): not accepted.
    case indefiniteLength
    /// Reserved additional information (28-30), a one-byte simple value below 32, or a lone "break".
    case malformed
    /// Tags (major type 6) and floating-point numbers: App Attest uses neither.
    case unsupported
    /// Nested deeper than `Limits.maxDepth`.
    case tooDeep
    /// More items in total than `Limits.maxItems`.
    case tooManyItems
    /// The input is longer than `Limits.maxBytes`.
    case tooLarge
    /// A text string that is not valid UTF-8.
    case invalidUTF8
    /// A map with two equal keys, which would let two readers see two different values.
    case duplicateKey
    /// Bytes after the one item `decode` expects.
    case trailingBytes
}

/// A small, bounded CBOR decoder (RFC 8949) for App Attest's attestation objects, assertions and COSE keys.
///
/// Pure: bytes in, one `CBORValue` or one `CBORError` out, never a trap. Definite lengths only (section 3.2.2's
/// indefinite form is refused), no tags, no floats. Every length is checked against the bytes left before
/// anything is allocated, so a huge declared length costs nothing; nesting, the total number of items and the
/// input size are capped by `Limits`. Non-minimal length encodings are accepted (section 4.2's deterministic
/// encoding is not required of the sender).
package struct CBORReader {
    package struct Limits: Sendable, Equatable {
        package var maxDepth: Int
        package var maxItems: Int
        package var maxBytes: Int

        package init(maxDepth: Int = 16, maxItems: Int = 4096, maxBytes: Int = 64 * 1024) {
            self.maxDepth = maxDepth
            self.maxItems = maxItems
            self.maxBytes = maxBytes
        }
    }

    /// Decodes `bytes` as exactly one item.
    package static func decode(_ bytes: [UInt8], limits: Limits = Limits()) throws(CBORError) -> CBORValue {
        let (value, consumed) = try decodePrefix(bytes[...], limits: limits)
        guard consumed == bytes.count else { throw .trailingBytes }
        return value
    }

    /// Decodes the one item at the start of `bytes`; returns it and how many bytes it took (the rest is left to
    /// the caller, as authenticator data's extensions after the COSE key are).
    package static func decodePrefix(_ bytes: ArraySlice<UInt8>, limits: Limits = Limits()) throws(CBORError) -> (value: CBORValue, consumed: Int) {
        guard bytes.count <= limits.maxBytes else { throw .tooLarge }
        var reader = CBORReader(bytes: Array(bytes), limits: limits)
        let value = try reader.item(depth: 1)
        return (value, reader.position)
    }

    private let bytes: [UInt8]
    private let limits: Limits
    private var position = 0
    private var items = 0

    private init(bytes: [UInt8], limits: Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    private var remaining: Int { bytes.count - position }

    private mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        guard depth <= limits.maxDepth else { throw .tooDeep }
        items += 1
        guard items <= limits.maxItems else { throw .tooManyItems }
        guard remaining > 0 else { throw .truncated }
        let initial = bytes[position]
        position += 1
        let major = initial >> 5
        let info = initial & 0x1F
        if major == 7 { return try simple(info) }
        if major == 6 { throw .unsupported }
        let argument = try argument(info)
        switch major {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            return .bytes(try take(argument))
        case 3:
            let raw = try take(argument)
            let text = String(decoding: raw, as: UTF8.self)
            // Decoding replaces invalid sequences with U+FFFD, so a round trip that changes the bytes means invalid.
            guard text.utf8.elementsEqual(raw) else { throw .invalidUTF8 }
            return .text(text)
        case 4:
            // Each item takes at least one byte: a count above the bytes left cannot be honest.
            guard argument <= UInt64(remaining) else { throw .truncated }
            var values: [CBORValue] = []
            values.reserveCapacity(Int(argument))
            for _ in 0..<argument { values.append(try item(depth: depth + 1)) }
            return .array(values)
        default: // 5, the only major type left
            guard argument <= UInt64(remaining / 2) else { throw .truncated }
            var entries: [CBORMapEntry] = []
            entries.reserveCapacity(Int(argument))
            var keys = Set<CBORValue>()
            for _ in 0..<argument {
                let key = try item(depth: depth + 1)
                let value = try item(depth: depth + 1)
                guard keys.insert(key).inserted else { throw .duplicateKey }
                entries.append(CBORMapEntry(key: key, value: value))
            }
            return .map(entries)
        }
    }

    /// The argument that follows the initial byte (section 3): the value itself below 24, else 1, 2, 4 or 8
    /// big-endian bytes.
    private mutating func argument(_ info: UInt8) throws(CBORError) -> UInt64 {
        let width: Int
        switch info {
        case 0..<24: return UInt64(info)
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        case 31: throw .indefiniteLength
        default: throw .malformed // 28, 29, 30 are reserved
        }
        guard remaining >= width else { throw .truncated }
        var value: UInt64 = 0
        for offset in 0..<width { value = value << 8 | UInt64(bytes[position + offset]) }
        position += width
        return value
    }

    private mutating func take(_ length: UInt64) throws(CBORError) -> [UInt8] {
        guard length <= UInt64(remaining) else { throw .truncated }
        let count = Int(length)
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    /// Major type 7 (section 3.3): simple values only.
    private mutating func simple(_ info: UInt8) throws(CBORError) -> CBORValue {
        switch info {
        case 0..<24:
            return .simple(info)
        case 24:
            guard remaining >= 1 else { throw .truncated }
            let value = bytes[position]
            position += 1
            // Values below 32 must use the one-byte form (section 3.3): the two-byte form is not well-formed.
            guard value >= 32 else { throw .malformed }
            return .simple(value)
        case 25, 26, 27: throw .unsupported
        case 31: throw .malformed // a break outside an indefinite-length item
        default: throw .malformed
        }
    }
}
