import Attestation
import Auth
import HTTP1
import RelayWire

/// What a request presented as proof of the genuine app, read from its headers (README, "Genuine app"). Pure.
///
/// App Attest: `X-App-Attest-Key-Id` (base64 of the 32-byte key id, either alphabet, padding optional) and
/// `X-App-Attest-Assertion` (base64 CBOR, at most `AppAttestVerifier.maxAssertionBytes`, 1 KiB). App Check: `X-Firebase-AppCheck` (a JWT).
/// A kind the relay is not configured for is not looked at. A header given twice, one without the other, bad
/// base64 or an oversized value is `malformed` (400): a client bug, never a reason to look further.
package struct AttestationPresentation: Equatable, Sendable {
    package struct AppAttest: Equatable, Sendable {
        var keyID: [UInt8]
        package var assertion: [UInt8]
        /// The key id as the store names it: base64url without padding.
        package var keyIDText: String { Base64URL.encode(keyID) }
    }

    /// Headers that cannot be read: which proof, and why (the log's step).
    package struct Malformed: Equatable, Sendable {
        var kind: AttestationKind
        var step: String
    }

    package var appAttest: AppAttest?
    package var appCheck: String?
    /// Why the headers cannot be read; nil when they can.
    package var malformed: Malformed?

    /// Base64 of the largest assertion the verifier reads (1 KiB; a device's is a DER signature and 37 bytes of
    /// authenticator data, in CBOR), with padding: longer header values are refused before decoding.
    package static let maxAssertionHeaderBytes = (AppAttestVerifier.maxAssertionBytes + 2) / 3 * 4
    package static let maxKeyIDHeaderBytes = 64

    package var isEmpty: Bool { appAttest == nil && appCheck == nil && malformed == nil }

    package static func read(_ headers: HTTPHeaders, appAttest readsAppAttest: Bool, appCheck readsAppCheck: Bool) -> AttestationPresentation {
        var presented = AttestationPresentation()
        if readsAppAttest {
            let ids = headers.values(AttestationWire.keyIDHeader), assertions = headers.values(AttestationWire.assertionHeader)
            switch (ids.count, assertions.count) {
            case (0, 0):
                break
            case (1, 1):
                guard ids[0].utf8.count <= maxKeyIDHeaderBytes, let id = decodeBase64(ids[0]), id.count == 32 else {
                    presented.malformed = Malformed(kind: .appAttest, step: "key_id_encoding")
                    return presented
                }
                guard assertions[0].utf8.count <= maxAssertionHeaderBytes else {
                    presented.malformed = Malformed(kind: .appAttest, step: "assertion_too_large")
                    return presented
                }
                guard let assertion = decodeBase64(assertions[0]), !assertion.isEmpty else {
                    presented.malformed = Malformed(kind: .appAttest, step: "assertion_encoding")
                    return presented
                }
                presented.appAttest = AppAttest(keyID: id, assertion: assertion)
            default:
                presented.malformed = Malformed(kind: .appAttest, step: ids.count > 1 || assertions.count > 1 ? "header_repeated" : "header_missing")
                return presented
            }
        }
        if readsAppCheck {
            let tokens = headers.values(AttestationWire.appCheckHeader)
            guard tokens.count <= 1 else {
                presented.malformed = Malformed(kind: .appCheck, step: "header_repeated")
                return presented
            }
            if let token = tokens.first {
                guard !token.isEmpty, token.utf8.count <= JWTVerifier.maxTokenBytes else {
                    presented.malformed = Malformed(kind: .appCheck, step: "token_size")
                    return presented
                }
                presented.appCheck = token
            }
        }
        return presented
    }

    /// Base64 in either alphabet (RFC 4648 sections 4 and 5), with or without padding; nil for anything else.
    /// Canonical only (non-zero leftover bits are refused), so each key id has one spelling.
    package static func decodeBase64(_ text: String) -> [UInt8]? {
        var bytes = Array(text.utf8)
        var padding = 0
        while bytes.last == UInt8(ascii: "=") && padding < 2 {
            bytes.removeLast()
            padding += 1
        }
        if padding > 0 && (bytes.count + padding) % 4 != 0 { return nil }
        var sawStandard = false, sawURL = false
        for i in bytes.indices {
            switch bytes[i] {
            case UInt8(ascii: "+"): bytes[i] = UInt8(ascii: "-"); sawStandard = true
            case UInt8(ascii: "/"): bytes[i] = UInt8(ascii: "_"); sawStandard = true
            case UInt8(ascii: "-"), UInt8(ascii: "_"): sawURL = true
            default: break
            }
        }
        // One alphabet per value: a mix is no encoder's output.
        if sawStandard && sawURL { return nil }
        return Base64URL.decode(bytes: bytes)
    }
}

/// What checking one presented proof found.
package enum ProofResult: Equatable, Sendable {
    /// Valid. `identity` is the proof's subject: the key id (App Attest) or the Firebase app id (App Check).
    case valid(identity: String)
    /// Not valid; `step` names the failed check for the log (never the client).
    case invalid(step: String)
    /// An App Attest assertion whose counter is not above the stored one: replayed or reordered.
    case replayed
    /// The attestation store did not answer.
    case unavailable
}

/// The proof a request passed with, as logs and metrics name it.
package enum AttestationKind: String, Sendable {
    case appAttest = "app_attest"
    case appCheck = "app_check"
    case none
}

/// The route's policy applied to what was presented and what each check found. Pure.
package enum AttestationVerdict: Equatable, Sendable {
    /// Forward it; with App Attest, `keyID` (base64url) names the device for limits on `auth: "none"` routes.
    case pass(AttestationKind, keyID: String?)
    /// Refuse it: the answer, the proof it was about, and the failed step for the log.
    case refuse(RelayError, AttestationKind, step: String)

    /// A valid proof passes, App Attest first; with none presented, `required` refuses (401
    /// `attestation_required`) and `optional` passes. Otherwise the presented proof's failure answers: 400
    /// `attestation_malformed` for headers that cannot be read, 503 `state_unavailable` when the store did not
    /// answer (a counter that cannot be checked cannot refuse a replay), 401 `assertion_replayed`, 401
    /// `attestation_invalid` (App Attest's failure before App Check's). A bad proof is refused on `optional`
    /// routes too: leaving the headers out would pass, so refusing costs an attacker nothing, and it tells an app
    /// with a stale key to register again.
    package static func decide(_ mode: RouteAttestation, presented: AttestationPresentation, appAttest: ProofResult?,
                       appCheck: ProofResult?) -> AttestationVerdict {
        if let malformed = presented.malformed { return .refuse(.attestationMalformed, malformed.kind, step: malformed.step) }
        if case .valid(let id)? = appAttest { return .pass(.appAttest, keyID: id) }
        if case .valid? = appCheck { return .pass(.appCheck, keyID: nil) }
        switch (appAttest, appCheck) {
        case (nil, nil):
            return mode == .required ? .refuse(.attestationRequired, .none, step: "missing") : .pass(.none, keyID: nil)
        case (.unavailable?, _):
            return .refuse(.stateUnavailable, .appAttest, step: "store_unavailable")
        case (.replayed?, _):
            return .refuse(.assertionReplayed, .appAttest, step: "counter")
        case (.invalid(let step)?, _):
            return .refuse(.attestationInvalid, .appAttest, step: step)
        case (_, .invalid(let step)?):
            return .refuse(.attestationInvalid, .appCheck, step: step)
        default:
            return .refuse(.attestationInvalid, .appCheck, step: "unexpected")
        }
    }
}

extension AttestationVerdict {
    /// A proof was presented and did not hold (invalid, replayed or unreadable): a failed authentication, which
    /// costs the address a token of its failure bucket (`rateLimits.authFailuresPerAddress`) as a refused
    /// credential does, so guessing at key ids and replaying assertions is paid for in time, not in store lookups.
    /// No proof at all costs nothing (nothing was tried, the store was not asked), nor does a store that did not
    /// answer (the relay's fault, not the caller's).
    package var isFailedProof: Bool {
        guard case .refuse(let error, _, _) = self else { return false }
        return error.code != RelayError.attestationRequired.code && error.code != RelayError.stateUnavailable.code
    }
}

extension RelayError {
    /// A route with `attestation: "required"` got neither an App Attest assertion nor an App Check token.
    package static let attestationRequired = RelayError(
        status: 401, type: "authentication_error", code: "attestation_required",
        message: "This route needs proof of the genuine app: an App Attest assertion or a Firebase App Check token.")

    /// An attestation or assertion (or App Check token) failed a check; which one is logged, not answered.
    package static let attestationInvalid = RelayError(
        status: 401, type: "authentication_error", code: "attestation_invalid",
        message: "The app attestation could not be verified. Register the App Attest key again (or refresh the App Check token).")

    /// An assertion whose counter is not above the last one the relay accepted for that key.
    package static let assertionReplayed = RelayError(
        status: 401, type: "authentication_error", code: "assertion_replayed",
        message: "This App Attest assertion was already used. Make a new assertion for each request.")

    /// Attestation headers or a registration body that cannot be read (encoding, size, missing fields).
    package static let attestationMalformed = RelayError(
        status: 400, type: "invalid_request_error", code: "attestation_malformed",
        message: "The attestation headers or registration body are malformed (base64, size or missing fields).")

    /// A registration for a key id that is registered already.
    package static let keyAlreadyRegistered = RelayError(
        status: 409, type: "invalid_request_error", code: "key_already_registered",
        message: "This App Attest key is already registered; use it.")
}

/// The steps of one App Attest assertion check between the store's two answers (the key, then the counter). Pure:
/// the signature check is offline (`AppAttestVerifier.verifyAssertion`).
package enum AssertionCheck {
    package enum Next: Equatable, Sendable {
        /// The assertion is sound: raise the stored counter to this (compare-and-set in the store).
        case raise(to: UInt32)
        case done(ProofResult)
    }

    /// After the key lookup: the key must still belong to a configured app id and environment (an operator who
    /// moves from development to production, or drops an app, retires its keys), then the signature over
    /// SHA-256(authenticatorData ‖ clientDataHash) with the stored key, and the rpIdHash of its app id.
    package static func afterLookup(_ answer: StoreAnswer<RegisteredAppAttestKey>, assertion: [UInt8], clientDataHash: [UInt8],
                            apple: AttestationConfiguration.Apple) -> Next {
        switch answer {
        case .unavailable: return .done(.unavailable)
        case .unknown: return .done(.invalid(step: "unknown_key"))
        case .done(let key):
            guard apple.appIds.contains(key.appID) else { return .done(.invalid(step: "app_id_not_configured")) }
            guard key.environment == apple.environment.rawValue else { return .done(.invalid(step: "environment")) }
            switch AppAttestVerifier.verifyAssertion(assertion, clientDataHash: clientDataHash, publicKey: key.publicKey, appId: key.appID) {
            case .success(let counter): return .raise(to: counter)
            case .failure(let failure): return .done(.invalid(step: failure.step))
            }
        }
    }

    /// After the counter raise: raised means valid; not raised means the counter was not above the stored one,
    /// or the key serves another account (`invalid`: the app registers a new key for this one, and retries).
    package static func afterRaise(_ answer: CounterRaise, keyID: String) -> ProofResult {
        switch answer {
        case .raised: .valid(identity: keyID)
        case .notAbove: .replayed
        case .otherSubject: .invalid(step: "key_of_another_account")
        case .unavailable: .unavailable
        }
    }
}
