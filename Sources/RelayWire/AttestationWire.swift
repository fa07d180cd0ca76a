/// The bytes both ends of an App Attest assertion must agree on, built in one place: the client library signs
/// what this returns, the relay checks the signature against what this returns, and a test holds the two
/// together, so the app and the relay cannot drift apart. Pure Swift, no Foundation.
///
/// clientData = the method, one space, the path with its query exactly as sent in the request line (origin-form,
/// RFC 9112 §3.2.1), one LF, then the exact request body bytes (none for a request without a body). The relay
/// checks the assertion over SHA-256(clientData) (README, "Genuine app").
public enum AttestationWire {
    /// The App Attest key's id (the base64 string `DCAppAttestService.generateKey` returned).
    public static let keyIDHeader = "X-App-Attest-Key-Id"
    /// The assertion (`DCAppAttestService.generateAssertion`) as base64: CBOR {signature, authenticatorData}.
    public static let assertionHeader = "X-App-Attest-Assertion"
    /// A Firebase App Check token (a JWT).
    public static let appCheckHeader = "X-Firebase-AppCheck"

    /// `POST`: answers `{"challenge": "<base64url>", "expiresInSeconds": N}`, one use.
    public static let challengePath = "/v1/relay/attest/challenge"
    /// `POST {"keyId", "attestation", "challenge"}`: registers an App Attest key (201 `{"keyId"}`).
    public static let registerPath = "/v1/relay/attest/apple"

    /// The clientData of one request. `pathWithQuery` is the request target as it goes on the wire
    /// (`/v1/chat/completions?x=1`), percent-encoding and all.
    public static func clientData(method: String, pathWithQuery: String, body: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(method.utf8.count + pathWithQuery.utf8.count + 2 + body.count)
        out.append(contentsOf: method.utf8)
        out.append(0x20)
        out.append(contentsOf: pathWithQuery.utf8)
        out.append(0x0A)
        out.append(contentsOf: body)
        return out
    }
}
