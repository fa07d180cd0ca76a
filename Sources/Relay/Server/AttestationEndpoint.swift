import Attestation
import Auth
import Foundation
import HTTP1
import HTTPServer
import JSON
import RelayCore
import RelayState
import RelayWire
import Support
import Transport

/// The App Attest registration endpoints, served when `attestation.apple` is configured (README, "Genuine
/// app", and Apple's "Validating apps that connect to your server"):
/// - `POST /v1/relay/attest/challenge` → 200 `{"challenge": "<base64url of 32 random bytes>", "expiresInSeconds": N}`,
///   kept in the attestation store for one use (any replica can redeem it with Redis);
/// - `POST /v1/relay/attest/apple` with `{"keyId", "attestation", "challenge"}` → the challenge is redeemed first
///   (one use, even if what follows fails), then the attestation is verified offline with clientDataHash =
///   SHA-256 of the challenge's UTF-8 bytes, then the key is stored if its id is new: 201 `{"keyId"}`, 409
///   `key_already_registered`, 401 `attestation_invalid` (the failed step goes to the log only), 400
///   `attestation_malformed`, 413 `attestation_too_large`, 503 `state_unavailable`.
///
/// Each call takes a token from the address's bucket first (the limits of failed authentications), so guessing or
/// flooding costs time. A responder: the store may answer later (Redis); a client gone meanwhile gets nothing.
/// Owned by the connection's loop queue.
final class AttestationEndpoint: RequestResponder, @unchecked Sendable {
    // Invariant: touched on `writer.scheduler.queue` only (the store answers there).
    enum Kind { case challenge, register }

    /// A registration body: base64 of a 16 KiB attestation object plus the JSON around it.
    static let maxBodyBytes = 24 * 1024

    private let service: AttestationService
    private let kind: Kind
    private let writer: any ResponseWriter
    private let head: RequestHead
    private let requestID: String
    private var body: [UInt8] = []
    private var tooLarge = false
    private var gone = false

    init(service: AttestationService, kind: Kind, head: RequestHead, requestID: String, writer: any ResponseWriter) {
        self.service = service
        self.kind = kind
        self.head = head
        self.requestID = requestID
        self.writer = writer
    }

    func requestBody(_ bytes: [UInt8]) {
        guard !tooLarge else { return }
        if body.count + bytes.count > Self.maxBodyBytes {
            tooLarge = true
            body = []
        } else {
            body.append(contentsOf: bytes)
        }
    }

    func clientClosed() { gone = true }
    func clientDrained() {}

    func requestEnd() {
        switch kind {
        case .challenge: issueChallenge()
        case .register: register()
        }
    }

    // MARK: Challenge

    private func issueChallenge() {
        guard let store = service.store, let apple = service.configuration.apple else { return }
        var random = SystemRandomNumberGenerator()   // getrandom(2) on Linux, arc4random on Darwin: a CSPRNG
        let challenge = Base64URL.encode((0..<32).map { _ in random.next() as UInt8 })
        store.issueChallenge(challenge, ttlSeconds: apple.challengeTTLSeconds, on: writer.scheduler) { issued in
            guard !self.gone else { return }
            guard issued else { return self.refuse(.stateUnavailable, result: "unavailable", step: "store_unavailable") }
            self.service.metrics.attestationRegistration(result: "challenge")
            self.answer(status: 200, json: "{\"challenge\":\(JSONLine.quote(challenge)),\"expiresInSeconds\":\(apple.challengeTTLSeconds)}\n",
                        result: "challenge")
        }
    }

    // MARK: Registration

    /// What a registration body holds, decoded.
    struct Registration: Equatable {
        var keyIDText: String
        var keyID: [UInt8]
        var attestation: [UInt8]
        var challenge: String
    }

    /// Parses `{"keyId": base64, "attestation": base64, "challenge": text}`; the failed step when it cannot. Read
    /// by the relay's one strict JSON reader, as a forwarded body is: a key given twice is refused, not read as
    /// whichever one a parser keeps.
    static func parse(_ body: [UInt8]) -> Result<Registration, AttestationFailureStep> {
        guard let members = try? JSONTopLevel.scan(body) else { return .failure("body_not_json") }
        guard JSONTopLevel.duplicateKeys(in: members).isEmpty else { return .failure("body_duplicate_keys") }
        func text(_ name: String) -> String? {
            guard let member = members.first(where: { $0.hasKey(name) }), member.kind == .string else { return nil }
            return JSONTopLevel.string(in: body, at: member.valueRange)
        }
        guard let keyIDText = text("keyId"), let attestationText = text("attestation"),
              let challenge = text("challenge") else { return .failure("body_fields") }
        guard keyIDText.utf8.count <= AttestationPresentation.maxKeyIDHeaderBytes,
              let keyID = AttestationPresentation.decodeBase64(keyIDText), keyID.count == 32 else { return .failure("key_id_encoding") }
        guard attestationText.utf8.count <= (AppAttestVerifier.maxAttestationBytes + 2) / 3 * 4 else { return .failure("attestation_too_large") }
        guard let attestation = AttestationPresentation.decodeBase64(attestationText), !attestation.isEmpty else {
            return .failure("attestation_encoding")
        }
        // Ours are 43 characters; anything much longer was never issued.
        guard !challenge.isEmpty, challenge.utf8.count <= 128 else { return .failure("challenge_encoding") }
        return .success(Registration(keyIDText: keyIDText, keyID: keyID, attestation: attestation, challenge: challenge))
    }

    private func register() {
        guard let store = service.store, let verifier = service.verifier else { return }
        if tooLarge { return refuse(.attestationTooLarge, result: "malformed", step: "body_too_large") }
        let registration: Registration
        switch Self.parse(body) {
        case .success(let parsed): registration = parsed
        case .failure(let step):
            return refuse(step.step == "attestation_too_large" ? .attestationTooLarge : .attestationMalformed, result: "malformed", step: step.step)
        }
        body = []
        store.redeemChallenge(registration.challenge, on: writer.scheduler) { redeemed in
            guard !self.gone else { return }
            switch redeemed {
            case .unavailable: return self.refuse(.stateUnavailable, result: "unavailable", step: "store_unavailable")
            case .unknown: return self.refuse(.attestationInvalid, result: "invalid", step: "challenge")
            case .done: break
            }
            let clientDataHash = Digest.sha256(registration.challenge.utf8)
            let key: AppAttestKey
            switch verifier.verifyAttestation(registration.attestation, keyId: registration.keyID, clientDataHash: clientDataHash,
                                              atUnixSeconds: Int64(self.service.wallClock())) {
            case .success(let verified): key = verified
            case .failure(let failure): return self.refuse(.attestationInvalid, result: "invalid", step: failure.step)
            }
            let keyID = Base64URL.encode(registration.keyID)
            let stored = RegisteredAppAttestKey(keyID: keyID, publicKey: key.publicKey, appID: key.appId,
                                                environment: key.environment.rawValue, receipt: key.receipt,
                                                registeredAt: Int64(self.service.wallClock()))
            store.register(stored, on: self.writer.scheduler) { registered in
                guard !self.gone else { return }
                switch registered {
                case .unavailable: self.refuse(.stateUnavailable, result: "unavailable", step: "store_unavailable")
                case .unknown: self.refuse(.keyAlreadyRegistered, result: "conflict", step: "key_already_registered")
                case .done:
                    self.service.metrics.attestationRegistration(result: "registered")
                    self.answer(status: 201, json: "{\"keyId\":\(JSONLine.quote(registration.keyIDText))}\n", result: "registered",
                                extra: [("identity", .string("appattest:" + keyID)), ("app_id", .string(key.appId))])
                }
            }
        }
    }

    // MARK: Answers

    private func answer(status: Int, json: String, result: String, extra: [(String, LogValue)] = []) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Request-Id", value: requestID)
        writer.respond(status: status, headers: headers, body: Array(json.utf8), keepAlive: head.keepAlive)
        service.logger.info("exchange", logFields(status: status, outcome: "completed") + [("registration", .string(result))] + extra)
    }

    private func refuse(_ error: RelayError, result: String, step: String) {
        service.metrics.attestationRegistration(result: result)
        service.metrics.rejected(reason: error.code)
        service.rejectionLog.log(reason: error.code, logFields(status: error.status, outcome: "rejected")
            + [("reason", .string(error.code)), ("registration", .string(result)), ("attestation_step", .string(step))])
        writer.respond(error: error, requestID: requestID, keepAlive: head.keepAlive)
    }

    private func logFields(status: Int, outcome: String) -> [(String, LogValue)] {
        [("request_id", .string(requestID)), ("client_ip", .string(writer.clientAddress)), ("method", .string(head.method)),
         ("path", .string(head.path)), ("status", .int(status)), ("outcome", .string(outcome)),
         ("attestation", .string(AttestationKind.appAttest.rawValue))]
    }
}

/// The check a registration body failed, for the log.
struct AttestationFailureStep: Error, Equatable, ExpressibleByStringLiteral {
    var step: String
    init(stringLiteral value: String) { step = value }
}

extension AttestationService {
    /// Whether a request for `path` is for one of the App Attest endpoints (served only with `attestation.apple`).
    func serves(path: String) -> Bool {
        store != nil && (path == AttestationWire.challengePath || path == AttestationWire.registerPath)
    }

    /// The endpoint's responder; nil when the request was answered here: 405 for a method other than POST, 429
    /// once the address's bucket is empty.
    func endpoint(_ head: RequestHead, requestID: String, writer: any ResponseWriter) -> (any RequestResponder)? {
        guard head.method == "POST" else {
            writer.respond(error: .methodNotAllowed(allowed: ["POST"]), requestID: requestID, keepAlive: head.keepAlive)
            return nil
        }
        switch limiter.acquire(key: writer.client.limitKey, now: writer.scheduler.clock.now()) {
        case .allowed(let lease):
            limiter.release(lease)
        case .limited(let wait, _):
            metrics.attestationRegistration(result: "rate_limited")
            metrics.rejected(reason: "rate_limited")
            rejectionLog.log(reason: "rate_limited", [("request_id", .string(requestID)), ("client_ip", .string(writer.clientAddress)),
                                                      ("path", .string(head.path)), ("status", .int(429)), ("outcome", .string("rejected")),
                                                      ("reason", .string("attestation_rate_limited"))])
            writer.respond(error: .rateLimited(retryAfterSeconds: wait), requestID: requestID, keepAlive: head.keepAlive)
            return nil
        }
        let kind: AttestationEndpoint.Kind = head.path == AttestationWire.challengePath ? .challenge : .register
        return AttestationEndpoint(service: self, kind: kind, head: head, requestID: requestID, writer: writer)
    }
}

extension RelayError {
    /// A registration body larger than a 16 KiB attestation object needs.
    static let attestationTooLarge = RelayError(
        status: 413, type: "invalid_request_error", code: "attestation_too_large",
        message: "The attestation object is larger than 16 KiB.")
}
