// RelayExchange without sockets or curl: a fake client side (ResponseWriter) and a fake provider side
// (UpstreamClient) on a real event loop with a manual clock. Each test drives the exchange by hand, on the loop.
import HTTP1
import HTTPServer
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import Support
import Testing
import Transport
import Upstream

/// A provider side the test plays by hand: it records each call and what was asked of it.
final class FakeUpstreamClient: UpstreamClient, @unchecked Sendable {
    // Invariant: touched on the loop's queue only.
    final class Call: UpstreamCall, @unchecked Sendable {
        let request: UpstreamRequest
        weak var delegate: (any TransferDelegate)?
        private(set) var cancelled = 0
        private(set) var resumed = 0
        init(request: UpstreamRequest, delegate: any TransferDelegate) {
            self.request = request
            self.delegate = delegate
        }
        func cancel() { cancelled += 1 }
        func resumeReceiving() { resumed += 1 }

        func head(_ status: Int, _ headers: [(String, String)] = [("Content-Type", "text/event-stream")]) {
            var h = HTTPHeaders()
            for (name, value) in headers { h.add(name: name, value: value) }
            delegate?.transfer(self, didReceiveHead: status, headers: h)
        }
        /// Offers bytes as curl would; returns whether the exchange took them.
        @discardableResult
        func body(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { delegate?.transfer(self, didReceiveBody: $0) ?? false } }
        func complete(_ result: Result<Void, UpstreamFailure> = .success(())) { delegate?.transfer(self, didCompleteWith: result) }
    }

    private(set) var calls: [Call] = []

    func call(_ request: UpstreamRequest, delegate: any TransferDelegate) -> any UpstreamCall {
        let call = Call(request: request, delegate: delegate)
        calls.append(call)
        return call
    }
}

@Suite struct RelayExchangeTests {
    /// One exchange on a loop with a manual clock; `run` executes a step on the loop.
    final class Harness: @unchecked Sendable {
        // Invariant: `exchange`, `writer` and `upstream` are touched inside `run` only, on the test's thread: the
        // scheduler is the fake one, so no thread and no epoll set run beside the test.
        let clock = ManualClock()
        let loop: ManualScheduler
        let writer: FakeResponseWriter
        let upstream = FakeUpstreamClient()
        let metrics = RelayMetrics()
        var exchange: RelayExchange!
        var ended = 0

        init(method: String = "POST", body: [UInt8]? = [], policy: BodyPolicy = BodyPolicy(), key: String? = nil,
             usage: UsageMeter.Settings = UsageMeter.Settings(), drainMaxSeconds: Double? = nil) {
            loop = ManualScheduler(clock: clock)
            writer = FakeResponseWriter(scheduler: loop)
            let settings = ExchangeStateMachine.Settings(
                requestMethod: method, clientVersion: .http1_1, keepAlive: true, requestID: "req-1",
                firstByteTimeoutSeconds: 10, idleTimeoutSeconds: 5, extraResponseHeaders: HTTPHeaders(),
                drainMaxSeconds: drainMaxSeconds)
            let record = ExchangeRecord(requestID: "req-1", method: method, path: "/v1/chat/completions", route: "/v1/",
                                        upstream: "test", clientAddress: "198.51.100.7", startedAt: clock.now())
            run { [self] in
                exchange = RelayExchange(machine: ExchangeStateMachine(settings: settings, now: clock.now()), writer: writer,
                                         clock: clock, record: record, metrics: metrics, usage: usage) { [weak self] _ in
                    // Weak: the exchange keeps `onEnd` for its whole life, so a strong capture would tie the harness
                    // and the exchange in a cycle that nothing breaks (the server's `onEnd` captures no exchange).
                    self?.ended += 1
                }
                exchange.providerKey = key.map { Secret($0) }
                let request = UpstreamRequest(url: "http://provider.invalid/v1/chat/completions", method: method,
                                              headers: HTTPHeaders(), body: body, connectTimeoutSeconds: 1, idleConnectionSeconds: 30)
                exchange.start(request, upstream: upstream, plan: RequestBodyPlan.Settings(
                    endpoint: .openAIChat, policy: policy, injectsUsage: usage.injectsUsage, budgets: nil))
            }
        }

        /// A fake admission store's recorded answers go with the harness (see `RecordingAdmissionStore.dropAnswers`).
        deinit {
            let exchange = exchange
            (exchange?.admission?.store as? RecordingAdmissionStore)?.dropAnswers()
        }

        /// One turn of the loop: `step`, then the work it handed to the loop.
        func run<R>(_ step: () throws -> R) rethrows -> R {
            let result = try step()
            loop.runPending()
            return result
        }

        /// Moves the clock and fires what is due, as the loop's timer would.
        func advance(_ seconds: Double) {
            clock.advance(bySeconds: seconds)
            run { loop.runDueTimers() }
        }

        var call: FakeUpstreamClient.Call { upstream.calls[0] }
    }

    /// A harness and its exchange are freed when the test lets go of them, ended or not, with an admission store
    /// that answered, or not yet (LeakSanitizer reported every harness of these suites until `onEnd` stopped
    /// capturing the harness strongly and the fake store let go of its answers with the harness).
    @Test(arguments: ["no store", "store answered", "store never answered"])
    func theHarnessAndItsExchangeAreFreed(_ admission: String) {
        weak var harness: Harness?
        weak var exchange: RelayExchange?
        weak var writer: FakeResponseWriter?
        weak var store: RecordingAdmissionStore?
        do {
            let fake = RecordingAdmissionStore(.byHand)
            let h = admission == "no store" ? Harness() : Self.admitting(fake)
            h.run {
                h.exchange.requestBody(Array(ChatStream.request.utf8))
                h.exchange.requestEnd()
                if admission == "store answered" { fake.admits[0].answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 15))) }
                if admission != "store never answered" { h.call.head(200) }
            }
            harness = h
            exchange = h.exchange
            writer = h.writer
            store = fake
        }
        #expect(harness == nil)
        #expect(exchange == nil)
        #expect(writer == nil)
        #expect(store == nil)
    }

    @Test func theProviderIsCalledOnlyOnceTheWholeBodyIsIn() {
        let h = Harness()
        h.run {
            h.exchange.requestBody(Array("{\"model\":".utf8))
            h.exchange.requestBody(Array("\"gpt-4o\"}".utf8))
        }
        #expect(h.upstream.calls.isEmpty, "called before the body was whole")
        h.run { h.exchange.requestEnd() }
        #expect(h.upstream.calls.count == 1)
        #expect(h.call.request.body == Array("{\"model\":\"gpt-4o\"}".utf8))
    }

    @Test func aBodylessRequestIsCalledAtItsEnd() {
        let h = Harness(method: "GET", body: nil)
        h.run { h.exchange.requestEnd() }
        #expect(h.upstream.calls.count == 1)
        #expect(h.call.request.body == nil)
    }

    @Test func aRejectedBodyNeverReachesTheProvider() {
        let h = Harness(policy: BodyPolicy(models: ["gpt-4o-mini"]))
        h.run {
            h.exchange.requestBody(Array(#"{"model":"gpt-4o"}"#.utf8))
            h.exchange.requestEnd()
        }
        #expect(h.upstream.calls.isEmpty)
        #expect(h.writer.events == [.error(status: 403, code: "model_not_allowed")])
        #expect(h.ended == 1)
    }

    @Test func theStreamIsRelayedAsItArrivesAndEndsCleanly() {
        let h = Harness()
        h.run {
            h.exchange.requestEnd()
            h.call.head(200)
            #expect(h.call.body("data: a\n\n"))
            #expect(h.call.body("data: b\n\n"))
            h.call.complete()
        }
        #expect(h.writer.events == [.head(200, .chunked), .body(Array("data: a\n\n".utf8)), .body(Array("data: b\n\n".utf8)),
                                    .finish(keepAlive: true)])
        #expect(h.ended == 1)
        #expect(h.call.cancelled == 0)
    }

    @Test func aSlowClientPausesTheProviderUntilItDrains() {
        let h = Harness()
        h.run {
            h.exchange.requestEnd()
            h.call.head(200)
            h.writer.isAboveHighWater = true
            #expect(!h.call.body("data: held\n\n"), "taken while the client was above its high-water mark")
            #expect(h.writer.body.isEmpty)
            h.writer.isAboveHighWater = false
            h.exchange.clientDrained()
        }
        #expect(h.call.resumed == 1)
        let taken = h.run { h.call.body("data: held\n\n") }   // curl offers the held bytes again
        #expect(taken)
        #expect(h.writer.body == Array("data: held\n\n".utf8))
    }

    @Test func aClientThatLeavesCancelsTheProviderInEveryPhase() {
        for phase in ["awaiting head", "streaming"] {
            let h = Harness()
            h.run {
                h.exchange.requestEnd()
                if phase == "streaming" {
                    h.call.head(200)
                    h.call.body("data: a\n\n")
                }
                h.exchange.clientClosed()
            }
            #expect(h.call.cancelled == 1, "\(phase)")
            #expect(h.ended == 1, "\(phase)")
            #expect(h.exchange.record.outcome == "client_cancelled", "\(phase)")
        }
    }

    @Test func aClientGoneMidBodyCancelsNothingAndCallsNoOne() {
        let h = Harness()
        h.run {
            h.exchange.requestBody(Array("{".utf8))
            h.exchange.clientClosed()
            h.exchange.requestEnd()   // late events after the end change nothing
        }
        #expect(h.upstream.calls.isEmpty)
        #expect(h.ended == 1)
        #expect(!h.metrics.render().contains("sse_relay_cancellations_total{"), "a call never made was counted as cancelled")
    }

    @Test func noHeadInTimeIs504AndTheCallIsCancelled() {
        let h = Harness()
        h.run { h.exchange.requestEnd() }
        h.advance(9.999)
        #expect(h.writer.events.isEmpty)
        h.advance(0.001)
        #expect(h.writer.events == [.error(status: 504, code: "upstream_timeout")])
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
    }

    @Test func anIdleStreamIsAbortedNeverEndedCleanly() {
        let h = Harness()
        h.run {
            h.exchange.requestEnd()
            h.call.head(200)
            h.call.body("data: a\n\n")
        }
        h.advance(4)
        _ = h.run { h.call.body("data: b\n\n") }   // activity moves the idle deadline
        h.advance(4)
        #expect(!h.writer.events.contains(.abort))
        h.advance(1)
        #expect(h.writer.events.last == .abort)
        #expect(h.call.cancelled == 1)
        #expect(!h.writer.events.contains(.finish(keepAlive: true)))
    }

    @Test func aProviderThatFailsBeforeItsHeadIs502() {
        let h = Harness()
        h.run {
            h.exchange.requestEnd()
            h.call.complete(.failure(.connectFailed("refused")))
        }
        #expect(h.writer.events == [.error(status: 502, code: "upstream_unreachable")])
        #expect(h.ended == 1)
    }

    @Test func theKeyIsMaskedInAnErrorBodyButNotInA2xxBody() {
        let key = "sk-test-0123456789abcdef"
        let masked = Harness(key: key)
        masked.run {
            masked.exchange.requestEnd()
            masked.call.head(401, [("Content-Type", "application/json")])
            masked.call.body("{\"error\":\"bad key sk-test-0123")
            masked.call.body("456789abcdef\"}")
            masked.call.complete()
        }
        #expect(String(decoding: masked.writer.body, as: UTF8.self) == "{\"error\":\"bad key sk-*********************\"}")
        let plain = Harness(key: key)
        plain.run {
            plain.exchange.requestEnd()
            plain.call.head(200)
            plain.call.body("data: \(key)\n\n")
            plain.call.complete()
        }
        #expect(plain.writer.body == Array("data: \(key)\n\n".utf8))
    }
}
