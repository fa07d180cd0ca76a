// HTTPConnectionStateMachine: one connection's HTTP/1.1 lifecycle, events in and actions out, no sockets.
// Pipelining, 100-continue, early answers, HTTP/1.0 close-delimited bodies, keep-alive and close, draining, parse
// errors before and after the head went out, timeouts, and the client leaving in every state.
import HTTP1
import HTTPServer
import Support
import Testing
import TestSupportCore

private typealias Machine = HTTPConnectionStateMachine
private typealias Action = HTTPConnectionStateMachine.Action

private let headerRead: UInt64 = 7
private let bodyRead: UInt64 = 13
private let keepAliveIdle: UInt64 = 41
private let writeStall: UInt64 = 23
private let readAhead = 1000

private let timeouts = ConnectionDeadlines.Settings(
    headerReadSeconds: Double(headerRead), bodyReadSeconds: Double(bodyRead),
    keepAliveIdleSeconds: Double(keepAliveIdle), clientWriteStallSeconds: Double(writeStall))

private func accepted(proxyProtocol: Bool = false) -> Machine {
    Machine(timeouts: timeouts, acceptedAt: t0, proxyProtocol: proxyProtocol, maxReadAhead: readAhead)
}

private func get(_ target: String = "/v1/models", keepAlive: Bool = true) -> RequestHead {
    RequestHead(method: "GET", target: target, keepAlive: keepAlive)
}

private func post(expectsContinue: Bool = false, version: HTTPVersion = .http1_1, keepAlive: Bool = true) -> RequestHead {
    RequestHead(method: "POST", target: "/v1/chat/completions", version: version, framing: .contentLength(10),
                keepAlive: keepAlive, expectsContinue: expectsContinue)
}

private extension Machine {
    /// A complete answer with a body goes out and the connection is kept.
    mutating func respondComplete(at now: Instant) {
        _ = sendHead(mode: .contentLength(2))
        _ = finish(keepAlive: true, bufferedBytes: 0, now: now)
    }
}

private let badLine = HTTPParseError(kind: .badRequest, message: "Malformed request line.")

/// Takes a head through the parser's events as `ServerConnection` would, the handler returning a responder.
private func started(_ head: RequestHead, on machine: inout Machine, at now: Instant = t0) {
    _ = machine.bytesArrived(bufferedBytes: 64, now: now)
    #expect(machine.requestHead(head, now: now) == [.rearmTimer, .startExchange(head)])
    _ = machine.handlerReturned(hasResponder: true)
}

/// A machine whose GET was read to its end and whose response is streaming chunked.
private func streaming(at now: Instant = t0) -> Machine {
    var m = accepted()
    started(get(), on: &m, at: now)
    #expect(m.requestEnd(bufferedBytes: 0, now: now) == [.deliverRequestEnd])
    let headWentOut = m.sendHead(mode: .chunked)
    #expect(headWentOut)
    return m
}

@Suite struct HTTPConnectionStateMachineTests {
    // MARK: Keep-alive and close

    @Test func aRequestWithoutBodyIsServedAndTheConnectionKeptForTheNext() {
        var m = accepted()
        #expect(m.state == .idle)
        #expect(m.bytesArrived(bufferedBytes: 40, now: at(1)) == [.rearmTimer, .readRequests])
        #expect(m.deadlines.phase == .readingHead(since: t0), "the first head's clock starts at accept (slowloris)")
        #expect(m.requestHead(get(), now: at(1)) == [.rearmTimer, .startExchange(get())])
        #expect(m.state == .readingRequest(.init(hasBody: false)))
        #expect(m.handlerReturned(hasResponder: true) == [])
        #expect(m.requestEnd(bufferedBytes: 0, now: at(1)) == [.deliverRequestEnd])
        #expect(m.state == .responding(.init(hasBody: false)))
        #expect(!m.isReadingRequests, "the next request waits for this response")
        let headWentOut = m.sendHead(mode: .chunked)
        #expect(headWentOut)
        #expect(m.bodyMode == .chunked)
        let secondHead = m.sendHead(mode: .chunked)
        #expect(!secondHead, "one head per response")
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(5))
                == [.writeLastChunk, .releaseResponder, .exchangeEnded, .rearmTimer])
        #expect(m.state == .idle)
        #expect(m.deadlines.phase == .idle(since: at(5)))
        #expect(m.nextDeadline == at(5 + keepAliveIdle))
        #expect(m.bodyMode == nil, "between requests nothing is written")
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(5)) == [], "a second finish is ignored")
    }

    @Test func finishWithoutKeepAliveClosesAfterTheFlush() {
        var m = streaming()
        #expect(m.finish(keepAlive: false, bufferedBytes: 0, now: at(2))
                == [.writeLastChunk, .releaseResponder, .exchangeEnded, .closeAfterFlush])
        #expect(m.state == .closing)
        #expect(!m.acceptsInput)
        #expect(m.nextDeadline == nil, "a closing connection has the flush and linger timers of its own")
    }

    @Test func aContentLengthBodyEndsWithoutATerminalChunk() {
        var m = accepted()
        started(get(), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        let headWentOut = m.sendHead(mode: .contentLength(5))
        #expect(headWentOut)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(1)) == [.releaseResponder, .exchangeEnded, .rearmTimer])
    }

    // MARK: HTTP/1.0

    @Test func aCloseDelimitedBodyNeverKeepsTheConnection() {
        var m = accepted()
        started(post(version: .http1_0, keepAlive: false), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        let headWentOut = m.sendHead(mode: .closeDelimited)
        #expect(headWentOut)
        // Even if asked: the close is how the client learns where the body ends.
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(1))
                == [.releaseResponder, .exchangeEnded, .closeAfterFlush])
    }

    @Test func anAbortedCloseDelimitedBodyIsReset() {
        var m = accepted()
        started(get(), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        let headWentOut = m.sendHead(mode: .closeDelimited)
        #expect(headWentOut)
        #expect(m.abort() == [.releaseResponder, .close(reset: true)], "a clean close would look like a complete body")
        #expect(m.abort() == [])
    }

    @Test func anAbortedChunkedBodyClosesAfterTheFlushWithoutATerminalChunk() {
        var m = streaming()
        #expect(m.abort() == [.releaseResponder, .closeAfterFlush])
        #expect(m.state == .closing)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(1)) == [])
    }

    @Test func aKeptAliveHTTP10RequestIsServedLikeAnyOther() {
        var m = accepted()
        started(RequestHead(method: "GET", target: "/", version: .http1_0, keepAlive: true), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        #expect(m.completeResponse(keepAlive: true)?.keepAlive == true)
        let headWentOut = m.sendHead(mode: .contentLength(3))
        #expect(headWentOut)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: t0).last == .rearmTimer)
        #expect(m.state == .idle)
    }

    // MARK: Pipelining

    @Test func pipelinedBytesWaitForTheResponseThenAreReadOnALaterTurn() {
        var m = streaming()
        #expect(m.bytesArrived(bufferedBytes: 300, now: at(1)) == [], "kept in the parser, not parsed")
        #expect(!m.isReadingRequests)
        #expect(m.finish(keepAlive: true, bufferedBytes: 300, now: at(2))
                == [.writeLastChunk, .releaseResponder, .exchangeEnded, .rearmTimer, .scheduleReadRequests])
        #expect(m.deadlines.phase == .readingHead(since: at(2)), "the next head's clock starts when its turn comes")
        #expect(m.isReadingRequests)
        // A second exchange ending before the scheduled read ran schedules nothing more.
        started(get(), on: &m, at: at(2))
        _ = m.requestEnd(bufferedBytes: 100, now: at(2))
        _ = m.sendHead(mode: .contentLength(0))
        #expect(m.finish(keepAlive: true, bufferedBytes: 100, now: at(2)).contains(.scheduleReadRequests) == false)
        m.scheduledReadStarted()
        started(get(), on: &m, at: at(3))
        _ = m.requestEnd(bufferedBytes: 50, now: at(3))
        _ = m.sendHead(mode: .contentLength(0))
        #expect(m.finish(keepAlive: true, bufferedBytes: 50, now: at(3)).last == .scheduleReadRequests)
    }

    @Test func readAheadBeyondTheBoundClosesTheConnection() {
        var m = streaming()
        #expect(m.bytesArrived(bufferedBytes: readAhead, now: at(1)) == [])
        #expect(m.bytesArrived(bufferedBytes: readAhead + 1, now: at(1)) == [.close(reset: false)])
        #expect(m.state == .closing)
        #expect(m.connectionClosed() == [.responderClientGone], "the streaming responder hears the client is gone")
    }

    @Test func requestsArriveInOrderOneAtATime() {
        var m = accepted()
        started(post(), on: &m)
        m.requestBodyReceived(now: at(1))
        #expect(m.requestHead(get(), now: at(1)) == [], "no second head while one is being read")
        _ = m.requestEnd(bufferedBytes: 0, now: at(1))
        #expect(m.requestHead(get(), now: at(1)) == [], "nor while its response streams")
    }

    // MARK: 100-continue

    @Test func continueGoesOutWhenTheHandlerTakesTheBody() {
        var m = accepted()
        _ = m.bytesArrived(bufferedBytes: 80, now: t0)
        _ = m.requestHead(post(expectsContinue: true), now: t0)
        #expect(m.handlerReturned(hasResponder: true) == [.writeContinue])
    }

    @Test func noContinueWhenTheHandlerAnsweredOrTookNothingOrNobodyAsked() {
        var answered = accepted()
        _ = answered.requestHead(post(expectsContinue: true), now: t0)
        let headWentOut = answered.sendHead(mode: .contentLength(2))
        #expect(headWentOut)
        #expect(answered.handlerReturned(hasResponder: true) == [], "the answer already went out")

        var refused = accepted()
        _ = refused.requestHead(post(expectsContinue: true), now: t0)
        #expect(refused.handlerReturned(hasResponder: false) == [])

        var plain = accepted()
        _ = plain.requestHead(post(), now: t0)
        #expect(plain.handlerReturned(hasResponder: true) == [])
    }

    // MARK: Early answers

    @Test func anAnswerBeforeTheBodyEndedClosesTheConnectionAfterTheFlush() {
        var m = accepted()
        started(post(), on: &m)
        m.requestBodyReceived(now: at(1))
        let answer = m.completeResponse(keepAlive: true)
        #expect(answer?.keepAlive == false, "the unread rest of the body would be taken for a request")
        let headWentOut = m.sendHead(mode: .contentLength(20))
        #expect(headWentOut)
        #expect(m.finish(keepAlive: true, bufferedBytes: 5, now: at(1)) == [.releaseResponder, .closeAfterFlush])
        #expect(m.state == .closing)
        #expect(!m.isReadingRequests, "the rest of the body is never parsed")
        #expect(m.requestEnd(bufferedBytes: 0, now: at(2)) == [])
    }

    @Test func anAnswerInsideHandleToABodilessRequestKeepsTheConnection() {
        var m = accepted()
        _ = m.bytesArrived(bufferedBytes: 40, now: t0)
        _ = m.requestHead(get(), now: t0)
        // The handler answers (a 404, say) before returning; the parser's `.end` for the GET is next.
        #expect(m.completeResponse(keepAlive: true)! == (keepAlive: true, headOnly: false))
        let headWentOut = m.sendHead(mode: .contentLength(3))
        #expect(headWentOut)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: t0) == [.releaseResponder])
        #expect(m.state == .awaitingRequestEnd)
        #expect(m.handlerReturned(hasResponder: false) == [])
        #expect(m.isReadingRequests)
        #expect(m.requestEnd(bufferedBytes: 0, now: at(1)) == [.deliverRequestEnd, .exchangeEnded, .rearmTimer])
        #expect(m.state == .idle)
    }

    @Test func anAnswerInsideHandleWithoutKeepAliveCloses() {
        var m = accepted()
        _ = m.requestHead(get(keepAlive: false), now: t0)
        _ = m.sendHead(mode: .contentLength(3))
        #expect(m.finish(keepAlive: false, bufferedBytes: 0, now: t0) == [.releaseResponder, .closeAfterFlush])
    }

    @Test func aHEADRequestIsAnsweredWithoutBody() {
        var m = accepted()
        _ = m.requestHead(RequestHead(method: "HEAD", target: "/healthz"), now: t0)
        #expect(m.completeResponse(keepAlive: true)! == (keepAlive: true, headOnly: true))
    }

    @Test func writerCallsBetweenRequestsAreIgnored() {
        var m = accepted()
        #expect(m.completeResponse(keepAlive: true) == nil)
        let headWentOut = m.sendHead(mode: .chunked)
        #expect(!headWentOut)
        #expect(m.bodyMode == nil)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: t0) == [])
    }

    // MARK: Draining

    @Test func drainingMakesTheCurrentResponseTheLast() {
        var m = streaming()
        m.drain()
        #expect(m.closeIfIdle(bufferedBytes: 0, pendingBytes: 0) == [], "an exchange in flight runs on")
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: at(1))
                == [.writeLastChunk, .releaseResponder, .exchangeEnded, .closeAfterFlush])

        var fresh = accepted()
        fresh.drain()
        started(get(), on: &fresh)
        _ = fresh.requestEnd(bufferedBytes: 0, now: t0)
        #expect(fresh.completeResponse(keepAlive: true)?.keepAlive == false, "answered with Connection: close")
    }

    @Test func drainingClosesAnIdleConnectionAfterWhatIsPending() {
        var quiet = accepted()
        quiet.drain()
        #expect(quiet.closeIfIdle(bufferedBytes: 0, pendingBytes: 0) == [.close(reset: false)])
        #expect(quiet.state == .closing)

        var flushing = accepted()
        #expect(flushing.closeIfIdle(bufferedBytes: 0, pendingBytes: 10) == [.closeAfterFlush])

        var arriving = accepted()
        #expect(arriving.closeIfIdle(bufferedBytes: 3, pendingBytes: 0) == [], "a request has begun: it is served")
        #expect(arriving.state == .idle)
    }

    // MARK: Parse errors

    @Test func aParseErrorBeforeAnyHeadIsAnsweredAndTheConnectionCloses() {
        var m = accepted()
        _ = m.bytesArrived(bufferedBytes: 20, now: t0)
        let error = ErrorResponse.badRequest(badLine)
        #expect(m.parseFailed(badLine) == [.reportRejection(error), .respond(error)])
        // What `.respond` then does through the writer side:
        #expect(m.completeResponse(keepAlive: false)! == (keepAlive: false, headOnly: false))
        let headWentOut = m.sendHead(mode: .contentLength(error.jsonBody.count))
        #expect(headWentOut)
        #expect(m.finish(keepAlive: false, bufferedBytes: 0, now: t0) == [.releaseResponder, .closeAfterFlush])
        #expect(m.state == .closing)
    }

    @Test func aParseErrorInTheBodyBeforeTheHeadWentOutTellsTheResponderAndAnswers() {
        var m = accepted()
        started(post(), on: &m)
        let error = ErrorResponse.badRequest(badLine)
        #expect(m.parseFailed(badLine) == [.responderClientGone, .reportRejection(error), .respond(error)])
        #expect(m.completeResponse(keepAlive: true)?.keepAlive == false)
    }

    @Test func aParseErrorAfterTheHeadWentOutCanOnlyClose() {
        var m = accepted()
        started(post(), on: &m)
        let headWentOut = m.sendHead(mode: .chunked)
        #expect(headWentOut)
        #expect(m.parseFailed(badLine) == [.responderClientGone, .close(reset: false)], "a second head would corrupt the stream")
        #expect(m.state == .closing)
    }

    @Test func aParseErrorAfterAHEADRequestIsAnsweredWithItsBody() {
        var m = accepted()
        _ = m.requestHead(RequestHead(method: "HEAD", target: "/"), now: t0)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        _ = m.sendHead(mode: .none)
        _ = m.finish(keepAlive: true, bufferedBytes: 9, now: t0)
        _ = m.parseFailed(badLine)
        #expect(m.completeResponse(keepAlive: false)?.headOnly == false, "the error answers the unparsed request, not the HEAD")
    }

    // MARK: Timeouts

    @Test func nothingAskedBeforeTheHeaderDeadlineClosesQuietly() {
        var m = accepted()
        #expect(m.nextDeadline == at(headerRead))
        #expect(m.deadlineReached(now: justBefore(headerRead)) == [.rearmTimer], "early or spurious: armed again")
        #expect(m.deadlineReached(now: at(headerRead)) == [.close(reset: false)])
        #expect(m.deadlineReached(now: at(headerRead + 1)) == [], "nothing after closing")
    }

    @Test func aHeadTooSlowGets408AndTheConnectionCloses() {
        var m = accepted()
        _ = m.bytesArrived(bufferedBytes: 3, now: at(1))
        let timeout = ErrorResponse.requestTimeout
        #expect(m.deadlineReached(now: at(headerRead)) == [.reportRejection(timeout), .responderClientGone, .respond(timeout)])
        #expect(m.completeResponse(keepAlive: false)! == (keepAlive: false, headOnly: false))
        _ = m.sendHead(mode: .contentLength(timeout.jsonBody.count))
        #expect(m.finish(keepAlive: false, bufferedBytes: 3, now: at(headerRead)) == [.releaseResponder, .closeAfterFlush])
    }

    @Test func aBodyTooSlowGets408UnlessTheResponseStartedThenTheConnectionCloses() {
        var before = accepted()
        started(post(), on: &before, at: at(1))
        before.requestBodyReceived(now: at(2))
        #expect(before.nextDeadline == at(2 + bodyRead))
        #expect(before.deadlineReached(now: at(2 + bodyRead)).last == .respond(.requestTimeout))

        var after = accepted()
        started(post(), on: &after, at: at(1))
        _ = after.sendHead(mode: .chunked)
        #expect(after.deadlineReached(now: at(1 + bodyRead))
                == [.reportRejection(.requestTimeout), .responderClientGone, .close(reset: false)])
    }

    @Test func aClientThatStopsReadingIsResetAfterTheStallDeadline() {
        var m = streaming()
        #expect(m.nextDeadline == nil, "a response has no deadline of its own")
        #expect(m.writeBufferFull(now: at(3)) == [.rearmTimer])
        #expect(m.writeStallClockRunning)
        #expect(m.writeBufferFull(now: at(4)) == [], "the clock started at the first time")
        #expect(m.nextDeadline == at(3 + writeStall))
        #expect(m.deadlineReached(now: at(3 + writeStall)) == [.reportWriteStall, .responderClientGone, .close(reset: true)])
    }

    @Test func aDrainedBufferStopsTheStallClockAndWakesTheResponder() {
        var m = streaming()
        _ = m.writeBufferFull(now: at(3))
        #expect(m.writeBufferDrained(bufferedBytes: 0, now: at(4)) == [.rearmTimer, .responderDrained])
        #expect(!m.writeStallClockRunning)
        #expect(m.nextDeadline == nil)
    }

    @Test func aClientNotReadingItsAnswersGetsNoNewRequestUntilTheyDrain() {
        var m = accepted()
        started(get(), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        _ = m.sendHead(mode: .contentLength(2))
        _ = m.writeBufferFull(now: at(1))
        #expect(m.finish(keepAlive: true, bufferedBytes: 40, now: at(1)) == [.releaseResponder, .exchangeEnded, .rearmTimer],
                "the pipelined request is not read now")
        #expect(m.state == .idle)
        #expect(m.writeStallClockRunning, "the answer is still unread")
        #expect(!m.isReadingRequests, "the pipelined request waits")
        #expect(m.bytesArrived(bufferedBytes: 80, now: at(2)) == [], "kept, not read")
        #expect(m.nextDeadline == at(1 + writeStall), "the head's clock has not started: the relay is not reading it")
        #expect(m.writeBufferDrained(bufferedBytes: 80, now: at(9)) == [.rearmTimer, .responderDrained, .scheduleReadRequests])
        #expect(m.isReadingRequests)
        #expect(m.nextDeadline == at(9 + headerRead), "the head's clock starts when the relay reads again")
    }

    @Test func aClientNotReadingItsAnswersMayPipelineOnlyUpToTheReadAheadBound() {
        var m = accepted()
        started(get(), on: &m)
        _ = m.requestEnd(bufferedBytes: 0, now: t0)
        _ = m.writeBufferFull(now: at(1))
        m.respondComplete(at: at(1))
        #expect(m.bytesArrived(bufferedBytes: readAhead, now: at(2)) == [])
        #expect(m.bytesArrived(bufferedBytes: readAhead + 1, now: at(2)) == [.close(reset: false)])
        #expect(m.state == .closing)
    }

    // MARK: The client leaves

    @Test(arguments: [
        ("idle", false), ("reading the body", true), ("responding", true), ("awaiting the request end", true),
        ("closing", true), ("awaiting the PROXY header", false),
    ])
    func theClientLeavingIsTerminalInEveryState(_ name: String, tellsResponder: Bool) {
        var m: Machine
        switch name {
        case "idle": m = accepted()
        case "reading the body":
            m = accepted()
            started(post(), on: &m)
        case "responding": m = streaming()
        case "awaiting the request end":
            m = accepted()
            _ = m.requestHead(get(), now: t0)
            _ = m.sendHead(mode: .contentLength(0))
            _ = m.finish(keepAlive: true, bufferedBytes: 0, now: t0)
            #expect(m.state == .awaitingRequestEnd)
        case "closing":
            m = streaming()
            _ = m.bytesArrived(bufferedBytes: readAhead + 1, now: t0)
        default: m = accepted(proxyProtocol: true)
        }
        #expect(m.connectionClosed() == (tellsResponder ? [.responderClientGone] : []), "\(name)")
        #expect(m.state == .closed)
        #expect(m.connectionClosed() == [], "terminal")
        let headWentOut = m.sendHead(mode: .chunked)
        #expect(!headWentOut)
        #expect(m.bodyMode == nil)
        #expect(m.finish(keepAlive: true, bufferedBytes: 0, now: t0) == [])
        #expect(m.abort() == [])
        #expect(m.deadlineReached(now: at(1000)) == [])
        #expect(m.bytesArrived(bufferedBytes: 10, now: t0) == [])
        #expect(!m.isReadingRequests && !m.acceptsInput)
        #expect(m.nextDeadline == nil)
    }

    // MARK: PROXY protocol

    @Test func noHTTPIsReadBeforeThePROXYHeader() {
        var m = accepted(proxyProtocol: true)
        #expect(m.state == .awaitingProxyHeader)
        #expect(!m.isReadingRequests)
        #expect(m.bytesArrived(bufferedBytes: 10, now: t0) == [])
        m.proxyHeaderAccepted()
        #expect(m.state == .idle)
        #expect(m.bytesArrived(bufferedBytes: 10, now: at(1)) == [.rearmTimer, .readRequests])
    }

    @Test func aMalformedPROXYHeaderIsReportedAndClosed() {
        var m = accepted(proxyProtocol: true)
        #expect(m.proxyHeaderRejected("bad signature") == [.reportProxyHeaderRejected("bad signature"), .close(reset: false)])
        #expect(m.state == .closing)
        #expect(m.proxyHeaderRejected("again") == [])
    }

    @Test func aPROXYHeaderThatNeverComesIsClosedQuietlyAtTheHeaderDeadline() {
        var m = accepted(proxyProtocol: true)
        #expect(m.deadlineReached(now: at(headerRead)) == [.close(reset: false)])
    }
}

@Suite struct ErrorResponseTests {
    @Test func aRefusedSocketGetsTheSameBytesAsAConnectionsOwnAnswer() {
        let error = ErrorResponse(status: 503, type: "server_error", code: "too_many_connections",
                                  message: "The relay is at its connection limit; retry later.")
        let body = #"{"error":{"message":"The relay is at its connection limit; retry later.","type":"server_error","code":"too_many_connections"}}"#
        let expected = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n" + body
        #expect(String(decoding: error.serialized(), as: UTF8.self) == expected)
    }

    @Test func extraFieldsFollowTheContentTypeAndTheRequestIdComesLast() {
        let error = ErrorResponse(status: 405, type: "invalid_request_error", code: "method_not_allowed", message: "m",
                                  headers: [("Allow", "GET, POST")])
        #expect(error.headerFields(requestID: "abc").map { "\($0.name): \($0.value)" }
                == ["Content-Type: application/json", "Allow: GET, POST", "X-Request-Id: abc"])
    }

    @Test func aCompleteHeadIsKeptAliveOrSaysClose() {
        let kept = ResponseHead.complete(status: 200, headers: HTTPHeaders([("A", "1")]), contentLength: 3, keepAlive: true)
        #expect(kept.headers.map { "\($0.name): \($0.value)" } == ["A: 1", "Content-Length: 3"])
        let closing = ResponseHead.complete(status: 200, headers: HTTPHeaders(), contentLength: 0, keepAlive: false)
        #expect(closing.headers.map { "\($0.name): \($0.value)" } == ["Content-Length: 0", "Connection: close"])
    }

    @Test(arguments: [
        (HTTPParseError.Kind.headTooLarge, 431, "request_header_too_large"), (.uriTooLong, 414, "uri_too_long"),
        (.bodyTooLarge, 413, "request_body_too_large"), (.versionNotSupported, 505, "http_version_not_supported"),
    ])
    func parseErrorsKeepTheParsersStatus(kind: HTTPParseError.Kind, status: Int, code: String) {
        let e = ErrorResponse.badRequest(HTTPParseError(kind: kind, message: "m"))
        #expect(e.status == status)
        #expect(e.code == code)
    }
}
