import HTTP1
import HTTPServer
import RelayCore
import RelayState
import SSE
import Support
import Transport
import Upstream
import Usage

/// The shell around one `ExchangeStateMachine`: it carries the machine's actions out on the client connection
/// and the curl transfer, and feeds it their events. It reads the whole request body before calling the
/// provider (nginx's `proxy_request_buffering on`, bounded by `limits.maxBodyBytes` and
/// `timeouts.bodyReadSeconds`): a slow client then costs a socket, never a provider connection, the body's
/// length is always known, and the first-byte clock measures the provider alone.
///
/// Usage: a `UsageMeter` gets a copy of every body delivery (never the client's bytes, which it cannot delay);
/// on a route that injected `stream_options.include_usage`, the client's bytes pass through its stripper. On a
/// route with `onClientCancel: drain`, a departed client's upstream is read on (bytes discarded) until the meter
/// has the provider's usage. The final usage goes to the record at the end.
///
/// Admission: with an `ExchangeAdmission`, the request, once whole and past the body policy, asks the admission
/// store (buckets, stream caps, budget reservation) and waits for its answer, asynchronously, before the provider is
/// called; the grant is settled exactly once at the end with the exchange's usage. A stream without a ceiling keeps
/// its reservation ahead of its output (`BudgetGuard`) and, when the budget runs out with `onExceed: cut`, ends at
/// the next event boundary with one closing event.
///
/// Owned by the connection's loop queue (the transfer's driver runs on the same queue).
final class RelayExchange: RequestResponder, TransferDelegate, @unchecked Sendable {
    // Invariant: touched on `writer.scheduler.queue` only.
    var machine: ExchangeStateMachine
    let writer: any ResponseWriter
    private var transfer: (any UpstreamCall)?
    /// The call to make once the request is whole; nil once made (or refused).
    private var pendingCall: (request: UpstreamRequest, upstream: any UpstreamClient, plan: RequestBodyPlan.Settings)?
    /// The request body as it arrives; handed to the transfer at the request's end.
    private var body: [UInt8] = []
    let clock: any Clock
    private var timer = LazyTimer()
    private let onEnd: (RelayExchange) -> Void
    private let metrics: RelayMetrics
    var record: ExchangeRecord
    /// The key injected into this request: masked out of a non-2xx response body, where a provider may echo it.
    var providerKey: Secret?
    private var masker: SecretMasker?
    /// An error answer's body the masker could not read (`SecretMasker.replacement`): sent instead of the provider's,
    /// which is read and dropped.
    private var replacementBody: [UInt8]?
    private(set) var meter: UsageMeter
    /// The call reached the provider (it did not fail to connect): the prompt may be billed.
    private var callReachedProvider = false
    /// When the call started: the cancel floor counts from it (`timeFloor`).
    private var callStartedAt: Instant?
    /// Asks the admission store when the request is whole; nil admits without asking (unit tests of other parts).
    var admission: ExchangeAdmission?
    /// What the store granted; settled at the end.
    private var grant: AdmissionGrant?
    /// The call waiting for the store's answer.
    private var admittedCall: (request: UpstreamRequest, upstream: any UpstreamClient)?
    /// A stream without a ceiling: its reservation grows with its output.
    private(set) var budgetGuard: BudgetGuard?
    /// The reservation's prompt part and whether the request named a ceiling; the guard is made at the head.
    private var reservation: RequestBodyPlan.Reservation?
    /// Checks the proof of the genuine app over the body as received, before everything else (`AttestationGate`).
    var attestationGate: AttestationGate?
    /// Prices (`ExchangeCost`, dollar budgets); nil prices nothing.
    var prices: PriceBook?
    /// The price the reservation was made at (the requested model's), for the guard's steps and the settle.
    private var admittedPrice: ModelPrice?
    /// The processing the request asked for (`RequestBodyPlan.serviceTier`): the prices it is charged at.
    private var serviceTier = ServiceTier.standard
    /// The request brings or asks for audio (`RequestBodyPlan.usesAudio`): its price needs audio rates.
    private var usesAudio = false
    /// Heartbeats and the resumable stream (`RelayExchange+Streams.swift`).
    var keeping = StreamKeeping()

    init(machine: ExchangeStateMachine, writer: any ResponseWriter, clock: any Clock,
         record: ExchangeRecord, metrics: RelayMetrics, usage: UsageMeter.Settings = UsageMeter.Settings(),
         onEnd: @escaping (RelayExchange) -> Void) {
        self.machine = machine
        self.meter = UsageMeter(settings: usage)
        self.writer = writer
        self.clock = clock
        self.record = record
        self.metrics = metrics
        self.onEnd = onEnd
    }

    /// Calls the provider with `request` once the request has been read to its end (at once for a request
    /// without a body: its end follows the head). A request with a body (`request.body` non-nil) gets the body
    /// as received, after its `RequestBodyPlan` (made with `plan`) accepted it; the plan's edits (clamp, usage
    /// request, written ceiling) are applied in one pass.
    func start(_ request: UpstreamRequest, upstream: any UpstreamClient, plan: RequestBodyPlan.Settings) {
        assertOnLoop()
        pendingCall = (request, upstream, plan)
    }

    var phase: ExchangeStateMachine.Phase { machine.phase }

    // MARK: RequestResponder

    func requestBody(_ bytes: [UInt8]) {
        assertOnLoop()
        record.bytesIn += bytes.count
        metrics.bytesToUpstream.wrappingAdd(bytes.count, ordering: .relaxed)
        body.append(contentsOf: bytes)
    }

    func requestEnd() {
        assertOnLoop()
        machine.requestBodyComplete(now: clock.now())
        guard let call = pendingCall, machine.phase == .admitting else { return }
        if let gate = attestationGate {
            attestationGate = nil   // this runs again once the gate has answered
            return gate.check(body: body, on: writer.scheduler) { verdict in
                guard self.machine.phase == .admitting else { return }
                if let error = verdict.apply(to: &self.record, admission: &self.admission) { self.reject(error) } else { self.requestEnd() }
            }
        }
        pendingCall = nil
        var request = call.request
        var reservation = RequestBodyPlan.Reservation(tokens: 0, promptTokens: 0, hasCeiling: true)
        if request.body != nil {
            // One strict read of the body decides everything about it (README, "Security").
            var settings = call.plan
            if settings.endpoint.isMetered { settings.budgets = admission?.planBudgets }   // what the store will be asked
            // With the query: Gemini streams only for `alt=sse`, and a stream gets no written ceiling.
            switch RequestBodyPlan.make(body, path: record.path, query: record.query, settings: settings) {
            case .failure(let error):
                reject(error)
                return
            case .success(let plan):
                request.body = plan.body
                meter.requestPlanned(plan, path: record.path)
                reservation = plan.reservation
                serviceTier = plan.serviceTier
                usesAudio = plan.usesAudio
            }
            body = []
        } else {
            meter.bodylessRequest(path: record.path)
        }
        record.model = meter.requestedModel
        guard let admission else {
            startCall(request, upstream: call.upstream)
            return
        }
        self.reservation = reservation
        admittedCall = (request, call.upstream)
        let charge: (charge: BudgetCharge?, price: ModelPrice?)
        switch admission.charge(reservation, model: meter.requestedModel, prices: prices, tier: serviceTier, audio: usesAudio) {
        case .success(let priced): charge = priced
        case .failure(let error):
            admittedCall = nil
            return reject(error)
        }
        admittedPrice = charge.price
        let asked = AdmissionRequest(address: admission.address, identity: admission.identity, budget: charge.charge,
                                     wallClockSeconds: Int64(admission.wallClock()))
        // The store may answer before `admit` returns (memory) or later on this loop (Redis): nothing follows.
        admission.store.admit(asked, on: writer.scheduler) { decision in self.admissionDecided(decision) }
    }

    /// Answers the client with `error`; the provider is not called.
    private func reject(_ error: RelayError) {
        record.rejection = error.code
        metrics.rejected(reason: error.code)
        perform(machine.rejected(error))
    }

    private func startCall(_ request: UpstreamRequest, upstream: any UpstreamClient) {
        machine.calling(now: clock.now())   // before the call: it may end it at once (connect refused)
        callReachedProvider = true
        callStartedAt = clock.now()
        transfer = upstream.call(request, delegate: self)
        armTimer()   // the first-byte clock starts with the call
    }

    /// The store's answer. The client may have left meanwhile: a grant then goes back at once, and no call is made.
    private func admissionDecided(_ decision: AdmissionDecision) {
        guard let admission else { return }
        switch decision {
        case .admitted(let granted):
            switch granted.mode {
            case .shared: break
            case .allowedUnavailable: metrics.stateUnavailable(outcome: "allowed")
            case .local: metrics.stateUnavailable(outcome: "local")
            }
            guard !isEnded, let call = admittedCall, machine.phase == .admitting else {
                admission.store.settle(granted, usedTokens: 0)
                return
            }
            grant = granted
            admittedCall = nil
            startCall(call.request, upstream: call.upstream)
        case .refused(let refusal):
            if refusal == .unavailable { metrics.stateUnavailable(outcome: "rejected") }
            admittedCall = nil
            guard !isEnded else { return }
            record.rejection = refusal.reason
            metrics.rejected(reason: refusal.reason)
            perform(machine.rejected(refusal.error))
        }
    }

    func clientClosed() {
        assertOnLoop()
        if writingDelivery {   // handled once the tap has read the delivery (`transfer(_:didReceiveBody:)`)
            clientClosedDuringWrite = true
            return
        }
        if streamClientClosed() { return }   // a resumable stream runs on, detached
        clientLeft()
    }

    /// The client is gone for good: the upstream is cancelled (or drained).
    func clientLeft() {
        assertOnLoop()
        let phase = machine.phase
        let actions = machine.clientClosed(now: clock.now(), afterFinish: meter.awaitsUsageAfterFinish)
        // Only a call that was made is cancelled (the machine knows: a client gone mid-body or during admission
        // never reached the provider). A drained call is not counted here: it runs on to its usage.
        if actions.contains(.cancelUpstream) {
            metrics.cancelled(phase: phase == .calling ? "before_head" : "streaming")
        }
        perform(actions)
    }

    func clientDrained() {
        assertOnLoop()
        perform(machine.clientDrained(now: clock.now()))
    }

    // MARK: TransferDelegate

    func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) {
        assertOnLoop()
        record.upstreamHeadAt = clock.now()
        var headers = headers
        if let key = providerKey {
            let secret = Array(key.revealForHeader().utf8)
            if !(200..<300).contains(status) {
                if let replacement = SecretMasker.replacement(forErrorStatus: status, headers: headers) {
                    replacementBody = replacement
                    headers.remove("Content-Encoding")
                    headers.remove("Content-Length")
                    headers.replaceOrAdd(name: "Content-Type", value: "application/json")
                } else {
                    masker = SecretMasker(secret: secret)
                }
            }
            if let masked = SecretMasker.masking(headers, secret: secret) { headers = masked }
        }
        streamHead(status: status, headers: &headers, now: clock.now())
        meter.responseHead(status: status, contentType: ResponseRewriter.contentType(headers))
        if let admission, let budgets = admission.budgets, let reservation, let grant,
           (200..<300).contains(status), meter.tap?.format == .eventStream {
            budgetGuard = BudgetGuard(reservedTokens: grant.reservedTokens, promptTokens: reservation.promptTokens,
                                      step: budgets.defaultReserveTokens, onExceed: budgets.onExceed,
                                      namedCeiling: reservation.hasCeiling)
        }
        perform(machine.upstreamHead(status: status, headers: headers, now: clock.now()))
    }

    func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        assertOnLoop()
        let now = clock.now()   // one clock read per delivery, for every use below
        switch machine.upstreamBody(clientAboveHighWater: writer.isAboveHighWater && !keeping.originalGone, now: now) {
        case .forward:
            streamDelivered(now: now)
            if record.firstBodyAt == nil { record.firstBodyAt = now }
            if replacementBody != nil { return true }   // read and dropped: the relay's own body goes at the end
            // A cut waiting at a boundary not yet settled (a lone CR whose LF may come now): it goes in first here.
            let cutWaiting = budgetGuard?.state == .exhausted && meter.atEventBoundary
            let scan = meter.scan(bytes)
            if budgetGuard != nil { return forwardGuarded(bytes, scan, cutWaiting: cutWaiting, now: now) }
            if masker != nil {
                meter.observe(bytes, scan)
                let masked = masker!.feed(bytes)
                if !masked.isEmpty { masked.withUnsafeBytes { send($0) } }
            } else {
                forwardThenObserve(bytes, scan)
                closeIfClosedDuringWrite()
            }
            return true
        case .refuse:
            return false
        case .drop:
            return true
        case .discard:
            meter.observe(bytes, meter.scan(bytes))
            if meter.hasProviderUsage { perform(machine.usageArrived()) }
            return true
        }
    }

    /// A delivery's client write is under way; the tap reads the delivery after it. A client found gone at that
    /// write (the connection reports it from inside the write) is handled once the tap has read the delivery
    /// (`closeIfClosedDuringWrite`), so the decision it makes (cancel, or drain for the counts after a finish chunk)
    /// and the usage it logs are the same as if the tap had read first. So is a resumable stream abandoned at that
    /// write (nobody reads it and the delivery overflowed its buffer: `streamWrote`), which ends the exchange too.
    private(set) var writingDelivery = false
    private var clientClosedDuringWrite = false
    var abandonedDuringWrite = false

    /// The client's write first, then the tap's read of the same bytes (about 1 µs of an event's path): a reader
    /// of the stream never delays it. Returns the output counted so far when `counting` (a budget guard's count).
    @discardableResult
    private func forwardThenObserve(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan, counting: Bool = false) -> Int {
        writingDelivery = true
        forwardToClient(bytes, scan)
        writingDelivery = false
        if counting { return meter.observeCounting(bytes, scan) }
        meter.observe(bytes, scan)
        return 0
    }

    private func closeIfClosedDuringWrite() {
        abandonIfAbandonedDuringWrite()
        guard clientClosedDuringWrite else { return }
        clientClosedDuringWrite = false
        clientClosed()
    }

    /// The client's part of a delivery (through the usage stripper when the relay injected the usage request).
    private func forwardToClient(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan) {
        switch meter.clientBytes(bytes, scan) {
        case .unchanged: send(bytes)
        case .bytes(let kept): if !kept.isEmpty { kept.withUnsafeBytes { send($0) } }
        }
    }

    /// A delivery of a guarded stream: forwarded, counted, and the reservation kept ahead of the count. Once the
    /// budget is exhausted, bytes pass only up to the end of the event under way (`cutWaiting`: it ended with the
    /// last delivery, in a lone CR, so only that CR's LF, if it comes first here); the stream ends there, once no
    /// later byte can move that end (`atSettledEventBoundary`).
    private func forwardGuarded(_ bytes: UnsafeRawBufferPointer, _ scan: SSEBoundaryScanner.Scan, cutWaiting: Bool,
                                now: Instant) -> Bool {
        if budgetGuard?.state == .exhausted, let end = cutWaiting ? scan.start : scan.firstEventEnd,
           end < bytes.count || meter.atSettledEventBoundary {
            if end > 0 { forwardThenObserve(UnsafeRawBufferPointer(rebasing: bytes[0..<end]), scan.prefix(end)) }
            closeIfClosedDuringWrite()
            cut()
            return true
        }
        let output = forwardThenObserve(bytes, scan, counting: true)
        closeIfClosedDuringWrite()
        guardAction(budgetGuard?.counted(output: max(output, timeFloor(at: now))) ?? .none)
        return true
    }

    /// The exchange's timer fired while streaming (a heartbeat is due: the provider has been silent): the guard
    /// counts the silence, at the cancel floor's rate, and may extend or cut as at a delivery.
    func guardSilence(now: Instant) {
        guard budgetGuard != nil, machine.phase == .streaming else { return }
        guardAction(budgetGuard!.counted(output: max(meter.countedOutput, timeFloor(at: now))))
    }

    private func guardAction(_ action: BudgetGuard.Action) {
        switch action {
        case .none:
            break
        case .extend(let tokens):
            guard let admission, let grant else { return }
            // Bytes keep flowing while the store decides; the answer comes on this loop (at once from memory).
            let step = BudgetAmount.step(tokens, price: admittedPrice, promptTokens: reservation?.promptTokens ?? 0)
            admission.store.extend(grant, by: step, on: writer.scheduler) { granted in self.extensionAnswered(granted) }
        case .cut:
            metrics.budgetCut(route: record.route)
            if meter.atSettledEventBoundary { cut() }   // else the next delivery ends the event under way, then the cut
        }
    }

    private func extensionAnswered(_ granted: Bool) {
        guard !isEnded, budgetGuard != nil else { return }
        if granted, grant != nil { grant!.reservedTokens += budgetGuard!.step }
        guardAction(budgetGuard!.extensionAnswered(granted: granted, output: max(meter.countedOutput, timeFloor(at: clock.now()))))
    }

    private func cut() {
        perform(machine.budgetExhausted(closingEvent: BudgetGuard.closingEvent(provider: meter.settings.provider)))
    }

    /// One write per delivery (or per what is left of it), counted as it goes to the client.
    private func send(_ bytes: UnsafeRawBufferPointer) {
        record.bytesOut += bytes.count
        metrics.bytesToClients.wrappingAdd(bytes.count, ordering: .relaxed)
        streamWrote(bytes)   // kept before it is sent: a client that has byte K can resume at K at once
        writer.sendBody(bytes)
    }

    func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
        assertOnLoop()
        if case .failure(let failure) = result {
            if case .connectFailed = failure { callReachedProvider = false }
            if case .connectTimeout = failure { callReachedProvider = false }
            record.failure = failure.summary
            metrics.upstreamError(kind: failure.kind)
        } else if machine.phase == .calling {
            metrics.upstreamError(kind: "no_response_head")
        }
        perform(machine.upstreamCompleted(result, now: clock.now()))
    }

    // MARK: Actions

    func perform(_ actions: [ExchangeStateMachine.Action]) {
        for action in actions {
            switch action {
            case .sendHead(let head, let mode):
                record.status = head.status
                writer.sendHead(head, mode: mode)
            case .cancelUpstream:
                transfer?.cancel()
            case .resumeUpstream:
                transfer?.resumeReceiving()
            case .respondError(let error, let keepAlive):
                record.status = error.status
                writer.respond(error: error, requestID: machine.settings.requestID, keepAlive: keepAlive)
            case .finishResponse(let keepAlive):
                if let tail = masker?.finish(), !tail.isEmpty { tail.withUnsafeBytes { send($0) } }
                if let body = replacementBody { body.withUnsafeBytes { send($0) } }
                let held = meter.finishClientBytes()
                if !held.isEmpty { held.withUnsafeBytes { send($0) } }
                writer.finish(keepAlive: keepAlive)
            case .abortClient:
                writer.abort()
            case .finishWithEvent(let event, let keepAlive):
                event.withUnsafeBytes { send($0) }
                writer.finish(keepAlive: keepAlive)
            }
        }
        if machine.isTerminal {
            end()
        } else {
            armTimer()
        }
    }

    /// Debug builds check that the exchange runs on its loop; release builds do nothing, not even fetch the
    /// writer's scheduler (an existential: a retain, a release and a call per entry point).
    @inline(__always)
    func assertOnLoop() {
        #if DEBUG
        writer.scheduler.assertOnLoop()
        #endif
    }

    /// Runs after every delivery: the earliest of the three deadlines is found without an array, and when the armed
    /// timer already fires no later (the common case) nothing else is done, not even the closure's allocation.
    func armTimer() {
        func earlier(_ a: Instant?, _ b: Instant?) -> Instant? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }
        let next = earlier(machine.timerDeadline(), keeping.heartbeat?.nextDue)
        guard let deadline = next, !timer.covers(deadline) else { return }
        // Body deliveries move the idle deadline later without re-arming: when the old timer fires, the machine
        // ignores the early call and the timer is armed again for the real deadline.
        timer.arm(at: deadline, on: writer.scheduler) { [weak self] in
            guard let self else { return }
            self.timer.fired()
            let phase = self.machine.phase
            let actions = self.machine.deadlinePassed(now: self.clock.now())
            if !actions.isEmpty {
                let kind = phase == .admitting || phase == .calling ? "first_byte_timeout" : "idle_timeout"
                self.metrics.upstreamError(kind: kind)
                self.record.failure = kind
            } else {
                self.streamTimer(now: self.clock.now())   // a heartbeat, or a detach window's end
                self.guardSilence(now: self.clock.now())
            }
            self.perform(actions)   // arms the next deadline
        }
    }

    /// `armTimer` when the armed timer would fire after `deadline`; otherwise one comparison.
    func armTimer(covering deadline: Instant) {
        if !timer.covers(deadline) { armTimer() }
    }

    /// The exchange is over (the machine says so once, `takeEnd`).
    var isEnded: Bool { machine.endTaken }

    /// The output this exchange reserved, extensions included: what an answer whose output the tap could not read
    /// is charged (`UsageMeter.usageAndReportedModel`), since an unknown count is never cheap.
    private var reservedOutput: Int {
        guard let reservation, let grant else { return 0 }
        return max(0, grant.reservedTokens - reservation.promptTokens)
    }

    /// The cancel floor (`RequestBodyPlan.Reservation.outputFloor`) at `now`, on the exchange's clock: only with
    /// budgets and a reservation, counted from the call's start. Not from the response head: an answer that comes
    /// whole has its head only when the provider is done, and a stream's head can wait for the first chunk, after
    /// a thinking model's silent phase (Gemini), which the provider bills whether or not a head came. The charge of
    /// a cancel, and what a budget guard counts beside the visible output, so a reasoning model's silent phase
    /// (billed, never shown) moves the guard too.
    private func timeFloor(at now: Instant) -> Int {
        guard let budgets = admission?.budgets, let reservation, let grant, let start = callStartedAt else { return 0 }
        return reservation.outputFloor(secondsSinceCall: now.seconds(since: start), tokensPerSecond: budgets.cancelFloorTokensPerSecond,
                                       reservedTokens: grant.reservedTokens)
    }

    private func end() {
        guard machine.takeEnd() else { return }
        timer.cancel()
        record.outcome = machine.outcome?.rawValue ?? "aborted"
        record.endedAt = clock.now()
        streamEnded()
        if transfer != nil {
            let (usage, reported) = meter.usageAndReportedModel(callReachedProvider: callReachedProvider,
                                                                outputFloor: timeFloor(at: record.endedAt!),
                                                                reservedOutput: reservedOutput)
            record.usage = usage
            record.modelLabel = meter.modelLabel
            record.cost = ExchangeCost(usage, reported: reported, requested: meter.requestedModel, prices: prices, admitted: admittedPrice,
                                       tier: serviceTier)
        }
        if let grant, let admission {
            admission.store.settle(grant, used: .settled(record.usage, cost: record.cost, admittedPrice: admittedPrice))
            self.grant = nil
        }
        onEnd(self)
    }
}

/// What the access log says about one exchange: a value the exchange owns (`RelayExchange.record`) and fills in on
/// its loop as it goes; the failover call writes its fields through the exchange.
struct ExchangeRecord: Sendable, LogFields {
    let requestID: String
    let method: String
    /// The endpoint (`RequestPath.endpoint`: unreserved escapes decoded, no trailing slash): what every endpoint
    /// decision reads (usage injection, output ceiling, prompt estimate, model label), so a path spelled another way
    /// is judged as the endpoint the provider serves for it.
    let path: String
    /// The path as forwarded (decoded, trailing slash kept): the access log's `path`.
    let requestedPath: String
    /// The request's query, as forwarded: what Gemini reads to choose an event stream (`alt=sse`). Never logged.
    let query: String?
    let route: String
    /// The upstream that answered (the last one called: `FailoverCall` sets it on each attempt).
    var upstream: String
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
    /// The model the request named (client text: logged through the logger's escaping only).
    var model: String?
    /// The metrics' `model` label (`UsageLabels.model`): an allowlisted name or `other`.
    var modelLabel = "other"
    /// What the exchange cost; nil when no call was made.
    var usage: Usage?
    /// The same in dollars; nil when no call was made.
    var cost: ExchangeCost?
    /// The proof of the genuine app (`app_attest`, `app_check`, `none`) on a route that asks for one, and the
    /// check it failed.
    var attestation: String?
    var attestationStep: String?
    /// Heartbeats written, resumes attached, and how long nobody read the stream (resumable streams only).
    var heartbeats = 0
    var resumes = 0
    var detachedMs: Double?
    /// Key pools and failover (`FailoverCall`): the key label, the calls made, and why earlier ones were not given.
    var keyLabel: String?
    var attempts: Int?
    var failover: String?

    /// `path`: the path as forwarded; the record's `path` is its endpoint.
    init(requestID: String, method: String, path: String, query: String? = nil, route: String, upstream: String,
         clientAddress: String, startedAt: Instant) {
        self.requestID = requestID
        self.method = method
        self.path = RequestPath.endpoint(of: path)
        self.requestedPath = path
        self.query = query
        self.route = route
        self.upstream = upstream
        self.clientAddress = clientAddress
        self.startedAt = startedAt
    }

    /// The access log's fields, written straight into its line (`Logger.log(_:_:fields:)`).
    func writeLogFields<W: LogFieldWriting>(to out: inout W) {
        out.field("request_id", .string(requestID))
        out.field("client_ip", .string(clientAddress))
        out.field("method", .string(method))
        out.field("path", .string(requestedPath))
        out.field("route", .string(route))
        out.field("upstream", .string(upstream))
        out.field("status", .int(status ?? 0))
        out.field("bytes_in", .int(bytesIn))
        out.field("bytes_out", .int(bytesOut))
        out.field("outcome", .string(outcome))
        if let identity { out.field("identity", .string(identity)) }
        if let rejection { out.field("reason", .string(rejection)) }
        if let t = upstreamHeadAt { out.field("upstream_head_ms", .double(t.seconds(since: startedAt) * 1000)) }
        if let t = firstBodyAt { out.field("first_byte_ms", .double(t.seconds(since: startedAt) * 1000)) }
        if let t = endedAt { out.field("duration_ms", .double(t.seconds(since: startedAt) * 1000)) }
        if let failure { out.field("error", .string(failure)) }
        if let model { out.field("model", .string(model)) }
        if let attestation { out.field("attestation", .string(attestation)) }
        if let attestationStep { out.field("attestation_step", .string(attestationStep)) }
        if heartbeats > 0 { out.field("heartbeats", .int(heartbeats)) }
        if let detachedMs {
            out.field("resumes", .int(resumes))
            out.field("detached_ms", .double(detachedMs))
        }
        if let keyLabel { out.field("key", .string(keyLabel)) }
        if let attempts { out.field("attempts", .int(attempts)) }
        if let failover { out.field("failover", .string(failover)) }
        if let usage {
            if usage.source != .none {
                out.field("prompt_tokens", .int(usage.prompt))
                out.field("completion_tokens", .int(usage.completion))
            }
            if let cached = usage.cached { out.field("cached_tokens", .int(cached)) }
            if let reasoning = usage.reasoning { out.field("reasoning_tokens", .int(reasoning)) }
            out.field("usage_source", .string(usage.source.rawValue))
        }
        cost?.writeLogFields(to: &out)
    }

    /// The same fields as a list.
    var logFields: [(String, LogValue)] { collectedLogFields }
}
