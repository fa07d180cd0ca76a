import HTTP1

/// Replaces every occurrence of a secret in a byte stream with a mask of the same length, across chunk
/// boundaries. Pure; one per response.
///
/// Why: some OpenAI-compatible providers and gateways echo the credential they received in an error body; the
/// relay must never hand the provider key to the app. Only non-2xx bodies pass through it (2xx bodies stay
/// byte-exact). The mask keeps the length, so a `Content-Length` stays right, and keeps the key's first three
/// bytes when the key is long enough for that to say nothing (`sk-*****…`), so a developer still sees which kind
/// of key the provider complained about. The full header value the relay sent (`Bearer sk-…`) is the configured
/// prefix plus the key, so masking every occurrence of the key masks that too.
///
/// Cost: up to `secret.count - 1` bytes are held back at the end of each chunk (they might begin the key), and
/// released by the next chunk or `finish()`.
package struct SecretMasker: Sendable {
    private let secret: [UInt8]
    private let mask: [UInt8]
    private var held: [UInt8] = []

    /// nil for an empty secret (nothing to mask).
    package init?(secret: [UInt8]) {
        guard !secret.isEmpty else { return nil }
        self.secret = secret
        let visible = secret.count >= 16 ? 3 : 0
        mask = Array(secret.prefix(visible)) + Array(repeating: UInt8(ascii: "*"), count: secret.count - visible)
    }

    /// The bytes that may be sent now, masked; what could still be the start of the secret is kept back.
    package mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var buffer = held
        buffer.append(contentsOf: bytes)
        let n = secret.count
        var i = 0
        while i + n <= buffer.count {
            if buffer[i] == secret[0] && buffer[i..<(i + n)].elementsEqual(secret) {
                buffer.replaceSubrange(i..<(i + n), with: mask)
                i += n
            } else {
                i += 1
            }
        }
        // Keep back the longest tail that is a proper prefix of the secret.
        var keep = min(n - 1, buffer.count)
        while keep > 0 && !buffer[(buffer.count - keep)...].elementsEqual(secret[..<keep]) { keep -= 1 }
        held = Array(buffer[(buffer.count - keep)...])
        buffer.removeLast(keep)
        return buffer
    }

    /// `headers` with the secret masked in every value (nil when no value contains it: nothing to copy).
    /// Response headers pass for every status, and a gateway may echo the credential in one (a debug header,
    /// `WWW-Authenticate`), so they are masked whatever the status.
    package static func masking(_ headers: HTTPHeaders, secret: [UInt8]) -> HTTPHeaders? {
        // Searched in place first: the masker and copies are made only when a value holds the secret (almost
        // never), not for every response (about 2 500 instructions a request).
        guard headers.contains(where: { contains($0.value, secret) }), var masker = SecretMasker(secret: secret) else { return nil }
        var masked = HTTPHeaders()
        for field in headers {
            var bytes = Array(field.value.utf8).withUnsafeBytes { masker.feed($0) }
            bytes += masker.finish()
            masked.add(name: field.name, value: String(decoding: bytes, as: UTF8.self))
        }
        return masked
    }

    /// The body an error answer gets instead of its own when the masker cannot read that (a `Content-Encoding` other
    /// than `identity`: the relay asks for `identity`, and a provider that compresses anyway could hide an echoed key
    /// from the masker); nil when the body can be masked. The caller also drops `Content-Encoding` and
    /// `Content-Length` and says `application/json`; the status and the other headers stay.
    package static func replacement(forErrorStatus status: Int, headers: HTTPHeaders) -> [UInt8]? {
        guard headers.tokens("Content-Encoding").contains(where: { $0 != "identity" }) else { return nil }
        return RelayError(status: status, type: "upstream_error", code: "upstream_error_encoded",
                          message: "The provider answered \(status) with a compressed body, which the relay does not pass on.").jsonBody
    }

    /// Whether `value`'s UTF-8 holds `secret` (not empty), searched on the string's own bytes.
    static func contains(_ value: String, _ secret: [UInt8]) -> Bool {
        guard !secret.isEmpty else { return false }
        var value = value
        return value.withUTF8 { hay in
            secret.withUnsafeBufferPointer { needle in
                guard needle.count <= hay.count else { return false }
                var i = 0
                while i + needle.count <= hay.count {
                    if hay[i] == needle[0] && UnsafeBufferPointer(rebasing: hay[i..<(i + needle.count)]).elementsEqual(needle) { return true }
                    i += 1
                }
                return false
            }
        }
    }

    /// The rest, at the end of the body: whatever was held back cannot be the secret any more.
    package mutating func finish() -> [UInt8] {
        defer { held = [] }
        return held
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        var i = 0
        while i + needle.count <= count {
            if self[i] == needle[0] && self[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
