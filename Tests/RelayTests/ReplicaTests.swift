import Dispatch
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// Three relay processes (the built binary, as replicas run) sharing one real `redis-server` started by the test:
/// limits and budgets hold across them, Redis going away degrades as configured without cutting a running stream,
/// and a replica lost to `kill -9` gives its stream slots back within the lease TTL.
@Suite("Replicas sharing Redis", .serialized)
struct ReplicaTests {
    static let token = "replica-client-token-3f9a"
    static let sseHead = [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]
    static let first = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    static let rest = "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
        + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\ndata: [DONE]\n\n"
    static let body = Array(#"{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#.utf8)

    /// An upstream that sends each stream's first event at once and the rest when `gate` is signalled (one
    /// signal per stream); `received` counts the requests that reached it.
    final class HeldUpstream: Sendable {
        let gate = Gate()
        let received = HarnessMonitor<Int>(0)
        let server: ScriptedUpstream

        init() throws {
            let gate = self.gate, received = self.received
            server = try ScriptedUpstream { connection in
                while let _ = try? connection.readRequest(timeout: 30) {
                    received.withLock { $0 += 1 }
                    try connection.writeHead(status: 200, headers: ReplicaTests.sseHead)
                    try connection.writeChunk(ReplicaTests.first)
                    try gate.wait(timeout: 30)
                    try connection.writeChunk(ReplicaTests.rest)
                    try connection.writeLastChunk()
                }
            }
        }

        func waitForRequests(_ n: Int, timeout: Double = 10) throws {
            _ = try received.wait(timeout: timeout) { $0 >= n ? true : nil }
        }
    }

    /// Redis's answer deadline is generous here (the whole suite shares two cores): these tests are about shared
    /// limits, not about a slow Redis (RedisAdmissionStoreTests covers `timeoutMs`).
    static func configuration(upstream: Int, redis: RedisServerProcess, extra: String = "", onUnavailable: String = "reject",
                              leaseTTLSeconds: Int = 30) -> String {
        """
        {"listen": {"host": "127.0.0.1", "port": 0},
         "admin": {"host": "127.0.0.1", "port": 0},
         "upstreams": {"up": {"baseURL": "http://127.0.0.1:\(upstream)", "key": {"env": "REPLICA_TEST_KEY"}}},
         "clients": {"tokens": [{"id": "app-user", "sha256": "\(ClientAuthTests.sha256Hex(token))"}]},
         "routes": [{"prefix": "/v1/", "upstream": "up", "auth": "token"}],
         "state": {"backend": "redis", "redis": {"url": "redis://127.0.0.1:\(redis.port)/0", "keyPrefix": "replica-test:",
                   "timeoutMs": 2000, "onUnavailable": "\(onUnavailable)", "leaseTTLSeconds": \(leaseTTLSeconds)}}
         \(extra)}
        """
    }

    static func startReplicas(_ n: Int = 3, upstream: Int, redis: RedisServerProcess, extra: String = "",
                              onUnavailable: String = "reject", leaseTTLSeconds: Int = 30) throws -> [RelayProcess] {
        try (0..<n).map { _ in
            try RelayProcess(configuration: configuration(upstream: upstream, redis: redis, extra: extra, onUnavailable: onUnavailable,
                                                          leaseTTLSeconds: leaseTTLSeconds),
                             environment: ["REPLICA_TEST_KEY": "sk-replica-test-key"])
        }
    }

    /// Sends one streaming request and reads the answer's head (the stream itself is left to the caller).
    static func open(_ relay: RelayProcess) throws -> (TestClient, ResponseHeadResult) {
        let client = try TestClient(port: relay.port)
        try client.sendRequest(path: "/v1/chat/completions",
                               headers: [("Host", "relay"), ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                               body: body)
        return (client, try client.readHead(timeout: 30))
    }

    /// One whole request: status and body.
    static func request(_ relay: RelayProcess) throws -> (Int, [UInt8]) {
        let (client, head) = try open(relay)
        defer { client.close() }
        return (head.status, try client.readBody(head: head, timeout: 30))
    }

    static func usage(_ relay: RelayProcess, identity: String = "static:app-user") throws -> [String: Any] {
        let client = try TestClient(port: try #require(relay.adminPort))
        defer { client.close() }
        try client.sendRequest(method: "GET", path: "/usage?identity=\(identity)", headers: [("Host", "relay")])
        let head = try client.readHead()
        #expect(head.status == 200)
        return try #require(try JSONSerialization.jsonObject(with: Data(try client.readBody(head: head))) as? [String: Any])
    }

    @Test("a per-identity limit of N requests per minute admits exactly N across three replicas")
    func rateLimitAcrossReplicas() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.server.shutdown() }
        upstream.gate.signal(100)
        let relays = try Self.startReplicas(upstream: upstream.server.port, redis: redis,
                                            extra: #", "rateLimits": {"perIdentity": {"requestsPerMinute": 5, "burst": 5}}"#)
        var statuses: [Int] = []
        for i in 0..<12 { statuses.append(try Self.request(relays[i % 3]).0) }
        #expect(statuses.filter { $0 == 200 }.count == 5, "\(statuses)")
        #expect(statuses.filter { $0 == 429 }.count == 7, "\(statuses)")
        #expect(Array(statuses.prefix(5)) == [200, 200, 200, 200, 200])
        #expect(upstream.received.withLock { $0 } == 5)
    }

    @Test("a concurrency cap of K holds across replicas, and a finished stream frees its slot")
    func concurrencyCapAcrossReplicas() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.server.shutdown() }
        let relays = try Self.startReplicas(upstream: upstream.server.port, redis: redis,
                                            extra: #", "rateLimits": {"perIdentity": {"concurrentStreams": 2}}"#)
        let (a, headA) = try Self.open(relays[0])
        let (b, headB) = try Self.open(relays[1])
        #expect(headA.status == 200 && headB.status == 200)
        for relay in relays {
            let (status, body) = try Self.request(relay)
            #expect(status == 429)
            #expect(String(decoding: body, as: UTF8.self).contains("concurrency_limit_exceeded"))
        }
        upstream.gate.signal(2)   // both streams end; their slots are free on every replica
        for client in [a, b] {
            #expect(String(decoding: try client.readChunkedBody(until: "[DONE]", timeout: 10), as: UTF8.self) == Self.first + Self.rest)
        }
        upstream.gate.signal(10)
        try eventually("relays[2] admits again", timeout: 5) { try Self.request(relays[2]).0 == 200 }
    }

    /// 50 requests sent at once over the replicas: `statuses` fills as they end, `admitted` is how many reached the
    /// held upstream once every request is either refused or held there (the reservations are all taken then).
    struct Burst {
        let statuses = HarnessMonitor<[Int]>([])
        let failures = HarnessMonitor<[String]>([])
        var admitted = 0
    }

    static func concurrentBurst(_ relays: [RelayProcess], _ upstream: HeldUpstream) throws -> Burst {
        var burst = Burst()
        let statuses = burst.statuses, failures = burst.failures
        // A thread each: all 50 block at once (the global queue would start its threads one by one).
        for i in 0..<50 {
            Thread {
                let status: Int
                do { status = try Self.request(relays[i % relays.count]).0 } catch {
                    status = -1
                    failures.withLock { $0.append("request \(i): \(error)") }
                }
                statuses.withLock { $0.append(status) }
            }.start()
        }
        // Two monitors: no single signal covers both, so this polls.
        try eventually("every request refused or held", timeout: 30) {
            statuses.withLock { $0.count } + upstream.received.withLock { $0 } >= 50
        }
        burst.admitted = upstream.received.withLock { $0 }
        return burst
    }

    /// Lets the held streams end: each admitted request got 200, every other one 429.
    static func release(_ burst: Burst, _ upstream: HeldUpstream) throws {
        upstream.gate.signal(50)
        let final = try burst.statuses.wait(timeout: 30) { s in s.count == 50 ? s : nil }
        #expect(burst.failures.withLock { $0 }.isEmpty, "\(burst.failures.withLock { $0 })")
        #expect(final.filter { $0 == 200 }.count == burst.admitted)
        #expect(final.filter { $0 == 429 }.count == 50 - burst.admitted, "\(final.sorted())")
    }

    @Test("a daily budget holds under 50 concurrent requests from one identity across replicas")
    func budgetUnderConcurrency() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.server.shutdown() }
        let budget = 1000
        let relays = try Self.startReplicas(upstream: upstream.server.port, redis: redis,
                                            extra: #", "budgets": {"perIdentity": {"tokensPerDay": \#(budget)}, "onExceed": "cut"}"#)
        let burst = try Self.concurrentBurst(relays, upstream)
        let admitted = burst.admitted
        let report = try Self.usage(relays[0])
        let day = try #require((report["windows"] as? [[String: Any]])?.first { $0["window"] as? String == "day" })
        let reserved = try #require(day["reserved"] as? Int)
        #expect(admitted >= 1)
        #expect(reserved <= budget, "reserved \(reserved) of \(budget) by \(admitted) streams")
        #expect(reserved / admitted >= 100, "each reservation covers max_tokens")
        #expect(admitted < 50)
        try Self.release(burst, upstream)
        // Settling follows the stream's end (fire and forget): wait for it, then every reservation is gone and
        // each stream is charged the provider's 11 tokens.
        var settledDay: [String: Any] = [:]
        try eventually("settled: \(settledDay)", timeout: 10) {
            let report = try Self.usage(relays[1])
            settledDay = (report["windows"] as? [[String: Any]])?.first { $0["window"] as? String == "day" } ?? [:]
            return settledDay["reserved"] as? Int == 0
        }
        #expect(settledDay["used"] as? Int == admitted * 11)
    }

    @Test("a stream cut at the end of a drain is charged in Redis by the time its replica has exited")
    func drainCutStreamIsChargedBeforeExit() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer {
            upstream.gate.signal(10)
            upstream.server.shutdown()
        }
        let relays = try Self.startReplicas(2, upstream: upstream.server.port, redis: redis,
                                            extra: #", "budgets": {"perIdentity": {"tokensPerDay": 100000}}, "timeouts": {"drainSeconds": 0.2}"#)
        let (client, head) = try Self.open(relays[0])
        defer { client.close() }
        #expect(head.status == 200)
        _ = try client.readChunkedBody(until: "Hel", timeout: 10)
        // SIGTERM: the drain's deadline passes with the stream still held upstream, so the relay cuts it, settles
        // it (no counts from the provider: the prompt estimate and the output floor) and exits.
        relays[0].terminate()
        #expect(!relays[0].isRunning)
        let report = try Self.usage(relays[1])
        let day = try #require((report["windows"] as? [[String: Any]])?.first { $0["window"] as? String == "day" })
        #expect(day["reserved"] as? Int == 0, "the cut stream's reservation was settled: \(day)")
        #expect((day["used"] as? Int ?? 0) > 0, "the cut stream was charged: \(day)")
    }

    @Test("Redis killed mid-run: running streams finish byte-exact, new requests get 503, and Redis back resumes admissions")
    func redisKilledAndRestarted() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.server.shutdown() }
        let relays = try Self.startReplicas(upstream: upstream.server.port, redis: redis,
                                            extra: #", "rateLimits": {"perIdentity": {"requestsPerMinute": 1000, "concurrentStreams": 10}}"#)
        let running = try relays.map { try Self.open($0) }
        #expect(running.allSatisfy { $0.1.status == 200 })
        redis.kill()
        for relay in relays {
            let (status, body) = try Self.request(relay)
            #expect(status == 503)
            #expect(String(decoding: body, as: UTF8.self).contains("state_unavailable"))
        }
        upstream.gate.signal(3)
        for (client, _) in running {
            let bytes = try client.readChunkedBody(until: "[DONE]", timeout: 10)
            #expect(String(decoding: bytes, as: UTF8.self) == Self.first + Self.rest)
        }
        #expect(relays.allSatisfy { $0.isRunning })
        try redis.restart()   // empty script cache: the relays reload their scripts on NOSCRIPT
        upstream.gate.signal(100)
        for relay in relays {
            try eventually("relay admits again", timeout: 10) { try Self.request(relay).0 == 200 }
        }
    }

    @Test("a replica killed with -9 while holding leases: the others admit again within the lease TTL")
    func killedReplicaLeasesExpire() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try HeldUpstream()
        defer { upstream.server.shutdown() }
        let ttl = 2
        let relays = try Self.startReplicas(upstream: upstream.server.port, redis: redis,
                                            extra: #", "rateLimits": {"perIdentity": {"concurrentStreams": 2}}"#, leaseTTLSeconds: ttl)
        let held = try [Self.open(relays[0]), Self.open(relays[0])]
        #expect(held.allSatisfy { $0.1.status == 200 })
        #expect(try Self.request(relays[1]).0 == 429)
        relays[0].kill()
        let killedAt = monotonicNanoseconds()
        upstream.gate.signal(100)
        try eventually("relays[1] admits again", timeout: Double(ttl) * 3) { try Self.request(relays[1]).0 == 200 }
        let waited = Double(monotonicNanoseconds() - killedAt) / 1e9
        #expect(waited <= Double(ttl) + 1.5, "slots came back after \(waited) s with a \(ttl) s lease TTL")
        #expect(relays[1].isRunning && relays[2].isRunning)
    }
}
