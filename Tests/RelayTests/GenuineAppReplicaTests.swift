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

/// App Attest with the shared state in a real `redis-server`: a challenge issued by one relay is redeemed by
/// another, a counter raised on one refuses the same assertion on the other (two relay processes, as replicas run),
/// challenges expire on Redis's own clock, and a Redis that does not answer refuses proofs (503) instead of letting
/// a replay through.
@Suite("Genuine app: replicas sharing Redis", .serialized)
struct GenuineAppReplicaTests {
    static let path = "/v1/chat/completions"

    static func redisConfiguration(_ relay: inout RelayConfiguration, _ redis: RedisServerProcess, timeoutMs: Int = 2_000) {
        var settings = StateConfiguration.Redis(host: "127.0.0.1", port: redis.port)
        settings.keyPrefix = "genuine-test:"
        settings.timeoutMilliseconds = timeoutMs
        relay.state.backend = .redis(settings)
    }

    /// Two relay processes on one Redis, before one provider that answers `data: ok`, with App Attest's root a
    /// test CA valid now (the processes read the real clock); `route` is the route's members after its prefix.
    static func withReplicas(route: String = "", keyPrefix: String,
                             _ body: (_ a: RelayProcess, _ b: RelayProcess, _ redis: RedisServerProcess,
                                      _ newDevice: () -> SoftwareAppAttestDevice) throws -> Void) throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try ScriptedUpstream { connection in
            while (try? connection.readRequest(timeout: 30)) != nil {
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk("data: ok\n\n")
                try connection.writeLastChunk()
            }
        }
        defer { upstream.shutdown() }
        let now = Int64(Date().timeIntervalSince1970)
        let ca = TestAppAttestCA(notBefore: now - 86_400, notAfter: now + 86_400)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("app-attest-root-\(UUID().uuidString).pem")
        try Data(ca.rootPEM).write(to: root)
        defer { try? FileManager.default.removeItem(at: root) }
        let configuration = """
            {"listen": {"host": "127.0.0.1", "port": 0},
             "upstreams": {"up": {"baseURL": "http://127.0.0.1:\(upstream.port)"}},
             "routes": [{"prefix": "/v1/", "upstream": "up", "auth": "none", "attestation": "required"\(route)}],
             "attestation": {"apple": {"appIds": ["\(GenuineAppTests.appId)"], "rootCAFile": "\(root.path)"}},
             "state": {"backend": "redis", "redis": {"url": "redis://127.0.0.1:\(redis.port)/0", "keyPrefix": "\(keyPrefix)",
                       "timeoutMs": 2000}}}
            """
        let a = try RelayProcess(configuration: configuration), b = try RelayProcess(configuration: configuration)
        try body(a, b, redis) { SoftwareAppAttestDevice(appId: GenuineAppTests.appId, now: now, ca: ca) }
    }

    @Test("two relay processes share one Redis: registered on one, a counter raised on one is refused on the other")
    func countersAcrossReplicas() throws {
        try Self.withReplicas(keyPrefix: "replica-attest:") { a, b, redis, newDevice in
            var device = newDevice()
            // The challenge comes from a, the registration goes to b.
            let challenge = try GenuineAppTests.challenge(a.port)
            #expect(try GenuineAppTests.register(b.port, device, challenge: challenge).status == 201)
            #expect(try GenuineAppTests.register(a.port, device).code == "key_already_registered")

            let hash = TestSHA256.digest(AttestationWire.clientData(method: "POST", pathWithQuery: Self.path, body: chatBody))
            let first = GenuineAppTests.headers(keyId: device.keyId, assertion: device.assertion(clientDataHash: hash))
            #expect(try GenuineAppTests.call(a.port, path: Self.path, headers: first, body: chatBody).status == 200)
            let replayed = try GenuineAppTests.call(b.port, path: Self.path, headers: first, body: chatBody)
            #expect(replayed.status == 401 && replayed.code == "assertion_replayed", "\(replayed.body)")
            let second = GenuineAppTests.headers(keyId: device.keyId, assertion: device.assertion(clientDataHash: hash))
            #expect(try GenuineAppTests.call(b.port, path: Self.path, headers: second, body: chatBody).status == 200)
            #expect(try GenuineAppTests.call(a.port, path: Self.path, headers: second, body: chatBody).code == "assertion_replayed")
            #expect(try redis.command("HGET replica-attest:attest:key:\(Base64URL.encode(device.keyId)) counter").contains("2"))
        }
    }

    @Test("a challenge expires on Redis's clock (a 1 s TTL, waited for until Redis says the key is gone)")
    func challengeExpiresInRedis() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let h = try GenuineAppTests.Harness { config in
            Self.redisConfiguration(&config, redis)
            config.attestation.apple?.challengeTTLSeconds = 1
        }
        let challenge = try GenuineAppTests.challenge(h.relay.port)
        let key = "genuine-test:attest:challenge:\(challenge)"
        #expect(try redis.command("EXISTS \(key)") == ":1")
        try eventually("Redis expired the challenge", timeout: 10) { try redis.command("EXISTS \(key)") == ":0" }
        let expired = try GenuineAppTests.register(h.relay.port, GenuineAppTests.device(), challenge: challenge)
        #expect(expired.status == 401 && expired.code == "attestation_invalid")
        // A fresh one, used at once, passes: the TTL is what refused the first.
        #expect(try GenuineAppTests.register(h.relay.port, GenuineAppTests.device()).status == 201)
    }

    /// A relay whose Redis replies time out after 300 ms; a real clock, since those timeouts are timers on the relay's
    /// loops.
    static func harness(timingOutOn redis: RedisServerProcess, configure: (inout RelayConfiguration) -> Void) throws -> GenuineAppTests.Harness {
        try GenuineAppTests.Harness(realClock: true) { config in
            Self.redisConfiguration(&config, redis, timeoutMs: 300)
            configure(&config)
        }
    }

    @Test("Redis stalled: proofs and the endpoints get 503 state_unavailable, whatever onUnavailable says")
    func redisUnavailable() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let h = try Self.harness(timingOutOn: redis) { config in
            if case .redis(var settings) = config.state.backend {
                settings.onUnavailable = .allow
                config.state.backend = .redis(settings)
            }
        }
        var device = GenuineAppTests.device()
        #expect(try GenuineAppTests.register(h.relay.port, device).status == 201)
        redis.pause()
        defer { redis.resume() }
        let asserted = try GenuineAppTests.call(h.relay.port, path: Self.path, headers: GenuineAppTests.assertionHeaders(&device, path: Self.path, body: chatBody),
                                                body: chatBody)
        #expect(asserted.status == 503 && asserted.code == "state_unavailable", "\(asserted.body)")
        let challenge = try GenuineAppTests.call(h.relay.port, path: AttestationWire.challengePath)
        #expect(challenge.status == 503)
        #expect(h.requests.count == 0)
        redis.resume()
        try eventually("Redis answers again", timeout: 10) {
            try GenuineAppTests.call(h.relay.port, path: Self.path, headers: GenuineAppTests.assertionHeaders(&device, path: Self.path, body: chatBody),
                                     body: chatBody).status == 200
        }
    }
}

extension GenuineAppReplicaTests {
    /// A resume or a stop presents an App Attest proof like any request: while Redis does not answer, the proof
    /// cannot be checked, so the answer is 503 `state_unavailable` (retry), not 404 (which tells the app its answer
    /// is gone, and charges its address a failed authentication); the stream, held here, is still there after.
    @Test("Redis stalled: a resume or a stop of an attested stream gets 503 state_unavailable, not 404, and the stream stays")
    func resumeWhileRedisIsStalled() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let h = try Self.harness(timingOutOn: redis) { config in
            config.routes[0].resume = RouteResume()
            config.routes[0].heartbeatSeconds = 0
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 1, burst: 2)
        }
        var device = GenuineAppTests.device()
        #expect(try GenuineAppTests.register(h.relay.port, device).status == 201)
        let started = try GenuineAppTests.call(h.relay.port, path: Self.path,
                                               headers: GenuineAppTests.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody)
        #expect(started.status == 200)
        let id = try #require(started.head.headerValues("X-Relay-Stream").first)
        let resume = "/v1/relay/streams/\(id)?offset=0", stop = "/v1/relay/streams/\(id)"
        redis.pause()
        for _ in 0..<3 {
            let resumed = try GenuineAppTests.call(h.relay.port, method: "GET", path: resume,
                                                   headers: GenuineAppTests.assertionHeaders(&device, method: "GET", path: resume, body: []))
            #expect(resumed.status == 503 && resumed.code == "state_unavailable", "\(resumed.status) \(resumed.body)")
        }
        let stopped = try GenuineAppTests.call(h.relay.port, method: "DELETE", path: stop,
                                               headers: GenuineAppTests.assertionHeaders(&device, method: "DELETE", path: stop, body: []))
        #expect(stopped.status == 503 && stopped.code == "state_unavailable", "\(stopped.status) \(stopped.body)")
        redis.resume()
        // The refusals above were the relay's, not the caller's: its failure bucket is whole, the stream still there.
        try eventually("Redis answers again", timeout: 10) {
            try GenuineAppTests.call(h.relay.port, method: "GET", path: resume,
                                     headers: GenuineAppTests.assertionHeaders(&device, method: "GET", path: resume, body: [])).status == 200
        }
    }
}

extension GenuineAppReplicaTests {
    /// A stream started on A with App Attest, on an `auth: "none"` resumable route, belongs to that device on every
    /// replica: B (which finds it in Redis) answers a resume or a stop only with a fresh assertion of the same
    /// device over that request. No proof, another device's, or an assertion already used gets 404 there.
    @Test("an attested stream started on one replica is resumed and stopped on the other only with its device's proof")
    func attestedResumeAcrossReplicas() throws {
        try Self.withReplicas(route: #", "heartbeatSeconds": 0, "resume": {"windowSeconds": 30}"#, keyPrefix: "replica-resume:") { a, b, redis, newDevice in
            var device = newDevice(), other = newDevice()
            #expect(try GenuineAppTests.register(a.port, device).status == 201)
            #expect(try GenuineAppTests.register(b.port, other).status == 201)
            let started = try GenuineAppTests.call(a.port, path: Self.path,
                                                   headers: GenuineAppTests.assertionHeaders(&device, path: Self.path, body: chatBody), body: chatBody)
            #expect(started.status == 200)
            let id = try #require(started.head.headerValues("X-Relay-Stream").first)
            // The sync point: the stream's record in Redis names its 10 bytes (`data: ok` and its blank line).
            let script = #""local m = redis.call('GET', KEYS[1]) if not m then return -1 end return tonumber(string.match(m, '^v1 %S+ %S+ %d+ (%d+)'))""#
            try eventually("the stream's record in Redis", timeout: 10) {
                try redis.command("EVAL \(script) 1 replica-resume:stream:\(id):meta").contains("10")
            }
            let resume = "/v1/relay/streams/\(id)?offset=0", stop = "/v1/relay/streams/\(id)"

            let proof = GenuineAppTests.assertionHeaders(&device, method: "GET", path: resume, body: [])
            let resumed = try GenuineAppTests.call(b.port, method: "GET", path: resume, headers: proof)
            #expect(resumed.status == 200, "\(resumed.body)")
            #expect(resumed.body == "data: ok\n\n")
            #expect(try GenuineAppTests.call(b.port, method: "GET", path: resume, headers: proof).status == 404, "a replayed proof")
            #expect(try GenuineAppTests.call(a.port, method: "GET", path: resume, headers: proof).status == 404, "replayed on the owner")
            #expect(try GenuineAppTests.call(b.port, method: "GET", path: resume).status == 404)
            #expect(try GenuineAppTests.call(b.port, method: "GET", path: resume,
                                             headers: GenuineAppTests.assertionHeaders(&other, method: "GET", path: resume, body: [])).status == 404)
            #expect(try GenuineAppTests.call(b.port, method: "DELETE", path: stop,
                                             headers: GenuineAppTests.assertionHeaders(&other, method: "DELETE", path: stop, body: [])).status == 404)
            #expect(try GenuineAppTests.call(b.port, method: "DELETE", path: stop,
                                             headers: GenuineAppTests.assertionHeaders(&device, method: "DELETE", path: stop, body: [])).status == 204)
        }
    }
}
