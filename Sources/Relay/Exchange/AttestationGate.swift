import Attestation
import Auth
import RelayCore
import RelayState
import RelayWire
import Transport

/// One exchange's check of the proof of the genuine app (README, "Genuine app"), run once the body is whole and
/// before admission, because an App Attest assertion signs the body: SHA-256 of `AttestationWire.clientData`
/// (method, path with query, the exact body bytes as received). The decisions are the pure
/// `AttestationPresentation`, `AssertionCheck` and `AttestationVerdict`; this value only asks the store (the
/// key, then the counter's compare-and-set) and passes the answers along. Made per request by `RelayHandler` for
/// a route whose `attestation` is not `off`; used on the exchange's loop queue.
struct AttestationGate: Sendable {
    let service: AttestationService
    let mode: RouteAttestation
    let presented: AttestationPresentation
    let method: String
    /// The request target as received (origin-form path and query): what the app signed.
    let target: String
    /// The request's authenticated account (its identity's key), nil on `auth: "none"`: an App Attest key serves
    /// the first account that asserts with it, and no other (`RegisteredAppAttestKey.subject`).
    var subject: String?
    /// The address's failure bucket (`rateLimits.authFailuresPerAddress`) a failed proof takes a token from, as a
    /// refused credential does; nil where the caller charges its refusals itself (the stream endpoint's misses).
    var failureBucket: (limiter: RateLimiter, address: String)?

    /// Calls `completion` on `loop` (possibly before returning) with the route policy's verdict.
    func check(body: [UInt8], on loop: any LoopScheduler, _ completion: @escaping @Sendable (AttestationVerdict) -> Void) {
        let appCheck = presented.appCheck.map { service.checkAppCheck($0) }
        let finish: @Sendable (ProofResult?) -> Void = { [self] appAttest in
            let verdict = AttestationVerdict.decide(mode, presented: presented, appAttest: appAttest, appCheck: appCheck)
            service.count(verdict)
            if verdict.isFailedProof, let bucket = failureBucket { bucket.limiter.charge(key: bucket.address, now: loop.clock.now()) }
            completion(verdict)
        }
        guard presented.malformed == nil, let assertion = presented.appAttest, let apple = service.configuration.apple,
              let store = service.store else {
            return finish(nil)
        }
        let clientDataHash = Digest.sha256(AttestationWire.clientData(method: method, pathWithQuery: target, body: body))
        let keyID = assertion.keyIDText
        store.key(keyID, on: loop) { answer in
            switch AssertionCheck.afterLookup(answer, assertion: assertion.assertion, clientDataHash: clientDataHash, apple: apple) {
            case .done(let result):
                finish(result)
            case .raise(let counter):
                store.raiseCounter(keyID, to: counter, subject: subject, on: loop) {
                    finish(AssertionCheck.afterRaise($0, keyID: keyID))
                }
            }
        }
    }
}

extension AttestationVerdict {
    /// Writes the verdict into the exchange's log record and, for App Attest on an `auth: "none"` route, makes the
    /// device (`appattest:<keyId>`) the identity its limits and budget are kept under (App Check names the app,
    /// not the device: the address stays the key there). The error to answer, or nil to go on.
    func apply(to record: inout ExchangeRecord, admission: inout ExchangeAdmission?) -> RelayError? {
        switch self {
        case .pass(let kind, let keyID):
            record.attestation = kind.rawValue
            if let keyID, record.identity == nil {
                let identity = "appattest:" + keyID
                record.identity = identity
                if admission != nil {
                    admission!.identity = identity
                    if admission!.budgetKey != nil { admission!.budgetKey = identity }
                }
            }
            return nil
        case .refuse(let error, let kind, let step):
            record.attestation = kind.rawValue
            record.attestationStep = step
            return error
        }
    }

    /// The metric's labels: what was presented, and what became of it.
    var labels: (kind: String, result: String) {
        switch self {
        case .pass(.none, _): (AttestationKind.none.rawValue, "absent")
        case .pass(let kind, _): (kind.rawValue, "valid")
        case .refuse(let error, let kind, _):
            (kind.rawValue, Self.results[error.code] ?? "invalid")
        }
    }

    /// A refusal's `result` label by its code; any other refusal is `invalid`.
    private static let results = [RelayError.attestationRequired.code: "missing", RelayError.assertionReplayed.code: "replayed",
                                  RelayError.attestationMalformed.code: "malformed", RelayError.stateUnavailable.code: "unavailable"]
}
