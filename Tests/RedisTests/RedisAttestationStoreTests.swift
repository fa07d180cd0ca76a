// RedisAttestationStore against a real redis-server: challenges redeemed once (by any replica) within Redis's own
// TTL, keys registered once, counters raised by compare-and-set, so of two replicas handed one assertion at once
// exactly one accepts it; and a Redis that does not answer is `.unavailable`, never an acceptance.
import Redis
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import TestHarness
import TestSupportCore
import Transport

@Suite("Redis attestation store", .serialized)
struct RedisAttestationStoreTests {
    /// One "replica": its own loop and connection, the shared prefix.
    struct Node: Sendable {
        let client: RedisClient
        let store: RedisAttestationStore

        init(_ server: RedisServerProcess, timeoutMs: Int = 2_000) throws {
            let client = try readyClient(server, timeoutMs: timeoutMs)
            self.client = client
            store = RedisAttestationStore(keyPrefix: "attest-test:", connection: { _ in client }, logger: Logger(label: "t", level: .error))
        }

        var loop: EventLoop { client.loop }

        func issue(_ challenge: String, ttl: Int = 300) throws -> Bool {
            let box = Mailbox<Bool>()
            loop.execute { store.issueChallenge(challenge, ttlSeconds: ttl, on: loop) { box.put($0) } }
            return try box.take(timeout: 10)
        }

        func redeem(_ challenge: String) throws -> StoreOutcome {
            let box = Mailbox<StoreOutcome>()
            loop.execute { store.redeemChallenge(challenge, on: loop) { box.put($0) } }
            return try box.take(timeout: 10)
        }

        func register(_ key: RegisteredAppAttestKey) throws -> StoreOutcome {
            let box = Mailbox<StoreOutcome>()
            loop.execute { store.register(key, on: loop) { box.put($0) } }
            return try box.take(timeout: 10)
        }

        func key(_ id: String) throws -> StoreAnswer<RegisteredAppAttestKey> {
            let box = Mailbox<StoreAnswer<RegisteredAppAttestKey>>()
            loop.execute { store.key(id, on: loop) { box.put($0) } }
            return try box.take(timeout: 10)
        }

        func raise(_ id: String, _ counter: UInt32, subject: String? = nil) throws -> CounterRaise {
            let box = Mailbox<CounterRaise>()
            loop.execute { store.raiseCounter(id, to: counter, subject: subject, on: loop) { box.put($0) } }
            return try box.take(timeout: 10)
        }
    }

    static func key(_ id: String = "K") -> RegisteredAppAttestKey {
        // Bytes that are not UTF-8 (0xFF, NUL): the hash fields are binary-safe.
        RegisteredAppAttestKey(keyID: id, publicKey: [4, 0xFF, 0] + [UInt8](repeating: 0x80, count: 62), appID: "ABCDE12345.com.example.app",
                               environment: "development", receipt: [0, 0xFE, 0xFF], registeredAt: 1_800_000_123)
    }

    @Test func aChallengeIssuedOnOneReplicaIsRedeemedOnceOnAnother() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        #expect(try a.issue("c1"))
        #expect(try b.redeem("c1") == .done)
        #expect(try a.redeem("c1") == .unknown)
        #expect(try b.redeem("c1") == .unknown)
        #expect(try a.redeem("never") == .unknown)
        #expect(try a.issue("c2"))
        #expect(!(try b.issue("c2")), "the same challenge issued twice")
    }

    @Test func aChallengeExpiresWithRedissOwnClock() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis)
        #expect(try a.issue("short", ttl: 1))
        let ttl = try redis.command("PTTL attest-test:attest:challenge:short")
        #expect(ttl.hasPrefix(":") && (Int(ttl.dropFirst()) ?? 0) > 0 && (Int(ttl.dropFirst()) ?? 0) <= 1000, "\(ttl)")
        // The explicit condition: Redis itself says the key is gone (no sleep guesses how long that takes).
        try eventually("Redis expired the challenge", timeout: 10) { try redis.command("EXISTS attest-test:attest:challenge:short") == ":0" }
        #expect(try a.redeem("short") == .unknown)
    }

    @Test func aKeyIsRegisteredOnceAndReadBackByteForByte() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        #expect(try a.key("K") == .unknown)
        #expect(try a.register(Self.key()) == .done)
        var other = Self.key()
        other.publicKey[1] = 0x01
        #expect(try b.register(other) == .unknown, "a key id registered twice")
        var expected = Self.key()
        expected.receipt = []   // kept in Redis, not read per request
        #expect(try b.key("K") == .done(expected))
        #expect(try redis.command("HSTRLEN attest-test:attest:key:K receipt") == ":3")
    }

    @Test func counterRisesStrictlyAcrossReplicas() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        #expect(try a.register(Self.key()) == .done)
        #expect(try a.raise("K", 0) == .notAbove, "0 is the registration's counter")
        #expect(try a.raise("K", 1) == .raised)
        #expect(try b.raise("K", 1) == .notAbove, "replayed on the other replica")
        #expect(try b.raise("K", 7) == .raised)
        #expect(try a.raise("K", 6) == .notAbove, "rolled back")
        #expect(try a.raise("K", UInt32.max) == .raised)
        #expect(try b.raise("unknown", 9) == .notAbove)
        guard case .done(let stored) = try a.key("K") else { Issue.record("key gone"); return }
        #expect(stored.counter == UInt32.max)
    }

    @Test func aKeyServesTheFirstAccountThatAssertsWithItOnEveryReplica() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        #expect(try a.register(Self.key()) == .done)
        #expect(try a.raise("K", 1) == .raised, "no account (auth none): binds nothing")
        #expect(try redis.command("HEXISTS attest-test:attest:key:K subject") == ":0")
        #expect(try a.raise("K", 2, subject: "jwt:alice") == .raised)
        #expect(try b.raise("K", 3, subject: "jwt:bob") == .otherSubject, "another account, on the other replica")
        #expect(try b.raise("K", 3, subject: "jwt:alice") == .raised, "bob's refused assertion changed nothing")
        #expect(try a.raise("K", 3, subject: "jwt:alice") == .notAbove, "a replay is still a replay")
        #expect(try b.raise("K", 4) == .raised, "auth none: any bound key serves")
        #expect(try redis.command("HGET attest-test:attest:key:K subject").contains("jwt:alice"))
        #expect(try b.raise("unknown", 9, subject: "jwt:alice") == .notAbove)
    }

    @Test func twoAccountsRacingForAnUnboundKeyBindOne() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        let answers = Mailbox<CounterRaise>()
        for round in 1...10 {
            let id = "K\(round)"
            #expect(try a.register(Self.key(id)) == .done)
            for (i, node) in [a, b].enumerated() {
                node.loop.execute {
                    for n in 0..<5 {
                        node.store.raiseCounter(id, to: UInt32(1 + n), subject: "account-\(i)", on: node.loop) { answers.put($0) }
                    }
                }
            }
            var outcomes: [CounterRaise] = []
            for _ in 0..<10 { outcomes.append(try answers.take(timeout: 10)) }
            // One account took the key with its first raise: every answer to the other is `otherSubject`, and
            // each of its own rising counters went through.
            #expect(outcomes.filter { $0 == .otherSubject }.count == 5, "round \(round): \(outcomes)")
            #expect(outcomes.filter { $0 == .raised }.count == 5, "round \(round): \(outcomes)")
        }
    }

    @Test func oneAssertionRacedOnTwoReplicasIsAcceptedOnce() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis), b = try Node(redis)
        #expect(try a.register(Self.key()) == .done)
        let answers = Mailbox<CounterRaise>()
        for round in 1...20 {
            // The same counter sent by both replicas in one turn of each loop: both scripts queue in Redis together.
            for node in [a, b] {
                node.loop.execute {
                    for _ in 0..<5 { node.store.raiseCounter("K", to: UInt32(round), subject: nil, on: node.loop) { answers.put($0) } }
                }
            }
            var accepted = 0
            for _ in 0..<10 { if try answers.take(timeout: 10) == .raised { accepted += 1 } }
            #expect(accepted == 1, "round \(round): \(accepted) accepted")
        }
    }

    @Test func aStalledRedisIsUnavailableNeverAnAcceptance() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let a = try Node(redis, timeoutMs: 200)
        #expect(try a.register(Self.key()) == .done)
        redis.pause()
        defer { redis.resume() }
        #expect(try a.raise("K", 1) == .unavailable)
        #expect(try a.key("K") == .unavailable)
        #expect(try a.redeem("c") == .unavailable)
        #expect(!(try a.issue("c")))
        #expect(try a.register(Self.key("L")) == .unavailable)
    }
}
