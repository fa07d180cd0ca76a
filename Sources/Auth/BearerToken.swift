import Support

/// Takes the token out of an `Authorization` header value (RFC 6750 section 2.1:
/// `Bearer 1*SP b64token`, scheme case-insensitive per RFC 9110 section 11.1). The token comes back as a
/// `Secret`, so it cannot reach a log line by accident.
package enum BearerToken {
    /// Tokens longer than this are refused before any parsing or hashing.
    package static let maxBytes = 16 * 1024

    /// `.missing` when there is no header or it is not Bearer credentials; `.malformed` when the token is
    /// empty, too long, or has characters outside the b64token grammar.
    package static func extract(authorization: String?) -> Result<Secret, AuthError> {
        guard let authorization else { return .failure(.missing) }
        let bytes = Array(authorization.utf8)
        let scheme = Array("bearer".utf8)
        guard bytes.count > scheme.count, bytes[scheme.count] == UInt8(ascii: " ") else { return .failure(.missing) }
        for index in 0..<scheme.count where bytes[index] | 0x20 != scheme[index] {
            return .failure(.missing)
        }
        var start = scheme.count
        while start < bytes.count, bytes[start] == UInt8(ascii: " ") { start += 1 }
        var end = bytes.count
        while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        let token = bytes[start..<end]
        guard !token.isEmpty else { return .failure(.missing) }
        guard token.count <= maxBytes, isB64Token(token) else { return .failure(.malformed) }
        return .success(Secret(String(decoding: token, as: UTF8.self)))
    }

    /// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
    static func isB64Token(_ token: ArraySlice<UInt8>) -> Bool {
        var seenPadding = false
        for byte in token {
            if byte == UInt8(ascii: "=") {
                seenPadding = true
                continue
            }
            if seenPadding { return false }
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
                 UInt8(ascii: "+"), UInt8(ascii: "/"):
                continue
            default:
                return false
            }
        }
        return token.first != UInt8(ascii: "=")
    }
}
