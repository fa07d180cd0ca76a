import HTTP1
import RelayCore
import RelayState
import Support
import Transport
import Upstream

/// Where one route's requests go when it has a choice (several keys or several upstreams): what each upstream
/// needs to build an attempt, and the shared pools. The exchange calls it as it would call the curl driver.
///
/// Made per exchange by `RelayHandler.failoverClient`; immutable but for `exchange`, which is set on the loop
/// queue before the call, and read there. The access-log fields of each attempt go to the exchange's record.
final class FailoverClient: UpstreamClient {
    /// One upstream of the route, ready to be called: its URL for this request and its headers without the key.
    struct Target {
        var name: String
        var url: String
        var headers: HTTPHeaders
        var keyHeader: String
        var keyPrefix: String
        var keys: [RelayConfiguration.UpstreamKey]
        var httpVersion: UpstreamHTTPVersion
        var caFile: String?
        var idleConnectionSeconds: Int
        var keyDisabledSeconds: Double
    }

    let targets: [Target]
    let pools: UpstreamPools
    let driver: any UpstreamClient
    let loop: any LoopScheduler
    /// The exchange's request id, for the log lines of its attempts.
    let requestID: String
    let maxAttempts: Int
    let firstByteSeconds: Double
    let wallClock: @Sendable () -> Double
    weak var exchange: RelayExchange?

    init(targets: [Target], pools: UpstreamPools, driver: any UpstreamClient, loop: any LoopScheduler, requestID: String,
         maxAttempts: Int, firstByteSeconds: Double, wallClock: @escaping @Sendable () -> Double) {
        self.targets = targets
        self.pools = pools
        self.driver = driver
        self.loop = loop
        self.requestID = requestID
        self.maxAttempts = maxAttempts
        self.firstByteSeconds = firstByteSeconds
        self.wallClock = wallClock
    }

    /// Writes into the exchange's access-log record; nothing once the exchange is gone. On `loop.queue`.
    func updateRecord(_ edit: (inout ExchangeRecord) -> Void) {
        if let exchange { edit(&exchange.record) }
    }

    func call(_ request: UpstreamRequest, delegate: any TransferDelegate) -> any UpstreamCall {
        let call = FailoverCall(client: self, request: request, delegate: delegate)
        call.begin()
        return call
    }
}

/// One request's calls over its route's upstreams and keys, seen by the exchange as one upstream call. It holds
/// back an answer the plan might retry (`FailoverPlan.mayRetry`: 429, 401, 503, 529, and for a replayable
/// request 500, 502, 504) until it is complete, at most `heldAnswerLimit` bytes (a larger one goes to the client
/// as it is, without retry), and passes every other answer through at once: once a byte went to the exchange,
/// nothing is tried again. Each attempt sends the
/// request's bytes as the exchange made them; only the URL's upstream and the key header change.
///
/// Owned by the exchange's loop queue (the driver and the Redis client answer there too).
final class FailoverCall: UpstreamCall, TransferDelegate, @unchecked Sendable {
    // Invariant: touched on `client.loop.queue` only.
    static let heldAnswerLimit = 64 * 1024

    private let client: FailoverClient
    /// The request as the exchange made it; its body is let go once no attempt can follow.
    private var request: UpstreamRequest
    private weak var delegate: (any TransferDelegate)?
    private var plan: FailoverPlan
    private var current: (any UpstreamCall)?
    private var cancelled = false
    /// The attempt's answer while it is held back.
    private var held: (status: Int, headers: HTTPHeaders, body: [UInt8])?
    private var headStatus: Int?
    /// The exchange has the head: everything passes through from now on.
    private var passing = false
    /// Bytes the exchange has not taken yet (it refused them: its client is slow), and the end that follows them.
    private var pending: [UInt8] = []
    private var pendingCompletion: Result<Void, UpstreamFailure>?
    private var sniffer: ErrorEventSniffer?
    /// The upstream and key label of the current attempt, for its log lines.
    private var attemptLabels: (upstream: String, key: String?) = ("", nil)

    init(client: FailoverClient, request: UpstreamRequest, delegate: any TransferDelegate) {
        self.client = client
        self.request = request
        self.delegate = delegate
        let now = client.loop.clock.now()
        plan = FailoverPlan(settings: .init(upstreams: client.targets.map(\.name),
                                            keyDisabledSeconds: client.targets.map(\.keyDisabledSeconds),
                                            maxAttempts: client.maxAttempts, deadline: now.advanced(bySeconds: client.firstByteSeconds),
                                            replayable: request.isReplayable))
    }

    private var names: [String] { plan.settings.upstreams }

    /// Learns what other replicas saw, then makes the first call (on a later turn when Redis is asked).
    func begin() {
        client.pools.refresh(names, on: client.loop) { [self] in
            guard !cancelled else { return }
            let now = client.loop.clock.now()
            let step = client.pools.withPools(names) { plan.start(pools: &$0, now: now) }
            switch step {
            case .call(let upstream, let key): attempt(upstream, key)
            case .noKeyAvailable(let retryAfter, let cooling): client.loop.execute { [self] in noKeyAvailable(retryAfter, cooling: cooling) }
            case .give: client.loop.execute { [self] in complete(.failure(.other("no upstream to call"))) }
            }
        }
    }

    private func attempt(_ upstream: Int, _ key: Int?) {
        let target = client.targets[upstream]
        var request = self.request
        request.url = target.url
        request.headers = target.headers
        if let key { request.headers.add(name: target.keyHeader, value: target.keyPrefix + target.keys[key].secret.revealForHeader()) }
        request.httpVersion = target.httpVersion
        request.caFile = target.caFile
        request.idleConnectionSeconds = target.idleConnectionSeconds
        let keyLabel = key.map { target.keys[$0].label }
        attemptLabels = (target.name, keyLabel)
        client.updateRecord { [plan] record in
            record.upstream = target.name
            record.keyLabel = keyLabel
            record.attempts = plan.attempts
            record.failover = plan.failoverField
        }
        (delegate as? RelayExchange)?.providerKey = key.map { target.keys[$0].secret }
        held = nil
        headStatus = nil
        current = client.driver.call(request, delegate: self)
    }

    // MARK: UpstreamCall

    func cancel() {
        cancelled = true
        pending = []
        pendingCompletion = nil
        current?.cancel()
    }

    func resumeReceiving() {
        guard !cancelled else { return }
        if !pending.isEmpty || pendingCompletion != nil {
            flush()
            if !pending.isEmpty { return }
        }
        current?.resumeReceiving()
    }

    // MARK: TransferDelegate (the current attempt's)

    func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) {
        guard transfer === current, !cancelled else { return }
        headStatus = status
        let now = client.loop.clock.now()
        disable(client.pools.withPools(names) { plan.headReceived(status: status, pools: &$0, now: now) })
        if FailoverPlan.mayRetry(status: status, replayable: plan.settings.replayable) {
            held = (status, headers, [])
            return
        }
        if (200..<300).contains(status), headers.first("Content-Type")?.lowercased().hasPrefix("text/event-stream") == true {
            sniffer = ErrorEventSniffer()
        }
        startPassing()
        delegate?.transfer(self, didReceiveHead: status, headers: headers)
    }

    /// The exchange gets this answer: nothing is tried again, so the body need not be kept.
    private func startPassing() {
        passing = true
        request.body = request.body.map { _ in [] }
    }

    func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        guard transfer === current, !cancelled else { return true }
        if let answer = held {
            if answer.body.count + bytes.count <= Self.heldAnswerLimit {
                held!.body.append(contentsOf: bytes)
                return true
            }
            // Too large for an error answer: it goes to the client as it is, and is not retried.
            held = nil
            startPassing()
            delegate?.transfer(self, didReceiveHead: answer.status, headers: answer.headers)
            pending = answer.body + Array(bytes)
            flush()
            return true
        }
        if !pending.isEmpty { return false }   // curl keeps the bytes and delivers them again after the resume
        if sniffer != nil { sniff(bytes) }
        return delegate?.transfer(self, didReceiveBody: bytes) ?? true
    }

    func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
        guard transfer === current, !cancelled else { return }
        countAttempt(result)
        if passing {
            pendingCompletion = result
            flush()
            return
        }
        if let answer = held {
            guard case .success = result else { return complete(result) }   // a broken error answer: never twice
            let retryAfter = RetryAfter.seconds(in: answer.headers, wallClockSeconds: client.wallClock())
            return decide(.answered(status: answer.status, retryAfterSeconds: retryAfter), last: result)
        }
        switch result {
        case .failure(.connectFailed), .failure(.connectTimeout): decide(.unreachable, last: result)
        default: complete(result)   // the request may have reached the provider: never sent again
        }
    }

    // MARK: Decisions

    private func decide(_ outcome: FailoverPlan.Outcome, last: Result<Void, UpstreamFailure>) {
        // A client that left (a drained exchange reads on for usage) gets no new call made for it.
        if let exchange = delegate as? RelayExchange, exchange.phase != .calling { return complete(last) }
        let now = client.loop.clock.now()
        let before = plan.current
        let step = client.pools.withPools(names) { plan.next(after: outcome, pools: &$0, now: now) }
        if let before, let key = before.key, case .answered(429, let retryAfter) = outcome {
            let target = client.targets[before.upstream]
            let seconds = min(FailoverPlan.maxCooldownSeconds, max(0, retryAfter ?? FailoverPlan.defaultCooldownSeconds))
            client.pools.share(upstream: target.name, label: target.keys[key].label, seconds: seconds, disabled: false, on: client.loop)
        }
        client.updateRecord { [plan] record in
            record.attempts = plan.attempts
            record.failover = plan.failoverField
        }
        switch step {
        case .call(let upstream, let key):
            attempt(upstream, key)
        case .give, .noKeyAvailable:
            guard let answer = held else { return complete(last) }
            var headers = answer.headers
            if let largest = plan.largestRetryAfterSeconds {
                headers.replaceOrAdd(name: "Retry-After", value: String(Int(largest.rounded(.up))))
                if headers.contains("retry-after-ms") { headers.replaceOrAdd(name: "retry-after-ms", value: String(Int((largest * 1000).rounded(.up)))) }
            }
            held = nil
            deliver(status: answer.status, headers: headers, body: answer.body)
        }
    }

    /// Keys the plan disabled (their 401 was theirs, not the request's): told to the other replicas, and logged
    /// once each at error level.
    private func disable(_ rejections: [FailoverPlan.Rejection]) {
        for rejection in rejections {
            let target = client.targets[rejection.upstream]
            let label = target.keys[rejection.key].label
            client.pools.share(upstream: target.name, label: label, seconds: target.keyDisabledSeconds, disabled: true, on: client.loop)
            guard rejection.isNews else { continue }
            client.pools.logger.error("upstream_key_rejected", [
                ("upstream", .string(target.name)), ("key", .string(label)),
                ("status", .int(401)), ("disabled_seconds", .double(target.keyDisabledSeconds)),
            ])
        }
    }

    /// Every key of every upstream is cooling down or disabled: the relay answers itself, without a call.
    private func noKeyAvailable(_ retryAfter: Double?, cooling: Bool) {
        guard !cancelled else { return }
        let error = cooling
            ? RelayError(status: 429, type: "rate_limit_error", code: "upstream_keys_cooling_down",
                         message: "Every provider key of this route is cooling down after a rate limit; retry later.")
            : RelayError(status: 503, type: "upstream_error", code: "upstream_keys_unavailable",
                         message: "No provider key of this route is usable now.")
        let body = error.jsonBody
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Retry-After", value: String(max(1, Int((retryAfter ?? 1).rounded(.up)))))
        client.updateRecord { $0.failover = "no_key" }
        deliver(status: error.status, headers: headers, body: body)
    }

    private func deliver(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        startPassing()
        delegate?.transfer(self, didReceiveHead: status, headers: headers)
        pending = body
        pendingCompletion = .success(())
        flush()
    }

    private func complete(_ result: Result<Void, UpstreamFailure>) {
        guard !cancelled else { return }
        startPassing()
        pendingCompletion = result
        flush()
    }

    /// Hands the exchange what it has not taken yet, then the end once every byte is taken.
    private func flush() {
        guard !cancelled, let delegate else { return }
        if !pending.isEmpty {
            let taken = pending.withUnsafeBytes { delegate.transfer(self, didReceiveBody: $0) }
            guard taken else { return }
            pending = []
        }
        guard !cancelled, let result = pendingCompletion else { return }
        pendingCompletion = nil
        delegate.transfer(self, didCompleteWith: result)
    }

    private func countAttempt(_ result: Result<Void, UpstreamFailure>) {
        guard let (upstream, key) = plan.current else { return }
        let target = client.targets[upstream]
        let label: String
        switch (headStatus, result) {
        case (let status?, .success): label = (200..<300).contains(status) ? "success" : String(status)
        case (_, .failure(.connectFailed)), (_, .failure(.connectTimeout)): label = "unreachable"
        default: label = "error"
        }
        client.pools.countAttempt(upstream: target.name, key: key.map { target.keys[$0].label } ?? "none", result: label)
    }

    private func sniff(_ bytes: UnsafeRawBufferPointer) {
        guard var s = sniffer else { return }
        s.feed(bytes)
        switch s.verdict {
        case .undecided:
            sniffer = s
        case .errorEvent:
            sniffer = nil
            client.pools.logger.warning("upstream_error_event", [
                ("request_id", .string(client.requestID)), ("upstream", .string(attemptLabels.upstream)),
                ("key", .string(attemptLabels.key ?? "none")),
            ])
        case .content:
            sniffer = nil
        }
    }
}
