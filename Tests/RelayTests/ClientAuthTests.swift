import Auth
import COpenSSL
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore

/// Only our app can spend the key, and no one can spend it all: authentication (static tokens, JWTs), rate
/// and concurrency limits, the model allowlist and max-tokens ceiling, the route allowlist and CORS, all
/// through the real server. Every failure path is also scanned for leaked credentials.
@Suite("Client authentication and abuse control")
struct ClientAuthTests {
    static let now: Double = 1_700_000_000
    static let appToken = "ios-app-token-7c1d4f0b9a2e"
    static let issuer = "https://issuer.example/project-1"
    static let audience = "relay-app"
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("AuthTests/Fixtures")

    static func sha256Hex(_ text: String) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        let bytes = Array(text.utf8)
        _ = cossl_sha256(bytes, bytes.count, &out)
        return out.map { String(format: "%02x", $0) }.joined()
    }

    static func jwt(kid: String = "rsa-1", key: String = "rsa-1.pem", _ overrides: [String: Any] = [:], alg: String = "RS256") -> String {
        var claims: [String: Any] = ["iss": issuer, "aud": audience, "sub": "user-42", "exp": now + 600, "iat": now - 10]
        for (k, v) in overrides { if v is NSNull { claims[k] = nil } else { claims[k] = v } }
        func b64(_ object: [String: Any]) -> String {
            Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        }
        let input = b64(["alg": alg, "typ": "JWT", "kid": kid]) + "." + b64(claims)
        if alg == "none" { return input + "." }
        let pem = Array(try! String(contentsOf: fixtures.appendingPathComponent(key), encoding: .utf8).utf8)
        let pkey = pem.withUnsafeBufferPointer { b in b.withMemoryRebound(to: CChar.self) { cossl_private_key_from_pem($0.baseAddress, $0.count) } }!
        defer { cossl_key_free(pkey) }
        var out = [UInt8](repeating: 0, count: 1024)
        let message = Array(input.utf8)
        let n = cossl_sign_rs256(pkey, message, message.count, &out, out.count)
        return input + "." + Base64URL.encode(out[0..<n])
    }

    /// An upstream that answers every request with a short SSE stream and records it.
    static func upstream(_ requests: Mailbox<RecordedRequest>, hold: Gate? = nil) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 10)
                requests.put(request)
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk("data: ok\n\n")
                if let hold { try hold.wait(timeout: 5) }
                try connection.writeLastChunk()
            }
        }
    }

    static func relay(_ upstream: ScriptedUpstream, _ extra: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: now) { config in
            config.clients.tokens = [.init(id: "ios-app", sha256Hex: sha256Hex(appToken))]
            let keys = try! JWKSet(json: Data(contentsOf: fixtures.appendingPathComponent("jwks.json")))
            config.clients.jwt = .init(settings: .init(algorithms: [.rs256], issuers: [issuer], audiences: [audience]), keys: keys)
            config.routes = [
                .init(prefix: "/v1/chat/completions", upstream: "test", methods: ["POST", "OPTIONS"], auth: .token, exact: true,
                      bodyPolicy: BodyPolicy(models: ["gpt-4o-mini"], maxTokens: .init(limit: 100, mode: .clamp))),
                .init(prefix: "/jwt/v1/chat/completions", upstream: "test", stripPrefix: false, methods: ["POST"], auth: .jwt, exact: true),
            ]
            extra(&config)
        }
    }

    static func post(_ relay: RelayFixture, path: String = "/v1/chat/completions", bearer: String?, body: String = #"{"model":"gpt-4o-mini","stream":true}"#,
                     headers: [(String, String)] = []) throws -> (head: ResponseHeadResult, body: String, client: TestClient) {
        let client = try relay.client()
        var h = headers + [("Content-Type", "application/json")]
        if let bearer { h.append(("Authorization", "Bearer \(bearer)")) }
        try client.sendRequest(path: path, headers: h, body: Array(body.utf8))
        let head = try client.readHead()
        return (head, String(decoding: try client.readBody(head: head), as: UTF8.self), client)
    }

    static func code(_ body: String) -> String? {
        let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }

    @Test("static token: missing or wrong → 401 with WWW-Authenticate; right → relayed with the provider key")
    func staticTokens() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests))
        let missing = try Self.post(relay, bearer: nil)
        #expect(missing.head.status == 401)
        #expect(missing.head.header("WWW-Authenticate") == "Bearer")
        #expect(Self.code(missing.body) == "token_missing")
        let wrong = try Self.post(relay, bearer: "not-the-token-\(Self.appToken)")
        #expect(wrong.head.status == 401)
        #expect(wrong.head.header("WWW-Authenticate")?.hasPrefix("Bearer error=\"invalid_token\"") == true)
        #expect(requests.count == 0, "the provider was called for a refused request")
        let ok = try Self.post(relay, bearer: Self.appToken)
        #expect(ok.head.status == 200)
        let forwarded = try requests.take()
        #expect(forwarded.headerValues("Authorization") == ["Bearer \(RelayFixture.providerKey)"])
        #expect(!forwarded.rawHead.contains(subsequence: Array(Self.appToken.utf8)))
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""identity":"static:ios-app""#) })
        relay.assertNoSecretLeaks(clients: [missing.client, wrong.client, ok.client], secrets: [Self.appToken])
    }

    @Test("JWT: valid RS256 passes; expired, wrong audience, wrong issuer, bad signature, alg none → 401")
    func jwts() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests))
        let good = Self.jwt()
        let ok = try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: good)
        #expect(ok.head.status == 200)
        var tampered = Array(Self.jwt(["sub": "admin"]).utf8)
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let cases: [(String, String)] = [
            (Self.jwt(["exp": Self.now - 3600]), "token_expired"),
            (Self.jwt(["aud": "someone-else"]), "token_wrong_audience"),
            (Self.jwt(["iss": "https://evil.example"]), "token_wrong_issuer"),
            (String(decoding: tampered, as: UTF8.self), "token_bad_signature"),
            (Self.jwt(alg: "none"), ""),
            (Self.jwt(kid: "rsa-1", key: "rsa-2.pem"), "token_bad_signature"),
            (Self.jwt(kid: "rsa-9"), "token_unknown_key"),
            (Self.jwt(["exp": Self.now + 86_400 * 30]), "token_lifetime_too_long"),
            (Self.jwt(["iat": NSNull()]), "token_missing_issued_at"),
        ]
        var clients = [ok.client]
        for (token, expected) in cases {
            let r = try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: token)
            #expect(r.head.status == 401, "\(expected)")
            if !expected.isEmpty { #expect(Self.code(r.body) == expected) }
            clients.append(r.client)
        }
        #expect(requests.count == 1)
        try relay.waitUntilIdle()
        relay.assertNoSecretLeaks(clients: clients, secrets: [good] + cases.map(\.0).map { String($0.split(separator: ".").last ?? "") }.filter { $0.count > 20 })
    }

    @Test("model allowlist → 403 without calling the provider; max_tokens clamped, every other byte kept")
    func bodyPolicy() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests))
        let denied = try Self.post(relay, bearer: Self.appToken, body: #"{"model":"gpt-4-32k","stream":true}"#)
        #expect(denied.head.status == 403)
        #expect(Self.code(denied.body) == "model_not_allowed")
        #expect(requests.count == 0)
        let body = #"{ "model" : "gpt-4o-mini", "max_tokens":  5000 , "stream": true, "messages": [{"role":"user","content":"héllo"}] }"#
        let clamped = try Self.post(relay, bearer: Self.appToken, body: body)
        #expect(clamped.head.status == 200)
        // The route's default usage injection composes with the clamp: two minimal edits, every other byte kept.
        let injection = #","stream_options":{"include_usage":true}"#
        #expect(String(decoding: try requests.take().body, as: UTF8.self)
                == body.replacingOccurrences(of: "5000", with: "100").replacingOccurrences(of: "}] }", with: "}]\(injection) }"))
        let untouched = #"{"model":"gpt-4o-mini","max_tokens":50,"stream":true}"#
        _ = try Self.post(relay, bearer: Self.appToken, body: untouched)
        #expect(String(decoding: try requests.take().body, as: UTF8.self) == String(untouched.dropLast()) + injection + "}")
    }

    @Test("only configured paths reach the provider: /v1/files is 404")
    func routeAllowlist() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests))
        let r = try Self.post(relay, path: "/v1/files", bearer: Self.appToken)
        #expect(r.head.status == 404)
        let r2 = try Self.post(relay, path: "/v1/chat/completions/extra", bearer: Self.appToken)
        #expect(r2.head.status == 404)
        #expect(requests.count == 0)
    }

    @Test("rate limit per identity → 429 with Retry-After; the provider is not called")
    func rateLimit() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests)) { $0.rateLimits.perIdentity = RateLimits(requestsPerMinute: 2, burst: 2) }
        #expect(try Self.post(relay, bearer: Self.appToken).head.status == 200)
        #expect(try Self.post(relay, bearer: Self.appToken).head.status == 200)
        let limited = try Self.post(relay, bearer: Self.appToken)
        #expect(limited.head.status == 429)
        #expect(limited.head.header("Retry-After") == "30")
        #expect(Self.code(limited.body) == "rate_limit_exceeded")
        #expect(requests.count == 2)
    }

    @Test("JWT with several issuers: the same sub from two issuers has two budgets (identity issuer|sub)")
    func issuersDoNotShareBudgets() throws {
        let requests = Mailbox<RecordedRequest>()
        let second = "https://issuer.example/project-2"
        let relay = try Self.relay(try Self.upstream(requests)) { config in
            config.clients.jwt?.settings.issuers = [Self.issuer, second]
            config.rateLimits.perIdentity = RateLimits(requestsPerMinute: 1, burst: 1)
        }
        let path = "/jwt/v1/chat/completions"
        #expect(try Self.post(relay, path: path, bearer: Self.jwt()).head.status == 200)
        #expect(try Self.post(relay, path: path, bearer: Self.jwt(["iss": second])).head.status == 200)
        let limited = try Self.post(relay, path: path, bearer: Self.jwt())
        #expect(limited.head.status == 429)
        #expect(Self.code(limited.body) == "rate_limit_exceeded")
        #expect(requests.count == 2)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""identity":"jwt:\#(Self.issuer)|user-42""#) })
        #expect(relay.logs.lines.contains { $0.contains(#""identity":"jwt:\#(second)|user-42""#) })
    }

    @Test("JWT with one issuer: the identity is the bare sub")
    func oneIssuerIdentity() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests))
        #expect(try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: Self.jwt()).head.status == 200)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""identity":"jwt:user-42""#) })
    }

    @Test("concurrent streams per address are capped; a finished stream frees its slot")
    func concurrencyCap() throws {
        let requests = Mailbox<RecordedRequest>()
        let hold = Gate()
        let relay = try Self.relay(try Self.upstream(requests, hold: hold)) {
            $0.rateLimits.perAddress = RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 1)
        }
        let first = try relay.client()
        try first.sendRequest(path: "/v1/chat/completions", headers: [("Authorization", "Bearer \(Self.appToken)")],
                              body: Array(#"{"model":"gpt-4o-mini"}"#.utf8))
        #expect(try first.readHead().status == 200)
        let second = try Self.post(relay, bearer: Self.appToken)
        #expect(second.head.status == 429)
        #expect(Self.code(second.body) == "concurrency_limit_exceeded")
        hold.signal()
        _ = try first.readChunkedBody(until: "data: ok\n\n")
        #expect(try first.readChunk() == nil)
        try relay.waitUntilIdle()
        hold.signal()
        #expect(try Self.post(relay, bearer: Self.appToken).head.status == 200)
    }

    @Test("CORS: a preflight from an allowed origin is answered here; others get 403; answers carry the origin")
    func cors() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests)) { $0.cors = CORSPolicy(allowedOrigins: ["https://app.example.com"]) }
        let client = try relay.client()
        try client.sendRequest(method: "OPTIONS", path: "/v1/chat/completions", headers: [
            ("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "authorization, content-type"),
        ])
        let preflight = try client.readHead()
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example.com")
        _ = try client.readBody(head: preflight)
        try client.sendRequest(method: "OPTIONS", path: "/v1/chat/completions", headers: [
            ("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")])
        let denied = try client.readHead()
        #expect(denied.status == 403)
        #expect(denied.header("Access-Control-Allow-Origin") == nil)
        let real = try Self.post(relay, bearer: Self.appToken, headers: [("Origin", "https://app.example.com")])
        #expect(real.head.status == 200)
        #expect(real.head.header("Access-Control-Allow-Origin") == "https://app.example.com")
        let refused = try Self.post(relay, bearer: nil, headers: [("Origin", "https://app.example.com")])
        #expect(refused.head.status == 401)
        #expect(refused.head.header("Access-Control-Allow-Origin") == "https://app.example.com")
        #expect(requests.count == 1)
    }

    @Test("jwksFile and jwksURL together: a refresh adds the URL's keys to the file's, never drops the file's")
    func jwksFileKeysOutliveARefresh() throws {
        let all = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Self.fixtures.appendingPathComponent("jwks.json"))) as? [String: Any])
        let keys = try #require(all["keys"] as? [[String: Any]])
        func set(_ kid: String) throws -> Data {
            try JSONSerialization.data(withJSONObject: ["keys": keys.filter { $0["kid"] as? String == kid }])
        }
        let served = try set("rsa-2")
        let keyServer = try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest(timeout: 10)
                try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(served.count)")])
                try connection.write(Array(served))
            }
        }
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests)) { config in
            config.clients.jwt = .init(settings: .init(algorithms: [.rs256], issuers: [Self.issuer], audiences: [Self.audience]),
                                       keys: try! JWKSet(json: try! set("rsa-1")), jwksURL: keyServer.baseURL + "/jwks.json",
                                       jwksRefreshSeconds: 3600)
        }
        try eventually("the URL's keys arrived", timeout: 10) { relay.logs.lines.contains { $0.contains(#""message":"JWKS refreshed""#) } }
        #expect(try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: Self.jwt(kid: "rsa-2", key: "rsa-2.pem")).head.status == 200)
        #expect(try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: Self.jwt(kid: "rsa-1", key: "rsa-1.pem")).head.status == 200,
                "the file's key still verifies after the refresh")
    }

    @Test("a JWKS refresh that fails keeps serving with the last good keys")
    func jwksRefreshKeepsLastGoodKeys() throws {
        let fetches = Mailbox<Int>()
        let counter = HarnessMonitor(0)
        let jwks = try Data(contentsOf: Self.fixtures.appendingPathComponent("jwks.json"))
        let keyServer = try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest(timeout: 10)
                let n = counter.withLock { value -> Int in value += 1; return value }
                fetches.put(n)
                if n == 1 {
                    try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(jwks.count)")])
                    try connection.write(Array(jwks))
                } else if n % 2 == 0 {
                    try connection.writeHead(status: 500, headers: [("Content-Length", "0")])
                } else {
                    let garbage = Array(#"{"keys": "not a list"}"#.utf8)
                    try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(garbage.count)")])
                    try connection.write(garbage)
                }
            }
        }
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.upstream(requests)) { config in
            config.clients.jwt = .init(settings: .init(algorithms: [.rs256], issuers: [Self.issuer], audiences: [Self.audience]),
                                       jwksURL: keyServer.baseURL + "/jwks.json", jwksRefreshSeconds: 0.05)
        }
        // The first (good) fetch, then at least three failed refreshes (500, garbage, 500).
        for _ in 0..<4 { _ = try fetches.take(timeout: 10) }
        let r = try Self.post(relay, path: "/jwt/v1/chat/completions", bearer: Self.jwt())
        #expect(r.head.status == 200)
        #expect(relay.logs.lines.contains { $0.contains("JWKS refresh") && $0.contains("keeping the last good keys") })
    }
}
