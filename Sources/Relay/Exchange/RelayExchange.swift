import HTTP1
import Support
import Transport
import Upstream

/// The shell around one `ExchangeStateMachine`: it carries the machine's actions out on the client connection
/// and the curl transfer, and feeds it their events. It also buffers the request body for curl's read callback,
/// so a large body streams upstream as it arrives (bounded by `limits.maxBodyBytes`).
///
/// Owned by the connection's loop queue (the transfer's driver runs on the same queue).
final class RelayExchange: RequestResponder, TransferDelegate, @unchecked Sendable {
    // Invariant: touched on `writer.loop.queue` only.
    private var machine: ExchangeStateMachine
    private let writer: ServerConnection
    private var transfer: Transfer?
    private var uploadBuffer = ByteQueue()
    private var requestEnded = false
    private let clock: any Clock
    private var timer: LoopTimer?
    private var armedDeadline: Instant?
    private let highWater: Int
    private let onEnd: (RelayExchange) -> Void
    let record: ExchangeRecord

    init(machine: ExchangeStateMachine, writer: ServerConnection, highWater: Int, clock: any Clock,
         record: ExchangeRecord, onEnd: @escaping (RelayExchange) -> Void) {
        self.machine = machine
        self.writer = writer
        self.highWater = highWater
        self.clock = clock
        self.record = record
        self.onEnd = onEnd
    }

    func start(_ request: UpstreamRequest, driver: CurlDriver) {
        transfer = driver.start(request, delegate: self)
        armTimer()
    }

    var phase: ExchangeStateMachine.Phase { machine.phase }

    // MARK: RequestResponder

    func requestBody(_ bytes: [UInt8]) {
        record.bytesIn += bytes.count
        bytes.withUnsafeBytes { uploadBuffer.append($0) }
        transfer?.resumeSending()
    }

    func requestEnd() {
        requestEnded = true
        machine.requestBodyComplete()
        transfer?.resumeSending()
    }

    func clientClosed() {
        perform(machine.clientClosed())
    }

    func clientDrained() {
        perform(machine.clientDrained(now: clock.now()))
    }

    // MARK: TransferDelegate

    func transfer(_ transfer: Transfer, didReceiveHead status: Int, headers: HTTPHeaders) {
        record.upstreamHeadAt = clock.now()
        perform(machine.upstreamHead(status: status, headers: headers, now: clock.now()))
    }

    func transfer(_ transfer: Transfer, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        switch machine.upstreamBody(clientPendingBytes: writer.pendingByteCount, highWaterBytes: highWater, now: clock.now()) {
        case .forward:
            if record.firstBodyAt == nil { record.firstBodyAt = clock.now() }
            record.bytesOut += bytes.count
            writer.sendBody(bytes)
            return true
        case .refuse:
            return false
        case .drop:
            return true
        }
    }

    func transfer(_ transfer: Transfer, readBodyInto buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        if uploadBuffer.isEmpty { return requestEnded ? .end : .wait }
        let n = uploadBuffer.withReadableBytes { bytes -> Int in
            let n = min(bytes.count, buffer.count)
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: n)
            return n
        }
        uploadBuffer.consume(n)
        return .bytes(n)
    }

    func transfer(_ transfer: Transfer, didCompleteWith result: Result<Void, UpstreamFailure>) {
        if case .failure(let failure) = result { record.failure = failure.summary }
        perform(machine.upstreamCompleted(result, now: clock.now()))
    }

    // MARK: Actions

    private func perform(_ actions: [ExchangeStateMachine.Action]) {
        for action in actions {
            switch action {
            case .sendHead(let head, let mode):
                record.status = head.status
                writer.sendHead(head, mode: mode)
            case .cancelUpstream:
                transfer?.cancel()
            case .resumeUpstream:
                transfer?.resumeReceiving()
            case .respondError(let error):
                record.status = error.status
                writer.respond(error: error, requestID: machine.settings.requestID, keepAlive: machine.settings.keepAlive)
            case .finishResponse(let keepAlive):
                writer.finish(keepAlive: keepAlive)
            case .abortClient:
                writer.abort()
            }
        }
        if machine.isTerminal {
            end()
        } else {
            armTimer()
        }
    }

    private func armTimer() {
        guard let deadline = machine.nextDeadline else { return }
        // Body deliveries move the idle deadline later without re-arming: when the old timer fires, the machine
        // ignores the early call and the timer is armed again for the real deadline.
        if let armed = armedDeadline, armed <= deadline, timer?.isCancelled == false { return }
        timer?.cancel()
        armedDeadline = deadline
        timer = writer.loop.schedule(at: deadline) { [weak self] in
            guard let self else { return }
            self.armedDeadline = nil
            self.timer = nil
            self.perform(self.machine.deadlinePassed(now: self.clock.now()))
        }
    }

    private var ended = false

    private func end() {
        guard !ended else { return }
        ended = true
        timer?.cancel()
        timer = nil
        record.outcome = machine.outcome?.rawValue ?? "aborted"
        record.endedAt = clock.now()
        onEnd(self)
    }
}

/// What the access log says about one exchange. Filled in on the loop as the exchange goes.
final class ExchangeRecord: @unchecked Sendable {
    // Invariant: touched on the exchange's loop queue only.
    let requestID: String
    let method: String
    let path: String
    let route: String
    let upstream: String
    let clientAddress: String
    let startedAt: Instant
    var status: Int?
    var bytesIn = 0
    var bytesOut = 0
    var upstreamHeadAt: Instant?
    var firstBodyAt: Instant?
    var endedAt: Instant?
    var outcome = "aborted"
    var failure: String?

    init(requestID: String, method: String, path: String, route: String, upstream: String, clientAddress: String, startedAt: Instant) {
        self.requestID = requestID
        self.method = method
        self.path = path
        self.route = route
        self.upstream = upstream
        self.clientAddress = clientAddress
        self.startedAt = startedAt
    }

    var logFields: [(String, LogValue)] {
        var fields: [(String, LogValue)] = [
            ("request_id", .string(requestID)), ("client_ip", .string(clientAddress)), ("method", .string(method)),
            ("path", .string(path)), ("route", .string(route)), ("upstream", .string(upstream)),
            ("status", .int(status ?? 0)), ("bytes_in", .int(bytesIn)), ("bytes_out", .int(bytesOut)),
            ("outcome", .string(outcome)),
        ]
        if let t = upstreamHeadAt { fields.append(("upstream_head_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let t = firstBodyAt { fields.append(("first_byte_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let t = endedAt { fields.append(("duration_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let failure { fields.append(("error", .string(failure))) }
        return fields
    }
}
