import Auth

/// Stream ids: 128 bits from the system's CSPRNG (getrandom(2) on Linux, arc4random on Darwin), base64url
/// without padding: 22 characters.
package enum StreamIDs {
    package static let length = 22

    package static func make() -> String {
        var random = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for _ in 0..<2 {
            let n = random.next() as UInt64
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: n >> UInt64(shift))) }
        }
        return Base64URL.encode(bytes)
    }

    /// Whether `text` is spelled as an id can be: 22 base64url characters that decode to 16 bytes.
    package static func isWellFormed(_ text: Substring) -> Bool {
        text.utf8.count == length && Base64URL.decode(bytes: text.utf8)?.count == 16
    }
}
