// The exchange state machine, event by event: every transition of its doc comment, timeouts at exact instants,
// backpressure, keep-alive, and the rule that terminal phases ignore everything.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import TestSupportCore
import Upstream

@Suite struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine

    // MARK: Start

    @Test func startsAwaitingTheBodyWithNoDeadline() {
        let m = newMachine(requestComplete: false)
        #expect(m.phase == .awaitingBody)
        #expect(!m.isTerminal)
        #expect(m.outcome == nil)
        #expect(m.status == nil)
        #expect(!m.upstreamPaused)
        #expect(!m.requestComplete)
        // The provider is not called before the request is whole: no first-byte clock yet.
        #expect(m.nextDeadline == nil)
    }

    /// Admission (the gate, the plan, the store) runs on the first-byte clock: a store that never answers ends
    /// the exchange as a timeout, with nothing to cancel since nothing was called.
    @Test func theFirstByteClockStartsWhenTheRequestIsWholeAndBoundsAdmission() {
        var m = newMachine(requestComplete: false)
        #expect(m.deadlinePassed(now: at(firstByteSeconds * 10)) == [])
        m.requestBodyComplete(now: at(5))
        #expect(m.requestComplete)
        #expect(m.phase == .admitting)
        #expect(m.nextDeadline == at(5 + firstByteSeconds))
        // A second call (a late duplicate) does not move the clock.
        m.requestBodyComplete(now: at(7))
        #expect(m.nextDeadline == at(5 + firstByteSeconds))
        #expect(m.deadlinePassed(now: justBefore(5 + firstByteSeconds)) == [])
        #expect(m.deadlinePassed(now: at(5 + firstByteSeconds)) == [.respondError(.upstreamTimeout, keepAlive: true)])
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == .upstreamTimeout)
    }

    /// The call starts the first-byte clock again: the time admission took is not the provider's.
    @Test func callingRestartsTheFirstByteClock() {
        var m = newMachine(requestComplete: false)
        m.requestBodyComplete(now: at(1))
        m.calling(now: at(4))
        #expect(m.phase == .calling)
        #expect(m.nextDeadline == at(4 + firstByteSeconds))
        #expect(m.deadlinePassed(now: at(1 + firstByteSeconds)) == [])
        #expect(m.deadlinePassed(now: at(4 + firstByteSeconds)) == [.cancelUpstream, .respondError(.upstreamTimeout, keepAlive: true)])
        // A second `calling` (none comes from the shell, but a late one must not revive anything) does nothing.
        m.calling(now: at(100))
        #expect(m.phase == .upstreamFailed)
    }

    /// Before the call there is nothing to cancel and nothing to drain, even on a draining route.
    @Test(arguments: [false, true])
    func clientLeavingBeforeTheCallEndsItWithNothingToCancel(admitting: Bool) {
        var m = ExchangeStateMachine(settings: Self.drainingSettings(), now: t0)
        if admitting { m.requestBodyComplete(now: t0) }
        #expect(m.phase == (admitting ? .admitting : .awaitingBody))
        #expect(m.clientClosed(now: at(1)) == [])
        #expect(m.phase == .clientGone)
        #expect(m.outcome == .clientCancelled)
        #expect(m.nextDeadline == nil)
        m.calling(now: at(2))
        #expect(m.phase == .clientGone, "no call is made for a client that left")
    }

    /// Events that need a call are ignored before there is one: no transfer exists to report them, and a
    /// stray one must not turn into an answer.
    @Test(arguments: [false, true])
    func callEventsBeforeTheCallAreIgnored(admitting: Bool) {
        var m = newMachine(requestComplete: false)
        if admitting { m.requestBodyComplete(now: t0) }
        let before = m.phase
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: at(1)) == [])
        #expect(m.upstreamBody(clientAboveHighWater: false, now: at(1)) == .drop)
        #expect(m.upstreamCompleted(.success(()), now: at(1)) == [])
        #expect(m.upstreamCompleted(.failure(.connectTimeout), now: at(1)) == [])
        #expect(m.phase == before)
        #expect(m.outcome == nil)
    }

    /// A refusal is possible while the body arrives and while admission decides, never once the provider is
    /// called: `rejected` always means the provider never saw the request.
    @Test func aRefusalEndsTheExchangeOnlyBeforeTheCall() {
        let refusal = RelayError(status: 403, type: "invalid_request_error", code: "model_not_allowed", message: "no")
        for setUp in [0, 1] {
            var m = newMachine(requestComplete: false)
            if setUp == 1 { m.requestBodyComplete(now: t0) }
            #expect(m.rejected(refusal) == [.respondError(refusal, keepAlive: true)])
            #expect(m.phase == .rejected)
            #expect(m.outcome == .rejected)
        }
        var called = newMachine()
        #expect(called.rejected(refusal) == [])
        #expect(called.phase == .calling)
        var streaming = streamingMachine()
        #expect(streaming.rejected(refusal) == [])
        #expect(streaming.phase == .streaming)
    }

    // MARK: calling → streaming

    /// Keep-alive and the extra response headers of an error answer are the machine's decisions, not the shell's.
    @Test(arguments: [true, false])
    func anErrorAnswerCarriesTheRequestsKeepAliveAndTheExtraHeaders(_ keepAlive: Bool) {
        var extra = HTTPHeaders()
        extra.add(name: "Access-Control-Allow-Origin", value: "https://app.example")
        var settings = exchangeSettings(method: "POST", version: .http1_1, keepAlive: keepAlive)
        settings.extraResponseHeaders = extra
        var m = ExchangeStateMachine(settings: settings, now: t0)
        m.requestBodyComplete(now: t0)
        m.calling(now: t0)
        let actions = m.upstreamCompleted(.failure(.connectTimeout), now: at(1))
        guard case .respondError(let error, let keep)? = actions.first else { Issue.record("no error answer: \(actions)"); return }
        #expect(keep == keepAlive)
        #expect(error.code == "upstream_connect_timeout")
        #expect(error.extraHeaders.map(\.0) == ["Access-Control-Allow-Origin"])
        #expect(error.extraHeaders.map(\.1) == ["https://app.example"])
    }

    /// "Is it over" is answered once, by the machine: not before a terminal phase, once at it, never again.
    @Test func theEndIsTakenExactlyOnceAndOnlyWhenTerminal() {
        var m = streamingMachine()
        var answers: [Bool] = []
        answers.append(m.takeEnd())   // streaming is not an end
        _ = m.upstreamBody(clientAboveHighWater: false, now: at(2))
        answers.append(m.takeEnd())
        _ = m.upstreamCompleted(.success(()), now: at(3))
        answers.append(m.takeEnd())   // the end
        answers.append(m.takeEnd())   // a second ask gets nothing
        _ = m.clientClosed(now: at(4))
        answers.append(m.takeEnd())   // a later event does not end it again
        #expect(answers == [false, false, true, false, false])
        #expect(m.endTaken)
    }

    /// A resumable stream nobody reads: the window and the time detached are the machine's; a paused upstream
    /// reads on; a second detach, or one outside `streaming`, changes nothing.
    @Test func aDetachedStreamRunsOnForItsWindowAndCountsTheTimeDetached() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: true, now: at(2)) == .refuse)
        #expect(m.detachDeadline == nil)
        #expect(m.detached(now: at(3), windowSeconds: 30) == [.resumeUpstream], "nobody to hold a paused upstream for")
        #expect(m.detachDeadline == at(33))
        #expect(m.timerDeadline() == at(33), "the window ends before the idle timeout")
        #expect(m.detached(now: at(5), windowSeconds: 30) == [], "already detached: the window keeps its start")
        #expect(m.detachDeadline == at(33))
        #expect(m.phase == .streaming)
        m.reattached(now: at(13))
        #expect(m.detachDeadline == nil)
        #expect(m.timerDeadline() == m.nextDeadline && m.nextDeadline != nil, "attached: the idle timeout")
        #expect(m.detachedSeconds == 10)
        _ = m.detached(now: at(20), windowSeconds: 30)
        m.reattached(now: at(22).advanced(bySeconds: 0.5))
        #expect(m.detachedSeconds == 12.5, "windows add up")
        _ = m.upstreamCompleted(.success(()), now: at(23))
        #expect(m.detached(now: at(24), windowSeconds: 30) == [], "an ended exchange is not detached")
        #expect(m.detachDeadline == nil)
    }

    @Test func headMovesToStreamingAndSendsTheRewrittenSSEHead() {
        var m = newMachine()
        let upstream = headers([
            ("Content-Type", "text/event-stream"), ("Content-Length", "999"), ("Cache-Control", "no-store"),
            ("Connection", "keep-alive"), ("X-Request-Id", "upstream-id"), ("openai-processing-ms", "12"),
        ])
        let actions = m.upstreamHead(status: 200, headers: upstream, now: at(2))
        let expected = ResponseHead(status: 200, version: .http1_1, headers: headers([
            ("Content-Type", "text/event-stream"), ("openai-processing-ms", "12"), ("Transfer-Encoding", "chunked"),
            ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"), ("X-Request-Id", "req-1"),
        ]))
        #expect(actions == [.sendHead(expected, .chunked)])
        #expect(m.phase == .streaming)
        #expect(m.status == 200)
        #expect(m.outcome == nil)
        #expect(!m.isTerminal)
        // The idle deadline now counts from the head, not from the start.
        #expect(m.nextDeadline == at(2 + idleSeconds))
    }

    @Test func sseHeadHasNoCacheNoBufferingAndNoContentLength() throws {
        var m = newMachine()
        let actions = m.upstreamHead(
            status: 200, headers: headers([("content-type", "text/event-stream; charset=utf-8"), ("Content-Length", "10")]),
            now: at(1))
        let action = try #require(actions.first)
        guard case .sendHead(let head, let mode) = action else {
            Issue.record("expected sendHead, got \(actions)")
            return
        }
        #expect(actions.count == 1)
        #expect(mode == .chunked)
        #expect(head.headers.values("Cache-Control") == ["no-cache"])
        #expect(head.headers.values("X-Accel-Buffering") == ["no"])
        #expect(!head.headers.contains("Content-Length"))
        #expect(head.headers.values("Transfer-Encoding") == ["chunked"])
    }

    @Test func aSecondHeadIsIgnored() {
        var m = streamingMachine()
        #expect(m.upstreamHead(status: 500, headers: jsonHeaders, now: at(3)) == [])
        #expect(m.status == 200)
        #expect(m.phase == .streaming)
    }

    @Test func errorStatusFromUpstreamIsRelayedAsItIs() {
        var m = newMachine()
        let upstream = headers([("Content-Type", "application/json"), ("Retry-After", "7"), ("Content-Length", "20")])
        let actions = m.upstreamHead(status: 429, headers: upstream, now: at(1))
        let expected = ResponseHead(status: 429, headers: headers([
            ("Content-Type", "application/json"), ("Retry-After", "7"), ("Content-Length", "20"),
            ("X-Request-Id", "req-1"),
        ]))
        #expect(actions == [.sendHead(expected, .contentLength(20))])
        #expect(m.status == 429)
    }

    // MARK: calling → upstreamFailed

    struct FailureCase: Sendable, CustomTestStringConvertible {
        var failure: UpstreamFailure
        var code: String
        var outcome: ExchangeStateMachine.Outcome
        var testDescription: String { "\(failure) → \(code)" }
    }

    static let failuresBeforeHead: [FailureCase] = [
        FailureCase(failure: .connectFailed("Could not resolve host"), code: "upstream_unreachable", outcome: .upstreamError),
        FailureCase(failure: .connectTimeout, code: "upstream_connect_timeout", outcome: .upstreamTimeout),
        FailureCase(failure: .brokenResponse("Weird server reply"), code: "upstream_bad_response", outcome: .upstreamError),
        FailureCase(failure: .connectionReset("Empty reply from server"), code: "upstream_connection_reset", outcome: .upstreamError),
        FailureCase(failure: .other("Out of memory"), code: "upstream_error", outcome: .upstreamError),
    ]

    @Test(arguments: failuresBeforeHead)
    func failureBeforeHeadRespondsWith502AndTheFailuresCode(_ c: FailureCase) throws {
        var m = newMachine()
        let actions = m.upstreamCompleted(.failure(c.failure), now: at(1))
        #expect(actions.count == 1)
        let error = try #require(actions.first?.relayError)
        #expect(error.status == 502)
        #expect(error.type == "upstream_error")
        #expect(error.code == c.code)
        #expect(!error.message.isEmpty)
        // The failure's detail (curl's text) is for logs, never for the client.
        if case .connectFailed(let detail) = c.failure { #expect(!error.message.contains(detail)) }
        if case .brokenResponse(let detail) = c.failure { #expect(!error.message.contains(detail)) }
        if case .other(let detail) = c.failure { #expect(!error.message.contains(detail)) }
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == c.outcome)
        #expect(m.isTerminal)
        #expect(m.nextDeadline == nil)
    }

    @Test func successWithoutAHeadIs502BadResponse() throws {
        var m = newMachine()
        let actions = m.upstreamCompleted(.success(()), now: at(1))
        #expect(actions == [.respondError(RelayError(
            status: 502, type: "upstream_error", code: "upstream_bad_response",
            message: "The provider's response was broken or cut off."), keepAlive: true)])
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == .upstreamError)
    }

    // MARK: First-byte timeout

    @Test func firstByteTimeoutDoesNothingBeforeTheDeadline() {
        var m = newMachine()
        #expect(m.deadlinePassed(now: t0) == [])
        #expect(m.deadlinePassed(now: at(firstByteSeconds / 2)) == [])
        #expect(m.deadlinePassed(now: justBefore(firstByteSeconds)) == [])
        #expect(m.phase == .calling)
        #expect(m.outcome == nil)
        #expect(m.nextDeadline == at(firstByteSeconds))
    }

    /// Exactly at the deadline, and when the timer fires late.
    @Test(arguments: [UInt64(0), 1, 5_000_000_000])
    func firstByteTimeoutCancelsAndAnswers504(lateByNanoseconds late: UInt64) {
        var m = newMachine()
        let actions = m.deadlinePassed(now: at(firstByteSeconds, plusNanoseconds: late))
        #expect(actions == [.cancelUpstream, .respondError(.upstreamTimeout, keepAlive: true)])
        #expect(RelayError.upstreamTimeout.status == 504)
        #expect(RelayError.upstreamTimeout.code == "upstream_timeout")
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == .upstreamTimeout)
        #expect(m.outcome?.rawValue == "upstream_timeout")
        #expect(m.nextDeadline == nil)
    }

    @Test func firstByteTimeoutWithAManualClock() {
        let clock = ManualClock()
        var m = ExchangeStateMachine(settings: exchangeSettings(), now: clock.now())
        m.requestBodyComplete(now: clock.now())
        m.calling(now: clock.now())
        clock.advance(bySeconds: 9.5)
        #expect(m.deadlinePassed(now: clock.now()) == [])
        clock.advance(bySeconds: 0.5)
        #expect(m.deadlinePassed(now: clock.now()) == [.cancelUpstream, .respondError(.upstreamTimeout, keepAlive: true)])
        clock.advance(bySeconds: 100)
        #expect(m.deadlinePassed(now: clock.now()) == [])
    }

    @Test func aHeadJustBeforeTheFirstByteDeadlineWins() {
        var m = newMachine()
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: justBefore(firstByteSeconds)).count == 1)
        // The old first-byte deadline no longer applies: the idle deadline counts from the head.
        #expect(m.deadlinePassed(now: at(firstByteSeconds)) == [])
        #expect(m.phase == .streaming)
        #expect(m.nextDeadline == justBefore(firstByteSeconds).advanced(bySeconds: Double(idleSeconds)))
    }

    // MARK: streaming → finished

    @Test func completionAfterTheHeadFinishesTheResponse() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 1024, now: at(2)) == .forward)
        #expect(m.upstreamCompleted(.success(()), now: at(3)) == [.finishResponse(keepAlive: true)])
        #expect(m.phase == .finished)
        #expect(m.outcome == .completed)
        #expect(m.outcome?.rawValue == "completed")
        #expect(m.isTerminal)
        #expect(m.nextDeadline == nil)
    }

    /// The request is always whole by the time a response can finish (the provider is called only then): the
    /// connection is kept when the client asked for it and the body's framing allows it.
    struct KeepAliveCase: Sendable, CustomTestStringConvertible {
        var clientKeepAlive: Bool
        var version: HTTPVersion
        var upstream: [String]   // Content-Type, optional Content-Length
        var expected: Bool
        var testDescription: String { "keepAlive=\(clientKeepAlive) \(version) \(upstream) → \(expected)" }
    }

    static let keepAliveCases: [KeepAliveCase] = [
        KeepAliveCase(clientKeepAlive: true, version: .http1_1, upstream: ["text/event-stream"], expected: true),
        KeepAliveCase(clientKeepAlive: false, version: .http1_1, upstream: ["text/event-stream"], expected: false),
        KeepAliveCase(clientKeepAlive: true, version: .http1_1, upstream: ["application/json", "5"], expected: true),
        KeepAliveCase(clientKeepAlive: true, version: .http1_0, upstream: ["application/json", "5"], expected: true),
        // HTTP/1.0 without a length: the close delimits the body, so the connection cannot be kept.
        KeepAliveCase(clientKeepAlive: true, version: .http1_0, upstream: ["text/event-stream"], expected: false),
    ]

    @Test(arguments: keepAliveCases)
    func finishKeepsTheConnectionOnlyWhenTheClientAskedAndTheFramingAllows(_ c: KeepAliveCase) {
        var m = newMachine(version: c.version, keepAlive: c.clientKeepAlive)
        var upstream = headers([("Content-Type", c.upstream[0])])
        if c.upstream.count > 1 { upstream.add(name: "Content-Length", value: c.upstream[1]) }
        #expect(m.upstreamHead(status: 200, headers: upstream, now: at(1)).count == 1)
        #expect(m.upstreamCompleted(.success(()), now: at(2)) == [.finishResponse(keepAlive: c.expected)])
    }

    // MARK: streaming → upstreamFailed

    @Test(arguments: failuresBeforeHead.map(\.failure))
    func failureAfterTheHeadOnlyAbortsTheClient(_ failure: UpstreamFailure) {
        var m = streamingMachine()
        let actions = m.upstreamCompleted(.failure(failure), now: at(5))
        #expect(actions == [.abortClient])
        #expect(!actions.contains { $0.isFinishResponse })
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == .upstreamError)
        #expect(m.outcome?.rawValue == "upstream_error")
    }

    @Test func idleTimeoutMidStreamCancelsAndAborts() {
        var m = streamingMachine()   // head at t0 + 1 s
        #expect(m.nextDeadline == at(1 + idleSeconds))
        #expect(m.deadlinePassed(now: justBefore(1 + idleSeconds)) == [])
        #expect(m.phase == .streaming)
        #expect(m.deadlinePassed(now: at(1 + idleSeconds)) == [.cancelUpstream, .abortClient])
        #expect(m.phase == .upstreamFailed)
        #expect(m.outcome == .upstreamTimeout)
    }

    @Test func theIdleDeadlineMovesWithEachBodyDelivery() {
        var m = streamingMachine()   // head at t0 + 1 s
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 100, now: at(20)) == .forward)
        #expect(m.nextDeadline == at(20 + idleSeconds))
        // The deadline computed from the head has passed, but a body arrived since: nothing happens.
        #expect(m.deadlinePassed(now: at(1 + idleSeconds)) == [])
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 100, now: at(45)) == .forward)
        #expect(m.nextDeadline == at(45 + idleSeconds))
        #expect(m.deadlinePassed(now: at(20 + idleSeconds)) == [])
        #expect(m.deadlinePassed(now: justBefore(45 + idleSeconds)) == [])
        #expect(m.phase == .streaming)
        #expect(m.deadlinePassed(now: at(45 + idleSeconds)) == [.cancelUpstream, .abortClient])
        #expect(m.outcome == .upstreamTimeout)
    }

    @Test func idleDeadlineWithAManualClockAndManyEvents() {
        let clock = ManualClock()
        var m = ExchangeStateMachine(settings: exchangeSettings(), now: clock.now())
        m.requestBodyComplete(now: clock.now())
        m.calling(now: clock.now())
        clock.advance(bySeconds: 3)
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: clock.now()).count == 1)
        for _ in 0..<50 {
            clock.advance(bySeconds: 29)
            #expect(m.deadlinePassed(now: clock.now()) == [])
            #expect(m.upstreamBody(clientAboveHighWater: 0 >= 1, now: clock.now()) == .forward)
        }
        clock.advance(bySeconds: 30)
        #expect(m.deadlinePassed(now: clock.now()) == [.cancelUpstream, .abortClient])
    }

    // MARK: → clientGone

    @Test func clientLeavingBeforeTheHeadCancelsTheUpstream() {
        var m = newMachine()
        #expect(m.clientClosed() == [.cancelUpstream])
        #expect(m.phase == .clientGone)
        #expect(m.outcome == .clientCancelled)
        #expect(m.outcome?.rawValue == "client_cancelled")
        #expect(m.nextDeadline == nil)
        // The head that was already on its way goes nowhere.
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: at(1)) == [])
    }

    @Test func clientLeavingMidStreamCancelsTheUpstream() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 10, now: at(2)) == .forward)
        #expect(m.clientClosed() == [.cancelUpstream])
        #expect(m.phase == .clientGone)
        #expect(m.outcome == .clientCancelled)
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 10, now: at(3)) == .drop)
    }

    // MARK: Backpressure

    @Test func bodyBelowTheHighWaterMarkIsForwarded() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 100, now: at(2)) == .forward)
        #expect(m.upstreamBody(clientAboveHighWater: 99 >= 100, now: at(2)) == .forward)
        #expect(!m.upstreamPaused)
        #expect(m.clientDrained(now: t0) == [])
    }

    @Test(arguments: [100, 101, 1_000_000])
    func bodyAtOrAboveTheHighWaterMarkIsRefusedAndResumedOnce(pending: Int) {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: pending >= 100, now: at(2)) == .refuse)
        #expect(m.upstreamPaused)
        #expect(m.phase == .streaming)
        #expect(m.clientDrained(now: t0) == [.resumeUpstream])
        #expect(!m.upstreamPaused)
        #expect(m.clientDrained(now: t0) == [])
        #expect(m.clientDrained(now: t0) == [])
        // The refused bytes come again once resumed.
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 100, now: at(3)) == .forward)
    }

    /// A client that stops reading is not a provider that went idle: while the relay holds the upstream paused,
    /// no idle deadline runs, and the idle clock restarts from the drain.
    @Test func noIdleTimeoutWhileTheRelayHoldsTheUpstreamPaused() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: 200 >= 100, now: at(2)) == .refuse)
        #expect(m.nextDeadline == nil)
        #expect(m.deadlinePassed(now: at(2 + idleSeconds * 10)) == [])
        #expect(m.phase == .streaming)
        #expect(m.clientDrained(now: at(500)) == [.resumeUpstream])
        #expect(m.nextDeadline == at(500 + idleSeconds))
        #expect(m.deadlinePassed(now: justBefore(500 + idleSeconds)) == [])
        #expect(m.deadlinePassed(now: at(500 + idleSeconds)) == [.cancelUpstream, .abortClient])
    }

    @Test func repeatedRefusalsNeedOnlyOneResume() {
        var m = streamingMachine()
        #expect(m.upstreamBody(clientAboveHighWater: 200 >= 100, now: at(2)) == .refuse)
        #expect(m.upstreamBody(clientAboveHighWater: 150 >= 100, now: at(2)) == .refuse)
        #expect(m.clientDrained(now: t0) == [.resumeUpstream])
        #expect(m.clientDrained(now: t0) == [])
    }

    @Test func drainOutsideStreamingDoesNothing() {
        var waiting = newMachine()
        #expect(waiting.clientDrained(now: t0) == [])
        #expect(waiting.upstreamBody(clientAboveHighWater: 0 >= 1, now: at(1)) == .drop)

        var paused = streamingMachine()
        #expect(paused.upstreamBody(clientAboveHighWater: 10 >= 1, now: at(2)) == .refuse)
        #expect(paused.clientClosed() == [.cancelUpstream])
        #expect(paused.clientDrained(now: t0) == [])
    }

    // MARK: Terminal phases ignore everything

    enum Ending: String, CaseIterable, Sendable {
        case finished, failedBeforeHead, failedAfterHead, noHead, firstByteTimeout, idleTimeout
        case clientGoneBeforeHead, clientGoneStreaming

        var phase: ExchangeStateMachine.Phase {
            switch self {
            case .finished: .finished
            case .failedBeforeHead, .failedAfterHead, .noHead, .firstByteTimeout, .idleTimeout: .upstreamFailed
            case .clientGoneBeforeHead, .clientGoneStreaming: .clientGone
            }
        }

        func reach() -> ExchangeStateMachine {
            var m = newMachine()
            switch self {
            case .finished:
                m = streamingMachine()
                _ = m.upstreamCompleted(.success(()), now: at(2))
            case .failedBeforeHead: _ = m.upstreamCompleted(.failure(.connectFailed("refused")), now: at(1))
            case .failedAfterHead:
                m = streamingMachine()
                _ = m.upstreamCompleted(.failure(.brokenResponse("reset")), now: at(2))
            case .noHead: _ = m.upstreamCompleted(.success(()), now: at(1))
            case .firstByteTimeout: _ = m.deadlinePassed(now: at(firstByteSeconds))
            case .idleTimeout:
                m = streamingMachine()
                _ = m.deadlinePassed(now: at(1 + idleSeconds))
            case .clientGoneBeforeHead: _ = m.clientClosed()
            case .clientGoneStreaming:
                m = streamingMachine()
                _ = m.clientClosed()
            }
            return m
        }
    }

    @Test(arguments: Ending.allCases)
    func terminalPhasesIgnoreEveryLaterEvent(_ ending: Ending) {
        var m = ending.reach()
        #expect(m.phase == ending.phase)
        #expect(m.isTerminal)
        let outcome = m.outcome
        let status = m.status
        #expect(outcome != nil)
        #expect(m.nextDeadline == nil)

        let far = at(100_000)
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: far) == [])
        #expect(m.upstreamBody(clientAboveHighWater: 0 >= 100, now: far) == .drop)
        #expect(m.upstreamBody(clientAboveHighWater: 1000 >= 100, now: far) == .drop)
        #expect(m.clientDrained(now: t0) == [])
        #expect(m.upstreamCompleted(.success(()), now: far) == [])
        #expect(m.upstreamCompleted(.failure(.connectTimeout), now: far) == [])
        #expect(m.upstreamCompleted(.failure(.other("late")), now: far) == [])
        #expect(m.clientClosed() == [])
        #expect(m.deadlinePassed(now: far) == [])
        m.requestBodyComplete(now: far)
        m.calling(now: far)

        #expect(m.phase == ending.phase)
        #expect(m.outcome == outcome)
        #expect(m.status == status)
        #expect(!m.upstreamPaused)
        #expect(m.nextDeadline == nil)
    }

    @Test(arguments: Ending.allCases)
    func eachEndingHasTheDocumentedOutcome(_ ending: Ending) {
        let expected: ExchangeStateMachine.Outcome = switch ending {
        case .finished: .completed
        case .failedBeforeHead, .failedAfterHead, .noHead: .upstreamError
        case .firstByteTimeout, .idleTimeout: .upstreamTimeout
        case .clientGoneBeforeHead, .clientGoneStreaming: .clientCancelled
        }
        #expect(ending.reach().outcome == expected)
    }
}

// MARK: Drain (onClientCancel: drain)

extension ExchangeStateMachineTests {
    static func drainingSettings(_ seconds: Double = 60) -> ExchangeStateMachine.Settings {
        var s = exchangeSettings()
        s.drainMaxSeconds = seconds
        return s
    }

    @Test func aDrainBeforeTheHeadDiscardsEverythingAndEndsAtItsDeadline() {
        var m = ExchangeStateMachine(settings: Self.drainingSettings(), now: t0)
        m.requestBodyComplete(now: t0)
        m.calling(now: t0)
        #expect(m.clientClosed(now: at(2)) == [])
        #expect(m.phase == .draining)
        #expect(m.outcome == .clientCancelled)
        #expect(m.upstreamHead(status: 200, headers: sseHeaders, now: at(3)) == [], "a head sent to a departed client")
        #expect(m.upstreamBody(clientAboveHighWater: true, now: at(3)) == .discard)
        #expect(m.nextDeadline == at(62))
        #expect(m.deadlinePassed(now: justBefore(62)) == [])
        #expect(m.deadlinePassed(now: at(62)) == [.cancelUpstream])
        #expect(m.phase == .clientGone)
        #expect(m.outcome == .clientCancelled)
    }

    @Test func aDrainEndsWhenUsageArrivesOrTheUpstreamEnds() {
        var byUsage = ExchangeStateMachine(settings: Self.drainingSettings(), now: t0)
        byUsage.requestBodyComplete(now: t0)
        byUsage.calling(now: t0)
        _ = byUsage.upstreamHead(status: 200, headers: sseHeaders, now: at(1))
        #expect(byUsage.clientClosed(now: at(2)) == [])
        #expect(byUsage.usageArrived() == [.cancelUpstream])
        #expect(byUsage.isTerminal)
        #expect(byUsage.usageArrived() == [])

        var byEnd = ExchangeStateMachine(settings: Self.drainingSettings(), now: t0)
        byEnd.requestBodyComplete(now: t0)
        byEnd.calling(now: t0)
        _ = byEnd.upstreamHead(status: 200, headers: sseHeaders, now: at(1))
        _ = byEnd.clientClosed(now: at(2))
        #expect(byEnd.upstreamCompleted(.failure(.brokenResponse("cut")), now: at(3)) == [], "nothing to tell a departed client")
        #expect(byEnd.phase == .clientGone)
        #expect(byEnd.outcome == .clientCancelled)
    }

    @Test func aClientGoneMidBodyIsNeverDrainedAndUsageOutsideADrainDoesNothing() {
        var m = ExchangeStateMachine(settings: Self.drainingSettings(), now: t0)
        #expect(m.clientClosed(now: at(1)) == [], "no call was made: nothing to drain or cancel")
        #expect(m.phase == .clientGone)
        var streaming = streamingMachine()
        #expect(streaming.usageArrived() == [])
        #expect(streaming.clientClosed(now: at(2)) == [.cancelUpstream], "cancel stays the default")
    }
}
