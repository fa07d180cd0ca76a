// The pure parts of the genuine-app checks: reading the proof headers, the route policy's verdict, and what a
// verdict does to the exchange's record and admission.
import AttestationTestSupport
import Auth
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Support
import Testing

@Suite struct AttestationPolicyTests {
    static let keyID = [UInt8](0..<32)
    /// The key id as Apple's API hands it out: standard base64 with padding.
    static let keyIDBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

    static func read(_ pairs: [(String, String)], appAttest: Bool = true, appCheck: Bool = true) -> AttestationPresentation {
        AttestationPresentation.read(HTTPHeaders(pairs), appAttest: appAttest, appCheck: appCheck)
    }

    // MARK: Base64

    @Test(arguments: [
        ("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", true), // standard, padded
        ("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", true),  // standard, unpadded
        ("-_8", true), ("+/8=", true), ("+/8", true),
        ("+_8", false),                                          // two alphabets in one value
        ("AAE=C", false), ("AA===", false), ("A", false),        // padding in the middle, too much, impossible length
        ("AB==", false),                                         // non-zero leftover bits: not canonical
        ("AA\nAA", false), ("AA AA", false), ("", true),
    ])
    func base64InEitherAlphabet(_ text: String, _ valid: Bool) {
        #expect((AttestationPresentation.decodeBase64(text) != nil) == valid, "\(text)")
    }

    @Test func bothAlphabetsDecodeToTheSameBytes() {
        #expect(AttestationPresentation.decodeBase64("+/8=") == [0xFB, 0xFF])
        #expect(AttestationPresentation.decodeBase64("-_8") == [0xFB, 0xFF])
        #expect(AttestationPresentation.decodeBase64(Self.keyIDBase64) == Self.keyID)
    }

    // MARK: Reading the headers

    @Test func noHeadersIsNothingPresented() {
        #expect(Self.read([("Content-Type", "application/json")]).isEmpty)
    }

    @Test func anAppAttestPairIsDecoded() {
        let p = Self.read([("x-app-attest-key-id", Self.keyIDBase64), ("X-App-Attest-Assertion", "oWFhAQ==")])
        #expect(p.malformed == nil)
        #expect(p.appAttest == .init(keyID: Self.keyID, assertion: [0xA1, 0x61, 0x61, 0x01]))
        #expect(p.appAttest?.keyIDText == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")
    }

    @Test(arguments: [
        ([("X-App-Attest-Key-Id", "AAEC"), ("X-App-Attest-Assertion", "oQ==")], "key_id_encoding"),       // 3 bytes
        ([("X-App-Attest-Key-Id", "%%%"), ("X-App-Attest-Assertion", "oQ==")], "key_id_encoding"),
        ([("X-App-Attest-Key-Id", keyIDBase64), ("X-App-Attest-Assertion", "o!==")], "assertion_encoding"),
        ([("X-App-Attest-Key-Id", keyIDBase64), ("X-App-Attest-Assertion", "")], "assertion_encoding"),
        ([("X-App-Attest-Key-Id", keyIDBase64), ("X-App-Attest-Assertion", String(repeating: "A", count: 1372))], "assertion_too_large"),
        ([("X-App-Attest-Key-Id", keyIDBase64)], "header_missing"),
        ([("X-App-Attest-Assertion", "oQ==")], "header_missing"),
        ([("X-App-Attest-Key-Id", keyIDBase64), ("X-App-Attest-Key-Id", keyIDBase64), ("X-App-Attest-Assertion", "oQ==")], "header_repeated"),
    ])
    func unreadableAppAttestHeadersAreMalformed(_ pairs: [(String, String)], _ step: String) {
        let p = Self.read(pairs)
        #expect(p.malformed == .init(kind: .appAttest, step: step))
        #expect(p.appAttest == nil)
    }

    @Test func theLongestAssertionHeaderIsAccepted() {
        // 1 KiB of assertion is 1368 base64 characters: accepted; one quantum more is not (above).
        let p = Self.read([("X-App-Attest-Key-Id", Self.keyIDBase64), ("X-App-Attest-Assertion", String(repeating: "A", count: 1368))])
        #expect(p.malformed == nil)
        #expect(p.appAttest?.assertion.count == 1026)
    }

    @Test func appCheckTokens() {
        #expect(Self.read([("X-Firebase-AppCheck", "a.b.c")]).appCheck == "a.b.c")
        #expect(Self.read([("X-Firebase-AppCheck", "a.b.c"), ("X-Firebase-AppCheck", "d.e.f")]).malformed == .init(kind: .appCheck, step: "header_repeated"))
        #expect(Self.read([("X-Firebase-AppCheck", "")]).malformed == .init(kind: .appCheck, step: "token_size"))
        #expect(Self.read([("X-Firebase-AppCheck", String(repeating: "a", count: JWTVerifier.maxTokenBytes + 1))]).malformed?.step == "token_size")
    }

    @Test func aKindTheRelayIsNotConfiguredForIsNotLookedAt() {
        let pairs = [("X-App-Attest-Key-Id", "junk"), ("X-Firebase-AppCheck", "a.b.c")]
        #expect(Self.read(pairs, appAttest: false) == AttestationPresentation(appCheck: "a.b.c"))
        #expect(Self.read([("X-Firebase-AppCheck", "a"), ("X-Firebase-AppCheck", "b")], appCheck: false).isEmpty)
    }

    // MARK: The verdict

    static let attest = AttestationPresentation(appAttest: .init(keyID: keyID, assertion: [1]))
    static let check = AttestationPresentation(appCheck: "t")
    static let both = AttestationPresentation(appAttest: .init(keyID: keyID, assertion: [1]), appCheck: "t")

    static func decide(_ mode: RouteAttestation, _ p: AttestationPresentation, _ a: ProofResult?, _ c: ProofResult?) -> AttestationVerdict {
        AttestationVerdict.decide(mode, presented: p, appAttest: a, appCheck: c)
    }

    @Test(arguments: [RouteAttestation.required, .optional])
    func validProofsPassAppAttestFirst(_ mode: RouteAttestation) {
        #expect(Self.decide(mode, Self.attest, .valid(identity: "K"), nil) == .pass(.appAttest, keyID: "K"))
        #expect(Self.decide(mode, Self.check, nil, .valid(identity: "app")) == .pass(.appCheck, keyID: nil))
        #expect(Self.decide(mode, Self.both, .valid(identity: "K"), .valid(identity: "app")) == .pass(.appAttest, keyID: "K"))
        // Either valid proof is enough.
        #expect(Self.decide(mode, Self.both, .replayed, .valid(identity: "app")) == .pass(.appCheck, keyID: nil))
        #expect(Self.decide(mode, Self.both, .valid(identity: "K"), .invalid(step: "token_expired")) == .pass(.appAttest, keyID: "K"))
    }

    @Test func nothingPresentedIsRefusedWhenRequiredAndPassesWhenOptional() {
        #expect(Self.decide(.required, AttestationPresentation(), nil, nil) == .refuse(.attestationRequired, .none, step: "missing"))
        #expect(Self.decide(.optional, AttestationPresentation(), nil, nil) == .pass(.none, keyID: nil))
    }

    @Test(arguments: [RouteAttestation.required, .optional])
    func aBadProofIsRefusedOnEveryRoute(_ mode: RouteAttestation) {
        #expect(Self.decide(mode, Self.attest, .replayed, nil) == .refuse(.assertionReplayed, .appAttest, step: "counter"))
        #expect(Self.decide(mode, Self.attest, .invalid(step: "signature"), nil) == .refuse(.attestationInvalid, .appAttest, step: "signature"))
        #expect(Self.decide(mode, Self.attest, .unavailable, nil) == .refuse(.stateUnavailable, .appAttest, step: "store_unavailable"))
        #expect(Self.decide(mode, Self.check, nil, .invalid(step: "token_expired")) == .refuse(.attestationInvalid, .appCheck, step: "token_expired"))
        // Both bad: App Attest's failure answers.
        #expect(Self.decide(mode, Self.both, .replayed, .invalid(step: "token_expired")) == .refuse(.assertionReplayed, .appAttest, step: "counter"))
        let malformed = AttestationPresentation(malformed: .init(kind: .appCheck, step: "header_repeated"))
        #expect(Self.decide(mode, malformed, nil, nil) == .refuse(.attestationMalformed, .appCheck, step: "header_repeated"))
    }

    @Test func onlyAPresentedProofThatFailedCostsAFailureToken() {
        let malformed = AttestationPresentation(malformed: .init(kind: .appAttest, step: "key_id_encoding"))
        #expect(Self.decide(.required, Self.attest, .invalid(step: "unknown_key"), nil).isFailedProof)
        #expect(Self.decide(.optional, Self.attest, .replayed, nil).isFailedProof)
        #expect(Self.decide(.required, Self.check, nil, .invalid(step: "token_expired")).isFailedProof)
        #expect(Self.decide(.required, malformed, nil, nil).isFailedProof)
        #expect(!Self.decide(.required, AttestationPresentation(), nil, nil).isFailedProof, "nothing presented")
        #expect(!Self.decide(.required, Self.attest, .unavailable, nil).isFailedProof, "the store's fault")
        #expect(!Self.decide(.required, Self.attest, .valid(identity: "K"), nil).isFailedProof)
        #expect(!Self.decide(.optional, AttestationPresentation(), nil, nil).isFailedProof)
    }

    @Test func statusesAndCodes() {
        #expect(RelayError.attestationRequired.status == 401 && RelayError.attestationRequired.code == "attestation_required")
        #expect(RelayError.attestationInvalid.status == 401 && RelayError.attestationInvalid.code == "attestation_invalid")
        #expect(RelayError.assertionReplayed.status == 401 && RelayError.assertionReplayed.code == "assertion_replayed")
        #expect(RelayError.attestationMalformed.status == 400)
        #expect(RelayError.keyAlreadyRegistered.status == 409 && RelayError.keyAlreadyRegistered.code == "key_already_registered")
    }

    @Test func metricLabels() {
        #expect(AttestationVerdict.pass(.appAttest, keyID: "K").labels == ("app_attest", "valid"))
        #expect(AttestationVerdict.pass(.none, keyID: nil).labels == ("none", "absent"))
        #expect(AttestationVerdict.refuse(.attestationRequired, .none, step: "missing").labels == ("none", "missing"))
        #expect(AttestationVerdict.refuse(.assertionReplayed, .appAttest, step: "counter").labels == ("app_attest", "replayed"))
        #expect(AttestationVerdict.refuse(.attestationInvalid, .appCheck, step: "x").labels == ("app_check", "invalid"))
        #expect(AttestationVerdict.refuse(.stateUnavailable, .appAttest, step: "x").labels == ("app_attest", "unavailable"))
    }

    // MARK: Applying a verdict

    static func record(identity: String?) -> ExchangeRecord {
        var r = ExchangeRecord(requestID: "r", method: "POST", path: "/v1/x", route: "/v1/", upstream: "u", clientAddress: "192.0.2.7",
                               startedAt: Instant(nanoseconds: 0))
        r.identity = identity
        return r
    }

    static func admission(identity: String?, budgetKey: String?) -> ExchangeAdmission {
        ExchangeAdmission(store: MemoryAdmissionStore(rateLimits: .init(), budgets: nil), address: "192.0.2.7", identity: identity,
                          budgetKey: budgetKey, budgets: nil, routeMaxTokens: nil, wallClock: { 0 })
    }

    @Test func appAttestMakesTheDeviceTheIdentityOnAnAnonymousRoute() {
        var record = Self.record(identity: nil)
        var admission: ExchangeAdmission? = Self.admission(identity: nil, budgetKey: "192.0.2.7")
        #expect(AttestationVerdict.pass(.appAttest, keyID: "K").apply(to: &record, admission: &admission) == nil)
        #expect(record.identity == "appattest:K")
        #expect(admission?.identity == "appattest:K")
        #expect(admission?.budgetKey == "appattest:K")
        #expect(record.attestation == "app_attest")
        #expect(record.logFields.contains { $0.0 == "attestation" && $0.1 == .string("app_attest") })
    }

    @Test func anAuthenticatedIdentityStaysAndAppCheckKeepsTheAddress() {
        var signedIn = Self.record(identity: "jwt:user-1")
        var a1: ExchangeAdmission? = Self.admission(identity: "jwt:user-1", budgetKey: "jwt:user-1")
        _ = AttestationVerdict.pass(.appAttest, keyID: "K").apply(to: &signedIn, admission: &a1)
        #expect(signedIn.identity == "jwt:user-1" && a1?.identity == "jwt:user-1" && a1?.budgetKey == "jwt:user-1")

        var anonymous = Self.record(identity: nil)
        var a2: ExchangeAdmission? = Self.admission(identity: nil, budgetKey: "192.0.2.7")
        _ = AttestationVerdict.pass(.appCheck, keyID: nil).apply(to: &anonymous, admission: &a2)
        #expect(anonymous.identity == nil && a2?.identity == nil && a2?.budgetKey == "192.0.2.7")
        #expect(anonymous.attestation == "app_check")

        // No budgets: no budget key appears.
        var a3: ExchangeAdmission? = Self.admission(identity: nil, budgetKey: nil)
        var fresh = Self.record(identity: nil)
        _ = AttestationVerdict.pass(.appAttest, keyID: "K").apply(to: &fresh, admission: &a3)
        #expect(a3?.identity == "appattest:K" && a3?.budgetKey == nil)
    }

    @Test func aRefusalNamesTheStepInTheLogOnly() {
        var record = Self.record(identity: nil)
        var admission: ExchangeAdmission? = nil
        let error = AttestationVerdict.refuse(.attestationInvalid, .appAttest, step: "signature").apply(to: &record, admission: &admission)
        #expect(error == .attestationInvalid)
        #expect(!String(decoding: error!.jsonBody, as: UTF8.self).contains("signature"))
        #expect(record.logFields.contains { $0.0 == "attestation_step" && $0.1 == .string("signature") })
    }
}

/// The assertion check's steps between the store's answers, with the software device's assertions.
@Suite struct AssertionCheckTests {
    static let now: Int64 = 1_767_225_600
    static let apple = AttestationConfiguration.Apple(appIds: ["ABCDE12345.com.example.relay"])
    static let hash = [UInt8](repeating: 0x5A, count: 32)

    static func stored(_ device: SoftwareAppAttestDevice, appID: String? = nil, environment: String = "production") -> StoreAnswer<RegisteredAppAttestKey> {
        .done(RegisteredAppAttestKey(keyID: Base64URL.encode(device.keyId), publicKey: device.publicKey, appID: appID ?? device.appId,
                                     environment: environment, receipt: [], counter: 3, registeredAt: now))
    }

    @Test func aSoundAssertionAsksToRaiseTheCounterToItsOwn() {
        let device = SoftwareAppAttestDevice(now: Self.now)
        let assertion = device.assertion(clientDataHash: Self.hash, counter: 9)
        #expect(AssertionCheck.afterLookup(Self.stored(device), assertion: assertion, clientDataHash: Self.hash, apple: Self.apple) == .raise(to: 9))
    }

    @Test func refusalsBeforeTheCounter() {
        let device = SoftwareAppAttestDevice(now: Self.now)
        let assertion = device.assertion(clientDataHash: Self.hash, counter: 9)
        func after(_ answer: StoreAnswer<RegisteredAppAttestKey>, _ bytes: [UInt8] = assertion, hash: [UInt8] = Self.hash) -> AssertionCheck.Next {
            AssertionCheck.afterLookup(answer, assertion: bytes, clientDataHash: hash, apple: Self.apple)
        }
        #expect(after(.unknown) == .done(.invalid(step: "unknown_key")))
        #expect(after(.unavailable) == .done(.unavailable))
        #expect(after(Self.stored(device, appID: "ABCDE12345.com.example.gone")) == .done(.invalid(step: "app_id_not_configured")))
        #expect(after(Self.stored(device, environment: "development")) == .done(.invalid(step: "environment")))
        // Signed over other client data, or by another key, or for another app: the verifier's step.
        guard case .done(.invalid) = after(Self.stored(device), hash: [UInt8](repeating: 0, count: 32)) else { Issue.record("other data passed"); return }
        guard case .done(.invalid) = after(Self.stored(SoftwareAppAttestDevice(now: Self.now))) else { Issue.record("another key passed"); return }
        let otherApp = device.assertion(clientDataHash: Self.hash, counter: 9, rpId: "ABCDE12345.com.example.other")
        guard case .done(.invalid) = after(Self.stored(device), otherApp) else { Issue.record("another app id passed"); return }
        guard case .done(.invalid) = after(Self.stored(device), [0xA0]) else { Issue.record("an empty map passed"); return }
    }

    @Test func theCountersAnswer() {
        #expect(AssertionCheck.afterRaise(.raised, keyID: "K") == .valid(identity: "K"))
        #expect(AssertionCheck.afterRaise(.notAbove, keyID: "K") == .replayed)
        #expect(AssertionCheck.afterRaise(.otherSubject, keyID: "K") == .invalid(step: "key_of_another_account"))
        #expect(AssertionCheck.afterRaise(.unavailable, keyID: "K") == .unavailable)
    }
}
