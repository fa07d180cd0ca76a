import Foundation
import RelayWire
import SSE
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP attempt streamed as Server-Sent Events: a data task of the client's `URLSession` whose body chunks
/// feed an `SSEParser`. The session's delegate (`StreamSession`) hands this attempt the callbacks of its task.
///
/// Why this shape, the same on every platform: `URLSession.bytes(for:)` does not exist in swift-corelibs-foundation;
/// a task-level delegate (`task.delegate`) gets no callbacks there; `dataTask(with:completionHandler:)` buffers the
/// whole body. A session-level delegate streams progressively on Linux and Apple platforms alike, so the code the
/// tests run on Linux is the code an app ships.
///
/// Contract: the callbacks arrive one at a time on the session's serial delegate queue; `completed` is terminal and
/// ends the event stream (with the events, a `RelayAPIError` for a non-2xx answer, a `CancellationError` for
/// -999, or the `URLError`). Ending the stream from either side (completion, or the consumer cancelling/dropping
/// it) cancels the task; the session then reports its completion and lets go of this attempt.
///
/// Resumable streams (README, "Resumable streams"): when the answer named its stream (`X-Relay-Stream`) and a
/// `Resume` is given, a transient failure (`isTransient`) does not end the event stream. The attempt asks for the
/// rest, `GET /v1/relay/streams/<id>?offset=N` with N the body bytes it has parsed, as a new task (a "leg") whose
/// bytes go on into the same parser, even mid-line or mid-character: the app sees one sequence of events, none
/// missing, none twice. Reconnects back off, and stop when `Resume.window` has passed since the last byte. A
/// stream that ends before the relay ended it (the consumer's stop, or an error the client raises itself: an
/// event too large, a resume it cannot build or read) sends `DELETE /v1/relay/streams/<id>` first, then
/// closes, so the relay cancels the provider at once instead of waiting for a resume. The close waits for the
/// DELETE's answer at most `Resume.stopGrace`: a slow or gone relay, a token provider that hangs, or a busy
/// concurrency pool (the DELETE is built in a Task) never keeps the connection open longer; the DELETE itself
/// goes on (it is bounded by its own request timeout) and stops the stream when it arrives.
///
/// The event stream is unbounded but never holds much: the client library's own task takes each event as it
/// arrives (`SSERelayClient` bounds what waits for the app).
final class EventStreamTask: @unchecked Sendable {
    // Invariant for `@unchecked Sendable`: `parser`, `response`, `status`, `errorBody`, `started`, `leg`,
    // `received`, `streamID`, `lastHeard`, `lastProgress`, `reconnects`, `eventsSeen` and `droppedLeg` are read and
    // written only inside `received`, `completed` and `check`, which the session's serial delegate queue runs one at
    // a time (maxConcurrentOperationCount = 1), and in `init` before the first task starts. `shared` is behind its own
    // lock; `continuation` is Sendable; the other stored properties are immutable.
    private let continuation: AsyncThrowingStream<SSEEvent, any Error>.Continuation
    private let requestID: String?
    private let maxErrorBodyBytes: Int
    private let session: StreamSession
    private let resume: Resume?
    private var parser: SSEParser
    private var started = false
    private var status = 0
    private var response: HTTPURLResponse?
    private var errorBody: [UInt8] = []
    /// The task whose callbacks set the fields above; a new leg's first callback starts them afresh.
    private var leg: Int?
    /// Body bytes of 2xx answers parsed so far, over every leg: the offset of a resume.
    private var received = 0
    private var streamID: String?
    /// When the relay was last heard from: a body byte, or a 2xx head. The stall watchdog counts from here.
    private var lastHeard = Date()
    /// When the answer last moved: a body byte, or the first leg's 2xx head. The resume window counts from here: a
    /// resume answered with a head and nothing more is no news of the stream, or a relay (or anything in between)
    /// that keeps doing so would be asked again every 2 s for ever.
    private var lastProgress = Date()
    private var reconnects = 0
    private var eventsSeen = 0
    /// The leg `dropAfterEvents` or the stall watchdog closed: bytes of it still in flight are not the stream's
    /// any more.
    private var droppedLeg: Int?
    private let shared = Protected(Shared())

    /// What the consumer's side and the delegate queue both touch.
    private struct Shared {
        var task: URLSessionTask?
        var streamID: String?
        /// The event stream has ended, from either side: no leg starts after it.
        var finished = false
        /// The relay ended the stream: its clean end, or an answer saying the stream is gone (404, 410, 502).
        /// Only then is there nothing to stop. A stream the client ends itself (an event too large, a resume it
        /// could not build or that was answered otherwise, the window passed) still runs at the relay, which pays
        /// the provider for its window unless the stop's DELETE comes.
        var relayEnded = false
        /// A 2xx answer arrived (`Attempt.answered`).
        var answered = false
        /// A resume or the stop's DELETE was refused 401 `token_expired` and asked again with a fresh token: once
        /// per stream, whichever came first (each refusal costs the app's address a failed-authentication token
        /// at the relay).
        var tokenRefreshed = false
        /// The reconnect waiting out its backoff or building its request: a stop cancels it, so that it calls
        /// neither the token nor the attestation provider afterwards.
        var reconnect: Task<Void, Never>?
    }

    /// How a resumable stream continues and stops; the client builds the requests (token, attestation).
    struct Resume: Sendable {
        /// How long after the relay was last heard from reconnecting is still tried.
        var window: TimeInterval
        /// The longest silence after a 2xx head before the leg is taken for dead and resumed; 0 for never.
        var stallTimeout: TimeInterval
        /// `GET` of the rest of stream `id` from byte `offset`; `refreshToken`: with a newly minted token (the
        /// token provider's `forceRefresh`).
        var request: @Sendable (_ id: String, _ offset: Int, _ refreshToken: Bool) async throws -> URLRequest
        /// `DELETE` of stream `id`.
        var stop: @Sendable (_ id: String, _ refreshToken: Bool) async throws -> URLRequest
        /// How long after the app's stop the connection stays open waiting for the DELETE's answer.
        var stopGrace: TimeInterval
        /// The requests carry the token provider's token: a resume or a stop refused with 401 `token_expired` is
        /// asked once more with a fresh one (the stream is still there: an expired token says nothing of it).
        var canRefreshToken = false
        /// For `relay-chat --drop-after-events` and tests: drop the connection once after this many events.
        var dropAfterEvents: Int?
        /// Tests: runs on the delegate queue right after a reconnect was scheduled, before the leg's completion
        /// returns; a test holds it there while it stops the stream.
        var afterReconnectScheduled: (@Sendable () -> Void)?
    }

    private init(continuation: AsyncThrowingStream<SSEEvent, any Error>.Continuation, requestID: String?,
                 session: StreamSession, resume: Resume?, maxErrorBodyBytes: Int, maxEventBytes: Int) {
        self.continuation = continuation
        self.requestID = requestID
        self.session = session
        self.resume = resume
        self.maxErrorBodyBytes = maxErrorBodyBytes
        parser = SSEParser(maxEventBytes: maxEventBytes)
        Self.live.add(1)
        session.live.add(1)
    }

    deinit {
        Self.live.add(-1)
        session.live.add(-1)
    }

    /// Attempts alive: each is held by its session's delegate until its task completes, so a count that does not
    /// return to zero is a task that never ended (see `SSERelayClient.liveStreams`).
    static let live = LiveCounter()

    /// One started attempt: its events, and a way to end it early from outside the stream.
    struct Attempt: Sendable {
        var events: AsyncThrowingStream<SSEEvent, any Error>
        /// Closes the connection and ends `events`; idempotent.
        var cancel: @Sendable () -> Void
        /// Whether the request was answered 2xx: the relay accepted it (the provider is called, and paid), so it
        /// must never be sent again, whatever error ends `events` later (a refused resume, an error event).
        var answered: @Sendable () -> Bool
    }

    /// Starts the request at once on `session`. It ends when the stream ends, from either side: a consumer that
    /// cancels its Task or drops the stream, or `cancel`, closes the connection (after a stop, on a resumable
    /// stream that had not ended).
    static func start(_ request: URLRequest, in session: StreamSession, settings: SSERelayClient.Configuration,
                      resume: Resume? = nil) -> Attempt {
        var captured: AsyncThrowingStream<SSEEvent, any Error>.Continuation?
        let events = AsyncThrowingStream<SSEEvent, any Error>(bufferingPolicy: .unbounded) { captured = $0 }
        let continuation = captured!
        let attempt = EventStreamTask(continuation: continuation, requestID: request.value(forHTTPHeaderField: "X-Request-Id"),
                                      session: session, resume: resume, maxErrorBodyBytes: settings.maxErrorBodyBytes,
                                      maxEventBytes: settings.maxEventBytes)
        attempt.startLeg(request)
        continuation.onTermination = { _ in attempt.terminated() }
        return Attempt(events: events, cancel: { continuation.finish() },
                       answered: { attempt.shared.withLock { $0.answered } })
    }

    private func startLeg(_ request: URLRequest) {
        // The lock is held across the check and the start, so that a stop either sees the new task (and cancels
        // it) or comes first (and no leg starts).
        let newLeg = shared.withLock { state -> Int? in
            guard !state.finished else { return nil }
            let task = session.start(request, for: self)
            state.task = task
            state.reconnect = nil
            return task.taskIdentifier
        }
        if let newLeg, let resume, resume.stallTimeout > 0 { watch(newLeg, after: resume.stallTimeout / 4) }
    }

    /// The stall watchdog. A connection that died without a FIN or a reset (a NAT that forgot it, a handover)
    /// shows nothing until the idle timeout, long past the resume window; but the relay writes a heartbeat
    /// after `routes[].heartbeatSeconds` (15 s) of silence, so a leg of a resumable stream that stays quiet
    /// `stallTimeout` after its head is dead: it is closed and resumed like a dropped one. Before the head the
    /// relay waits for the provider's, and only the idle timeout applies.
    ///
    /// Checks run on the session's delegate queue, one at a time with the task's callbacks: until the head is
    /// there, every quarter of `stallTimeout` (the head has no callback of its own, see `start`); then when the
    /// silence would reach `stallTimeout`. They hold the attempt weakly, and end with the leg.
    private func watch(_ leg: Int, after delay: TimeInterval) {
        session.onDelegateQueue(after: delay) { [weak self] in self?.check(leg) }
    }

    private func check(_ id: Int) {
        guard let resume, let task = shared.withLock({ $0.finished ? nil : $0.task }), task.taskIdentifier == id,
              task.state == .running, droppedLeg != id else { return }
        if leg != id {
            guard task.response != nil else { return watch(id, after: resume.stallTimeout / 4) }
            start(task)
        }
        guard (200..<300).contains(status), streamID != nil else { return }
        let quiet = Date().timeIntervalSince(lastHeard)
        guard quiet >= resume.stallTimeout else { return watch(id, after: resume.stallTimeout - quiet) }
        droppedLeg = id
        task.cancel()
    }

    /// Either side ended the stream: close the request (the relay then cancels the provider within milliseconds);
    /// on a resumable stream the relay still runs, stop it first. A task that already completed ignores this.
    ///
    /// The stop's close comes from whichever is first: the DELETE's answer (on the session's delegate queue), its
    /// failure to be built, or `stopGrace` on a Dispatch timer. Neither the answer nor the timer needs a thread
    /// of the concurrency pool, so a pool kept busy by blocking work cannot hold the connection open.
    private func terminated() {
        let (task, id, reconnect) = shared.withLock { state -> (URLSessionTask?, String?, Task<Void, Never>?) in
            defer {
                state.finished = true
                state.reconnect = nil
            }
            let reconnect = state.reconnect
            guard !state.relayEnded, resume != nil else { return (state.task, nil, reconnect) }
            // A stop between the head and the first body byte: the head names the stream already, and without the
            // DELETE the relay would keep the provider running for its window. Only the first leg can lack the id,
            // and `state.task` is that leg then. (A task's `response` may be read on any thread.)
            return (state.task, state.streamID ?? state.task.flatMap { Self.streamID(in: $0.response) }, reconnect)
        }
        reconnect?.cancel()
        guard let id, let resume else {
            task?.cancel()
            return
        }
        let pending = Protected(task)
        let close: @Sendable () -> Void = {
            pending.withLock { task in
                defer { task = nil }
                return task
            }?.cancel()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + resume.stopGrace, execute: close)
        let session = self.session, shared = self.shared
        Task {
            guard let request = try? await resume.stop(id, false) else { return close() }
            session.send(request) { tokenExpired in
                // Refused for an expired token (the app was away longer than its token lives): once more, fresh,
                // unless a resume of this stream was refreshed already.
                guard tokenExpired, resume.canRefreshToken,
                      shared.withLock({ s in defer { s.tokenRefreshed = true }; return !s.tokenRefreshed }) else { return close() }
                Task {
                    guard let again = try? await resume.stop(id, true) else { return close() }
                    session.send(again) { _ in close() }
                }
            }
        }
    }

    func received(_ data: Data, on task: URLSessionTask) {
        if leg != task.taskIdentifier { start(task) }
        if !(200..<300).contains(status) {
            let room = maxErrorBodyBytes - errorBody.count
            if room > 0 { errorBody.append(contentsOf: data.prefix(room)) }
            // The error is what was kept: a body past the bound (or one that never ends) is not waited for.
            if data.count >= room { endWithErrorAnswer() }
            return
        }
        if droppedLeg == task.taskIdentifier { return }
        lastHeard = Date()
        lastProgress = lastHeard
        reconnects = 0
        do {
            try data.withUnsafeBytes { buffer in
                guard let drop = resume?.dropAfterEvents, eventsSeen < drop, streamID != nil else {
                    received += buffer.count
                    try parser.parse(buffer) { event in
                        continuation.yield(event)
                        eventsSeen += 1
                    }
                    return
                }
                // The drop hook, until it fires: byte by byte, so that the connection is dropped right after the
                // chosen event even when one read holds the whole answer, and the resume asks from exactly there.
                for i in 0..<buffer.count {
                    received += 1
                    try parser.parse(UnsafeRawBufferPointer(rebasing: buffer[i..<(i + 1)])) { event in
                        continuation.yield(event)
                        eventsSeen += 1
                    }
                    if eventsSeen == drop {
                        droppedLeg = task.taskIdentifier
                        task.cancel()
                        return
                    }
                }
            }
        } catch let error as SSEParser.EventTooLarge {
            end(throwing: SSERelayClientError(code: .eventTooLarge, limit: error.limit), relayEnded: false)
        } catch {
            end(throwing: error, relayEnded: false)
        }
    }

    func completed(_ task: URLSessionTask, error: (any Error)?) {
        // A leg the drop hook closed is a drop even when it completed cleanly: its whole answer may have arrived
        // before the cancel did, but the events after the drop were not taken.
        let dropped = droppedLeg == task.taskIdentifier
        if dropped || error != nil {
            // A head without a body byte (the connection broke before the provider's first one) still names the
            // stream: read it, or the drop ends an answer the relay keeps running, waiting for a resume.
            if leg != task.taskIdentifier, task.response != nil { start(task) }
            if dropped || error.map(Self.isTransient) == true, (200..<300).contains(status) || leg != task.taskIdentifier,
               reconnect() {
                return
            }
            // A leg the client closed itself (the watchdog, the drop hook) and could not resume timed out.
            end(throwing: dropped ? URLError(.timedOut) : Self.map(error ?? URLError(.networkConnectionLost)),
                relayEnded: false)
            return
        }
        if leg != task.taskIdentifier { start(task) }
        if !(200..<300).contains(status) {
            // A resume refused for an expired token: the stream is still there, so once more with a fresh token.
            // (The first leg's refusals are `SSERelayClient.runAttempts`'s; after its 2xx only resumes follow.)
            if streamID != nil, status == 401, resume?.canRefreshToken == true,
               RelayAPIError.response(status: status, headers: [:], body: errorBody, requestID: nil).isTokenExpired,
               shared.withLock({ s in defer { s.tokenRefreshed = true }; return !s.tokenRefreshed }),
               reconnect(refreshingToken: true) {
                return
            }
            // 503: the relay could not look the stream up (Redis or the attestation store did not answer), or only
            // the replica that owns it can serve it (its copy in Redis lost bytes). The stream is still there:
            // asked again with the reconnects' backoff, within the window.
            if streamID != nil, status == 503, reconnect() { return }
            // 429: a limit at the relay: the address's failed-authentication bucket (another app behind the same
            // address can empty it), or the stream's resumes. The stream is still there: asked again once
            // `Retry-After` (or the backoff, without one) has passed, if that is within the window.
            if streamID != nil, status == 429, reconnect(notBefore: retryAfterSeconds) { return }
            return endWithErrorAnswer()
        }
        // An event without its closing empty line is discarded, as the standard says; the chat layer notices a
        // missing [DONE].
        parser.finish()
        end(throwing: nil, relayEnded: true)
    }

    /// Ends the event stream with the non-2xx answer of the current leg (its body as far as it was kept).
    private func endWithErrorAnswer() {
        end(throwing: RelayAPIError.response(status: status, headers: response?.allHeaderFields ?? [:],
                                             body: errorBody, requestID: requestID),
            relayEnded: [404, 410, 502].contains(status))
    }

    /// Ends the event stream; `relayEnded` says whether the relay ended it (see `Shared.relayEnded`).
    private func end(throwing error: (any Error)?, relayEnded: Bool) {
        shared.withLock { state in
            state.finished = true
            if relayEnded { state.relayEnded = true }
        }
        if let error { continuation.finish(throwing: error) } else { continuation.finish() }
    }

    /// The current leg's `Retry-After` in seconds (whole seconds or an HTTP date, as `RelayAPIError` reads it,
    /// and at most `RelayAPIError.maxRetryAfter`), if it has one.
    private var retryAfterSeconds: TimeInterval? {
        response.flatMap { RelayAPIError.header("Retry-After", in: $0.allHeaderFields) }
            .flatMap { RelayAPIError.parseRetryAfter($0, now: Date()) }
            .map { min($0, RelayAPIError.maxRetryAfter) }
    }

    /// Asks for the rest of a named stream after a transient failure, unless the window has passed or the app
    /// has gone; not before `notBefore` seconds (a 429's `Retry-After`) nor before the backoff. Returns false when
    /// the failure must end the stream.
    private func reconnect(refreshingToken: Bool = false, notBefore: TimeInterval? = nil) -> Bool {
        guard let resume, let id = streamID else { return false }
        let waited = Date().timeIntervalSince(lastProgress)
        let backoff = reconnects == 0 || refreshingToken ? 0 : min(2.0, 0.25 * Double(1 << min(reconnects - 1, 3)))
        let delay = max(backoff, notBefore ?? 0)
        guard waited + delay < resume.window, !shared.withLock({ $0.finished }) else { return false }
        reconnects += 1
        let offset = received
        // Created and kept for a stop to cancel under one lock: a stop either comes first (and no reconnect starts)
        // or finds the Task. Kept after it was created, the Task could call the token and attestation providers
        // before a stop that came in between saw it (a thread preempted there, in CI).
        let scheduled = shared.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.reconnect = Task {
                do {
                    if delay > 0 { try await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
                    try Task.checkCancellation()
                    self.startLeg(try await resume.request(id, offset, refreshingToken))
                } catch {
                    // After a stop this finds the stream finished already, and changes nothing.
                    self.end(throwing: error, relayEnded: false)
                }
            }
            return true
        }
        // A stop that came first ended the stream already; returning false only finishes it again.
        if scheduled { resume.afterReconnectScheduled?() }
        return scheduled
    }

    /// Reads the head of `task`, a new leg: at its first body byte, or at its end when none came (cleanly or
    /// not). Reading it there avoids the `didReceive response:completionHandler:` callback, whose signature
    /// differs between Foundations.
    private func start(_ task: URLSessionTask) {
        let first = leg == nil
        leg = task.taskIdentifier
        started = true
        errorBody = []
        response = task.response as? HTTPURLResponse
        status = response?.statusCode ?? 0
        if (200..<300).contains(status) {
            lastHeard = Date()
            if first { lastProgress = lastHeard }
            shared.withLock { $0.answered = true }
            let contentType = response.flatMap { RelayAPIError.header("Content-Type", in: $0.allHeaderFields) }
            if !(contentType?.lowercased().hasPrefix("text/event-stream") ?? false) {
                end(throwing: SSERelayClientError(code: .notAnEventStream, status: status, contentType: contentType),
                    relayEnded: false)
                status = -1
            } else if first, resume != nil, let id = Self.streamID(in: response) {
                streamID = id
                shared.withLock { $0.streamID = id }
            }
        }
    }

    /// The resumable stream a head names: a 2xx `text/event-stream` answer with a valid `X-Relay-Stream`.
    static func streamID(in response: URLResponse?) -> String? {
        guard let response = response as? HTTPURLResponse, (200..<300).contains(response.statusCode),
              let contentType = RelayAPIError.header("Content-Type", in: response.allHeaderFields),
              contentType.lowercased().hasPrefix("text/event-stream"),
              let id = RelayAPIError.header(StreamWire.streamHeader, in: response.allHeaderFields),
              StreamWire.isValidID(id) else { return nil }
        return id
    }

    /// The failures after which a resumable stream asks for the rest: any URL loading error but a cancel. The
    /// relay already named the stream and answered 2xx, so whatever ended the connection (the network went away
    /// or stalled, a reset, or the body ending before its last chunk, which Linux's Foundation reports as code -1,
    /// "transfer closed with outstanding read data remaining") is worth one more question; the relay's answer to
    /// the resume (200, 404, 410, 416) decides.
    static func isTransient(_ error: any Error) -> Bool {
        let ns = error as NSError
        return ns.domain == NSURLErrorDomain && ns.code != NSURLErrorCancelled
    }

    /// URLSession reports its own cancellation as NSURLErrorCancelled (-999); Swift code expects
    /// `CancellationError`, so both ways of stopping look the same to the app.
    static func map(_ error: any Error) -> any Error {
        if let urlError = error as? URLError, urlError.code == .cancelled { return CancellationError() }
        let ns = error as NSError
        if ns.domain == NSURLErrorDomain && ns.code == NSURLErrorCancelled { return CancellationError() }
        return error
    }
}

/// A value behind a lock, for what the delegate queue and the app's side both touch. (The relay's `Locked` is in
/// `Support`, which the client library does not link.)
final class Protected<Value>: @unchecked Sendable {
    // Invariant for `@unchecked Sendable`: `value` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A count of streams: every stream's in the process (`EventStreamTask.live`), one client's (`StreamSession.live`).
final class LiveCounter: @unchecked Sendable {
    // Invariant for `@unchecked Sendable`: `value` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var value = 0

    func add(_ delta: Int) {
        lock.lock()
        value += delta
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
