// A cancel is never free (issue 18 §4): a stream that ends without the provider's counts is charged at least
// `budgets.cancelFloorTokensPerSecond` for every second since the call to the provider, capped by its output
// reservation; and a client that leaves between OpenAI's finish chunk and its usage chunk leaves the relay reading
// for that chunk, at most `ExchangeStateMachine.finishDrainSeconds`. The exchange harness's manual clock measures
// the silence exactly.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import Support
import Testing
import Usage

extension RelayExchangeTests {
    /// 4096 reserved for output, the floor at its default (50 a second).
    static let floorBudgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000), onExceed: .cut,
                                                  defaultReserveTokens: 4096)

    /// A reasoning model's silent phase: `seconds` pass after the head with no content, in steps under the harness's
    /// 5 s idle timeout, each ending with an SSE comment (what keeps a real idle timer quiet; not content).
    static func silence(_ h: Harness, seconds: Int) {
        for _ in 0..<(seconds / 4) {
            h.advance(4)
            h.run { _ = h.call.body(": keep-alive\n\n") }
        }
    }

    /// The chat request (5 prompt tokens) admitted with `reserved` tokens and answered with a 200 event-stream head.
    static func headAnswered(_ h: Harness, _ store: RecordingAdmissionStore, request: String = ChatStream.request, reserved: Int) {
        h.run {
            h.exchange.requestBody(Array(request.utf8))
            h.exchange.requestEnd()
            store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: reserved)))
            h.call.head(200)
        }
    }

    @Test func aClientThatLeavesAfterASilentPhasePaysTheFloorForIt() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        Self.headAnswered(h, store, reserved: 4096 + 5)
        #expect(store.admits.first?.request.budget?.tokens == 4096 + 5)
        Self.silence(h, seconds: 32)
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 1)
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 32 * 50, source: .estimate))
        #expect(store.settled.map(\.used) == [5 + 32 * 50], "the silent phase was free")
    }

    @Test func theFloorIsCappedByTheOutputReservation() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        let request = #"{"model":"gpt-4o","stream":true,"max_tokens":300,"messages":[{"role":"user","content":"How are you today?"}]}"#
        Self.headAnswered(h, store, request: request, reserved: 300 + 5)
        Self.silence(h, seconds: 32)
        h.run { h.exchange.clientClosed() }
        #expect(store.settled.map(\.used) == [5 + 300])
    }

    @Test func theFloorCountsFromTheCallInFractionsOfASecondRoundedUp() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        h.advance(3)   // before the request was whole: nothing asked of the provider yet
        Self.headAnswered(h, store, reserved: 4096 + 5)
        h.advance(1.01)
        h.run {
            _ = h.call.body(ChatStream.hello)   // one content event, "Hello": 1 token counted
            h.exchange.clientClosed()
        }
        #expect(store.settled.map(\.used) == [5 + 51])
    }

    @Test func providerCountsNeedNoFloorAndTheFloorCanBeTurnedOff() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets, usage: Self.openAIInjecting)
        Self.headAnswered(h, store, reserved: 4096 + 5)
        Self.silence(h, seconds: 32)
        h.run {
            for e in ChatStream.events { _ = h.call.body(e) }
            h.call.complete()
        }
        #expect(store.settled.map(\.used) == [9 + 2], "the provider's own count is the charge")

        var off = Self.floorBudgets
        off.cancelFloorTokensPerSecond = 0
        let offStore = RecordingAdmissionStore(.byHand)
        let o = Self.admitting(offStore, budgets: off)
        Self.headAnswered(o, offStore, reserved: 4096 + 5)
        Self.silence(o, seconds: 32)
        o.run { o.exchange.clientClosed() }
        #expect(offStore.settled.map(\.used) == [5])
    }

    /// A stream's head can wait for its first chunk, after a thinking model's silent phase (Gemini), which the
    /// provider bills: a client that leaves before the head (8 s) pays the floor from the call, not the prompt alone.
    @Test func aStreamLeftBeforeItsHeadPaysTheFloorFromTheCall() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        h.run {
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
            store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 4096 + 5)))
        }
        h.advance(8)
        h.run { h.exchange.clientClosed() }
        #expect(store.settled.map(\.used) == [5 + 8 * 50])
    }

    /// A request whose answer comes whole has its head only when the provider is done: a client that leaves
    /// before it (8 s), or a first-byte timeout (the harness's 10 s), pays the floor from the call's start, not the
    /// prompt alone.
    @Test(arguments: [(8.0, 5 + 400), (10.0, 5 + 500)])
    func aWholeAnswerEndedBeforeItsHeadPaysTheFloorFromTheCall(seconds: Double, charged: Int) {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        h.run {
            h.exchange.requestBody(Array(#"{"model":"gpt-4o","messages":[{"role":"user","content":"How are you today?"}]}"#.utf8))
            h.exchange.requestEnd()
            store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 4096 + 5)))
        }
        h.advance(seconds)
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 1)
        #expect(store.settled.map(\.used) == [charged])
        #expect(h.exchange.record.usage?.source == .estimate)
    }

    // MARK: The guard counts the silence too

    /// A reasoning model's silent phase is billed but never shown: the budget guard counts it at the floor's rate
    /// beside the visible output. 4096 reserved: at 3 277 counted (66 s of silence) one more step is asked for,
    /// with no content seen; refused, the stream ends with the closing event and the upstream is cancelled.
    @Test func aSilentStreamAsksForMoreAndIsCutWhenRefused() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, budgets: Self.floorBudgets)
        Self.headAnswered(h, store, reserved: 4096 + 5)
        Self.silence(h, seconds: 64)
        #expect(store.extensions.isEmpty, "3 200 counted: under the threshold")
        Self.silence(h, seconds: 4)
        #expect(store.extensions.map(\.tokens) == [4096])
        h.run { store.extensions[0].answer(false) }
        #expect(h.call.cancelled == 1)
        #expect(h.exchange.record.outcome == "budget_exhausted")
        #expect(String(decoding: h.writer.body, as: UTF8.self).hasSuffix(#""code":"budget_exhausted"}}"# + "\n\n"))
        #expect(store.settled.map(\.used) == [5 + 68 * 50])
    }

    /// A provider silent with no bytes at all (not even comments) is looked at when a heartbeat is due: the guard
    /// asks at the first heartbeat after the threshold. 100 reserved: 80 counted at 1.6 s; heartbeats every 2 s.
    @Test func aSilenceWithoutBytesIsCountedAtTheHeartbeat() {
        let store = RecordingAdmissionStore(.byHand)
        var budgets = Self.floorBudgets
        budgets.defaultReserveTokens = 100
        let h = Self.admitting(store, budgets: budgets)
        h.run { h.exchange.keeping = StreamKeeping(heartbeatSeconds: 2) }
        Self.headAnswered(h, store, reserved: 100 + 5)
        h.advance(1.9)
        #expect(store.extensions.isEmpty)
        h.advance(0.1)
        #expect(h.exchange.record.heartbeats == 1)
        #expect(store.extensions.map(\.tokens) == [100])
        h.run { store.extensions[0].answer(true) }
        #expect(h.call.cancelled == 0)
    }

    /// With the floor turned off the guard counts visible output only, as before.
    @Test func withoutAFloorTheSilenceIsNotCounted() {
        let store = RecordingAdmissionStore(.byHand)
        var off = Self.floorBudgets
        off.cancelFloorTokensPerSecond = 0
        let h = Self.admitting(store, budgets: off)
        Self.headAnswered(h, store, reserved: 4096 + 5)
        Self.silence(h, seconds: 200)
        #expect(store.extensions.isEmpty)
    }

    // MARK: Leaving between the finish chunk and the usage chunk

    /// Role, "Hello", the finish chunk: the answer is whole and its usage chunk is next.
    static let finished = [ChatStream.role, ChatStream.hello, ChatStream.stop]

    @Test func aClientThatLeavesAfterTheFinishChunkLeavesTheRelayReadingForTheUsage() {
        let h = Harness(usage: Self.openAIInjecting)   // onClientCancel: cancel (no drainMaxSeconds)
        Self.play(h, events: Self.finished, complete: false)
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 0, "cancelled with the usage one chunk away")
        #expect(h.ended == 0)
        h.advance(1.5)
        h.run { _ = h.call.body(ChatStream.usage) }
        #expect(h.call.cancelled == 1, "read on after the usage arrived")
        #expect(h.ended == 1)
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
        #expect(h.exchange.record.outcome == "client_cancelled")
        #expect(h.writer.body == Array(Self.finished.joined().utf8), "a byte went to the departed client")
    }

    @Test func theReadAfterTheFinishChunkLastsTwoSecondsAtMost() {
        let h = Harness(usage: Self.openAIInjecting)
        Self.play(h, events: Self.finished, complete: false)
        h.run { h.exchange.clientClosed() }
        h.advance(1.999)
        #expect(h.ended == 0)
        h.advance(0.001)
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
        #expect(h.exchange.record.usage?.source == .estimate)
    }

    @Test func aClientThatLeavesBeforeTheFinishChunkCancelsAtOnce() {
        let h = Harness(usage: Self.openAIInjecting)
        Self.play(h, events: [ChatStream.role, ChatStream.hello], complete: false)
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
    }
}
