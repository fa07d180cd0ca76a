/// Base64url without padding, the encoding of every JWS segment and JWK parameter (RFC 7515 section 2 and
/// appendix C; RFC 4648 section 5). Decoding is strict: any character outside `A-Z a-z 0-9 - _` (padding and
/// whitespace included), an impossible length, or non-zero leftover bits make it fail, so each byte string has
/// exactly one accepted spelling and no input can crash it.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 6-bit value of each byte, or 0xFF when the byte is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// The bytes as unpadded base64url. A contiguous collection (an array, a slice, a string's UTF-8) is read
    /// in place; any other sequence is copied first.
    package static func encode(_ bytes: some Sequence<UInt8>) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ encode(buffer: $0) }) { return text }
        return Array(bytes).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    /// The encoder's loop, not generic: called from another module, the generic one ran through the collection's
    /// witness table for every byte (an asserted request's key id and headers cost 100 000 instructions so).
    private static func encode(buffer bytes: UnsafeBufferPointer<UInt8>) -> String {
        let length = (bytes.count * 8 + 5) / 6
        return alphabet.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: length) { out in
                var written = 0
                var accumulator: UInt32 = 0
                var bits = 0
                for byte in bytes {
                    accumulator = (accumulator << 8) | UInt32(byte)
                    bits += 8
                    while bits >= 6 {
                        bits -= 6
                        out[written] = alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)]
                        written += 1
                    }
                    accumulator &= (1 << UInt32(bits)) - 1
                }
                if bits > 0 {
                    out[written] = alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)]
                    written += 1
                }
                return written
            }
        }
    }

    package static func decode(_ text: String) -> [UInt8]? { decode(bytes: text.utf8) }

    /// Decodes base64url text given as its bytes; nil when it is not canonical unpadded base64url. Contiguous
    /// bytes are read in place, others copied first.
    package static func decode<Bytes: Collection<UInt8>>(bytes: Bytes) -> [UInt8]? {
        if let result = bytes.withContiguousStorageIfAvailable({ decode(buffer: $0) }) { return result }
        return Array(bytes).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    private static func decode(buffer bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = bytes.count
        if count % 4 == 1 { return nil } // one leftover character carries only 6 bits: never a whole byte
        var accumulator: UInt32 = 0
        var bits = 0
        var valid = true
        let out = values.withUnsafeBufferPointer { values in
            [UInt8](unsafeUninitializedCapacity: count / 4 * 3 + 2) { out, written in
                for byte in bytes {
                    let value = values[Int(byte)]
                    if value == 0xFF { valid = false; break }
                    accumulator = (accumulator << 6) | UInt32(value)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                        written += 1
                        accumulator &= (1 << UInt32(bits)) - 1
                    }
                }
            }
        }
        // The 2 or 4 bits left after the last whole byte must be zero (RFC 4648 section 3.5 canonical form).
        return valid && accumulator == 0 ? out : nil
    }
}
