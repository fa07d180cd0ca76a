import HTTP1
import HTTPServer
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
    private let writer: any ResponseWriter
    private var transfer: Transfer?
    /// The request body as received. Kept whole (it is bounded by `limits.maxBodyBytes`) until the response
    /// head arrives, so curl can send it again when it retries on a fresh connection; `uploadOffset` is how far
    /// curl has read.
    private var uploadBody: [UInt8] = []
    private var uploadOffset = 0
    private var requestEnded = false
    private let clock: any Clock
    private var timer: LoopTimer?
    private var armedDeadline: Instant?
    private let highWater: Int
    private let onEnd: (RelayExchange) -> Void
    private let metrics: RelayMetrics
    let record: ExchangeRecord
    /// The key injected into this request: masked out of a non-2xx response body, where a provider may echo it.
    var providerKey: Secret?
    private var masker: SecretMasker?

    init(machine: ExchangeStateMachine, writer: any ResponseWriter, highWater: Int, clock: any Clock,
         record: ExchangeRecord, metrics: RelayMetrics, onEnd: @escaping (RelayExchange) -> Void) {
        self.machine = machine
        self.writer = writer
        self.highWater = highWater
        self.clock = clock
        self.record = record
        self.metrics = metrics
        self.onEnd = onEnd
    }

    func start(_ request: UpstreamRequest, driver: CurlDriver) {
        transfer = driver.start(request, delegate: self)
        armTimer()
    }

    /// Starts the upstream transfer only when the whole body is in and `policy` accepts it (model allowlist,
    /// max-tokens ceiling); a clamp may change the body, and the request's length with it.
    func startAfterBody(_ request: UpstreamRequest, driver: CurlDriver, policy: BodyPolicy) {
        pendingStart = (request, driver, policy)
        armTimer()
    }

    private var pendingStart: (request: UpstreamRequest, driver: CurlDriver, policy: BodyPolicy)?

    /// Rate-limiter leases (concurrent-stream slots) given back when the exchange ends.
    var leases: [(RateLimiter, RateLimiterState.Lease)] = []

    var phase: ExchangeStateMachine.Phase { machine.phase }

    // MARK: RequestResponder

    func requestBody(_ bytes: [UInt8]) {
        record.bytesIn += bytes.count
        metrics.bytesToUpstream.wrappingAdd(bytes.count, ordering: .relaxed)
        uploadBody.append(contentsOf: bytes)
        transfer?.resumeSending()
    }

    func requestEnd() {
        requestEnded = true
        machine.requestBodyComplete(now: clock.now())
        armTimer()   // the first-byte clock starts now for a request with a body
        if let pending = pendingStart {
            pendingStart = nil
            switch pending.policy.evaluate(uploadBody) {
            case .reject(let error):
                record.rejection = error.code
                metrics.rejected(reason: error.code)
                perform(machine.rejected(error))
            case .forward(let body, let changed):
                var request = pending.request
                if changed { uploadBody = body }
                request.bodyLength = uploadBody.count   // known now, even for a chunked client body
                transfer = pending.driver.start(request, delegate: self)
            }
            return
        }
        transfer?.resumeSending()
    }

    func clientClosed() {
        let phase = machine.phase
        let actions = machine.clientClosed()
        if !actions.isEmpty { metrics.cancelled(phase: phase == .awaitingUpstreamHead ? "before_head" : "streaming") }
        perform(actions)
    }

    func clientDrained() {
        perform(machine.clientDrained(now: clock.now()))
    }

    // MARK: TransferDelegate

    func transfer(_ transfer: Transfer, didReceiveHead status: Int, headers: HTTPHeaders) {
        record.upstreamHeadAt = clock.now()
        if !(200..<300).contains(status), let key = providerKey {
            masker = SecretMasker(secret: Array(key.revealForHeader().utf8))
        }
        if requestEnded && uploadOffset == uploadBody.count {
            uploadBody = []   // sent, and no retry can follow a response head
            uploadOffset = 0
        }
        perform(machine.upstreamHead(status: status, headers: headers, now: clock.now()))
    }

    func transfer(_ transfer: Transfer, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        switch machine.upstreamBody(clientPendingBytes: writer.pendingByteCount, highWaterBytes: highWater, now: clock.now()) {
        case .forward:
            if record.firstBodyAt == nil { record.firstBodyAt = clock.now() }
            record.bytesOut += bytes.count
            metrics.bytesToClients.wrappingAdd(bytes.count, ordering: .relaxed)
            if masker != nil {
                let masked = masker!.feed(bytes)
                if !masked.isEmpty { masked.withUnsafeBytes { _ = writer.sendBody($0) } }
            } else {
                writer.sendBody(bytes)
            }
            return true
        case .refuse:
            return false
        case .drop:
            return true
        }
    }

    func transfer(_ transfer: Transfer, readBodyInto buffer: UnsafeMutableRawBufferPointer) -> BodyRead {
        let available = uploadBody.count - uploadOffset
        if available == 0 { return requestEnded ? .end : .wait }
        let n = min(available, buffer.count)
        uploadBody.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + uploadOffset, byteCount: n)
        }
        uploadOffset += n
        return .bytes(n)
    }

    func transferRewindBody(_ transfer: Transfer) -> Bool {
        guard machine.phase == .awaitingUpstreamHead else { return false }
        uploadOffset = 0
        return true
    }

    func transfer(_ transfer: Transfer, didCompleteWith result: Result<Void, UpstreamFailure>) {
        if case .failure(let failure) = result {
            record.failure = failure.summary
            metrics.upstreamError(kind: failure.kind)
        } else if machine.phase == .awaitingUpstreamHead {
            metrics.upstreamError(kind: "no_response_head")
        }
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
            case .respondError(var error):
                record.status = error.status
                for field in machine.settings.extraResponseHeaders { error.extraHeaders.append((field.name, field.value)) }
                writer.respond(error: error, requestID: machine.settings.requestID, keepAlive: machine.settings.keepAlive)
            case .finishResponse(let keepAlive):
                if let tail = masker?.finish(), !tail.isEmpty { tail.withUnsafeBytes { _ = writer.sendBody($0) } }
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
            let phase = self.machine.phase
            let actions = self.machine.deadlinePassed(now: self.clock.now())
            if !actions.isEmpty {
                let kind = phase == .awaitingUpstreamHead ? "first_byte_timeout" : "idle_timeout"
                self.metrics.upstreamError(kind: kind)
                self.record.failure = kind
            }
            self.perform(actions)
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
        for (limiter, lease) in leases { limiter.release(lease) }
        leases = []
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
    var identity: String?
    var rejection: String?

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
        if let identity { fields.append(("identity", .string(identity))) }
        if let rejection { fields.append(("reason", .string(rejection))) }
        if let t = upstreamHeadAt { fields.append(("upstream_head_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let t = firstBodyAt { fields.append(("first_byte_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let t = endedAt { fields.append(("duration_ms", .double(t.seconds(since: startedAt) * 1000))) }
        if let failure { fields.append(("error", .string(failure))) }
        return fields
    }
}
