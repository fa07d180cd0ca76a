import RelayCore
import RelayState
import Support
import Transport

/// The one admission store double of the test targets: it records every call, and answers as `Answers` says, by
/// hand (the test calls the kept completion when it chooses, as Redis would, later, on the loop), at once admitting
/// everything (a fallback store), or by forwarding to a real store (to count what the server calls).
///
/// Every field is behind one lock (`Locked`), so tests may read it from any thread; completions run where the test
/// or the inner store runs them.
package final class RecordingAdmissionStore: AdmissionStore {
    package enum Answers: Sendable {
        /// Keep each completion in `admits` / `extensions` for the test to call.
        case byHand
        /// Admit at once with grant `grantID`, grow every extension, report nothing.
        case admitAll(grantID: UInt64)
        /// Pass every call to `inner`.
        case forward(to: any AdmissionStore)
    }

    package struct Admit: Sendable {
        package let request: AdmissionRequest
        package let answer: @Sendable (AdmissionDecision) -> Void
    }
    package struct Extension: Sendable {
        package let grant: AdmissionGrant
        package let tokens: Int
        package let answer: @Sendable (Bool) -> Void
    }
    private struct Record {
        var admits: [Admit] = []
        var extensions: [Extension] = []
        var settled: [(grant: AdmissionGrant, used: Int)] = []
        var log: [String] = []
        var shutdowns = 0
    }

    private let answers: Answers
    private let record = Locked(Record())

    package init(_ answers: Answers) { self.answers = answers }

    package var admits: [Admit] { record.withLock { $0.admits } }
    package var extensions: [Extension] { record.withLock { $0.extensions } }
    package var settled: [(grant: AdmissionGrant, used: Int)] { record.withLock { $0.settled } }
    /// Every call in order: `admit`, `extend <grant>`, `settle <grant> <tokens>`.
    package var log: [String] { record.withLock { $0.log } }
    package var shutdowns: Int { record.withLock { $0.shutdowns } }

    package func admit(_ request: AdmissionRequest, on loop: any LoopScheduler, _ completion: @escaping @Sendable (AdmissionDecision) -> Void) {
        record.withLock { $0.admits.append(Admit(request: request, answer: completion)); $0.log.append("admit") }
        switch answers {
        case .byHand: break
        case .admitAll(let id): completion(.admitted(AdmissionGrant(id: id, reservedTokens: request.budget?.tokens ?? 0)))
        case .forward(let inner): inner.admit(request, on: loop, completion)
        }
    }

    package func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        record.withLock { $0.extensions.append(Extension(grant: grant, tokens: tokens, answer: completion)); $0.log.append("extend \(grant.id)") }
        switch answers {
        case .byHand: break
        case .admitAll: completion(true)
        case .forward(let inner): inner.extend(grant, byTokens: tokens, on: loop, completion)
        }
    }

    package func settle(_ grant: AdmissionGrant, usedTokens: Int) {
        record.withLock { $0.settled.append((grant, usedTokens)); $0.log.append("settle \(grant.id) \(usedTokens)") }
        if case .forward(let inner) = answers { inner.settle(grant, usedTokens: usedTokens) }
    }

    package func usageReport(identity: String, wallClockSeconds: Int64, on loop: any LoopScheduler,
                             _ completion: @escaping @Sendable (BudgetReport?) -> Void) {
        if case .forward(let inner) = answers {
            inner.usageReport(identity: identity, wallClockSeconds: wallClockSeconds, on: loop, completion)
        } else {
            completion(nil)
        }
    }

    package func shutdown() { record.withLock { $0.shutdowns += 1 } }

    /// Lets go of the kept answers (what was asked stays readable). Each holds its exchange (as a real store's
    /// pending completion does until it answers, once), and the exchange holds this store: a harness calls this
    /// when it goes, so that an answer kept for the test, or never given, does not keep both alive for the run.
    package func dropAnswers() {
        record.withLock { r in
            r.admits = r.admits.map { Admit(request: $0.request, answer: { _ in }) }
            r.extensions = r.extensions.map { Extension(grant: $0.grant, tokens: $0.tokens, answer: { _ in }) }
        }
    }
}
