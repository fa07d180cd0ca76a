import HTTP1
import Support

/// The life of one relayed request, as a value: events in, actions out. No sockets, no curl, no clock of its
/// own (every event carries `now`), so every path, including the timeouts, is tested without I/O.
///
/// Phases and the transitions allowed (accept → admit → plan → call → relay → end):
/// - `awaitingBody` (the request body arrives; nothing is called and no clock runs: a slow client is the
///   connection's body-read timeout's business) → `admitting` (`requestBodyComplete`), `rejected`, `clientGone`.
/// - `admitting` (the request is whole: the attestation gate, the body plan and the admission store decide; the
///   first-byte clock runs, so a store that never answers ends it as a timeout) → `calling` (`calling`: the provider
///   is called now, and the first-byte clock starts again, so the store's time is not the provider's), `rejected`
///   (a policy or the store refused it), `upstreamFailed` (the first-byte deadline), `clientGone` (never
///   `draining`: nothing was called).
/// - `calling` (the provider is called, its head awaited) → `streaming` (head arrived), `upstreamFailed` (connect
///   error, connection reset, first-byte timeout, no head), `clientGone`, `draining`. Only a call in this phase or
///   the next can be cancelled, and only a call the relay made: `rejected` is never reached from here.
/// - `streaming` → `finished` (upstream completed), `upstreamFailed` (died or went idle mid-body),
///   `clientGone`.
/// - `calling`, `streaming` → `draining` (the client left on a route with `onClientCancel: drain`):
///   the upstream is read on, its bytes discarded and nothing written to the client, until the provider's usage
///   arrives (`usageArrived`), the upstream ends, or `drainMaxSeconds` pass → `clientGone`. On any route, a client
///   that leaves `streaming` after the answer's last chunk (`afterFinish`: OpenAI's `finish_reason`, whose usage
///   chunk follows) is drained the same way for at most `finishDrainSeconds`: the usage is already paid for, and
///   is one chunk away.
/// - `streaming` → `finished` with outcome `budget_exhausted` (`budgetExhausted`): the relay ends the stream itself
///   with one closing event, at an event boundary.
/// - `streaming`, detached (`detached` → `reattached`): a resumable stream that nobody reads runs on for its
///   window; the shell asks the stream registry at `detachDeadline` whether a resume came in time, and if none did,
///   the exchange ends as `clientCancelled` (`clientClosed`).
/// - `finished`, `upstreamFailed`, `clientGone`, `rejected` are terminal: every later event returns no action.
/// Before the head has gone out a failure becomes a complete error response; after it, only an abort (no
/// terminal chunk), so the client sees a truncated stream and never a clean end.
package struct ExchangeStateMachine: Sendable {
    package enum Phase: Equatable, Sendable {
        case awaitingBody, admitting, calling, streaming, draining, finished, upstreamFailed, clientGone, rejected
    }

    package enum Action: Equatable, Sendable {
        case sendHead(ResponseHead, ResponseBodyMode)
        case cancelUpstream
        case resumeUpstream
        /// A complete error response (the head has not gone out), the extra response headers (CORS) already in
        /// it; `keepAlive` says whether the connection may take another request after it.
        case respondError(RelayError, keepAlive: Bool)
        /// The body is complete: terminal chunk if chunked, then keep the connection or close it.
        case finishResponse(keepAlive: Bool)
        /// The head has gone out and the body cannot complete: close without a clean end.
        case abortClient
        /// The relay ends the body itself: write `event` (one SSE event), then end as `finishResponse` does. Any
        /// bytes a filter still holds are dropped (they are the part of an event the cut falls after).
        case finishWithEvent([UInt8], keepAlive: Bool)
    }

    /// What to do with a body delivery.
    package enum BodyDecision: Equatable, Sendable {
        case forward
        /// The client's buffer is above its high-water mark: pause the upstream and keep the bytes there.
        case refuse
        /// The exchange is over; the bytes go nowhere.
        case drop
        /// The client left and the upstream is drained: take the bytes (for the usage tap), send nothing.
        case discard
    }

    /// The closed set of ways an exchange ends, for logs and metrics.
    package enum Outcome: String, Sendable {
        case completed, clientCancelled = "client_cancelled", upstreamError = "upstream_error"
        case upstreamTimeout = "upstream_timeout", aborted, rejected
        case budgetExhausted = "budget_exhausted"
    }

    package struct Settings: Sendable, Equatable {
        package var requestMethod: String
        package var clientVersion: HTTPVersion
        package var keepAlive: Bool
        package var requestID: String
        package var firstByteTimeoutSeconds: Double
        package var idleTimeoutSeconds: Double
        /// `onClientCancel: drain`: how long to read on after the client left; nil cancels at once.
        package var drainMaxSeconds: Double?
        /// Added to the client's response head (CORS headers for an allowed origin).
        package var extraResponseHeaders: HTTPHeaders
        package init(requestMethod: String, clientVersion: HTTPVersion, keepAlive: Bool, requestID: String,
                    firstByteTimeoutSeconds: Double, idleTimeoutSeconds: Double, extraResponseHeaders: HTTPHeaders = HTTPHeaders(),
                    drainMaxSeconds: Double? = nil) {
            self.extraResponseHeaders = extraResponseHeaders
            self.drainMaxSeconds = drainMaxSeconds
            self.requestMethod = requestMethod
            self.clientVersion = clientVersion
            self.keepAlive = keepAlive
            self.requestID = requestID
            self.firstByteTimeoutSeconds = firstByteTimeoutSeconds
            self.idleTimeoutSeconds = idleTimeoutSeconds
        }
    }

    package let settings: Settings
    package private(set) var phase = Phase.awaitingBody
    package private(set) var outcome: Outcome?
    package private(set) var status: Int?
    package private(set) var upstreamPaused = false
    package private(set) var requestComplete = false
    private var keepAliveAfterResponse: Bool
    private var firstByteClockStart: Instant
    private var lastBodyAt: Instant
    private var drainUntil: Instant?
    /// Since when nobody reads this resumable stream (`detached`); nil while someone does.
    package private(set) var detachedSince: Instant?
    private var detachWindowSeconds = 0.0
    /// The time spent detached, windows closed so far (the access log's `detached_ms`).
    package private(set) var detachedSeconds = 0.0
    /// The exchange's end was taken (`takeEnd`): it is over, and its end work done or under way.
    package private(set) var endTaken = false
    private var bodyMode: ResponseBodyMode?

    package init(settings: Settings, now: Instant) {
        self.settings = settings
        self.keepAliveAfterResponse = settings.keepAlive
        self.firstByteClockStart = now
        self.lastBodyAt = now
    }

    package var isTerminal: Bool {
        phase == .finished || phase == .upstreamFailed || phase == .clientGone || phase == .rejected
    }

    /// When `deadlinePassed` should next be called, or nil if no timer is needed.
    package var nextDeadline: Instant? {
        switch phase {
        // While the body arrives a slow client is the body-read timeout's business (the connection's).
        case .admitting, .calling: firstByteClockStart.advanced(bySeconds: settings.firstByteTimeoutSeconds)
        // While the relay itself holds the upstream paused (the client is not reading), the provider is not
        // idle: the idle clock restarts when the client drains.
        case .streaming: upstreamPaused ? nil : lastBodyAt.advanced(bySeconds: settings.idleTimeoutSeconds)
        case .draining: drainUntil
        default: nil
        }
    }

    /// The client's request has been read to its end (a connection can only be reused after that): the gate, the
    /// body plan and the admission store decide now (`admitting`), and the first-byte clock starts.
    package mutating func requestBodyComplete(now: Instant) {
        guard !requestComplete else { return }
        requestComplete = true
        guard phase == .awaitingBody else { return }
        phase = .admitting
        firstByteClockStart = now
    }

    /// The request was admitted and the provider is called now: the first-byte clock starts again, so the time
    /// the gate and the store took is not the provider's.
    package mutating func calling(now: Instant) {
        guard phase == .admitting else { return }
        phase = .calling
        firstByteClockStart = now
    }

    package mutating func upstreamHead(status: Int, headers: HTTPHeaders, now: Instant) -> [Action] {
        guard phase == .calling else { return [] }
        phase = .streaming
        lastBodyAt = now
        self.status = status
        let (head, mode, keepAlive) = ResponseRewriter.clientHead(
            status: status, upstreamHeaders: headers, requestMethod: settings.requestMethod,
            clientVersion: settings.clientVersion, keepAlive: settings.keepAlive, requestID: settings.requestID,
            extraHeaders: settings.extraResponseHeaders)
        keepAliveAfterResponse = keepAlive
        bodyMode = mode
        return [.sendHead(head, mode)]
    }

    /// A body delivery from the provider. `clientAboveHighWater` is the client connection's own judgement (its
    /// high-water mark is the one place that decides), so a slow reader pauses the upstream.
    package mutating func upstreamBody(clientAboveHighWater: Bool, now: Instant) -> BodyDecision {
        if phase == .draining { return .discard }
        guard phase == .streaming else { return .drop }
        lastBodyAt = now
        if clientAboveHighWater {
            upstreamPaused = true
            return .refuse
        }
        return .forward
    }

    /// The client's pending bytes fell to the low-water mark.
    package mutating func clientDrained(now: Instant) -> [Action] {
        guard phase == .streaming, upstreamPaused else { return [] }
        upstreamPaused = false
        lastBodyAt = now
        return [.resumeUpstream]
    }

    package mutating func upstreamCompleted(_ result: Result<Void, UpstreamFailure>, now: Instant) -> [Action] {
        switch (phase, result) {
        case (.streaming, .success):
            phase = .finished
            outcome = .completed
            return [.finishResponse(keepAlive: keepAliveAfterResponse)]
        case (.streaming, .failure):
            phase = .upstreamFailed
            outcome = .upstreamError
            return [.abortClient]
        case (.calling, .success):
            phase = .upstreamFailed
            outcome = .upstreamError
            return [respond(Self.error(for: .brokenResponse("no response head")))]
        case (.calling, .failure(let failure)):
            phase = .upstreamFailed
            outcome = failure == .connectTimeout ? .upstreamTimeout : .upstreamError
            return [respond(Self.error(for: failure))]
        case (.draining, _):
            phase = .clientGone
            return []
        default:
            return []
        }
    }

    /// A policy or the admission store refused the request before the provider was called. Once it is called,
    /// a refusal is no longer possible: the call's own answer decides.
    package mutating func rejected(_ error: RelayError) -> [Action] {
        guard phase == .awaitingBody || phase == .admitting else { return [] }
        phase = .rejected
        outcome = .rejected
        return [respond(error)]
    }

    /// How long a client that left after the answer's finish chunk leaves the relay reading for the usage chunk.
    package static let finishDrainSeconds = 2.0

    /// The client left. A call that was made is cancelled at once, or, with `drainMaxSeconds`, drained first;
    /// before the call there is nothing to cancel (`awaitingBody`, `admitting`: the provider never saw it).
    /// `afterFinish`: the stream's finish chunk was seen and its usage not yet, so even without `drainMaxSeconds`
    /// it is drained, for `finishDrainSeconds`.
    package mutating func clientClosed(now: Instant? = nil, afterFinish: Bool = false) -> [Action] {
        switch phase {
        case .awaitingBody, .admitting:
            outcome = .clientCancelled
            phase = .clientGone
            return []
        case .calling, .streaming:
            outcome = .clientCancelled
            let drainSeconds = settings.drainMaxSeconds ?? (afterFinish && phase == .streaming ? Self.finishDrainSeconds : nil)
            if let seconds = drainSeconds, let now {
                phase = .draining
                drainUntil = now.advanced(bySeconds: seconds)
                // A slow client may have left the upstream paused: the drain reads on regardless.
                let wasPaused = upstreamPaused
                upstreamPaused = false
                return wasPaused ? [.resumeUpstream] : []
            }
            phase = .clientGone
            return [.cancelUpstream]
        default:
            return []
        }
    }

    /// The stream's budget cannot cover its next extension (`budgets.onExceed: cut`) and what the client has is
    /// whole events: the upstream is cancelled and the body ends with `closingEvent`, cleanly. A body whose length
    /// the client was told (Content-Length) cannot take another byte: it is aborted instead.
    package mutating func budgetExhausted(closingEvent: [UInt8]) -> [Action] {
        guard phase == .streaming else { return [] }
        phase = .finished
        outcome = .budgetExhausted
        switch bodyMode {
        case .chunked?, .closeDelimited?:
            return [.cancelUpstream, .finishWithEvent(closingEvent, keepAlive: keepAliveAfterResponse)]
        default:
            return [.cancelUpstream, .abortClient]
        }
    }

    // MARK: Detached: a resumable stream nobody reads

    /// Nobody reads the stream now (its client left, or its resumer did): it runs on for `windowSeconds`, the
    /// route's `resume.windowSeconds`, and a paused upstream reads on, since nobody is there to hold it for. The
    /// phase stays `streaming`: the provider's bytes still go where a reader finds them (the replay buffer).
    package mutating func detached(now: Instant, windowSeconds: Double) -> [Action] {
        guard phase == .streaming, detachedSince == nil else { return [] }
        detachedSince = now
        detachWindowSeconds = windowSeconds
        return clientDrained(now: now)
    }

    /// Someone reads the stream again (a resume attached), or it ended: the time it was detached is counted.
    package mutating func reattached(now: Instant) {
        guard let since = detachedSince else { return }
        detachedSeconds += now.seconds(since: since)
        detachedSince = nil
    }

    /// When a detached stream's window ends (the shell then asks the stream registry whether a resume came in time);
    /// nil while someone reads.
    package var detachDeadline: Instant? { detachedSince?.advanced(bySeconds: detachWindowSeconds) }

    /// The earlier of `nextDeadline` and `detachDeadline`, for the shell's timer after every delivery. Mutating
    /// though it changes nothing: the shell's stored machine is then read in place (a modify access), where a
    /// getter made it copy the whole machine first, retains and releases included (two copies per relayed event
    /// before, callgrind).
    package mutating func timerDeadline() -> Instant? {
        guard let detach = detachDeadline else { return nextDeadline }
        guard let next = nextDeadline else { return detach }
        return min(next, detach)
    }

    /// The usage tap has the provider's final counts: a drain has what it waited for.
    package mutating func usageArrived() -> [Action] {
        guard phase == .draining else { return [] }
        phase = .clientGone
        return [.cancelUpstream]
    }

    /// Called at (or after) `nextDeadline`. Early calls do nothing, so a timer may fire late or spuriously.
    package mutating func deadlinePassed(now: Instant) -> [Action] {
        guard let deadline = nextDeadline, now >= deadline else { return [] }
        switch phase {
        case .admitting:
            phase = .upstreamFailed
            outcome = .upstreamTimeout
            return [respond(.upstreamTimeout)]
        case .calling:
            phase = .upstreamFailed
            outcome = .upstreamTimeout
            return [.cancelUpstream, respond(.upstreamTimeout)]
        case .streaming:
            phase = .upstreamFailed
            outcome = .upstreamTimeout
            return [.cancelUpstream, .abortClient]
        case .draining:
            phase = .clientGone
            return [.cancelUpstream]
        default:
            return []
        }
    }

    /// An error answer as this exchange sends it: with the route's extra response headers (CORS), and the
    /// request's own keep-alive (the connection closes after it anyway when the request body did not end).
    private func respond(_ error: RelayError) -> Action {
        var error = error
        for field in settings.extraResponseHeaders { error.extraHeaders.append((field.name, field.value)) }
        return .respondError(error, keepAlive: settings.keepAlive)
    }

    /// True exactly once: the first time it is asked after the exchange reached a terminal phase. Where the
    /// exchange's end (settle, access log, stream end) is decided: once, whichever event ended it.
    package mutating func takeEnd() -> Bool {
        guard isTerminal, !endTaken else { return false }
        endTaken = true
        return true
    }

    static func error(for failure: UpstreamFailure) -> RelayError {
        switch failure {
        case .connectFailed:
            RelayError(status: 502, type: "upstream_error", code: "upstream_unreachable",
                       message: "The relay could not connect to the provider.")
        case .connectTimeout:
            RelayError(status: 502, type: "upstream_error", code: "upstream_connect_timeout",
                       message: "Connecting to the provider timed out.")
        case .connectionReset:
            .upstreamConnectionReset
        case .brokenResponse:
            RelayError(status: 502, type: "upstream_error", code: "upstream_bad_response",
                       message: "The provider's response was broken or cut off.")
        case .other:
            RelayError(status: 502, type: "upstream_error", code: "upstream_error",
                       message: "The request to the provider failed.")
        }
    }
}
