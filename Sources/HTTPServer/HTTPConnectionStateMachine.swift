import HTTP1
import Support

/// The HTTP/1.1 lifecycle of one server connection, as a value: the socket shell (`ServerConnection`) reports what
/// happened (a request head, the request's end, the response's head and end, a parse error, a deadline, the client
/// gone) and carries out the actions it gets back. No I/O and no clock of its own, so every path is tested with
/// plain values (HTTPServerTests).
///
/// One request is served at a time: bytes of the next (pipelined) request wait in the parser until the current
/// response has ended, and answers go out in order (RFC 9112 §9.3.2), as NIO's `HTTPServerPipelineHandler` does.
/// A response may end before its request did (an early answer, such as 401 to an upload): the rest of that body
/// is unread, so the connection cannot carry another request and closes after the flush, unless the request had
/// no body at all. A client that is not reading its answers (its pending output above the high-water mark) gets
/// no new request started either: an answer the relay writes on its own (a built-in endpoint, a rejection) has no
/// upstream to pause, so without this a pipelining client that never reads would grow the output without bound.
///
/// ```
/// awaitingProxyHeader ─► idle ─► readingRequest ─► responding ─► idle …
///                              │       └─► awaitingRequestEnd ─► idle   (answered before a bodiless request's end)
///      every state ─► closing (we close: after the flush, or at once) ─► closed (the socket is gone)
/// ```
///
/// Owned by its connection's loop queue, like the connection.
public struct HTTPConnectionStateMachine: Sendable {
    public enum State: Sendable, Equatable {
        /// The listener requires a PROXY protocol header first (`listen.proxyProtocol`); no HTTP byte is read yet.
        /// → `idle` (header read), `closing` (malformed or late header).
        case awaitingProxyHeader
        /// Between requests, or before the first; bytes of the next head may be arriving (the deadlines know).
        /// → `readingRequest` (a head, or an error answered on the connection), `closing`.
        case idle
        /// A head arrived and its body has not ended; the response may have started (100-continue, early answer).
        /// → `responding` (request end), `awaitingRequestEnd` or `closing` (response end), `closing`.
        case readingRequest(Exchange)
        /// The request was read to its end; its response is being produced. Pipelined bytes wait in the parser.
        /// → `idle` (response end, kept alive), `closing`.
        case responding(Exchange)
        /// The response of a request without a body ended before the parser's `.end` for it was taken (the handler
        /// answered inside `handle`); that end follows at once. → `idle`, `closing`.
        case awaitingRequestEnd
        /// We asked the connection to close (after what is pending, or at once): nothing more is read or answered.
        /// → `closed`.
        case closing
        /// The socket is gone. Terminal.
        case closed
    }

    /// The request being served and how far its response got.
    public struct Exchange: Sendable, Equatable {
        /// A HEAD request: a complete response carries its length but no body (RFC 9110 §9.3.2).
        public var isHead: Bool
        /// The request has a body (its framing is not `.none`), so its end comes after the head.
        public var hasBody: Bool
        /// The client waits for `100 Continue` before sending the body (RFC 9110 §10.1.1).
        public var expectsContinue: Bool
        /// `nil` until the response head is out; then how its body is framed.
        public var responseMode: ResponseBodyMode?

        public init(isHead: Bool = false, hasBody: Bool, expectsContinue: Bool = false, responseMode: ResponseBodyMode? = nil) {
            self.isHead = isHead
            self.hasBody = hasBody
            self.expectsContinue = expectsContinue
            self.responseMode = responseMode
        }
    }

    public enum Action: Sendable, Equatable {
        /// Hand the head to the request handler, then report `handlerReturned`.
        case startExchange(RequestHead)
        /// Write `HTTP/1.1 100 Continue`: the handler wants the body the client is holding back.
        case writeContinue
        /// Parse and deliver what the parser holds, for as long as `isReadingRequests`.
        case readRequests
        /// Parse the next pipelined request on a later turn of the loop (this may run inside a curl callback).
        case scheduleReadRequests
        /// Tell the responder the request body ended.
        case deliverRequestEnd
        /// Tell the responder its client is gone (terminal for it), and forget it.
        case responderClientGone
        /// Tell the responder the client's pending output fell to the low-water mark.
        case responderDrained
        /// The response ended: forget the responder.
        case releaseResponder
        /// The exchange is over: the client is the peer again (for errors answered between requests).
        case exchangeEnded
        /// Write the terminal chunk (`0\r\n\r\n`).
        case writeLastChunk
        /// Arm the timer for `nextDeadline`.
        case rearmTimer
        /// Report an error the connection answered on its own (logs, metrics).
        case reportRejection(ErrorResponse)
        /// Answer `error` completely (the connection closes after it).
        case respond(ErrorResponse)
        /// Report a missing or malformed PROXY header.
        case reportProxyHeaderRejected(String)
        /// The client stopped reading with the buffer above high water for `clientWriteStallSeconds`.
        case reportWriteStall
        /// Send what is pending, then close (lingering for the client's FIN).
        case closeAfterFlush
        /// Close now; with `reset`, abandon what is pending and send RST.
        case close(reset: Bool)
    }

    public private(set) var state: State
    public private(set) var deadlines: ConnectionDeadlines
    /// The current response is the connection's last (the server drains): it goes out with `Connection: close`.
    public private(set) var closeAfterResponse = false
    /// Bytes a client may send ahead (pipelined) while its current response is still streaming.
    public let maxReadAhead: Int
    private var readScheduled = false

    public init(timeouts: ConnectionDeadlines.Settings, acceptedAt: Instant, proxyProtocol: Bool, maxReadAhead: Int) {
        state = proxyProtocol ? .awaitingProxyHeader : .idle
        deadlines = ConnectionDeadlines(settings: timeouts, acceptedAt: acceptedAt)
        self.maxReadAhead = maxReadAhead
    }

    /// When the timer should fire next (nil: no timer). A closing connection has its own flush and linger timers.
    public var nextDeadline: Instant? {
        switch state {
        case .closing, .closed: nil
        default: deadlines.next?.deadline
        }
    }

    /// Whether the parser's next event should be taken now. Not while a response streams (its request has
    /// ended: what follows is the next request, which waits its turn), nor between requests while the client is
    /// not reading its answers (the next waits until they drain), nor once closing.
    public var isReadingRequests: Bool {
        switch state {
        case .idle: !writeStallClockRunning
        case .readingRequest, .awaitingRequestEnd: true
        case .awaitingProxyHeader, .responding, .closing, .closed: false
        }
    }

    /// Whether bytes from the client are still wanted at all (a closing connection discards them).
    public var acceptsInput: Bool {
        switch state {
        case .closing, .closed: false
        default: true
        }
    }

    // MARK: Input

    public mutating func proxyHeaderAccepted() {
        if state == .awaitingProxyHeader { state = .idle }
    }

    public mutating func proxyHeaderRejected(_ reason: String) -> [Action] {
        guard state == .awaitingProxyHeader else { return [] }
        state = .closing
        return [.reportProxyHeaderRejected(reason), .close(reset: false)]
    }

    /// Bytes arrived and were appended to the parser, which now holds `bufferedBytes` not yet parsed.
    public mutating func bytesArrived(bufferedBytes: Int, now: Instant) -> [Action] {
        switch state {
        case .idle:
            // A client not reading its answers: the request waits for them to drain, as one behind a streaming
            // response waits for its end, and its head's clock starts then (`writeBufferDrained`).
            if writeStallClockRunning { return readAhead(bufferedBytes: bufferedBytes) }
            deadlines.headBytesArrived(now: now)
            return [.rearmTimer, .readRequests]
        case .readingRequest, .awaitingRequestEnd:
            return [.readRequests]
        case .responding:
            return readAhead(bufferedBytes: bufferedBytes)
        case .awaitingProxyHeader, .closing, .closed:
            return []
        }
    }

    /// Bytes of a next request are kept for later, within a bound: a client may pipeline, not flood.
    private mutating func readAhead(bufferedBytes: Int) -> [Action] {
        guard bufferedBytes > maxReadAhead else { return [] }
        state = .closing
        return [.close(reset: false)]
    }

    public mutating func requestHead(_ head: RequestHead, now: Instant) -> [Action] {
        guard state == .idle else { return [] }
        let hasBody = head.framing != .none
        deadlines.headComplete(now: now, hasBody: hasBody)
        state = .readingRequest(Exchange(isHead: head.method == "HEAD", hasBody: hasBody, expectsContinue: head.expectsContinue))
        return [.rearmTimer, .startExchange(head)]
    }

    /// The handler returned from `handle`: with a responder, and nothing answered yet, a client that expects
    /// `100 Continue` gets it now.
    public mutating func handlerReturned(hasResponder: Bool) -> [Action] {
        guard hasResponder, case .readingRequest(let exchange) = state, exchange.expectsContinue, exchange.responseMode == nil
        else { return [] }
        return [.writeContinue]
    }

    public mutating func requestBodyReceived(now: Instant) {
        deadlines.bodyProgress(now: now)
    }

    /// The request ended; the parser holds `bufferedBytes` of whatever follows it.
    public mutating func requestEnd(bufferedBytes: Int, now: Instant) -> [Action] {
        deadlines.bodyComplete()
        switch state {
        case .readingRequest(let exchange):
            state = .responding(exchange)
            return [.deliverRequestEnd]
        case .awaitingRequestEnd:
            return [.deliverRequestEnd] + exchangeFinished(keepAlive: true, bufferedBytes: bufferedBytes, now: now)
        default:
            return []
        }
    }

    /// The parser refused the input. Before any response byte, the client gets the error and the connection
    /// closes after it; once a response has started, only closing is left (a second head would corrupt it).
    public mutating func parseFailed(_ error: HTTPParseError) -> [Action] {
        let response = ErrorResponse.badRequest(error)
        switch state {
        case .idle:
            state = .readingRequest(Exchange(hasBody: true))
            return [.reportRejection(response), .respond(response)]
        case .readingRequest(let exchange) where exchange.responseMode == nil:
            state = .readingRequest(Exchange(isHead: exchange.isHead, hasBody: true))
            return [.responderClientGone, .reportRejection(response), .respond(response)]
        case .readingRequest, .awaitingRequestEnd:
            state = .closing
            return [.responderClientGone, .close(reset: false)]
        case .awaitingProxyHeader, .responding, .closing, .closed:
            return []
        }
    }

    // MARK: Output (the writer side)

    /// Whether a complete response (a head with its whole body) may go out now, kept alive or not, and whether
    /// its body is left out (HEAD). Nil once a response has started, or between requests.
    public func completeResponse(keepAlive: Bool) -> (keepAlive: Bool, headOnly: Bool)? {
        switch state {
        case .readingRequest(let exchange) where exchange.responseMode == nil:
            // Unread body bytes would be taken for the next request: only a bodiless request can be kept.
            return (keepAlive && !exchange.hasBody && !closeAfterResponse, exchange.isHead)
        case .responding(let exchange) where exchange.responseMode == nil:
            return (keepAlive && !closeAfterResponse, exchange.isHead)
        default:
            return nil
        }
    }

    /// The response head goes out now; false (write nothing) if a response already started or none may.
    public mutating func sendHead(mode: ResponseBodyMode) -> Bool {
        switch state {
        case .readingRequest(var exchange) where exchange.responseMode == nil:
            exchange.responseMode = mode
            state = .readingRequest(exchange)
            return true
        case .responding(var exchange) where exchange.responseMode == nil:
            exchange.responseMode = mode
            state = .responding(exchange)
            return true
        default:
            return false
        }
    }

    /// How to frame a body delivery now; nil when there is no response body to write into.
    @inline(__always)
    public var bodyMode: ResponseBodyMode? {
        switch state {
        case .readingRequest(let exchange), .responding(let exchange): exchange.responseMode
        default: nil
        }
    }

    /// The response is complete. `keepAlive` asks to keep the connection; it is kept only if the request was
    /// (or, without a body, is about to be) read to its end, the body's end was not the connection's close, and
    /// the server is not draining. The parser holds `bufferedBytes` of a pipelined request.
    public mutating func finish(keepAlive: Bool, bufferedBytes: Int, now: Instant) -> [Action] {
        guard let mode = bodyMode else { return [] }
        var actions: [Action] = mode == .chunked ? [.writeLastChunk, .releaseResponder] : [.releaseResponder]
        let keep = keepAlive && mode != .closeDelimited && !closeAfterResponse
        switch state {
        case .responding:
            actions += exchangeFinished(keepAlive: keep, bufferedBytes: bufferedBytes, now: now)
        case .readingRequest(let exchange) where !exchange.hasBody && keep:
            // The parser's `.end` for this request is next; `requestEnd` then finishes the exchange.
            state = .awaitingRequestEnd
        default:
            // The response ended before the request body did: the rest of the body is unread, so the
            // connection cannot carry another request.
            state = .closing
            actions.append(.closeAfterFlush)
        }
        return actions
    }

    /// The response ends without a clean end (no terminal chunk): the connection closes after what is pending,
    /// or at once with RST when the body is close-delimited (its close is how such a body ends normally; only a
    /// reset says it did not).
    public mutating func abort() -> [Action] {
        switch state {
        case .closing, .closed:
            return []
        default:
            let mode = bodyMode
            state = .closing
            return [.releaseResponder, mode == .closeDelimited ? .close(reset: true) : .closeAfterFlush]
        }
    }

    private mutating func exchangeFinished(keepAlive: Bool, bufferedBytes: Int, now: Instant) -> [Action] {
        guard keepAlive else {
            state = .closing
            return [.exchangeEnded, .closeAfterFlush]
        }
        state = .idle
        deadlines.responseComplete(now: now)
        return [.exchangeEnded, .rearmTimer] + nextRequest(bufferedBytes: bufferedBytes, now: now)
    }

    /// Between requests, with `bufferedBytes` of the next one held in the parser: it is read on a later turn of
    /// the loop, unless the client is not reading its answers (then `writeBufferDrained` calls this again).
    private mutating func nextRequest(bufferedBytes: Int, now: Instant) -> [Action] {
        guard bufferedBytes > 0, !writeStallClockRunning else { return [] }
        deadlines.headBytesArrived(now: now)
        guard !readScheduled else { return [] }
        readScheduled = true
        return [.scheduleReadRequests]
    }

    /// The read scheduled by `.scheduleReadRequests` is running.
    public mutating func scheduledReadStarted() {
        readScheduled = false
    }

    // MARK: The client's buffer and the clock

    public var writeStallClockRunning: Bool { deadlines.writeStalledSince != nil }

    /// The pending output reached the high-water mark: the write-stall clock starts (if not already running).
    public mutating func writeBufferFull(now: Instant) -> [Action] {
        guard deadlines.writeStalledSince == nil else { return [] }
        deadlines.writeBufferFull(now: now)
        return [.rearmTimer]
    }

    /// The pending output fell to the low-water mark. Between requests, the parser may hold `bufferedBytes` of a
    /// next request that waited for this (`bytesArrived`).
    public mutating func writeBufferDrained(bufferedBytes: Int, now: Instant) -> [Action] {
        deadlines.writeBufferDrained()
        let next = state == .idle ? nextRequest(bufferedBytes: bufferedBytes, now: now) : []
        return [.rearmTimer, .responderDrained] + next
    }

    /// The timer fired. It may be early or spurious: then it is only armed again.
    public mutating func deadlineReached(now: Instant) -> [Action] {
        guard nextDeadline != nil else { return [] }
        switch deadlines.expired(now: now) {
        case nil:
            return [.rearmTimer]
        case .closeQuietly:
            state = .closing
            return [.close(reset: false)]
        case .requestTimeout:
            let response = ErrorResponse.requestTimeout
            switch state {
            case .idle, .awaitingProxyHeader:
                state = .readingRequest(Exchange(hasBody: true))
                return [.reportRejection(response), .responderClientGone, .respond(response)]
            case .readingRequest(let exchange) where exchange.responseMode == nil:
                state = .readingRequest(Exchange(isHead: exchange.isHead, hasBody: true))
                return [.reportRejection(response), .responderClientGone, .respond(response)]
            default:
                state = .closing
                return [.reportRejection(response), .responderClientGone, .close(reset: false)]
            }
        case .writeStall:
            state = .closing
            return [.reportWriteStall, .responderClientGone, .close(reset: true)]
        }
    }

    // MARK: Closing

    /// Makes the current (or next) response the connection's last; `closeIfIdle` then closes an idle one.
    public mutating func drain() {
        closeAfterResponse = true
    }

    /// Closes the connection if it sits between requests with nothing of a next one received, after what is
    /// still pending (`pendingBytes`) has gone out.
    public mutating func closeIfIdle(bufferedBytes: Int, pendingBytes: Int) -> [Action] {
        switch state {
        case .idle, .awaitingProxyHeader:
            guard bufferedBytes == 0 else { return [] }
            state = .closing
            return [pendingBytes == 0 ? .close(reset: false) : .closeAfterFlush]
        default:
            return []
        }
    }

    /// The socket is gone (the client left, a write failed, or our close completed). Terminal.
    public mutating func connectionClosed() -> [Action] {
        let previous = state
        state = .closed
        switch previous {
        case .awaitingProxyHeader, .idle, .closed: return []
        case .readingRequest, .responding, .awaitingRequestEnd, .closing: return [.responderClientGone]
        }
    }
}
