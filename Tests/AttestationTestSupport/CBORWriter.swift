import Attestation

/// CBOR encoder for tests (RFC 8949, preferred serialization: the shortest argument form), the mirror of
/// `CBORReader`: the software device builds attestation objects and assertions with it, and the reader's tests
/// round-trip through it. Map entries are written in the order given.
package enum CBORWriter {
    package static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    /// The head of an item: major type and argument, shortest form.
    package static func head(major: UInt8, argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24...0xFF: return [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: return [type | 25] + bigEndian(argument, width: 2)
        case 0x1_0000...0xFFFF_FFFF: return [type | 26] + bigEndian(argument, width: 4)
        default: return [type | 27] + bigEndian(argument, width: 8)
        }
    }

    private static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private static func write(_ value: CBORValue, into out: inout [UInt8]) {
        switch value {
        case .unsigned(let n): out += head(major: 0, argument: n)
        case .negative(let n): out += head(major: 1, argument: n)
        case .bytes(let bytes):
            out += head(major: 2, argument: UInt64(bytes.count))
            out += bytes
        case .text(let text):
            out += head(major: 3, argument: UInt64(text.utf8.count))
            out += Array(text.utf8)
        case .array(let items):
            out += head(major: 4, argument: UInt64(items.count))
            for item in items { write(item, into: &out) }
        case .map(let entries):
            out += head(major: 5, argument: UInt64(entries.count))
            for entry in entries {
                write(entry.key, into: &out)
                write(entry.value, into: &out)
            }
        case .simple(let n):
            out += n < 24 ? [0xE0 | n] : [0xF8, n]
        }
    }
}

extension CBORValue {
    /// A map from text keys, in the order given (test convenience).
    package static func textMap(_ pairs: [(String, CBORValue)]) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: .text($0.0), value: $0.1) })
    }
}
