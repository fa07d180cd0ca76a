// Key pools and failover through the real relay (README, "Key pools and failover"): scripted providers that
// answer by key, a manual clock for cooldowns, a real redis-server for two relays sharing what they saw.
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

@Suite("Key pools and failover", .serialized)
struct KeyPoolFailoverTests {
    static let keyA = "sk-pool-A-0f9e8d7c6b5a41"
    static let keyB = "sk-pool-B-1a2b3c4d5e6f72"
    static let keyC = "sk-pool-C-9a8b7c6d5e4f33"
    static let keyD = "sk-pool-D-55aa66bb77cc88"
    static let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"

    /// What a scripted provider does with one request.
    enum Answer: Sendable {
        case stream(String)
        case status(Int, headers: [(String, String)], body: String)
        /// Reads the request, then resets the connection: the provider may be processing it.
        case reset
        /// A 200 stream whose connection resets after `first`.
        case breakAfter(String)
    }

    /// A provider that answers each request by what `answer` says for it (its key, its number from 0).
    static func provider(_ answer: @escaping @Sendable (_ key: String, _ index: Int) -> Answer) throws -> ScriptedUpstream {
        let count = HarnessMonitor<Int>(0)
        return try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 30) {
                let index = count.withLock { n -> Int in defer { n += 1 }; return n }
                let key = String((request.header("Authorization") ?? "").dropFirst("Bearer ".count))
                switch answer(key, index) {
                case .stream(let text):
                    try connection.writeHead(status: 200, headers: sseHead)
                    try connection.writeChunk(text)
                    try connection.writeLastChunk()
                case .status(let status, let headers, let body):
                    try connection.writeHead(status: status, headers: headers + [("Content-Type", "application/json"),
                                                                               ("Content-Length", String(body.utf8.count))])
                    try connection.write(body)
                case .reset:
                    connection.reset()
                    return
                case .breakAfter(let first):
                    try connection.writeHead(status: 200, headers: sseHead)
                    try connection.writeChunk(first)
                    connection.reset()
                    return
                }
            }
        }
    }

    static func keys(_ secrets: [(String, String, Int)]) -> [RelayConfiguration.UpstreamKey] {
        secrets.map { .init(label: $0.0, secret: Secret($0.1), weight: $0.2) }
    }

    static func relay(_ upstream: ScriptedUpstream, keys: [(String, String, Int)], clock: any Clock = MonotonicClock(),
                      configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, clock: clock) { config in
            config.upstreams["test"]!.keys = Self.keys(keys)
            config.upstreams["test"]!.key = Secret(keys[0].1)
            config.admin = .init(host: "127.0.0.1", port: 0)
            configure(&config)
        }
    }

    /// One chat request; the answer's head and whole body.
    static func post(_ client: TestClient) throws -> (ResponseHeadResult, [UInt8]) {
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        let head = try client.readHead()
        return (head, try client.readBody(head: head))
    }

    static func keysUsed(_ upstream: ScriptedUpstream) -> [String] {
        upstream.requests.map { String(($0.header("Authorization") ?? "").dropFirst("Bearer ".count)) }
    }

    static func accessLog(_ relay: RelayFixture) -> [String] { relay.logs.lines.filter { $0.contains("\"outcome\"") && $0.contains("\"attempts\"") } }

    @Test("a 429 with Retry-After: 2 on key A: a byte-exact 200 through B; A unused for 2 s, then used again")
    func rateLimitedKey() throws {
        let upstream = try Self.provider { key, index in
            key == Self.keyA && index == 0
                ? .status(429, headers: [("Retry-After", "2")], body: #"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#)
                : .stream(Self.stream)
        }
        let clock = ManualClock()
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)], clock: clock)
        let client = try relay.client()
        let (head, body) = try Self.post(client)
        #expect(head.status == 200)
        #expect(body == Array(Self.stream.utf8))
        #expect(Self.keysUsed(upstream) == [Self.keyA, Self.keyB])
        // The second attempt is the first one's bytes: same request line, same body, same fields but the key.
        let requests = upstream.requests
        #expect(requests[0].target == requests[1].target && requests[0].body == requests[1].body)
        #expect(requests[0].headers.filter { $0.name != "Authorization" }.map { "\($0.name): \($0.value)" }
                == requests[1].headers.filter { $0.name != "Authorization" }.map { "\($0.name): \($0.value)" })
        for _ in 0..<3 { _ = try Self.post(client) }
        clock.advance(bySeconds: 1.99)
        _ = try Self.post(client)
        #expect(Self.keysUsed(upstream).dropFirst(2).allSatisfy { $0 == Self.keyB }, "A used while cooling down")
        clock.advance(bySeconds: 0.01)
        for _ in 0..<2 { _ = try Self.post(client) }
        #expect(Self.keysUsed(upstream).suffix(2).contains(Self.keyA), "A not used again after its cooldown")
        try relay.waitUntilIdle()
        let line = try #require(Self.accessLog(relay).first)
        #expect(line.contains(#""key":"b""#) && line.contains(#""attempts":2"#) && line.contains(#""failover":"429""#), "\(line)")
        relay.assertNoSecretLeaks(clients: [client], secrets: [Self.keyA, Self.keyB])
    }

    @Test("every key 429: the client gets 429 with the largest Retry-After, the echoed key masked")
    func allKeysRateLimited() throws {
        let upstream = try Self.provider { key, _ in
            .status(429, headers: [("Retry-After", key == Self.keyA ? "7" : "3")],
                    body: #"{"error":{"message":"limit for key \#(key)","type":"rate_limit_error"}}"#)
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)])
        let client = try relay.client()
        let (head, body) = try Self.post(client)
        #expect(head.status == 429)
        #expect(head.header("Retry-After") == "7")
        #expect(String(decoding: body, as: UTF8.self).contains("limit for key"))
        #expect(upstream.requests.count == 2)
        // Both keys cool down now: the next request is answered by the relay, without a call.
        let (again, _) = try Self.post(client)
        #expect(again.status == 429)
        #expect(upstream.requests.count == 2)
        relay.assertNoSecretLeaks(clients: [client], secrets: [Self.keyA, Self.keyB])
    }

    @Test("a 401 on A: A disabled, logged once at error level, B answers")
    func rejectedKey() throws {
        let upstream = try Self.provider { key, _ in
            key == Self.keyA ? .status(401, headers: [], body: #"{"error":{"message":"invalid key","type":"invalid_request_error"}}"#)
                             : .stream(Self.stream)
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)])
        let client = try relay.client()
        for _ in 0..<4 {
            let (head, _) = try Self.post(client)
            #expect(head.status == 200)
        }
        #expect(Self.keysUsed(upstream).filter { $0 == Self.keyA }.count == 1)
        let rejections = relay.logs.lines.filter { $0.contains("upstream_key_rejected") }
        #expect(rejections.count == 1)
        #expect(rejections.first?.contains(#""key":"a""#) == true && rejections.first?.contains(#""level":"error""#) == true, "\(rejections)")
        relay.assertNoSecretLeaks(clients: [client], secrets: [Self.keyA, Self.keyB])
    }

    @Test("weights 2:1 over 300 requests: within ±10 %")
    func weights() throws {
        let upstream = try Self.provider { _, _ in .status(200, headers: [], body: "{}") }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 2), ("b", Self.keyB, 1)])
        let client = try relay.client()
        for _ in 0..<300 { _ = try Self.post(client) }
        let a = Self.keysUsed(upstream).filter { $0 == Self.keyA }.count
        #expect((180...220).contains(a), "A: \(a) of 300")
        #expect(upstream.requests.count == 300)
    }

    /// A relay whose route tries `primary`, then a second upstream with key C.
    static func fallbackRelay(primary baseURL: String, primaryUpstream: ScriptedUpstream?, secondary: ScriptedUpstream,
                              configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: primaryUpstream, baseURL: baseURL) { config in
            config.upstreams["test"]!.key = Secret(Self.keyA)
            config.upstreams["second"] = .init(name: "second", baseURL: secondary.baseURL, key: Secret(Self.keyC))
            config.routes[0].upstreams = ["test", "second"]
            configure(&config)
        }
    }

    @Test("a 503, a 529 and a refused connection on the primary: the secondary answers")
    func fallback() throws {
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        for status in [503, 529] {
            let primary = try Self.provider { _, _ in .status(status, headers: [], body: #"{"error":{"message":"overloaded"}}"#) }
            let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
            let client = try relay.client()
            let (head, body) = try Self.post(client)
            #expect(head.status == 200)
            #expect(body == Array(Self.stream.utf8))
            #expect(primary.requests.count == 1)
            try relay.waitUntilIdle()
            let line = try #require(Self.accessLog(relay).first)
            #expect(line.contains(#""upstream":"second""#) && line.contains(#""failover":"\#(status)""#), "\(line)")
        }
        let gone = try ScriptedUpstream { _ in }
        let refused = gone.baseURL
        gone.shutdown()
        let before = secondary.requests.count
        let relay = try Self.fallbackRelay(primary: refused, primaryUpstream: nil, secondary: secondary)
        let client = try relay.client()
        let (head, body) = try Self.post(client)
        #expect(head.status == 200)
        #expect(body == Array(Self.stream.utf8))
        #expect(secondary.requests.count == before + 1)
        try relay.waitUntilIdle()
        #expect(Self.accessLog(relay).first?.contains(#""failover":"unreachable""#) == true)
    }

    @Test("a 500, 502 or 504 to a POST goes to the client: the POST is not sent to the next upstream")
    func serverErrorToAPostIsNotResent() throws {
        // A gateway's complete 5xx does not say the backend did nothing: a second send may be a second bill.
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        for status in [500, 502, 504] {
            let primary = try Self.provider { _, _ in .status(status, headers: [], body: #"{"error":{"message":"gateway timeout"}}"#) }
            let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
            let (head, _) = try Self.post(try relay.client())
            try relay.waitUntilIdle()
            #expect(head.status == status, "the client got \(head.status)")
            #expect(primary.requests.count == 1)
            #expect(secondary.requests.isEmpty, "\(status): the POST reached the secondary too")
        }
    }

    @Test("a 502 to a GET: the next upstream answers; to a POST, with or without Idempotency-Key, it is the answer")
    func serverErrorToAReplayableRequestFallsBack() throws {
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        let primary = try Self.provider { _, _ in .status(502, headers: [], body: #"{"error":{"message":"bad gateway"}}"#) }
        let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/models")
        let get = try client.readHead()
        _ = try client.readBody(head: get)
        #expect(get.status == 200)
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json"), ("Idempotency-Key", "k-1")],
                               body: chatBody)
        let post = try client.readHead()
        _ = try client.readBody(head: post)
        #expect(post.status == 502)
        #expect(primary.requests.count == 2 && secondary.requests.count == 1)
    }

    @Test("a 403 the request provoked goes to the client; no key is disabled and no other key is tried")
    func forbiddenRequestDisablesNoKey() throws {
        // The provider answers 403 for a model this project may not use (OpenAI: "Project … does not have access
        // to model …"), whatever the key: the keys are fine, and a client must not be able to take them down.
        let upstream = try Self.provider { _, index in
            index == 0 ? .status(403, headers: [], body: #"{"error":{"message":"Project does not have access to model o1-pro"}}"#)
                       : .stream(Self.stream)
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1), ("c", Self.keyC, 1)])
        let (refused, _) = try Self.post(try relay.client())
        #expect(refused.status == 403)
        #expect(upstream.requests.count == 1, "the request was tried with \(upstream.requests.count) keys")
        let (honest, body) = try Self.post(try relay.client())
        #expect(honest.status == 200, "honest request refused: \(honest.status) \(String(decoding: body, as: UTF8.self))")
        #expect(relay.server.pools.pool("test")?.state(of: 0, now: MonotonicClock().now()) == .available)
        #expect(!relay.logs.lines.contains { $0.contains("upstream_key_rejected") })
    }

    @Test("a 401 from every key for one request: the client gets 401, no key is disabled")
    func unauthorizedByEveryKeyDisablesNone() throws {
        // What one request provokes from every key (an endpoint the keys' scopes do not cover) says nothing
        // about any key; a key is disabled only when another key got past authentication for the same request.
        let upstream = try Self.provider { _, index in
            index < 3 ? .status(401, headers: [], body: #"{"error":{"message":"Missing scopes: api.model.write"}}"#) : .stream(Self.stream)
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1), ("c", Self.keyC, 1)])
        let (refused, _) = try Self.post(try relay.client())
        #expect(refused.status == 401)
        #expect(upstream.requests.count == 3)
        let (honest, _) = try Self.post(try relay.client())
        #expect(honest.status == 200)
        let now = MonotonicClock().now()
        #expect((0..<3).allSatisfy { relay.server.pools.pool("test")?.state(of: $0, now: now) == .available })
        #expect(!relay.logs.lines.contains { $0.contains("upstream_key_rejected") })
    }

    @Test("a reset after the request was read: 502, the provider saw it once, the secondary never")
    func neverTwice() throws {
        let primary = try Self.provider { _, _ in .reset }
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let client = try relay.client()
        let (head, _) = try Self.post(client)
        #expect(head.status == 502)
        try relay.waitUntilIdle()
        #expect(primary.requests.count == 1)
        #expect(secondary.requests.isEmpty)
    }

    /// curl 7.88 reports an answer with no HTTP status line as an unsupported protocol ("Received HTTP/0.9 when not
    /// allowed"), a code it also gives before any connection: the request was read all the same.
    @Test("an answer that is not HTTP, after the request was read: 502 bad response, the secondary never",
          arguments: ["{\"error\":\"oops\"}\n", "FOO BAR BAZ\r\n\r\n", "HTTP/1.1 5033 X\r\n\r\n", "\r\n\r\n"])
    func notHTTPIsNotUnreachable(_ answer: String) throws {
        let primary = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write(answer)
            connection.close()
        }
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let (head, body) = try Self.post(try relay.client())
        #expect(head.status == 502)
        #expect(String(decoding: body, as: UTF8.self).contains("\"upstream_bad_response\""), "\(String(decoding: body, as: UTF8.self))")
        try relay.waitUntilIdle()
        #expect(primary.requests.count == 1)
        #expect(secondary.requests.isEmpty)
        let line = try #require(Self.accessLog(relay).first)
        #expect(line.contains(#""attempts":1"#) && !line.contains("unreachable"), "\(line)")
    }

    @Test("a stream that breaks after its first byte: truncated, not retried")
    func noRetryAfterFirstByte() throws {
        let first = "data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\n\n"
        let primary = try Self.provider { _, _ in .breakAfter(first) }
        let secondary = try Self.provider { _, _ in .stream(Self.stream) }
        defer { secondary.shutdown() }
        let relay = try Self.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        let rest = try client.readUntilClose()
        #expect(!rest.bytes.contains(subsequence: Array("0\r\n\r\n".utf8)), "a broken stream must not end cleanly")
        #expect(rest.bytes.contains(subsequence: Array(first.utf8)))
        try relay.waitUntilIdle()
        #expect(primary.requests.count == 1)
        #expect(secondary.requests.isEmpty)
    }

    @Test("maxAttempts holds")
    func maxAttempts() throws {
        let upstream = try Self.provider { _, _ in .status(429, headers: [("Retry-After", "1")], body: "{}") }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1), ("c", Self.keyC, 1), ("d", Self.keyD, 1)]) {
            $0.routes[0].maxAttempts = 2
        }
        let client = try relay.client()
        let (head, _) = try Self.post(client)
        #expect(head.status == 429)
        #expect(upstream.requests.count == 2)
    }

    @Test("no attempt starts after timeouts.upstreamFirstByteSeconds from the first")
    func timeBound() throws {
        let gate = Gate()
        let clock = ManualClock()
        let upstream = try Self.provider { key, _ in
            if key == Self.keyA { try? gate.wait(timeout: 10) }
            return .status(429, headers: [("Retry-After", "1")], body: "{}")
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)], clock: clock) {
            $0.timeouts.upstreamFirstByteSeconds = 30
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        try upstream.waitForConnections(1)
        try eventually("request reached the provider") { upstream.requests.count == 1 }
        clock.advance(bySeconds: 30)
        gate.signal()
        let head = try client.readHead()
        #expect(head.status == 429)
        #expect(Self.keysUsed(upstream) == [Self.keyA])
    }

    @Test("a 200 stream whose first event is an error: passed through, logged, not retried")
    func errorEvent() throws {
        let event = "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"
        let upstream = try Self.provider { _, _ in .stream(event) }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)])
        let client = try relay.client()
        let (head, body) = try Self.post(client)
        #expect(head.status == 200)
        #expect(body == Array(event.utf8))
        #expect(upstream.requests.count == 1)
        #expect(relay.logs.lines.contains { $0.contains("upstream_error_event") && $0.contains(#""key":"a""#) })
    }

    @Test("GET /upstreams and the pool metrics show labels and states, never a key")
    func opsView() throws {
        let upstream = try Self.provider { key, _ in
            key == Self.keyA ? .status(429, headers: [("Retry-After", "60")], body: "{}") : .stream(Self.stream)
        }
        let relay = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)])
        let client = try relay.client()
        _ = try Self.post(client)
        let admin = try #require(relay.server.adminPort)
        let (status, body, _) = try TestClient.get(port: admin, path: "/upstreams")
        #expect(status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        let test = try #require((json["upstreams"] as? [[String: Any]])?.first { $0["name"] as? String == "test" })
        let keys = try #require(test["keys"] as? [[String: Any]])
        #expect(keys.map { $0["label"] as? String } == ["a", "b"])
        #expect(keys.map { $0["state"] as? String } == ["cooling_down", "available"])
        #expect(((keys[0]["cooldownEndsInSeconds"] as? Double) ?? 0) > 50)
        let (_, metrics, _) = try TestClient.get(port: admin, path: "/metrics")
        #expect(metrics.contains(#"sse_relay_upstream_attempts_total{upstream="test",key="a",result="429"} 1"#))
        #expect(metrics.contains(#"sse_relay_upstream_attempts_total{upstream="test",key="b",result="success"} 1"#))
        #expect(metrics.contains(#"sse_relay_upstream_key_available{upstream="test",key="a"} 0"#))
        #expect(metrics.contains(#"sse_relay_upstream_key_available{upstream="test",key="b"} 1"#))
        #expect(!body.contains(Self.keyA) && !metrics.contains(Self.keyA) && !metrics.contains(Self.keyB))
    }

    @Test("two relays on one Redis: a key that cooled down on one is skipped by the other")
    func sharedThroughRedis() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try Self.provider { key, index in
            key == Self.keyA && index == 0 ? .status(429, headers: [("Retry-After", "120")], body: "{}") : .stream(Self.stream)
        }
        func shared(_ config: inout RelayConfiguration) {
            var settings = StateConfiguration.Redis(host: "127.0.0.1", port: redis.port)
            settings.keyPrefix = "pool-test:"
            settings.timeoutMilliseconds = 2000
            config.state.backend = .redis(settings)
        }
        let first = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)], configure: shared)
        let second = try Self.relay(upstream, keys: [("a", Self.keyA, 1), ("b", Self.keyB, 1)], configure: shared)
        let (head, _) = try Self.post(try first.client())
        #expect(head.status == 200)
        #expect(Self.keysUsed(upstream) == [Self.keyA, Self.keyB])
        // The sync point: the cooldown is in Redis (it is sent before the second attempt; this only makes sure).
        try eventually("cooldown in redis") { try redis.command("EXISTS pool-test:keys:test:a") == ":1" }
        let (other, _) = try Self.post(try second.client())
        #expect(other.status == 200)
        #expect(Self.keysUsed(upstream) == [Self.keyA, Self.keyB, Self.keyB], "the second relay used the key the first saw cool down")
        #expect(second.server.pools.pool("test")?.state(of: 0, now: MonotonicClock().now()) == .coolingDown)
    }
}

@Suite("Key pools and failover: hostile providers and a lost Redis", .serialized)
struct KeyPoolFailoverHostileTests {
    @Test("an error answer above 64 KiB goes to the client whole, and is not retried")
    func largeErrorBody() throws {
        let big = "{\"error\":{\"message\":\"" + String(repeating: "x", count: 100_000) + "\"}}"
        let primary = try KeyPoolFailoverTests.provider { _, _ in .status(503, headers: [], body: big) }
        let secondary = try KeyPoolFailoverTests.provider { _, _ in .stream(KeyPoolFailoverTests.stream) }
        defer { secondary.shutdown() }
        let relay = try KeyPoolFailoverTests.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let client = try relay.client()
        let (head, body) = try KeyPoolFailoverTests.post(client)
        #expect(head.status == 503)
        #expect(body == Array(big.utf8))
        #expect(secondary.requests.isEmpty)
    }

    @Test("an error answer cut before its end: 502, not retried")
    func brokenErrorBody() throws {
        let primary = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 503, headers: [("Content-Type", "application/json"), ("Content-Length", "100")])
            try connection.write("{\"error\":")
            connection.reset()
        }
        let secondary = try KeyPoolFailoverTests.provider { _, _ in .stream(KeyPoolFailoverTests.stream) }
        defer { secondary.shutdown() }
        let relay = try KeyPoolFailoverTests.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary)
        let (head, _) = try KeyPoolFailoverTests.post(try relay.client())
        #expect(head.status == 502)
        #expect(secondary.requests.isEmpty)
    }

    @Test("Redis gone: the pool decides on what this replica saw, and requests go on")
    func redisDown() throws {
        let redis = try RedisServerProcess()
        let upstream = try KeyPoolFailoverTests.provider { key, index in
            key == KeyPoolFailoverTests.keyA && index == 0 ? .status(429, headers: [("Retry-After", "120")], body: "{}") : .stream(KeyPoolFailoverTests.stream)
        }
        let relay = try KeyPoolFailoverTests.relay(upstream, keys: [("a", KeyPoolFailoverTests.keyA, 1), ("b", KeyPoolFailoverTests.keyB, 1)]) { config in
            var settings = StateConfiguration.Redis(host: "127.0.0.1", port: redis.port)
            settings.keyPrefix = "pool-down:"
            settings.onUnavailable = .allow
            config.state.backend = .redis(settings)
        }
        redis.stop()
        let client = try relay.client()
        for _ in 0..<3 {
            let (head, body) = try KeyPoolFailoverTests.post(client)
            #expect(head.status == 200)
            #expect(body == Array(KeyPoolFailoverTests.stream.utf8))
        }
        #expect(KeyPoolFailoverTests.keysUsed(upstream) == [KeyPoolFailoverTests.keyA] + Array(repeating: KeyPoolFailoverTests.keyB, count: 3))
    }
}

@Suite("Key pools and failover: a client that leaves", .serialized)
struct KeyPoolFailoverDrainTests {
    @Test("on a drain route, a client gone while a 503 is held back gets no second call")
    func noCallForADepartedClient() throws {
        let gate = Gate()
        let primary = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try gate.wait(timeout: 10)
            try connection.writeHead(status: 503, headers: [("Content-Type", "application/json"), ("Content-Length", "2")])
            try connection.write("{}")
        }
        let secondary = try KeyPoolFailoverTests.provider { _, _ in .stream(KeyPoolFailoverTests.stream) }
        defer { secondary.shutdown() }
        let relay = try KeyPoolFailoverTests.fallbackRelay(primary: primary.baseURL, primaryUpstream: primary, secondary: secondary) {
            $0.routes[0].usage.onClientCancel = .drain
            $0.routes[0].usage.drainMaxSeconds = 10
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("Content-Type", "application/json")], body: chatBody)
        try eventually("request reached the provider") { primary.requests.count == 1 }
        client.close()
        try relay.waitUntilNoConnections()
        gate.signal()
        try relay.waitUntilIdle(timeout: 5)
        #expect(secondary.requests.isEmpty)
    }
}
