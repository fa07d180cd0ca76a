/// One CBOR data item (RFC 8949 section 3), as far as App Attest needs: integers, byte and text strings,
/// arrays, maps and the simple values. `CBORReader` makes them; nothing here reads bytes.
package indirect enum CBORValue: Hashable, Sendable {
    /// Major type 0.
    case unsigned(UInt64)
    /// Major type 1: the value is -1 - n (so the whole range down to -2^64 fits).
    case negative(UInt64)
    /// Major type 2.
    case bytes([UInt8])
    /// Major type 3, valid UTF-8.
    case text(String)
    /// Major type 4.
    case array([CBORValue])
    /// Major type 5, in the order of the input; no two keys are equal (the reader refuses duplicates).
    case map([CBORMapEntry])
    /// Major type 7 below 24 or one-byte (false 20, true 21, null 22, undefined 23).
    case simple(UInt8)

    /// The value under `key` when this is a map and the key is the text `key`.
    package subscript(_ key: String) -> CBORValue? { self[.text(key)] }

    /// The value under `key` when this is a map.
    package subscript(_ key: CBORValue) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    package var bytes: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    package var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    package var array: [CBORValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    package var isMap: Bool {
        if case .map = self { return true }
        return false
    }

    /// The integer value when it is a major type 0 or 1 item that fits an `Int64`.
    package var integer: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    /// An integer as a value (COSE keys use small integers as map keys).
    package static func int(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }
}

/// One key/value pair of a CBOR map.
package struct CBORMapEntry: Hashable, Sendable {
    package var key: CBORValue
    package var value: CBORValue

    package init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}
