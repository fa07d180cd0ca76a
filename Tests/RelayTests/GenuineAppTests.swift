import Attestation
import AttestationTestSupport
import Auth
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import RelayWire
import Support
import TestHarness
import Testing
import TestSupportCore

/// App Attest and App Check through the real relay (README, "Genuine app"): a software App Attest device with its
/// own root CA registers through the challenge and register endpoints and asserts requests exactly as a device
/// does; App Check tokens are minted with the local test key set. Every refusal is checked to reach no provider.
@Suite("Genuine app: App Attest and App Check through the relay")
struct GenuineAppTests {
    static let appId = "ABCDE12345.com.example.relay"
    /// The device's clock and the relay's wall clock: certificates are issued around it.
    static let now: Int64 = 1_767_225_600

    /// One CA for the suite's devices (making one costs two key generations).
    static let ca = TestAppAttestCA(notBefore: now - 365 * 86_400, notAfter: now + 3650 * 86_400)

    static func device(appId: String = appId, environment: AppAttestEnvironment = .production, now: Int64 = now) -> SoftwareAppAttestDevice {
        SoftwareAppAttestDevice(appId: appId, environment: environment, now: now, ca: ca)
    }

    /// A relay with App Attest (trusting the test root) on `/v1/` (auth none), in front of a recording upstream.
    final class Harness: Sendable {
        let requests = Mailbox<RecordedRequest>()
        let relay: RelayFixture
        /// The relay's loops' clock (challenge expiry with the memory store, timers); a real one with `realClock`.
        let clock: ManualClock

        init(mode: RouteAttestation = .required, environment: AttestationConfiguration.Environment = .production, realClock: Bool = false,
             configure: (inout RelayConfiguration) -> Void = { _ in }) throws {
            let requests = self.requests
            let upstream = try ScriptedUpstream { connection in
                while let request = try? connection.readRequest(timeout: 30) {
                    requests.put(request)
                    try connection.writeHead(status: 200, headers: sseHead)
                    try connection.writeChunk("data: ok\n\n")
                    try connection.writeLastChunk()
                }
            }
            let clock = ManualClock()
            self.clock = clock
            relay = try RelayFixture(upstream: upstream, fixedWallClock: Double(GenuineAppTests.now),
                                     clock: realClock ? MonotonicClock() : clock) { config in
                config.attestation.apple = .init(appIds: [GenuineAppTests.appId], environment: environment,
                                                 rootCAPEM: GenuineAppTests.ca.rootPEM)
                config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .none)]
                config.routes[0].attestation = mode
                configure(&config)
            }
        }
    }

    struct Answer {
        var status: Int
        var body: String
        var head: ResponseHeadResult
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
        var code: String? { (json["error"] as? [String: Any])?["code"] as? String }
    }

    static func call(_ port: Int, method: String = "POST", path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws -> Answer {
        let client = try TestClient(port: port)
        defer { client.close() }
        try client.sendRequest(method: method, path: path, headers: headers + [("Content-Type", "application/json")], body: body)
        let head = try client.readHead(timeout: 10)
        return Answer(status: head.status, body: String(decoding: try client.readBody(head: head, timeout: 10), as: UTF8.self), head: head)
    }

    static func challenge(_ port: Int) throws -> String {
        let answer = try call(port, path: AttestationWire.challengePath)
        #expect(answer.status == 200, "\(answer.body)")
        #expect(answer.json["expiresInSeconds"] as? Int != nil)
        return try #require(answer.json["challenge"] as? String)
    }

    static func registrationBody(keyId: String, attestation: [UInt8], challenge: String) -> [UInt8] {
        let object = ["keyId": keyId, "attestation": Data(attestation).base64EncodedString(), "challenge": challenge]
        return Array(try! JSONSerialization.data(withJSONObject: object))
    }

    /// Registers `device` with a fresh challenge (or `challenge`), optionally tampered.
    static func register(_ port: Int, _ device: SoftwareAppAttestDevice, challenge: String? = nil,
                         tampering: AttestationTampering = AttestationTampering()) throws -> Answer {
        let challenge = try challenge ?? Self.challenge(port)
        let attestation = device.attestation(clientDataHash: TestSHA256.digest(Array(challenge.utf8)), tampering: tampering)
        return try call(port, path: AttestationWire.registerPath,
                        body: registrationBody(keyId: Data(device.keyId).base64EncodedString(), attestation: attestation, challenge: challenge))
    }

    /// The headers of an assertion over this request, as `AppAttestProvider` sends them.
    static func assertionHeaders(_ device: inout SoftwareAppAttestDevice, method: String = "POST", path: String, body: [UInt8]) -> [(String, String)] {
        let hash = TestSHA256.digest(AttestationWire.clientData(method: method, pathWithQuery: path, body: body))
        return [(AttestationWire.keyIDHeader, Data(device.keyId).base64EncodedString()),
                (AttestationWire.assertionHeader, Data(device.assertion(clientDataHash: hash)).base64EncodedString())]
    }

    static func headers(keyId: [UInt8], assertion: [UInt8]) -> [(String, String)] {
        [(AttestationWire.keyIDHeader, Data(keyId).base64EncodedString()), (AttestationWire.assertionHeader, Data(assertion).base64EncodedString())]
    }

    static let path = "/v1/chat/completions"

    // MARK: App Attest

    @Test("register, then assert: relayed without the attestation headers, logged and counted as app_attest")
    func registerThenAssert() throws {
        let h = try Harness()
        var device = Self.device()
        let registered = try Self.register(h.relay.port, device)
        #expect(registered.status == 201, "\(registered.body)")
        #expect(registered.json["keyId"] as? String == Data(device.keyId).base64EncodedString())

        let asserted = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody)
        #expect(asserted.status == 200, "\(asserted.body)")
        let forwarded = try h.requests.take()
        // Checked over the body as received; the relay's own edits (the usage request) come after.
        #expect(forwarded.body.starts(with: chatBody.dropLast()))
        for name in [AttestationWire.keyIDHeader, AttestationWire.assertionHeader] {
            #expect(forwarded.headerValues(name).isEmpty, "\(name) forwarded to the provider")
        }
        // A second request with the next assertion passes too (counter 2 > 1).
        let again = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody)
        #expect(again.status == 200)
        _ = try h.requests.take()

        let keyID = Base64URL.encode(device.keyId)
        try h.relay.waitUntilIdle()
        #expect(h.relay.logs.lines.contains { $0.contains(#""status":200"#) && $0.contains(#""attestation":"app_attest""#)
            && $0.contains(#""identity":"appattest:\#(keyID)""#) })
        let metrics = h.relay.server.metrics.render()
        #expect(metrics.contains(#"sse_relay_attestations_total{kind="app_attest",result="valid"} 2"#), "\(metrics)")
        #expect(metrics.contains(#"sse_relay_attestation_registrations_total{result="registered"} 1"#))
        #expect(h.relay.logs.lines.contains { $0.contains(#""status":201"#) && $0.contains(#""registration":"registered""#)
            && $0.contains(#""identity":"appattest:\#(keyID)""#) })
        // The assertion never appears in a log line.
        let assertionText = Self.assertionHeaders(&device, path: Self.path, body: chatBody)[1].1
        #expect(!h.relay.logs.lines.contains { $0.contains(assertionText) || $0.contains("X-App-Attest") })
    }

    @Test("a required route refuses a request without a proof (401 attestation_required); the provider is not called")
    func requiredWithoutProof() throws {
        let h = try Harness()
        let answer = try Self.call(h.relay.port, path: Self.path, body: chatBody)
        #expect(answer.status == 401)
        #expect(answer.code == "attestation_required")
        #expect(h.requests.count == 0)
        #expect(h.relay.server.metrics.render().contains(#"sse_relay_attestations_total{kind="none",result="missing"} 1"#))
        // Not open to anyone, though its auth is "none": no start-up warning saying so.
        #expect(!h.relay.logs.lines.contains { $0.contains("spends the provider key") })
    }

    @Test("replay, counter rollback and the wrong key id are refused")
    func replayRollbackWrongKey() throws {
        let h = try Harness()
        let device = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        let hash = TestSHA256.digest(AttestationWire.clientData(method: "POST", pathWithQuery: Self.path, body: chatBody))

        let five = Self.headers(keyId: device.keyId, assertion: device.assertion(clientDataHash: hash, counter: 5))
        #expect(try Self.call(h.relay.port, path: Self.path, headers: five, body: chatBody).status == 200)
        _ = try h.requests.take()
        let replay = try Self.call(h.relay.port, path: Self.path, headers: five, body: chatBody)
        #expect(replay.status == 401 && replay.code == "assertion_replayed", "\(replay.body)")
        let rollback = try Self.call(h.relay.port, path: Self.path, headers: Self.headers(keyId: device.keyId, assertion: device.assertion(clientDataHash: hash, counter: 4)),
                                     body: chatBody)
        #expect(rollback.status == 401 && rollback.code == "assertion_replayed")

        // Another registered device's key id with this device's assertion: the signature does not verify.
        let other = Self.device()
        #expect(try Self.register(h.relay.port, other).status == 201)
        let swapped = try Self.call(h.relay.port, path: Self.path, headers: Self.headers(keyId: other.keyId, assertion: device.assertion(clientDataHash: hash, counter: 6)),
                                    body: chatBody)
        #expect(swapped.status == 401 && swapped.code == "attestation_invalid")
        // A key id never registered.
        let unknown = try Self.call(h.relay.port, path: Self.path, headers: Self.headers(keyId: Self.device().keyId, assertion: device.assertion(clientDataHash: hash, counter: 7)),
                                    body: chatBody)
        #expect(unknown.status == 401 && unknown.code == "attestation_invalid")
        // The device's own next assertion still passes: no refusal above raised its counter.
        #expect(try Self.call(h.relay.port, path: Self.path, headers: Self.headers(keyId: device.keyId, assertion: device.assertion(clientDataHash: hash, counter: 6)),
                              body: chatBody).status == 200)
        #expect(h.requests.count == 1)
        try h.relay.waitUntilIdle()
        #expect(h.relay.logs.lines.contains { $0.contains(#""attestation_step":"counter""#) })
        #expect(h.relay.logs.lines.contains { $0.contains(#""attestation_step":"unknown_key""#) })
    }

    @Test("the body, path, query or method changed after signing: 401 attestation_invalid")
    func changedAfterSigning() throws {
        let h = try Harness()
        var device = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        let other = Array(#"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8)
        let cases: [(signedMethod: String, signedPath: String, signedBody: [UInt8], sentPath: String)] = [
            ("POST", Self.path, chatBody, Self.path),            // body swapped below
            ("POST", Self.path, chatBody, "/v1/responses"),
            ("POST", Self.path, chatBody, Self.path + "?a=1"),
            ("PUT", Self.path, chatBody, Self.path),
        ]
        for (i, c) in cases.enumerated() {
            let headers = Self.assertionHeaders(&device, method: c.signedMethod, path: c.signedPath, body: c.signedBody)
            let answer = try Self.call(h.relay.port, path: c.sentPath, headers: headers, body: i == 0 ? other : chatBody)
            #expect(answer.status == 401 && answer.code == "attestation_invalid", "case \(i): \(answer.body)")
        }
        #expect(h.requests.count == 0)
        // Signed as sent, with a query: passes.
        let withQuery = Self.path + "?a=1"
        #expect(try Self.call(h.relay.port, path: withQuery, headers: Self.assertionHeaders(&device, path: withQuery, body: other), body: other).status == 200)
    }

    @Test("registration: the wrong app id, the wrong environment, an expired leaf → 401 attestation_invalid, step logged")
    func badRegistrations() throws {
        let h = try Harness()
        let wrongApp = try Self.register(h.relay.port, Self.device(appId: "ABCDE12345.com.example.other"))
        #expect(wrongApp.status == 401 && wrongApp.code == "attestation_invalid")
        let development = try Self.register(h.relay.port, Self.device(environment: .development))
        #expect(development.status == 401 && development.code == "attestation_invalid")
        var expired = AttestationTampering()
        expired.leafValidity = (Self.now - 4 * 86_400, Self.now - 86_400)
        let expiredLeaf = try Self.register(h.relay.port, Self.device(), tampering: expired)
        #expect(expiredLeaf.status == 401 && expiredLeaf.code == "attestation_invalid")
        for answer in [wrongApp, development, expiredLeaf] {
            #expect(!answer.body.contains("rp_id") && !answer.body.contains("aaguid") && !answer.body.contains("certificate"), "the step reached the client")
        }
        try eventually("three refusals logged") { h.relay.logs.lines.filter { $0.contains(#""attestation_step""#) }.count == 3 }
        #expect(h.relay.server.metrics.render().contains(#"sse_relay_attestation_registrations_total{result="invalid"} 3"#))
    }

    @Test("a development relay takes development keys; a key registered there is refused once the relay says production")
    func environments() throws {
        let dev = try Harness(environment: .development)
        #expect(try Self.register(dev.relay.port, Self.device(environment: .development)).status == 201)
        #expect(try Self.register(dev.relay.port, Self.device(environment: .production)).status == 401)
    }

    @Test("challenges: never issued, reused, expired (manual clock) → 401; one just before expiry passes")
    func challenges() throws {
        let h = try Harness()
        let never = try Self.register(h.relay.port, Self.device(), challenge: Base64URL.encode([UInt8](repeating: 7, count: 32)))
        #expect(never.status == 401 && never.code == "attestation_invalid")

        let challenge = try Self.challenge(h.relay.port)
        #expect(Base64URL.decode(challenge)?.count == 32)
        #expect(try Self.register(h.relay.port, Self.device(), challenge: challenge).status == 201)
        let reused = try Self.register(h.relay.port, Self.device(), challenge: challenge)
        #expect(reused.status == 401 && reused.code == "attestation_invalid")

        let late = try Self.challenge(h.relay.port)
        let justInTime = try Self.challenge(h.relay.port)
        h.clock.advance(bySeconds: 299.9)
        #expect(try Self.register(h.relay.port, Self.device(), challenge: justInTime).status == 201)
        h.clock.advance(bySeconds: 0.1)
        let expired = try Self.register(h.relay.port, Self.device(), challenge: late)
        #expect(expired.status == 401 && expired.code == "attestation_invalid")
        #expect(h.relay.logs.lines.filter { $0.contains(#""attestation_step":"challenge""#) }.count == 3)

        // A challenge is 32 fresh random bytes each time.
        let a = try Self.challenge(h.relay.port), b = try Self.challenge(h.relay.port)
        #expect(a != b)
    }

    @Test("a key id registered twice: 409 key_already_registered")
    func registeredTwice() throws {
        let h = try Harness()
        let device = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        let again = try Self.register(h.relay.port, device)
        #expect(again.status == 409 && again.code == "key_already_registered")
    }

    @Test("the endpoints: POST only, rate-limited per address, absent without attestation.apple")
    func endpoints() throws {
        let h = try Harness { config in
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 1, burst: 2)
        }
        let get = try Self.call(h.relay.port, method: "GET", path: AttestationWire.challengePath)
        #expect(get.status == 405)
        _ = try Self.challenge(h.relay.port)
        _ = try Self.challenge(h.relay.port)
        let limited = try Self.call(h.relay.port, path: AttestationWire.challengePath)
        #expect(limited.status == 429)
        #expect(limited.head.header("Retry-After") != nil)
        let limitedRegister = try Self.call(h.relay.port, path: AttestationWire.registerPath, body: Array("{}".utf8))
        #expect(limitedRegister.status == 429)

        // Without attestation.apple the paths are nobody's: routed like any other (here, to no route).
        let plain = try RelayFixture(upstream: try oneEventUpstream()) { config in
            config.routes = [.init(prefix: "/v1/chat/completions", upstream: "test", exact: true)]
        }
        let absent = try Self.call(plain.port, path: AttestationWire.challengePath)
        #expect(absent.status == 404 && absent.code == "route_not_found")
    }

    @Test("an optional route passes a request without a proof, and still refuses a bad one")
    func optionalRoute() throws {
        let h = try Harness(mode: .optional)
        #expect(try Self.call(h.relay.port, path: Self.path, body: chatBody).status == 200)
        _ = try h.requests.take()
        var stranger = Self.device()
        let bad = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&stranger, path: Self.path, body: chatBody), body: chatBody)
        #expect(bad.status == 401 && bad.code == "attestation_invalid")
        try h.relay.waitUntilIdle()
        #expect(h.relay.logs.lines.contains { $0.contains(#""attestation":"none""#) })
        #expect(h.relay.server.metrics.render().contains(#"sse_relay_attestations_total{kind="none",result="absent"} 1"#))
        #expect(h.relay.logs.lines.contains { $0.contains("spends the provider key") }, "optional leaves the route open: warned")
    }

    @Test("a presented proof that fails costs the address a token of its failure bucket, as a bad credential does; no proof costs nothing")
    func failedProofsCostTheFailureBucket() throws {
        let h = try Harness { config in
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 1, burst: 2)
        }
        var device = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        // No proof on a required route: refused, and free (nothing was tried, the store was not asked).
        for _ in 0..<3 {
            #expect(try Self.call(h.relay.port, path: Self.path, body: chatBody).code == "attestation_required")
        }
        // A key this relay never registered: two refusals empty the bucket (the manual clock refills nothing), then the
        // address gets 429 before its proof is looked up, whatever it presents.
        var stranger = Self.device()
        for _ in 0..<2 {
            let bad = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&stranger, path: Self.path, body: chatBody), body: chatBody)
            #expect(bad.status == 401 && bad.code == "attestation_invalid")
        }
        let limited = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&stranger, path: Self.path, body: chatBody), body: chatBody)
        #expect(limited.status == 429 && limited.head.header("Retry-After") != nil, "\(limited.status) \(limited.body)")
        let genuine = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody)
        #expect(genuine.status == 429, "the address's bucket, whatever it presents next")
        #expect(h.requests.count == 0)
    }

    @Test("auth none: limits are kept per device (appattest:<keyId>), not per address")
    func identityIsTheDevice() throws {
        let h = try Harness { config in
            config.rateLimits.perIdentity = RateLimits(requestsPerMinute: 1, burst: 1)
        }
        var a = Self.device(), b = Self.device()
        #expect(try Self.register(h.relay.port, a).status == 201)
        #expect(try Self.register(h.relay.port, b).status == 201)
        #expect(try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&a, path: Self.path, body: chatBody), body: chatBody).status == 200)
        #expect(try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&b, path: Self.path, body: chatBody), body: chatBody).status == 200)
        let second = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&a, path: Self.path, body: chatBody), body: chatBody)
        #expect(second.status == 429, "device a's bucket is its own")
    }

    @Test("with auth, a key serves the first account that asserts with it: another account's proof is refused, and its own key serves it")
    func aKeyServesOneAccount() throws {
        let alice = "alice-token-0123456789abcdef", bob = "bob-token-0123456789abcdef"
        let h = try Harness { config in
            config.clients.tokens = [.init(id: "alice", sha256Hex: ClientAuthTests.sha256Hex(alice)),
                                     .init(id: "bob", sha256Hex: ClientAuthTests.sha256Hex(bob))]
            config.routes[0].auth = .token
        }
        var phone = Self.device()
        #expect(try Self.register(h.relay.port, phone).status == 201)
        func ask(_ token: String, _ device: inout SoftwareAppAttestDevice) throws -> Answer {
            try Self.call(h.relay.port, path: Self.path,
                          headers: [("Authorization", "Bearer \(token)")] + Self.assertionHeaders(&device, path: Self.path, body: chatBody),
                          body: chatBody)
        }
        #expect(try ask(alice, &phone).status == 200)
        let refused = try ask(bob, &phone)
        #expect(refused.status == 401 && refused.code == "attestation_invalid", "\(refused.body)")
        #expect(try ask(alice, &phone).status == 200, "the refused proof changed nothing for the key's own account")
        // Bob registers a key of his own (the client library does so on attestation_invalid), and it serves him.
        var bobsKey = Self.device()
        #expect(try Self.register(h.relay.port, bobsKey).status == 201)
        #expect(try ask(bob, &bobsKey).status == 200)
        #expect(try ask(alice, &bobsKey).status == 401)
        #expect(h.requests.count == 3)
        try h.relay.waitUntilIdle()
        #expect(h.relay.logs.lines.filter { $0.contains(#""attestation_step":"key_of_another_account""#) }.count == 2)
    }

    @Test("malformed input: bad base64, a header twice, huge or garbage CBOR, a bad registration body → 400/401/413, never a crash")
    func malformedInput() throws {
        let h = try Harness()
        var device = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        let id = Data(device.keyId).base64EncodedString()
        let hugeLength: [UInt8] = [0xA2, 0x69] + Array("signature".utf8) + [0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        let deep = [UInt8](repeating: 0x81, count: 900) + [0x00]
        let cases: [(headers: [(String, String)], status: Int, code: String)] = [
            ([(AttestationWire.keyIDHeader, "not base64!"), (AttestationWire.assertionHeader, "oQ==")], 400, "attestation_malformed"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, "%%%")], 400, "attestation_malformed"),
            ([(AttestationWire.keyIDHeader, id)], 400, "attestation_malformed"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, "oQ==")], 400, "attestation_malformed"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, String(repeating: "A", count: 4000))], 400, "attestation_malformed"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, Data(hugeLength).base64EncodedString())], 401, "attestation_invalid"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, Data(deep).base64EncodedString())], 401, "attestation_invalid"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, Data([0xFF, 0x00, 0x13]).base64EncodedString())], 401, "attestation_invalid"),
            ([(AttestationWire.keyIDHeader, id), (AttestationWire.assertionHeader, Data([0xA1, 0x60]).base64EncodedString())], 401, "attestation_invalid"),
        ]
        for (i, c) in cases.enumerated() {
            let answer = try Self.call(h.relay.port, path: Self.path, headers: c.headers, body: chatBody)
            #expect(answer.status == c.status && answer.code == c.code, "case \(i): \(answer.status) \(answer.body)")
        }
        // A truncated real assertion.
        let hash = TestSHA256.digest(AttestationWire.clientData(method: "POST", pathWithQuery: Self.path, body: chatBody))
        let whole = device.assertion(clientDataHash: hash, counter: 50)
        for cut in [1, whole.count / 2, whole.count - 1] {
            let answer = try Self.call(h.relay.port, path: Self.path, headers: Self.headers(keyId: device.keyId, assertion: Array(whole.prefix(cut))), body: chatBody)
            #expect(answer.status == 401 && answer.code == "attestation_invalid", "cut at \(cut)")
        }
        // Registration bodies.
        let register: [([UInt8], Int, String)] = [
            (Array("not json".utf8), 400, "attestation_malformed"),
            (Array(#"{"keyId": 5}"#.utf8), 400, "attestation_malformed"),
            (Array(#"{"keyId":"\#(id)","keyId":"\#(id)","attestation":"oQ==","challenge":"c"}"#.utf8), 400, "attestation_malformed"),
            (Array(#"{"keyId":"\#(id)","k\u0065yId":"\#(id)","attestation":"oQ==","challenge":"c"}"#.utf8), 400, "attestation_malformed"),
            (Self.registrationBody(keyId: "short", attestation: [1], challenge: "c"), 400, "attestation_malformed"),
            (Self.registrationBody(keyId: id, attestation: [UInt8](repeating: 0xA1, count: 17_000), challenge: "c"), 413, "attestation_too_large"),
            (Self.registrationBody(keyId: id, attestation: hugeLength, challenge: try Self.challenge(h.relay.port)), 401, "attestation_invalid"),
            (Self.registrationBody(keyId: id, attestation: deep, challenge: try Self.challenge(h.relay.port)), 401, "attestation_invalid"),
        ]
        for (i, (body, status, code)) in register.enumerated() {
            let answer = try Self.call(h.relay.port, path: AttestationWire.registerPath, body: body)
            #expect(answer.status == status && answer.code == code, "registration \(i): \(answer.status) \(answer.body)")
        }
        // Still serving, the device's key still good.
        #expect(try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody).status == 200)
        #expect(h.requests.count == 1)
    }
}

extension GenuineAppTests {
    /// A stream started with App Attest on an `auth: "none"` route belongs to that device: a resume or a stop needs
    /// an assertion of the same device over the resume's own request; no proof, another device's proof, or an
    /// assertion signed for another request get 404, as for an id never issued, and the stream goes on.
    @Test("an attested stream is resumed and stopped only with its own device's assertion")
    func anAttestedStreamNeedsItsDeviceToResume() throws {
        let h = try Harness { config in
            config.routes[0].resume = RouteResume()
            config.routes[0].heartbeatSeconds = 0
        }
        var device = Self.device()
        var other = Self.device()
        #expect(try Self.register(h.relay.port, device).status == 201)
        #expect(try Self.register(h.relay.port, other).status == 201)
        let started = try Self.call(h.relay.port, path: Self.path, headers: Self.assertionHeaders(&device, path: Self.path, body: chatBody),
                                    body: chatBody)
        #expect(started.status == 200)
        _ = try h.requests.take()
        let id = try #require(started.head.headerValues("X-Relay-Stream").first)
        let resume = "/v1/relay/streams/\(id)?offset=0", stop = "/v1/relay/streams/\(id)"

        #expect(try Self.call(h.relay.port, method: "GET", path: resume).status == 404)
        #expect(try Self.call(h.relay.port, method: "GET", path: resume,
                              headers: Self.assertionHeaders(&other, method: "GET", path: resume, body: [])).status == 404)
        #expect(try Self.call(h.relay.port, method: "GET", path: resume,
                              headers: Self.assertionHeaders(&device, method: "GET", path: "/v1/relay/streams/\(id)?offset=1", body: [])).status == 404)
        #expect(try Self.call(h.relay.port, method: "DELETE", path: stop).status == 404)
        #expect(try Self.call(h.relay.port, method: "DELETE", path: stop,
                              headers: Self.assertionHeaders(&other, method: "DELETE", path: stop, body: [])).status == 404)

        let resumed = try Self.call(h.relay.port, method: "GET", path: resume,
                                    headers: Self.assertionHeaders(&device, method: "GET", path: resume, body: []))
        #expect(resumed.status == 200)
        #expect(resumed.body == "data: ok\n\n")
        #expect(try Self.call(h.relay.port, method: "DELETE", path: stop,
                              headers: Self.assertionHeaders(&device, method: "DELETE", path: stop, body: [])).status == 204)
        // Each miss is answered as an unknown id; the log says which check a refused proof failed (no proof twice,
        // an assertion over another path once). The other device's valid proofs failed no check: not its stream.
        try h.relay.waitUntilIdle()
        let misses = h.relay.logs.lines.filter { $0.contains(#""message":"stream""#) && $0.contains(#""result":"not_found""#) }
        #expect(misses.count == 5, "\(misses)")
        #expect(misses.filter { $0.contains(#""attestation_step":"missing""#) }.count == 2, "\(misses)")
        #expect(misses.filter { $0.contains(#""attestation_step":"#) }.count == 3, "\(misses)")
    }
}
