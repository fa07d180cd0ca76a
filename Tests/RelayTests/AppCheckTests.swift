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

/// Firebase App Check through the real relay: tokens minted with the local test key set (AuthTests/Fixtures), good
/// and bad in each claim the relay checks (README, "Genuine app").
@Suite("Genuine app: Firebase App Check")
struct AppCheckTests {
    static let now = ClientAuthTests.now
    static let project = "123456789012"
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f"
    static let issuer = "https://firebaseappcheck.googleapis.com/123456789012"

    static func token(_ overrides: [String: Any] = [:], alg: String = "RS256", kid: String = "rsa-1", key: String = "rsa-1.pem") -> String {
        testAppCheckToken(overrides, now: now, alg: alg, kid: kid, keyFile: key)
    }

    static func relay(_ requests: Mailbox<RecordedRequest>, mode: RouteAttestation = .required,
                      configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: try ClientAuthTests.upstream(requests), fixedWallClock: now) { config in
            config.attestation.firebase = .init(projectNumber: project, appIds: [appId], jwksURL: nil, keys: testJWKS())
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .none)]
            config.routes[0].attestation = mode
            configure(&config)
        }
    }

    static func post(_ relay: RelayFixture, token: String?) throws -> (status: Int, code: String?, client: TestClient) {
        let client = try relay.client()
        var headers = [("Content-Type", "application/json")]
        if let token { headers.append((AttestationWire.appCheckHeader, token)) }
        try client.sendRequest(path: "/v1/chat/completions", headers: headers, body: chatBody)
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        return (head.status, ClientAuthTests.code(body), client)
    }

    @Test("a good token passes, is not forwarded, and is logged as app_check under the client address")
    func goodToken() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests)
        let token = Self.token()
        let ok = try Self.post(relay, token: token)
        #expect(ok.status == 200)
        let forwarded = try requests.take()
        #expect(forwarded.headerValues(AttestationWire.appCheckHeader).isEmpty)
        #expect(!forwarded.rawHead.contains(subsequence: Array(token.utf8)))
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""attestation":"app_check""#) && !$0.contains(#""identity""#) })
        #expect(relay.server.metrics.render().contains(#"sse_relay_attestations_total{kind="app_check",result="valid"} 1"#))
        relay.assertNoSecretLeaks(clients: [ok.client], secrets: [token])
    }

    @Test("wrong iss, aud or sub, a bare-string aud, expired, too long-lived, not RS256, unknown key, tampered → 401 attestation_invalid")
    func badTokens() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests)
        var tampered = Array(Self.token(["sub": "1:123456789012:ios:ffff"]).utf8)
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let cases: [(String, String)] = [
            (Self.token(["iss": "https://firebaseappcheck.googleapis.com/999"]), "token_wrong_issuer"),
            (Self.token(["iss": "https://securetoken.google.com/123456789012"]), "token_wrong_issuer"),
            (Self.token(["aud": ["projects/999"]]), "token_wrong_audience"),
            (Self.token(["aud": "projects/\(Self.project)"]), "audience_not_array"),
            (Self.token(["sub": "1:123456789012:android:ffff"]), "app_not_allowed"),
            (Self.token(["exp": Self.now - 61, "iat": Self.now - 3600]), "token_expired"),
            (Self.token(["iat": Self.now + 120]), "token_issued_in_future"),
            (Self.token(["exp": Self.now + 8 * 86_400]), "token_lifetime_too_long"),
            (Self.token(alg: "ES256", kid: "ec-1", key: "ec-1.pem"), "token_unsupported_algorithm"),
            (Self.token(kid: "rsa-1", key: "rsa-2.pem"), "token_bad_signature"),
            (Self.token(kid: "rsa-9"), "token_unknown_key"),
            (String(decoding: tampered, as: UTF8.self), "token_bad_signature"),
            ("not.a.jwt", "token_malformed"),
        ]
        var clients: [TestClient] = []
        for (token, step) in cases {
            let answer = try Self.post(relay, token: token)
            #expect(answer.status == 401 && answer.code == "attestation_invalid", "\(step): \(answer.status) \(answer.code ?? "")")
            clients.append(answer.client)
        }
        #expect(requests.count == 0)
        try relay.waitUntilIdle()
        for (_, step) in cases {
            #expect(relay.logs.lines.contains { $0.contains(#""attestation_step":"\#(step)""#) }, "\(step) not logged")
        }
        relay.assertNoSecretLeaks(clients: clients, secrets: cases.map(\.0).filter { $0.count > 20 })
    }

    @Test("exp within skew passes (clients.jwt.skewSeconds applies); a token twice in one header list is malformed")
    func skewAndRepeats() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests) { config in
            config.clients.jwt = .init(settings: .init(algorithms: [.rs256], issuers: ["https://x"], audiences: ["y"], skewSeconds: 120),
                                       keys: testJWKS())
        }
        #expect(try Self.post(relay, token: Self.token(["exp": Self.now - 100, "iat": Self.now - 3600])).status == 200)
        #expect(try Self.post(relay, token: Self.token(["exp": Self.now - 121, "iat": Self.now - 3600])).status == 401)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [(AttestationWire.appCheckHeader, Self.token()), (AttestationWire.appCheckHeader, Self.token())],
                               body: chatBody)
        #expect(try client.readHead().status == 400)
    }

    @Test("keys from jwksURL: fetched in the background (the refresher clients.jwt uses), then tokens verify")
    func keysFromTheURL() throws {
        let fetched = Mailbox<String>()
        let jwks = try Data(contentsOf: testKeyFixtures.appendingPathComponent("jwks.json"))
        let keyServer = try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 10) {
                fetched.put(request.target)
                try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(jwks.count)")])
                try connection.write(Array(jwks))
            }
        }
        defer { keyServer.shutdown() }
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests) { config in
            config.attestation.firebase = .init(projectNumber: Self.project, appIds: [Self.appId], jwksURL: keyServer.baseURL + "/v1/jwks")
        }
        #expect(try fetched.take(timeout: 10) == "/v1/jwks")
        try eventually("the fetched keys are in use", timeout: 10) { try Self.post(relay, token: Self.token()).status == 200 }
        #expect(try Self.post(relay, token: Self.token(["sub": "1:123456789012:ios:other"])).status == 401)
    }
}
