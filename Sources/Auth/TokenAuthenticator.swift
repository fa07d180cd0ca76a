import Support

/// Checks static bearer tokens (RFC 6750) against configured SHA-256 hashes. Only hashes are held, never the
/// tokens; the presented token is hashed and compared with every configured hash in constant time
/// (CRYPTO_memcmp), always all of them, so neither the timing nor an early exit tells how close a guess was.
package struct TokenAuthenticator: Sendable, CustomStringConvertible, CustomReflectable {
    private let ids: [String]
    /// The hashes back to back, 32 bytes per id, in `ids` order.
    private let digests: [UInt8]

    /// `sha256Hex` is the SHA-256 of the token as 64 hex digits (`printf %s "$TOKEN" | sha256sum`).
    package init(tokens: [(id: String, sha256Hex: String)]) throws(AuthConfigurationError) {
        var ids: [String] = []
        var digests: [UInt8] = []
        var seenIDs = Set<String>()
        var seenDigests = Set<[UInt8]>()
        for (id, hex) in tokens {
            guard !id.isEmpty else { throw .emptyTokenID }
            guard seenIDs.insert(id).inserted else { throw .duplicateTokenID(id) }
            guard let digest = Self.parseHex(hex), digest.count == 32 else { throw .invalidTokenHash(id: id) }
            guard seenDigests.insert(digest).inserted else { throw .duplicateTokenHash(id: id) }
            ids.append(id)
            digests += digest
        }
        self.ids = ids
        self.digests = digests
    }

    /// The configured ids, in configuration order.
    package var tokenIDs: [String] { ids }

    /// Authenticates a token taken from `Authorization: Bearer <token>` (see `BearerToken.extract`).
    package func authenticate(bearer token: Secret) -> Result<Identity, AuthError> {
        authenticate(bearer: token.revealForHeader())
    }

    /// `.unknownToken` when no configured hash matches; `.missing` for an empty token; `.malformed` for one
    /// longer than `BearerToken.maxBytes`.
    package func authenticate(bearer token: String) -> Result<Identity, AuthError> {
        let bytes = token.utf8
        guard !bytes.isEmpty else { return .failure(.missing) }
        guard bytes.count <= BearerToken.maxBytes else { return .failure(.malformed) }
        let digest = Crypto.sha256(bytes)
        // Every hash is compared; the match is selected without branching on the comparisons.
        var found = -1
        for index in ids.indices {
            let equal = Crypto.equal(digest, digests, at: index * 32)
            let mask = 0 &- Int(equal ? 1 : 0) // all ones when equal
            found = (index & mask) | (found & ~mask)
        }
        guard found >= 0 else { return .failure(.unknownToken) }
        return .success(Identity(id: ids[found], kind: .staticToken))
    }

    package var description: String { "TokenAuthenticator(ids: \(ids))" }
    /// Shows the ids only: even hashes of tokens stay out of dumps.
    package var customMirror: Mirror { Mirror(self, children: ["ids": ids]) }

    static func parseHex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
