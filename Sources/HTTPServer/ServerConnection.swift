import HTTP1
import Support
import Transport

/// HTTP/1.1 server side of one client connection: feeds the parser, runs one exchange at a time (pipelined
/// requests wait their turn, answered in order), frames responses, and keeps or closes the connection.
///
/// Owned by the connection's loop queue; every method is called there.
public final class ServerConnection: ConnectionDelegate, ResponseWriter, @unchecked Sendable {
    // Invariant: all state is touched on `connection.loop.queue` only.
    public let connection: Connection
    private let handler: any RequestHandler
    private var parser: RequestParser
    private let logger: Logger
    private let onClose: (ServerConnection) -> Void

    private var responder: (any RequestResponder)?
    private var inExchange = false
    private var requestComplete = false
    /// The current request has no body, so its `.end` is already in the parser's hands.
    private var requestHasNoBody = false
    private var headSent = false
    private var responseDone = false
    private var bodyMode = ResponseBodyMode.none
    private var requestVersion = HTTPVersion.http1_1
    private var requestMethod = ""
    private var closed = false
    private var pumpScheduled = false
    /// Bytes a client may send ahead (pipelined) while its current response is still streaming.
    private let maxReadAhead: Int
    private var sizeLine: [UInt8] = []
    private var deadlines: ConnectionDeadlines
    private var timer: LoopTimer?
    private var armedDeadline: Instant?

    /// The connection's own client before any forwarding header: the TCP peer, or the source its PROXY header named.
    public private(set) var peerAddress: String
    private let peerIsTrusted: Bool
    private let clientAddresses: ClientAddressResolver
    /// Set until the PROXY protocol header is read, on a listener that requires one (`listen.proxyProtocol`).
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
        self.logger = logger
        self.onClose = onClose
        self.maxReadAhead = limits.maxHeadBytes + 64 * 1024
        self.deadlines = ConnectionDeadlines(settings: timeouts, acceptedAt: connection.loop.clock.now())
        sizeLine.reserveCapacity(24)
    }

    /// Starts the connection's clock; call once, on the loop, when the connection starts reading.
    public func start() {
        armTimer()
    }

    public var loop: EventLoop { connection.loop }
    /// The address rate limits key on and logs show (see `client`).
    public var clientAddress: String { client.address }
    public var pendingByteCount: Int { connection.pendingByteCount }
    public var highWaterMark: Int { connection.highWaterMark }
    public var isClosed: Bool { closed }
    public var debugDescription: String {
        "fd=\(connection.fd) open=\(connection.isOpen) inExchange=\(inExchange) requestComplete=\(requestComplete) headSent=\(headSent) responseDone=\(responseDone) buffered=\(parser.bufferedByteCount) pending=\(connection.pendingByteCount) phase=\(deadlines.phase)"
    }

    // MARK: ConnectionDelegate

    public func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        var bytes = bytes
        if proxyHeader != nil {
            guard let rest = readProxyHeader(bytes) else { return }
            bytes = rest
        }
        parser.append(bytes)
        if !inExchange {
            deadlines.headBytesArrived(now: loop.clock.now())
            armTimer()
        }
        if inExchange && requestComplete {
            // A pipelined request arrived while the response streams: keep it for later, within a bound.
            if parser.bufferedByteCount > maxReadAhead { abortConnection() }
            return
        }
        pump()
    }

    public func connectionDidDrain(_ connection: Connection) {
        deadlines.writeBufferDrained()
        armTimer()
        responder?.clientDrained()
    }

    public func connection(_ connection: Connection, didCloseWith reason: ConnectionCloseReason) {
        closed = true
        timer?.cancel()
        timer = nil
        let responder = self.responder
        self.responder = nil
        if !responseDone || !requestComplete { responder?.clientClosed() }
        onClose(self)
    }

    /// Consumes the PROXY header's bytes before the HTTP parser sees any; returns what follows it, if anything.
    private func readProxyHeader(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        switch proxyHeader!.parse(bytes) {
        case .needMore:
            return nil
        case .invalid(let reason):
            proxyHeader = nil
            handler.proxyHeaderRejected(reason, writer: self)
            connection.close()
            return nil
        case .header(let header, let consumed):
            proxyHeader = nil
            // The balancer works at L4, so the source it names is the client itself. `.local` (its own health
            // check) keeps the real peer.
            if case .proxied(let source, _, _, _) = header {
                peerAddress = source.description
                client = .direct(peerAddress)
            }
            guard consumed < bytes.count else { return nil }
            return UnsafeRawBufferPointer(rebasing: bytes[consumed...])
        }
    }

    // MARK: Requests

    private func pump() {
        // A connection that is closing takes no new request (it could start an upstream call nobody reads).
        while !closed && connection.isOpen {
            if inExchange && requestComplete { return }
            let event: RequestEvent?
            do {
                event = try parser.next()
            } catch {
                parseFailed(error)
                return
            }
            guard let event else { return }
            switch event {
            case .head(let head):
                deadlines.headComplete(now: loop.clock.now(), hasBody: head.framing != .none)
                armTimer()
                startExchange(head)
            case .body(let bytes):
                deadlines.bodyProgress(now: loop.clock.now())
                responder?.requestBody(bytes)
            case .end:
                requestComplete = true
                deadlines.bodyComplete()
                responder?.requestEnd()
                if responseDone { exchangeFinished(keepAlive: lastKeepAlive) }
            }
        }
    }

    private func startExchange(_ head: RequestHead) {
        inExchange = true
        requestComplete = false
        headSent = false
        responseDone = false
        bodyMode = .none
        requestVersion = head.version
        requestMethod = head.method
        requestHasNoBody = head.framing == .none
        if peerIsTrusted { client = clientAddresses.resolve(peer: peerAddress, forwardedFor: head.headers.values("X-Forwarded-For")) }
        responder = handler.handle(head, writer: self)
        if responder != nil && !headSent && head.expectsContinue && !closed {
            connection.write(Self.continueLine)
        }
    }

    private func parseFailed(_ error: HTTPParseError) {
        if let responder, !responseDone {
            responder.clientClosed()
            self.responder = nil
        }
        if headSent {
            abortConnection()
            return
        }
        requestComplete = false
        inExchange = true
        let response = ErrorResponse.badRequest(error)
        handler.connectionRejected(response, writer: self)
        respond(error: response, keepAlive: false)
    }

    // MARK: Responses (the writer side)

    /// Sends a complete JSON error response. `keepAlive` is honoured only if the request was read to its end.
    public func respond(error: ErrorResponse, requestID: String? = nil, keepAlive: Bool = true) {
        respond(status: error.status, headers: error.headerFields(requestID: requestID), body: error.jsonBody, keepAlive: keepAlive)
    }

    /// Sends a complete response with a Content-Length body (none for HEAD requests).
    public func respond(status: Int, headers: HTTPHeaders, body: [UInt8], keepAlive: Bool = true) {
        guard !headSent, !closed else { return }
        let keep = keepAlive && requestCanContinue && !closeAfterResponse
        sendHead(ResponseHead.complete(status: status, headers: headers, contentLength: body.count, keepAlive: keep),
                 mode: requestMethod == "HEAD" ? .none : .contentLength(body.count))
        _ = body.withUnsafeBytes { sendBody($0) }
        finish(keepAlive: keep)
    }

    /// Set while the server drains: the current response is the connection's last.
    public var closeAfterResponse = false

    /// Closes the connection if it sits between requests (used when draining), after what is still pending.
    public func closeIfIdle() {
        guard !inExchange && parser.bufferedByteCount == 0 else { return }
        if connection.pendingByteCount == 0 { connection.close() } else { connection.closeAfterFlush(flushSeconds: flushSeconds) }
    }

    private var flushSeconds: Double { deadlines.settings.clientWriteStallSeconds }

    private var requestCanContinue: Bool { requestComplete || requestHasNoBody || !inExchange }

    public func sendHead(_ head: ResponseHead, mode: ResponseBodyMode) {
        guard !headSent, !closed else { return }
        headSent = true
        bodyMode = mode
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        head.serialize(into: &bytes)
        // The head waits for the rest of this turn of the loop: the first chunk (or the whole small body) that
        // usually arrives in the same curl callback batch then leaves with it in one write.
        connection.hold()
        connection.write(bytes)
        loop.queue.async { [connection] in connection.releaseHold() }
    }

    /// Writes one body delivery; for chunked framing the size line, payload and CRLF leave in one syscall.
    @discardableResult
    public func sendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard headSent, !responseDone, !closed, bytes.count > 0 else { return !closed }
        switch bodyMode {
        case .none:
            return true
        case .chunked:
            sizeLine.removeAll(keepingCapacity: true)
            ChunkedEncoding.appendSizeLine(bytes.count, to: &sizeLine)
            let ok = sizeLine.withUnsafeBytes { line in
                Self.crlf.withUnsafeBytes { crlf in connection.write(line, bytes, crlf) }
            }
            noteWriteBuffer()
            return ok
        case .contentLength, .closeDelimited:
            let ok = connection.write(bytes)
            noteWriteBuffer()
            return ok
        }
    }

    /// The client-write-stall clock starts when the pending buffer reaches the high-water mark.
    @inline(__always)
    private func noteWriteBuffer() {
        if connection.isAboveHighWater && deadlines.writeStalledSince == nil {
            deadlines.writeBufferFull(now: loop.clock.now())
            armTimer()
        }
    }

    private var lastKeepAlive = true

    /// The response is complete. With chunked framing the last chunk goes out; the connection is then kept for
    /// the next request (if `keepAlive` and the request was read to its end) or closed after the flush.
    public func finish(keepAlive: Bool) {
        guard headSent, !responseDone, !closed else { return }
        responseDone = true
        if bodyMode == .chunked { connection.write(ChunkedEncoding.lastChunk) }
        responder = nil
        lastKeepAlive = keepAlive && bodyMode != .closeDelimited && !closeAfterResponse
        if requestComplete || !inExchange {
            exchangeFinished(keepAlive: lastKeepAlive)
        } else if requestHasNoBody && lastKeepAlive {
            // The parser's `.end` for this request follows at once; `pump` then finishes the exchange.
        } else {
            // The response ended before the request body did: the rest of the body is unread, so the
            // connection cannot carry another request.
            connection.closeAfterFlush(flushSeconds: flushSeconds)
        }
    }

    /// Ends the response without a clean end: no terminal chunk, the connection closes after what is pending.
    public func abort() {
        guard !closed else { return }
        responseDone = true
        responder = nil
        if bodyMode == .closeDelimited {
            // The connection's close is how such a body ends normally: only a reset says it did not.
            connection.close(reset: true)
        } else {
            connection.closeAfterFlush(flushSeconds: flushSeconds)
        }
    }

    private func abortConnection() {
        guard !closed else { return }
        connection.close(reset: false)
    }

    private func exchangeFinished(keepAlive: Bool) {
        inExchange = false
        responder = nil
        client = .direct(peerAddress)
        // The next request starts from a clean response state (a parse error or timeout answers on it).
        headSent = false
        responseDone = false
        bodyMode = .none
        guard keepAlive else {
            connection.closeAfterFlush(flushSeconds: flushSeconds)
            return
        }
        let now = loop.clock.now()
        deadlines.responseComplete(now: now)
        if parser.bufferedByteCount > 0 { deadlines.headBytesArrived(now: now) }
        armTimer()
        // The next pipelined request, on a later turn of the loop (this may run inside a curl callback).
        if parser.bufferedByteCount > 0 && !pumpScheduled {
            pumpScheduled = true
            loop.queue.async { [self] in
                pumpScheduled = false
                pump()
            }
        }
    }

    // MARK: Timeouts

    private func armTimer() {
        guard !closed, let next = deadlines.next else {
            timer?.cancel()
            timer = nil
            armedDeadline = nil
            return
        }
        // An armed timer that fires no later than the new deadline stays: when it fires, `expired` says whether
        // anything is really due, and the timer is armed again for the real deadline. Activity therefore costs
        // no timer work on the hot path.
        if let armed = armedDeadline, armed <= next.deadline, timer?.isCancelled == false { return }
        timer?.cancel()
        armedDeadline = next.deadline
        timer = loop.schedule(at: next.deadline) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.armedDeadline = nil
            self.deadlineReached()
        }
    }

    private func deadlineReached() {
        guard !closed else { return }
        switch deadlines.expired(now: loop.clock.now()) {
        case nil:
            armTimer()
        case .closeQuietly:
            connection.close()
        case .requestTimeout:
            handler.connectionRejected(.requestTimeout, writer: self)
            if let responder {
                self.responder = nil
                responder.clientClosed()
            }
            if headSent {
                abortConnection()
            } else {
                requestComplete = false
                respond(error: .requestTimeout, keepAlive: false)
            }
        case .writeStall:
            logger.info("client stopped reading; closing", [("client", .string(clientAddress))])
            if let responder {
                self.responder = nil
                responder.clientClosed()
            }
            connection.close(reset: true)
        }
    }

    static let continueLine: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    static let crlf: [UInt8] = [0x0D, 0x0A]
}
