import HTTP1
import Support
import Transport

/// HTTP/1.1 server side of one client connection: the shell around an `HTTPConnectionStateMachine`. It feeds the
/// parser, reports what happens to the machine and carries out its actions: socket writes, timers, handler calls.
/// One exchange runs at a time (pipelined requests wait their turn and are answered in order); responses are framed
/// here, one write per body delivery.
///
/// Owned by the connection's loop queue; every method is called there.
public final class ServerConnection: ConnectionDelegate, ResponseWriter, @unchecked Sendable {
    // Invariant: all state is touched on `connection.loop.queue` only.
    public let connection: Connection
    private let handler: any RequestHandler
    private var parser: RequestParser
    private var machine: HTTPConnectionStateMachine
    private let logger: Logger
    private let onClose: (ServerConnection) -> Void
    private var responder: (any RequestResponder)?
    private var timer = LazyTimer()
    /// `LatencyTrace` only: when the connection was accepted, then when its exchange started (0: tracing is off).
    private var traceMark = LatencyTrace.now()

    /// The connection's own client before any forwarding header: the TCP peer, or the source its PROXY header named.
    public private(set) var peerAddress: String
    private let peerIsTrusted: Bool
    private let clientAddresses: ClientAddressResolver
    /// Reads the PROXY protocol header while the machine awaits one (`listen.proxyProtocol`); nil after.
    private var proxyHeader: ProxyProtocolParser?
    /// The current request's client (the peer, or whom a trusted proxy names); between requests, the peer.
    public private(set) var client: ClientAddress

    /// `clientAddresses` says whose `X-Forwarded-For` to believe. With `proxyProtocol`, the connection must start
    /// with a PROXY header (v1 or v2) whose source becomes the peer and the client (no `X-Forwarded-For` is then
    /// believed); the caller accepts such connections from trusted balancers only.
    public init(connection: Connection, handler: any RequestHandler, limits: RequestLimits,
                timeouts: ConnectionDeadlines.Settings, logger: Logger, clientAddresses: ClientAddressResolver = ClientAddressResolver(),
                proxyProtocol: Bool = false, onClose: @escaping (ServerConnection) -> Void) {
        self.connection = connection
        self.peerAddress = connection.peerAddress
        self.clientAddresses = clientAddresses
        // Behind an L4 balancer no forwarding header is believed: the PROXY header names the client itself.
        self.peerIsTrusted = !proxyProtocol && clientAddresses.isTrusted(connection.peerAddress)
        self.proxyHeader = proxyProtocol ? ProxyProtocolParser() : nil
        self.client = .direct(connection.peerAddress)
        self.handler = handler
        self.parser = RequestParser(limits: limits)
        self.machine = HTTPConnectionStateMachine(timeouts: timeouts, acceptedAt: connection.loop.clock.now(),
                                                  proxyProtocol: proxyProtocol, maxReadAhead: limits.maxHeadBytes + 64 * 1024)
        self.logger = logger
        self.onClose = onClose
    }

    /// Starts the connection's clock; call once, on the loop, when the connection starts reading.
    public func start() {
        loop.assertOnLoop()
        armTimer()
    }

    public var loop: EventLoop { connection.loop }
    public var scheduler: any LoopScheduler { connection.loop }
    /// The address rate limits key on and logs show (see `client`).
    public var clientAddress: String { client.address }
    public var pendingByteCount: Int { connection.pendingByteCount }
    public var isAboveHighWater: Bool { connection.isAboveHighWater }
    public var debugDescription: String {
        "fd=\(connection.fd) open=\(connection.isOpen) state=\(machine.state) buffered=\(parser.bufferedByteCount) pending=\(connection.pendingByteCount) phase=\(machine.deadlines.phase)"
    }

    // MARK: ConnectionDelegate

    public func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        loop.assertOnLoop()
        var bytes = bytes
        if machine.state == .awaitingProxyHeader {
            guard let rest = readProxyHeader(bytes) else { return }
            bytes = rest
        }
        guard machine.acceptsInput else { return }
        parser.append(bytes)
        perform(machine.bytesArrived(bufferedBytes: parser.bufferedByteCount, now: loop.clock.now()))
    }

    public func connectionDidDrain(_ connection: Connection) {
        loop.assertOnLoop()
        perform(machine.writeBufferDrained(bufferedBytes: parser.bufferedByteCount, now: loop.clock.now()))
    }

    public func connection(_ connection: Connection, didCloseWith reason: ConnectionCloseReason) {
        loop.assertOnLoop()
        timer.cancel()
        perform(machine.connectionClosed())
        onClose(self)
    }

    /// Consumes the PROXY header's bytes before the HTTP parser sees any; returns what follows it, if anything.
    private func readProxyHeader(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        switch proxyHeader!.parse(bytes) {
        case .needMore:
            return nil
        case .invalid(let reason):
            proxyHeader = nil
            perform(machine.proxyHeaderRejected(reason))
            return nil
        case .header(let header, let consumed):
            proxyHeader = nil
            // The balancer works at L4, so the source it names is the client itself. `.local` (its own health
            // check) keeps the real peer.
            if case .proxied(let source, _, _, _) = header {
                peerAddress = source.description
                client = .direct(peerAddress)
            }
            machine.proxyHeaderAccepted()
            guard consumed < bytes.count else { return nil }
            return UnsafeRawBufferPointer(rebasing: bytes[consumed...])
        }
    }

    // MARK: Requests

    /// Delivers what the parser holds while the machine takes requests (not while a response streams: the next
    /// request waits its turn; not once closing: it could start an upstream call nobody reads).
    private func readRequests() {
        while machine.isReadingRequests {
            let event: RequestEvent?
            do {
                event = try parser.next()
            } catch {
                perform(machine.parseFailed(error))
                return
            }
            guard let event else { return }
            switch event {
            case .head(let head):
                perform(machine.requestHead(head, now: loop.clock.now()))
            case .body(let bytes):
                machine.requestBodyReceived(now: loop.clock.now())
                responder?.requestBody(bytes)
            case .end:
                perform(machine.requestEnd(bufferedBytes: parser.bufferedByteCount, now: loop.clock.now()))
            }
        }
    }

    private func startExchange(_ head: RequestHead) {
        if LatencyTrace.enabled {
            LatencyTrace.since(traceMark, .acceptToRequest)   // on a kept-alive connection: since the last exchange
            traceMark = LatencyTrace.now()
        }
        if peerIsTrusted { client = clientAddresses.resolve(peer: peerAddress, forwardedFor: head.headers.values("X-Forwarded-For")) }
        // Assigned after `handle` returns: a handler that answered inside it may still return a responder.
        responder = handler.handle(head, writer: self)
        perform(machine.handlerReturned(hasResponder: responder != nil))
    }

    private func perform(_ actions: [HTTPConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .startExchange(let head):
                startExchange(head)
            case .writeContinue:
                connection.write(Self.continueLine)
            case .readRequests:
                readRequests()
            case .scheduleReadRequests:
                loop.soon { [self] in
                    machine.scheduledReadStarted()
                    readRequests()
                }
            case .deliverRequestEnd:
                responder?.requestEnd()
            case .responderClientGone:
                let gone = responder
                responder = nil
                gone?.clientClosed()
            case .responderDrained:
                responder?.clientDrained()
            case .releaseResponder:
                responder = nil
            case .exchangeEnded:
                responder = nil
                client = .direct(peerAddress)
            case .writeLastChunk:
                connection.write(ChunkedEncoding.lastChunk)
            case .rearmTimer:
                armTimer()
            case .reportRejection(let error):
                handler.connectionRejected(error, writer: self)
            case .respond(let error):
                respond(error: error, keepAlive: false)
            case .reportProxyHeaderRejected(let reason):
                handler.proxyHeaderRejected(reason, writer: self)
            case .reportWriteStall:
                logger.info("client stopped reading; closing", [("client", .string(clientAddress))])
            case .closeAfterFlush:
                connection.closeAfterFlush(flushSeconds: machine.deadlines.settings.clientWriteStallSeconds)
            case .close(let reset):
                connection.close(reset: reset)
            }
        }
    }

    // MARK: Responses (the writer side)

    /// Sends a complete JSON error response. `keepAlive` is honoured only if the request was read to its end.
    public func respond(error: ErrorResponse, requestID: String? = nil, keepAlive: Bool = true) {
        respond(status: error.status, headers: error.headerFields(requestID: requestID), body: error.jsonBody, keepAlive: keepAlive)
    }

    /// Sends a complete response with a Content-Length body (none for HEAD requests).
    public func respond(status: Int, headers: HTTPHeaders, body: [UInt8], keepAlive: Bool = true) {
        loop.assertOnLoop()
        guard let response = machine.completeResponse(keepAlive: keepAlive) else { return }
        sendHead(ResponseHead.complete(status: status, headers: headers, contentLength: body.count, keepAlive: response.keepAlive),
                 mode: response.headOnly ? .none : .contentLength(body.count))
        _ = body.withUnsafeBytes { sendBody($0) }
        finish(keepAlive: response.keepAlive)
    }

    /// The server drains: the current response (or, if `closeIfIdle` is false, the next) is the connection's last,
    /// and a connection between requests closes now, after what is still pending. A connection accepted while the
    /// server drains still answers the request it came with (`closeIfIdle: false`).
    public func drain(closeIfIdle: Bool = true) {
        loop.assertOnLoop()
        machine.drain()
        guard closeIfIdle else { return }
        perform(machine.closeIfIdle(bufferedBytes: parser.bufferedByteCount, pendingBytes: connection.pendingByteCount))
    }

    public func sendHead(_ head: ResponseHead, mode: ResponseBodyMode) {
        loop.assertOnLoop()
        guard machine.sendHead(mode: mode) else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        head.serialize(into: &bytes)
        // The head waits for the first body delivery (`sendBody`), or at most until the slice of handlers running
        // now has run (`EventLoop.soon`): the first chunk, which usually arrives in the same curl read, then leaves
        // with it in one write, as soon as it is there.
        connection.hold()
        connection.write(bytes)
        LatencyTrace.since(traceMark, .requestToHead)
        headHeldAt = LatencyTrace.now()
        let headAt = headHeldAt
        loop.soon { [self] in
            LatencyTrace.since(headAt, .hop)
            releaseHeldHead()
        }
    }

    /// `LatencyTrace` only: when the head now held was written (0: tracing is off).
    private var headHeldAt: UInt64 = 0

    /// Sends a head held by `sendHead` and whatever joined it (a first delivery, a whole small response).
    private func releaseHeldHead() {
        if connection.releaseHold() { LatencyTrace.since(headHeldAt, .headToSend) }
    }

    /// Writes one body delivery; for chunked framing the size line, payload and CRLF leave in one syscall. A head
    /// still held (`sendHead`) leaves with the first delivery, in the same write: it waited only for this.
    @discardableResult
    public func sendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        loop.assertOnLoop()
        guard let mode = machine.bodyMode, bytes.count > 0 else { return machine.state != .closed }
        let ok: Bool
        switch mode {
        case .none:
            return true
        case .chunked:
            // The size line on the stack and CRLF from static text: no array touched per event.
            ok = withUnsafeTemporaryAllocation(byteCount: ChunkedEncoding.maxSizeLineBytes, alignment: 1) { line in
                let length = ChunkedEncoding.writeSizeLine(bytes.count, into: line)
                return connection.write(UnsafeRawBufferPointer(rebasing: line[..<length]), bytes, Self.crlfBytes)
            }
        case .contentLength, .closeDelimited:
            ok = connection.write(bytes)
        }
        releaseHeldHead()
        noteWriteBuffer()
        return ok
    }

    /// The client-write-stall clock starts when the pending buffer reaches the high-water mark.
    @inline(__always)
    private func noteWriteBuffer() {
        if connection.isAboveHighWater && !machine.writeStallClockRunning {
            perform(machine.writeBufferFull(now: loop.clock.now()))
        }
    }

    /// The response is complete. With chunked framing the last chunk goes out; the connection is then kept for
    /// the next request (if `keepAlive` and the request was read to its end) or closed after the flush.
    ///
    /// A head still held for its first chunk (`sendHead`) leaves now with everything after it, in one write: nothing
    /// more is coming to join it, and the caller's end-of-exchange work (usage, settle, the access-log line) then
    /// runs after the client has its answer instead of before. The buffer is looked at first (a head-only answer,
    /// HEAD or 204, wrote no body): a next request waits while the client is not reading its answers.
    public func finish(keepAlive: Bool) {
        loop.assertOnLoop()
        noteWriteBuffer()
        perform(machine.finish(keepAlive: keepAlive, bufferedBytes: parser.bufferedByteCount, now: loop.clock.now()))
        releaseHeldHead()
    }

    /// Ends the response without a clean end: no terminal chunk, the connection closes after what is pending.
    public func abort() {
        loop.assertOnLoop()
        perform(machine.abort())
    }

    // MARK: Timeouts

    private func armTimer() {
        guard let next = machine.nextDeadline else {
            timer.cancel()
            return
        }
        // Lazily: when an earlier timer fires, the machine says whether anything is really due.
        timer.arm(at: next, on: loop) { [weak self] in
            guard let self else { return }
            self.timer.fired()
            self.perform(self.machine.deadlineReached(now: self.loop.clock.now()))
        }
    }

    static let continueLine: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    /// CRLF, ending each chunk's data: static text, read without an array.
    private static let crlfText: StaticString = "\r\n"
    static var crlfBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: crlfText.utf8Start, count: crlfText.utf8CodeUnitCount) }
}
