// Usage accounting in RelayExchange, with the fakes of RelayExchangeTests: the tap's copy, include_usage injection
// and the strip of its event, the estimate on cancel, and the drain.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import Testing
import Usage

/// An OpenAI chat stream (docs: "Streaming", `stream_options.include_usage`), one event per delivery.
enum ChatStream {
    static let role = #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"# + "\n\n"
    static let hello = #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}],"usage":null}"# + "\n\n"
    static let world = #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}],"usage":null}"# + "\n\n"
    static let stop = #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"# + "\n\n"
    static let usage = #"data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}"# + "\n\n"
    static let done = "data: [DONE]\n\n"
    static let events = [role, hello, world, stop, usage, done]
    static let providerUsage = Usage(prompt: 9, completion: 2, cached: 4, reasoning: 1, source: .provider)

    /// 18 characters of message text: 5 estimated prompt tokens.
    static let request = #"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"How are you today?"}]}"#
    static let injected = #"{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"How are you today?"}],"stream_options":{"include_usage":true}}"#
}

extension RelayExchangeTests {
    static let openAIInjecting = UsageMeter.Settings(provider: .openai, injectsUsage: true, modelAllowlist: ["gpt-4o"])

    /// Sends the request body, a 200 event-stream head and each event as one delivery.
    static func play(_ h: Harness, request: String = ChatStream.request, events: [String], complete: Bool = true) {
        h.run {
            h.exchange.requestBody(Array(request.utf8))
            h.exchange.requestEnd()
            h.call.head(200)
            for e in events { h.call.body(e) }
            if complete { h.call.complete() }
        }
    }

    @Test func injectionAddsIncludeUsageAndRemovesExactlyItsEventFromTheClientsStream() {
        let h = Harness(usage: Self.openAIInjecting)
        Self.play(h, events: ChatStream.events)
        #expect(h.call.request.body == Array(ChatStream.injected.utf8))
        let expected = ChatStream.events.filter { $0 != ChatStream.usage }.joined()
        #expect(h.writer.body == Array(expected.utf8))
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
        #expect(h.exchange.record.model == "gpt-4o")
        #expect(h.exchange.record.modelLabel == "gpt-4o")
        #expect(h.exchange.record.bytesOut == expected.utf8.count)
    }

    @Test(arguments: [
        (#"{"model":"gpt-4o","stream":true,"stream":true,"messages":[]}"#, "stream"),
        (#"{"model":"gpt-4o","stream":true,"stream_options":{},"stream_options":{"include_usage":false},"messages":[]}"#,
         "stream_options"),
    ])
    func aDuplicatedStreamKeyCannotBlindTheAccounting(_ c: (String, String)) {
        let h = Harness(usage: Self.openAIInjecting)
        h.run {
            h.exchange.requestBody(Array(c.0.utf8))
            h.exchange.requestEnd()
        }
        #expect(h.upstream.calls.isEmpty, "a body the injection cannot read reached the provider")
        #expect(h.writer.events == [.error(status: 400, code: "ambiguous_body")], "\(c.1)")
        let passes = Harness(usage: UsageMeter.Settings(provider: .openai, injectsUsage: false))
        passes.run {
            passes.exchange.requestBody(Array(c.0.utf8))
            passes.exchange.requestEnd()
        }
        #expect(passes.upstream.calls.count == 1, "routes that do not inject forward it as before")
    }

    @Test func aClientThatAskedForUsageGetsTheStreamUntouched() {
        let asked = #"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#
        let h = Harness(usage: Self.openAIInjecting)
        Self.play(h, request: asked, events: ChatStream.events)
        #expect(h.call.request.body == Array(asked.utf8))
        #expect(h.writer.events.dropFirst().dropLast() == ChatStream.events.map { .body(Array($0.utf8)) }[...],
                "not one write per delivery, or bytes changed")
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
    }

    @Test func withoutInjectionTheTapReadsACopyAndEveryByteGoesOut() {
        let h = Harness(usage: UsageMeter.Settings(provider: .openai, injectsUsage: false))
        Self.play(h, events: ChatStream.events)
        #expect(h.call.request.body == Array(ChatStream.request.utf8))
        #expect(h.writer.body == Array(ChatStream.events.joined().utf8))
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
        #expect(h.exchange.record.modelLabel == "other", "no allowlist: every model is other")
    }

    @Test func theMaxTokensClampAndTheInjectionCompose() {
        let policy = BodyPolicy(maxTokens: .init(limit: 100, mode: .clamp))
        let h = Harness(policy: policy, usage: Self.openAIInjecting)
        Self.play(h, request: #"{"model":"gpt-4o","stream":true,"max_tokens":5000}"#, events: [])
        #expect(h.call.request.body == Array(#"{"model":"gpt-4o","stream":true,"max_tokens":100,"stream_options":{"include_usage":true}}"#.utf8))
    }

    @Test func aClientThatCancelsGetsAnEstimateFromTheRequestAndTheContentEvents() {
        let h = Harness(usage: Self.openAIInjecting)
        Self.play(h, events: [ChatStream.role, ChatStream.hello, ChatStream.world], complete: false)
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 2, source: .estimate))
        #expect(h.exchange.record.outcome == "client_cancelled")
    }

    @Test func aClientThatLeavesBeforeTheHeadCostsThePromptEstimate() {
        let h = Harness(usage: Self.openAIInjecting)
        h.run {
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
            h.exchange.clientClosed()
        }
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 0, source: .estimate))
    }

    @Test func anErrorAnswerCostsNothing() {
        let h = Harness(usage: Self.openAIInjecting)
        h.run {
            h.exchange.requestBody(Array(ChatStream.request.utf8))
            h.exchange.requestEnd()
            h.call.head(429, [("Content-Type", "application/json")])
            h.call.body(#"{"error":{"message":"slow down"}}"#)
            h.call.complete()
        }
        #expect(h.exchange.record.usage == Usage.none)
    }

    @Test func aDrainReadsOnWithoutWritingUntilTheProvidersUsageThenCancels() {
        let h = Harness(usage: Self.openAIInjecting, drainMaxSeconds: 30)
        Self.play(h, events: [ChatStream.role, ChatStream.hello], complete: false)
        let before = h.writer.events
        h.run { h.exchange.clientClosed() }
        #expect(h.call.cancelled == 0, "cancelled instead of drained")
        #expect(h.ended == 0)
        h.run {
            #expect(h.call.body(ChatStream.world))
            #expect(h.call.body(ChatStream.stop))
        }
        #expect(h.call.cancelled == 0)
        h.run { #expect(h.call.body(ChatStream.usage)) }
        #expect(h.call.cancelled == 1, "the drain went on after the usage arrived")
        #expect(h.ended == 1)
        #expect(h.writer.events == before, "bytes written to a departed client")
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
        #expect(h.exchange.record.outcome == "client_cancelled")
        #expect(h.metrics.render().contains("sse_relay_cancellations_total") && !h.metrics.render().contains("phase=\"streaming\""),
                "a drained call counted as cancelled")
    }

    /// The client's write of a delivery goes before the tap's read of it (a reader of the stream never delays it),
    /// and a client found gone at that write is handled with the delivery read: counted once, not lost.
    @Test func theClientsWriteGoesBeforeTheTapsReadAndAFailedWriteIsCountedOnce() {
        let h = Harness(usage: UsageMeter.Settings(provider: .openai, injectsUsage: false))
        Self.play(h, events: [ChatStream.role], complete: false)
        let before = h.exchange.meter.tap?.contentEvents ?? -1
        var atWrite = -1
        h.writer.onSendBody = { _ in
            atWrite = h.exchange.meter.tap?.contentEvents ?? -1
            return true
        }
        h.run { _ = h.call.body(ChatStream.hello) }
        #expect(atWrite == before, "the tap read the delivery before the client's write")
        #expect(h.exchange.meter.tap?.contentEvents == before + 1)
        // The next write fails as the server's does: the connection tears down and tells the exchange at once.
        h.writer.onSendBody = { _ in
            h.exchange.clientClosed()
            return false
        }
        h.run { _ = h.call.body(ChatStream.world) }
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
        #expect(h.exchange.meter.tap?.contentEvents == before + 2, "the failed delivery was not read once")
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 2, source: .estimate))
    }

    /// The same on a budget-guarded stream: the write first, then the tap's count, the guard's step after both; a
    /// client gone at a write is handled with the delivery counted once, and the grant settles on the counts.
    @Test func aGuardedStreamAlsoWritesBeforeTheTapReadsAndCountsAFailedWriteOnce() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, usage: UsageMeter.Settings(provider: .openai, injectsUsage: false))
        Self.headAnswered(h, store, request: ChatStream.request, reserved: 4096 + 5)
        #expect(h.exchange.budgetGuard != nil, "the stream is guarded")
        h.run { _ = h.call.body(ChatStream.role) }
        let before = h.exchange.meter.tap?.contentEvents ?? -1
        var atWrite = -1
        h.writer.onSendBody = { _ in
            atWrite = h.exchange.meter.tap?.contentEvents ?? -1
            h.exchange.clientClosed()
            return false
        }
        h.run { _ = h.call.body(ChatStream.hello) }
        #expect(atWrite == before, "the tap read the delivery before the client's write")
        #expect(h.exchange.meter.tap?.contentEvents == before + 1, "the failed delivery was not read once")
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
        #expect(store.settled.count == 1)
    }

    /// A client gone at the write of the finish chunk leaves the relay reading on for the counts that follow it, as
    /// when it leaves just after: the chunk is read before the decision.
    @Test func aClientGoneAtTheFinishChunksWriteStillGetsTheCountsRead() {
        let h = Harness(usage: UsageMeter.Settings(provider: .openai, injectsUsage: false))
        Self.play(h, events: [ChatStream.role, ChatStream.hello], complete: false)
        h.writer.onSendBody = { _ in
            h.exchange.clientClosed()
            return false
        }
        h.run { _ = h.call.body(ChatStream.stop) }
        #expect(h.call.cancelled == 0, "cancelled before the counts that follow the finish chunk")
        #expect(h.ended == 0)
        h.run { #expect(h.call.body(ChatStream.usage)) }
        #expect(h.exchange.record.usage == ChatStream.providerUsage)
        #expect(h.ended == 1)
    }

    @Test func aDrainEndsWithTheUpstream() {
        let h = Harness(usage: UsageMeter.Settings(provider: .openai), drainMaxSeconds: 30)
        Self.play(h, events: [ChatStream.role], complete: false)
        h.run {
            h.exchange.clientClosed()
            h.call.body(ChatStream.hello)
            h.call.complete()
        }
        #expect(h.call.cancelled == 0)
        #expect(h.ended == 1)
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 1, source: .estimate))
    }

    @Test func aDrainStopsAtDrainMaxSeconds() {
        let h = Harness(usage: Self.openAIInjecting, drainMaxSeconds: 30)
        Self.play(h, events: [ChatStream.role, ChatStream.hello], complete: false)
        h.run { h.exchange.clientClosed() }
        h.advance(4.999)   // under the 5 s idle timeout too: only the drain's deadline counts now
        h.advance(25)
        #expect(h.call.cancelled == 0)
        h.advance(0.001)
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
        #expect(h.exchange.record.usage == Usage(prompt: 5, completion: 1, source: .estimate))
    }

    @Test func aDrainResumesAnUpstreamPausedForTheSlowClient() {
        let h = Harness(usage: Self.openAIInjecting, drainMaxSeconds: 30)
        Self.play(h, events: [ChatStream.role], complete: false)
        h.run {
            h.writer.isAboveHighWater = true
            #expect(!h.call.body(ChatStream.hello))
            h.exchange.clientClosed()
        }
        #expect(h.call.resumed == 1)
        #expect(h.call.cancelled == 0)
    }

    @Test func theTapsCopyIsBoundedAndItsGivingUpNeverTouchesTheClientsBytes() {
        let h = Harness(usage: UsageMeter.Settings(provider: .openai, injectsUsage: false, maxTapBytes: 256))
        let long = "data: " + String(repeating: "x", count: 1000) + "\n\n"
        Self.play(h, events: [ChatStream.hello, long, ChatStream.usage, ChatStream.done])
        #expect(h.writer.body == Array((ChatStream.hello + long + ChatStream.usage + ChatStream.done).utf8))
        // The event past the bound is dropped from the copy; the usage after it is read.
        #expect(h.exchange.record.usage == Usage(prompt: 9, completion: 2, cached: 4, reasoning: 1, source: .provider))
    }
}
