// MemoryAttestationStore: challenges redeemed once within their TTL, keys registered once, counters that only rise.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite struct MemoryAttestationStoreTests {
    static let t0 = Instant(nanoseconds: 5_000_000_000)

    static func key(_ id: String = "K") -> RegisteredAppAttestKey {
        RegisteredAppAttestKey(keyID: id, publicKey: [4] + [UInt8](repeating: 1, count: 64), appID: "ABCDE12345.com.example.app",
                               environment: "production", receipt: [9, 9], registeredAt: 1_800_000_000)
    }

    @Test func aChallengeIsRedeemedOnce() {
        let store = MemoryAttestationStore()
        #expect(store.issueChallenge("c1", ttlSeconds: 300, now: Self.t0))
        #expect(store.redeemChallenge("c1", now: Self.t0))
        #expect(!store.redeemChallenge("c1", now: Self.t0), "redeemed twice")
        #expect(!store.redeemChallenge("never-issued", now: Self.t0))
    }

    @Test func aChallengeExpiresAtItsTTL() {
        let store = MemoryAttestationStore()
        #expect(store.issueChallenge("early", ttlSeconds: 300, now: Self.t0))
        #expect(store.issueChallenge("late", ttlSeconds: 300, now: Self.t0))
        #expect(store.redeemChallenge("early", now: Self.t0.advanced(bySeconds: 299.999)))
        #expect(!store.redeemChallenge("late", now: Self.t0.advanced(bySeconds: 300)), "redeemed at its expiry")
    }

    @Test func theSameChallengeCannotBeIssuedTwice() {
        let store = MemoryAttestationStore()
        #expect(store.issueChallenge("c", ttlSeconds: 300, now: Self.t0))
        #expect(!store.issueChallenge("c", ttlSeconds: 300, now: Self.t0))
    }

    @Test func waitingChallengesAreBoundedOldestFirst() {
        let store = MemoryAttestationStore(maxChallenges: 3)
        for i in 0..<5 { #expect(store.issueChallenge("c\(i)", ttlSeconds: 300, now: Self.t0)) }
        #expect(store.pendingChallenges == 3)
        #expect(!store.redeemChallenge("c0", now: Self.t0) && !store.redeemChallenge("c1", now: Self.t0))
        #expect(store.redeemChallenge("c2", now: Self.t0) && store.redeemChallenge("c4", now: Self.t0))
    }

    @Test func theIssueOrderStaysBoundedWhileOneChallengeWaitsAndTheOthersAreRedeemed() {
        let store = MemoryAttestationStore()
        #expect(store.issueChallenge("kept", ttlSeconds: 3600, now: Self.t0))
        for i in 0..<20_000 {
            #expect(store.issueChallenge("c\(i)", ttlSeconds: 3600, now: Self.t0))
            #expect(store.redeemChallenge("c\(i)", now: Self.t0))
        }
        #expect(store.pendingChallenges == 1)
        #expect(store.issueOrderLength <= 2 * 1 + 1024 + 1, "\(store.issueOrderLength) entries for one waiting challenge")
        #expect(store.redeemChallenge("kept", now: Self.t0))
    }

    @Test func expiredChallengesAreSweptWhenNewOnesArrive() {
        let store = MemoryAttestationStore()
        for i in 0..<2_000 { _ = store.issueChallenge("old\(i)", ttlSeconds: 10, now: Self.t0) }
        #expect(store.redeemChallenge("old5", now: Self.t0))
        _ = store.issueChallenge("new", ttlSeconds: 10, now: Self.t0.advanced(bySeconds: 10))
        #expect(store.pendingChallenges == 1)
        #expect(store.redeemChallenge("new", now: Self.t0.advanced(bySeconds: 19)))
    }

    @Test func aKeyIdIsRegisteredOnce() {
        let store = MemoryAttestationStore()
        #expect(store.register(Self.key()))
        var other = Self.key()
        other.publicKey = [4] + [UInt8](repeating: 2, count: 64)
        #expect(!store.register(other))
        #expect(store.key("K") == Self.key())
        #expect(store.key("missing") == nil)
    }

    @Test func theCounterOnlyRisesStrictly() {
        let store = MemoryAttestationStore()
        _ = store.register(Self.key())
        #expect(store.raiseCounter("K", to: 0) == .notAbove, "0 is the registration's counter")
        #expect(store.raiseCounter("K", to: 1) == .raised)
        #expect(store.raiseCounter("K", to: 1) == .notAbove, "replay")
        #expect(store.raiseCounter("K", to: 5) == .raised)
        #expect(store.raiseCounter("K", to: 3) == .notAbove, "rollback")
        #expect(store.raiseCounter("K", to: UInt32.max) == .raised)
        #expect(store.key("K")?.counter == UInt32.max)
        #expect(store.raiseCounter("unknown", to: 7) == .notAbove)
    }

    @Test func aKeyServesTheFirstAccountThatAssertsWithIt() {
        let store = MemoryAttestationStore()
        _ = store.register(Self.key())
        #expect(store.raiseCounter("K", to: 1) == .raised, "no account (auth none): binds nothing")
        #expect(store.key("K")?.subject == nil)
        #expect(store.raiseCounter("K", to: 2, subject: "jwt:alice") == .raised)
        #expect(store.key("K")?.subject == "jwt:alice")
        #expect(store.raiseCounter("K", to: 3, subject: "jwt:bob") == .otherSubject)
        #expect(store.key("K")?.counter == 2, "the other account's assertion changed nothing")
        #expect(store.raiseCounter("K", to: 3, subject: "jwt:alice") == .raised)
        #expect(store.raiseCounter("K", to: 3, subject: "jwt:alice") == .notAbove, "a replay is still a replay")
        #expect(store.raiseCounter("K", to: 4) == .raised, "auth none: a bound key serves there too")
        #expect(store.key("K")?.subject == "jwt:alice")
    }
}
