// Admission in RelayExchange, with the fakes of RelayExchangeTests and an admission store that answers when the
// test says (as Redis would, later, on the loop): the wait, the client leaving meanwhile, refusals, the settle, and
// a stream's reservation growing or the stream being cut at an event boundary.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import Support
import Testing
import Transport

extension RelayExchangeTests {
    static let budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000), onExceed: .cut, defaultReserveTokens: 10)

    /// A harness whose exchange asks `store`, keyed on identity `app`.
    static func admitting(_ store: RecordingAdmissionStore, budgets: BudgetConfiguration? = RelayExchangeTests.budgets,
                          usage: UsageMeter.Settings = UsageMeter.Settings()) -> Harness {
        let h = Harness(usage: usage)
        h.run {
            h.exchange.admission = ExchangeAdmission(store: store, address: "198.51.100.7", identity: "app",
                                                     budgetKey: budgets == nil ? nil : "app", budgets: budgets,
                                                     routeMaxTokens: nil, wallClock: { 1_797_328_800 })
        }
        return h
    }

    /// The chat request, admitted with 15 tokens reserved (10 + 5), a 200 event-stream head and `hellos` events.
    static func streamAdmitted(_ h: Harness, _ store: RecordingAdmissionStore, hellos: Int) {
        h.run {
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
            store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 15)))
            h.call.head(200)
            for _ in 0..<hellos { h.call.body(ChatStream.hello) }
        }
    }

    /// These bodies are short and the test's default reserve small (10 + a 5-token prompt), so the reservation is
    /// the floor every request reserves: the body's bytes ÷ 4, rounded up (above 15 here).
    static func floor(_ body: String) -> Int {
        let floor = (body.utf8.count + 3) / 4
        precondition(floor > 15, "the fixture no longer tests the floor")
        return floor
    }

    @Test func theProviderWaitsForTheStoreAndTheReservationIsTheDefaultPlusThePrompt() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        h.run {
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
        }
        #expect(h.upstream.calls.isEmpty, "called before the store answered")
        #expect(store.admits.map(\.request) == [AdmissionRequest(address: "198.51.100.7", identity: "app",
                                                                 budget: BudgetCharge(key: "app", tokens: Self.floor(ChatStream.request)),
                                                                 wallClockSeconds: 1_797_328_800)])
        h.run { store.admits[0].answer(.admitted(AdmissionGrant(id: 7, reservedTokens: 15))) }
        #expect(h.upstream.calls.count == 1)
        h.run {
            h.call.head(200)
            h.call.body(ChatStream.hello)
            h.call.complete()
        }
        #expect(store.settled.map(\.grant.id) == [7], "settled exactly once")
        #expect(store.settled.first?.used == 5 + 1, "the estimate: 5 prompt tokens and one content event")
    }

    @Test func aRequestCeilingIsReservedAndNeedsNoGuard() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        h.run {
            h.exchange.requestBody(Array(#"{"model":"gpt-4o","max_tokens":300,"max_completion_tokens":200,"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8))
            h.exchange.requestEnd()
        }
        #expect(store.admits.first?.request.budget == BudgetCharge(key: "app", tokens: 300 + 5))
    }

    @Test func aClientThatLeavesWhileTheStoreDecidesGetsNoCallAndItsGrantGoesBackAtOnce() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Harness(drainMaxSeconds: 30)   // even a drain route: nothing was called, nothing to drain
        h.run {
            h.exchange.admission = ExchangeAdmission(store: store, address: "198.51.100.7", identity: "app", budgetKey: "app",
                                                     budgets: Self.budgets, routeMaxTokens: nil, wallClock: { 1_797_328_800 })
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
            h.exchange.clientClosed()
        }
        #expect(h.ended == 1)
        h.run { store.admits[0].answer(.admitted(AdmissionGrant(id: 3, reservedTokens: 15))) }
        #expect(h.upstream.calls.isEmpty)
        #expect(store.settled.map(\.grant.id) == [3])
        #expect(store.settled.first?.used == 0)
        #expect(h.writer.events.isEmpty)
    }

    @Test func refusalsAreAnsweredWithTheirErrorAndNoCall() {
        for (refusal, status, code) in [(AdmissionRefusal.budget(retryAfterSeconds: 50_400), 429, "budget_exhausted"),
                                        (.rate(retryAfterSeconds: 2), 429, "rate_limit_exceeded"),
                                        (.concurrency(retryAfterSeconds: 1), 429, "concurrency_limit_exceeded"),
                                        (.unavailable, 503, "state_unavailable")] {
            let store = RecordingAdmissionStore(.byHand)
            let h = Self.admitting(store)
            h.run {
                h.exchange.requestEnd()
                store.admits[0].answer(.refused(refusal))
            }
            #expect(h.writer.events == [.error(status: status, code: code)], "\(refusal)")
            #expect(h.upstream.calls.isEmpty)
            #expect(store.settled.isEmpty)
            #expect(h.ended == 1)
            #expect(h.exchange.record.rejection == refusal.reason)
        }
    }

    /// 10 tokens reserved for output: at 8 counted (the 7th "Hello": 35 bytes of text / 4) one more step is asked
    /// for; bytes flow while it is pending; refused, the stream ends at once (it is at a boundary) with the closing
    /// event, the upstream cancelled.
    @Test func aRefusedExtensionEndsTheStreamWithOneErrorEventAndCancelsTheUpstream() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        Self.streamAdmitted(h, store, hellos: 6)
        #expect(store.extensions.isEmpty)
        _ = h.run { h.call.body(ChatStream.hello) }
        #expect(store.extensions.map(\.tokens) == [10])
        h.run {
            #expect(h.call.body(ChatStream.world), "bytes stopped while the extension was pending")
            #expect(h.call.body(ChatStream.world))
        }
        #expect(store.extensions.count == 1, "a second extension while one was in flight")
        h.run { store.extensions[0].answer(false) }
        let expected = String(repeating: ChatStream.hello, count: 7) + ChatStream.world + ChatStream.world
            + #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        #expect(String(decoding: h.writer.body, as: UTF8.self) == expected)
        #expect(h.writer.events.last == .finish(keepAlive: true))
        #expect(h.call.cancelled == 1)
        #expect(h.exchange.record.outcome == "budget_exhausted")
        #expect(store.settled.map(\.used) == [5 + 11], "9 events, 47 bytes of text: 11 tokens")
        #expect(h.metrics.render().contains(#"sse_relay_budget_cuts_total{route="/v1/"} 1"#))
    }

    @Test func aGrantedExtensionLetsTheStreamRunOn() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        Self.streamAdmitted(h, store, hellos: 7)
        h.run {
            store.extensions[0].answer(true)
            for _ in 0..<7 { h.call.body(ChatStream.hello) }
        }
        #expect(store.extensions.count == 1, "the next step is asked for at 18 tokens (the 15th Hello), not before")
        _ = h.run { h.call.body(ChatStream.hello) }
        #expect(store.extensions.count == 2)
        h.run { h.call.complete() }
        #expect(h.call.cancelled == 0)
        #expect(h.writer.events.last == .finish(keepAlive: true))
        #expect(store.settled.count == 1)
    }

    /// The refusal arrives while the client has half an event: the rest of that event passes, then the closing
    /// event; the bytes after the boundary are dropped.
    @Test func aCutMidEventWaitsForTheEventsEnd() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        let half = ChatStream.world.count - 1
        let world = Array(ChatStream.world.utf8)
        Self.streamAdmitted(h, store, hellos: 8)
        h.run {
            h.call.body(String(decoding: world[..<half], as: UTF8.self))
            store.extensions[0].answer(false)
        }
        #expect(h.call.cancelled == 0, "cut before the event under way ended")
        _ = h.run { h.call.body("\n" + ChatStream.hello) }
        let expected = String(repeating: ChatStream.hello, count: 8) + ChatStream.world
            + #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        #expect(String(decoding: h.writer.body, as: UTF8.self) == expected)
        #expect(h.call.cancelled == 1)
        #expect(h.writer.events.last == .finish(keepAlive: true))
    }

    /// A CRLF stream whose delivery ends inside the blank line's CRLF (`…\r\n\r`, its LF first in the next
    /// delivery): the event has ended, but a closing event written right after that CR reads, to a parser that
    /// splits lines on LF alone, as a line `\rdata: {…}`, an unknown field: the error is lost and the stream ends
    /// cleanly, a truncated answer that looks whole. The cut waits for the LF, as a heartbeat does; the refusal
    /// may come at that point (`refusedThere`) or mid-event, before the delivery that ends with the CR.
    @Test(arguments: [false, true])
    func aCutAfterALoneCRWaitsForItsLF(refusedThere: Bool) {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        let world = Array(ChatStream.world.replacingOccurrences(of: "\n", with: "\r\n").utf8)
        Self.streamAdmitted(h, store, hellos: 8)
        h.run {
            h.call.body(String(decoding: world[..<20], as: UTF8.self))
            if !refusedThere { store.extensions[0].answer(false) }
            h.call.body(String(decoding: world[20..<(world.count - 1)], as: UTF8.self))
            if refusedThere { store.extensions[0].answer(false) }
        }
        #expect(h.call.cancelled == 0, "cut between the CR and its LF")
        _ = h.run { h.call.body("\n" + ChatStream.hello) }
        let expected = String(repeating: ChatStream.hello, count: 8) + String(decoding: world, as: UTF8.self)
            + #"data: {"error":{"message":"The token budget is used up; the answer was cut short.","type":"budget_exhausted","code":"budget_exhausted"}}"# + "\n\n"
        #expect(String(decoding: h.writer.body, as: UTF8.self).debugDescription == expected.debugDescription)
        #expect(h.call.cancelled == 1)
        #expect(h.writer.events.last == .finish(keepAlive: true))
    }

    @Test func finishLetsTheStreamRunAndChargesIt() {
        let store = RecordingAdmissionStore(.byHand)
        var budgets = Self.budgets
        budgets.onExceed = .finish
        let h = Self.admitting(store, budgets: budgets)
        Self.streamAdmitted(h, store, hellos: 8)
        h.run {
            store.extensions[0].answer(false)
            for _ in 0..<20 { h.call.body(ChatStream.hello) }
            h.call.complete()
        }
        #expect(h.call.cancelled == 0)
        #expect(h.writer.body == Array(String(repeating: ChatStream.hello, count: 28).utf8))
        #expect(store.extensions.count == 1)
        #expect(store.settled.map(\.used) == [5 + 35], "28 deltas of 5 bytes: 35 tokens")
    }

    /// Output is counted by its text, not one token per event: a Gemini chunk carries dozens of tokens, and counted
    /// as one, a guarded stream ran to many times its reservation before its first extension. 10 tokens reserved
    /// for output, the step asked at 8: one chunk with 40 bytes of text (10 tokens) asks at once. The framing is
    /// not text: chunks of 4 bytes of text in 200 bytes of JSON count one token each.
    @Test func aGeminiChunkCountsItsTextNotOneTokenPerEvent() {
        func chunk(_ text: String) -> String {
            #"data: {"candidates":[{"content":{"parts":[{"text":"\#(text)"}],"role":"model"},"index":0,"safetyRatings":[]}],"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5},"modelVersion":"gemini-2.5-flash"}"# + "\r\n\r\n"
        }
        /// A Gemini stream admitted with 15 tokens reserved (10 + 5), its chunks delivered one by one.
        func streamed(_ chunks: [String]) -> (RecordingAdmissionStore, Harness) {
            let store = RecordingAdmissionStore(.byHand)
            let h = Self.admitting(store, usage: UsageMeter.Settings(provider: .gemini))
            h.run {
                h.exchange.requestBody(Array(#"{"contents":[{"parts":[{"text":"How are you today?"}]}]}"#.utf8))
                h.exchange.requestEnd()
                store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 15)))
                h.call.head(200)
                for c in chunks { h.call.body(c) }
            }
            return (store, h)
        }
        let (store, _) = streamed([chunk(String(repeating: "word ", count: 8))])
        #expect(store.extensions.map(\.tokens) == [10], "40 bytes of text are 10 tokens, past the step's 80 %")
        let (framed, f) = streamed(Array(repeating: chunk("word"), count: 7))
        #expect(framed.extensions.isEmpty, "7 chunks of 4 bytes of text are 7 tokens, whatever their framing")
        _ = f.run { f.call.body(chunk("word")) }
        #expect(framed.extensions.count == 1)
    }

    /// Anthropic deltas and OpenAI chunks likewise: the text of `delta.text` / `delta.content`, bytes / 4.
    @Test func anthropicAndOpenAIDeltasCountTheirText() {
        let long = String(repeating: "abcd", count: 8)   // 32 bytes: 8 tokens, the threshold
        let anthropic = RecordingAdmissionStore(.byHand)
        let a = Self.admitting(anthropic, usage: UsageMeter.Settings(provider: .anthropic))
        a.run {
            a.exchange.requestBody(Array(#"{"model":"claude","stream":true,"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8))
            a.exchange.requestEnd()
            anthropic.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 15)))
            a.call.head(200)
            a.call.body("event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\#(long)"}}"# + "\n\n")
        }
        #expect(anthropic.extensions.count == 1)
        let openAI = RecordingAdmissionStore(.byHand)
        let o = Self.admitting(openAI)
        Self.streamAdmitted(o, openAI, hellos: 0)
        _ = o.run { o.call.body(#"data: {"choices":[{"index":0,"delta":{"content":"\#(long)"}}]}"# + "\n\n") }
        #expect(openAI.extensions.count == 1)
    }

    /// A non-streaming request without a ceiling cannot be guarded (no events to count), so it carries the ceiling
    /// it reserved: the provider stops there. One that names its own ceiling is forwarded as received.
    @Test func aNonStreamingRequestWithoutACeilingCarriesTheReservedOne() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        let request = #"{"model":"o3","messages":[{"role":"user","content":"How are you today?"}]}"#
        h.run {
            h.exchange.requestBody(Array(request.utf8))
            h.exchange.requestEnd()
            store.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 15)))
        }
        #expect(store.admits.first?.request.budget == BudgetCharge(key: "app", tokens: Self.floor(request)))
        #expect(h.call.request.body.map { String(decoding: $0, as: UTF8.self) }
                == #"{"model":"o3","messages":[{"role":"user","content":"How are you today?"}],"max_completion_tokens":10}"#)

        let named = RecordingAdmissionStore(.byHand)
        let n = Self.admitting(named)
        let own = #"{"model":"o3","max_tokens":7,"messages":[{"role":"user","content":"How are you today?"}]}"#
        n.run {
            n.exchange.requestBody(Array(own.utf8))
            n.exchange.requestEnd()
            named.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 12)))
        }
        #expect(n.call.request.body == Array(own.utf8))

        let unbudgeted = RecordingAdmissionStore(.byHand)
        let u = Self.admitting(unbudgeted, budgets: nil)
        u.run {
            u.exchange.requestBody(Array(request.utf8))
            u.exchange.requestEnd()
            unbudgeted.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 0)))
        }
        #expect(u.call.request.body == Array(request.utf8), "without budgets the body is not touched")
    }

    @Test func aDuplicatedCeilingIsRefusedBeforeTheStore() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store)
        h.run {
            h.exchange.requestBody(Array(#"{"model":"o3","stream":true,"max_tokens":1,"max_tokens":null,"messages":[]}"#.utf8))
            h.exchange.requestEnd()
        }
        #expect(h.writer.events == [.error(status: 400, code: "ambiguous_body")])
        #expect(store.admits.isEmpty)
        #expect(h.upstream.calls.isEmpty)
    }
}
