import RelayCore
import Support
import Transport

/// The `AttestationStore` of one replica: challenges and App Attest keys in this process's memory, behind one
/// lock, so each redemption, registration and counter raise is one atomic step. Answers every call at once, on
/// the caller's queue. Challenge expiry reads the caller's loop clock (a manual clock in tests).
///
/// Bounded: at most `maxChallenges` challenges wait at once; beyond that the oldest go first (they expire in order,
/// since every challenge lives equally long); the issue-order list holds at most twice as many, plus 1024. Keys
/// are not bounded here: each one took a valid Apple attestation. Safe from any thread or queue (`Locked`).
package final class MemoryAttestationStore: AttestationStore {
    package static let defaultMaxChallenges = 100_000

    struct State: Sendable {
        /// Challenge → when it expires.
        var challenges: [String: Instant] = [:]
        /// Issue order (which is expiry order), consumed from `head`; entries already redeemed are skipped.
        var order: [String] = []
        var head = 0
        var keys: [String: RegisteredAppAttestKey] = [:]
    }

    private let state = Locked(State())
    private let maxChallenges: Int

    package init(maxChallenges: Int = MemoryAttestationStore.defaultMaxChallenges) {
        self.maxChallenges = max(1, maxChallenges)
    }

    /// Challenges waiting to be redeemed (expired ones not yet swept included).
    package var pendingChallenges: Int { state.withLock { $0.challenges.count } }

    /// Entries of the issue-order list not yet consumed, redeemed ones included (tests: its bound).
    package var issueOrderLength: Int { state.withLock { $0.order.count - $0.head } }

    package func issueChallenge(_ challenge: String, ttlSeconds: Int, now: Instant) -> Bool {
        state.withLock { s in
            // Sweep what expired, then make room: both from the oldest end.
            while s.head < s.order.count {
                let oldest = s.order[s.head]
                guard let expiry = s.challenges[oldest] else { s.head += 1; continue }
                guard expiry <= now || s.challenges.count >= maxChallenges else { break }
                s.challenges[oldest] = nil
                s.head += 1
            }
            if s.head > 1024 && s.head * 2 > s.order.count {
                s.order.removeFirst(s.head)
                s.head = 0
            }
            // A redeemed challenge stays in `order` until the sweep passes it, and the sweep stops at the oldest
            // one still waiting: a caller that keeps one waiting and redeems all the others would grow the list
            // for as long as that one lives. Dropped when they are most of it, so the list stays within twice the
            // challenges waiting (plus 1024), at a cost spread over the issues that made them.
            if s.order.count - s.head > 2 * s.challenges.count + 1024 {
                let waiting = s.challenges
                s.order = s.order[s.head...].filter { waiting[$0] != nil }
                s.head = 0
            }
            guard s.challenges[challenge] == nil else { return false }
            s.challenges[challenge] = now.advanced(bySeconds: Double(ttlSeconds))
            s.order.append(challenge)
            return true
        }
    }

    package func redeemChallenge(_ challenge: String, now: Instant) -> Bool {
        state.withLock { s in
            guard let expiry = s.challenges.removeValue(forKey: challenge) else { return false }
            return now < expiry
        }
    }

    package func register(_ key: RegisteredAppAttestKey) -> Bool {
        state.withLock { s in
            guard s.keys[key.keyID] == nil else { return false }
            s.keys[key.keyID] = key
            return true
        }
    }

    package func key(_ keyID: String) -> RegisteredAppAttestKey? { state.withLock { $0.keys[keyID] } }

    /// Compare-and-set: raised only when `counter` is strictly greater than the stored counter, and, with a
    /// `subject`, the key serves no other account (it is bound to `subject` if it served none).
    package func raiseCounter(_ keyID: String, to counter: UInt32, subject: String? = nil) -> CounterRaise {
        state.withLock { s in
            guard let key = s.keys[keyID] else { return .notAbove }
            if let subject, let bound = key.subject, bound != subject { return .otherSubject }
            guard counter > key.counter else { return .notAbove }
            s.keys[keyID]!.counter = counter
            if let subject, key.subject == nil { s.keys[keyID]!.subject = subject }
            return .raised
        }
    }

    // MARK: AttestationStore

    package func issueChallenge(_ challenge: String, ttlSeconds: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        completion(issueChallenge(challenge, ttlSeconds: ttlSeconds, now: loop.clock.now()))
    }

    package func redeemChallenge(_ challenge: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void) {
        completion(redeemChallenge(challenge, now: loop.clock.now()) ? .done : .unknown)
    }

    package func register(_ key: RegisteredAppAttestKey, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void) {
        completion(register(key) ? .done : .unknown)
    }

    package func key(_ keyID: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreAnswer<RegisteredAppAttestKey>) -> Void) {
        completion(key(keyID).map { .done($0) } ?? .unknown)
    }

    package func raiseCounter(_ keyID: String, to counter: UInt32, subject: String?, on loop: any LoopScheduler,
                              _ completion: @escaping @Sendable (CounterRaise) -> Void) {
        completion(raiseCounter(keyID, to: counter, subject: subject))
    }
}
