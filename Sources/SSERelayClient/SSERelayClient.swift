import Foundation
import RelayWire
import SSE
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Streams chat answers (and any Server-Sent Events) through an SSE Relay, for iOS 16+, macOS 13+ and Linux.
///
/// Every stream it returns is one request that ends when the stream ends, from either side: cancelling the
/// consuming Task, leaving a `withChat` body, or the answer finishing all close the connection, and the relay
/// then cancels the provider. See README, "Client library", for the `break` trap this API is shaped around.
///
/// Each attempt carries its own `X-Request-Id`. A 401 `token_expired` makes the client ask the token provider
/// for a fresh token and retry once; the first attempt's request is ended before the second starts, so nothing
/// from a superseded attempt reaches the app.
///
/// One `URLSession` per client, shared by its streams: keep one client for the app's life (or per relay), so
/// connections and TLS sessions are reused across messages. Releasing the client lets its running streams
/// finish, then releases the session.
///
/// What waits for the app is bounded. The relay holds back the provider when the app's connection is slow (its
/// high/low water marks pause curl), but inside the app URLSession reads as fast as the network delivers: a data
/// task has no flow control (Apple documents that a suspended data task starts over when resumed). So a stream
/// holds at most `Configuration.maxBufferedEvents` values the app has not taken yet, and about
/// `Configuration.maxBufferedBytes` in them (at most two values more); a consumer that falls further behind
/// ends its request, and the stream throws `SSERelayClientError.consumerTooSlow` after the
/// values it holds. Snapshot streams never fall behind: they keep only the newest snapshot.
public final class SSERelayClient: Sendable {
    /// Returns the bearer token to send, or nil to send none. `forceRefresh` is true after the relay answered
    /// 401 `token_expired`: return a newly minted token then (Firebase: `getIDTokenForcingRefresh(true)`;
    /// Sign in with Apple: exchange through your backend).
    public typealias TokenProvider = @Sendable (_ forceRefresh: Bool) async throws -> String?

    public struct Configuration: Sendable {
        /// The relay's base URL, e.g. `https://relay.example.com` (a path prefix is kept).
        public var baseURL: URL
        /// The chat completions path under `baseURL`.
        public var chatPath = "/v1/chat/completions"
        public var tokenProvider: TokenProvider?
        /// Proof of the genuine app for every request (`AppAttestProvider`, `AppCheckProvider`); nil for none.
        public var attestation: (any RelayAttestationProvider)?
        /// The longest silence allowed between two body bytes (URLSession's `timeoutIntervalForRequest`, an idle
        /// timeout, whole seconds). URLSession's default of 60 s kills a model that thinks quietly; the default
        /// here is the relay's own upstream idle timeout (300 s) plus a margin, so the relay, which also cancels
        /// the provider, gives up first.
        public var idleTimeout: TimeInterval = 310
        /// The longest a whole stream may take (`timeoutIntervalForResource`).
        public var resourceTimeout: TimeInterval = 24 * 3600
        /// Sent with every request to the relay (an app version, an `OpenAI-Beta` value). The client's own headers
        /// win.
        public var additionalHeaders: [String: String] = [:]
        /// How much of a non-2xx body is read to build the error.
        public var maxErrorBodyBytes = 64 * 1024
        /// The bound on one event (see `SSEParser.maxEventBytes`).
        public var maxEventBytes = SSEParser.defaultMaxEventBytes
        /// The most events (`events(for:)`) or chat events (`chat(_:)`) a stream holds that the app has not taken
        /// yet; past it the request ends with `SSERelayClientError.consumerTooSlow`. A chat answer streams tens
        /// of chunks a second, so the default is many seconds of a consumer that does not keep up.
        public var maxBufferedEvents = 1024
        /// The most bytes those events may hold (`events(for:)`: each event's data, name and id; `chat(_:)`: each
        /// chunk's strings): when the next event comes while the ones before it hold more, the request ends the
        /// same way. Events are small, so the count bound usually comes first; this one keeps a few large events
        /// (each up to `maxEventBytes`) from holding 1 GiB. One event larger than this alone ends nothing.
        public var maxBufferedBytes = 8 << 20
        /// Streams at once to one relay host over HTTP/1.1, each holding a connection for its whole answer (more
        /// wait for a free one; HTTP/2 carries them all on one). URLSession's default, 4 to 6, would make a 7th
        /// concurrent stream wait silently.
        public var maxConnectionsPerHost = 16
        /// A new `X-Request-Id` per attempt: 1–64 of `[A-Za-z0-9._-]`, so the relay keeps it and logs it.
        public var makeRequestID: @Sendable () -> String = { "app-" + UUID().uuidString.lowercased() }
        /// On a route where the relay keeps streams resumable (`X-Relay-Stream`), how long after the last byte (or
        /// the first head) a dropped answer is still asked for again (the relay's `resume.windowSeconds`, 30 by default);
        /// 0 turns resuming off, and a dropped connection then ends the stream with its `URLError`.
        public var resumeWindow: TimeInterval = 30
        /// On a resumable stream, the longest silence after the response head before the connection is taken for
        /// dead, closed and resumed. A connection that died without a FIN or a reset (a NAT that forgot it, a
        /// handover) otherwise shows nothing until `idleTimeout`, long past `resumeWindow`. The relay writes a
        /// heartbeat after 15 s of silence (`routes[].heartbeatSeconds`), so a live stream is never this quiet.
        /// Keep it above the route's heartbeat interval, and below `resumeWindow`: the window counts from the
        /// last byte, so a stall found later could not be resumed (the relay may have let go of a stream that
        /// ended while the connection was dead `windowSeconds` after that end). Resume requests use it as their
        /// timeout too (the relay answers them at once, from what it kept). 0 turns the watchdog off.
        public var stallTimeout: TimeInterval = 20
        /// Drops the connection once after this many events, so the resume can be seen (`relay-chat
        /// --drop-after-events`, tests).
        package var dropAfterEvents: Int?
        /// After the app's stop on a resumable stream, how long the connection stays open waiting for the answer
        /// to its `DELETE`, which normally comes in milliseconds; past it the connection closes and the DELETE
        /// goes on alone (its own timeout is 5 s). The DELETE first, then the close: the relay then cancels the
        /// provider at once rather than keep the stream for a resume. Tests set it.
        package var stopGrace: TimeInterval = 2
        /// After a chat's `[DONE]`, how long the client waits for the relay to end the response (its last chunk
        /// follows `[DONE]` at once) before it ends the request itself. The answer is complete either way; the
        /// wait only lets a connection that ends cleanly be reused. Without it, a response held open after
        /// `[DONE]` (a provider or anything in between that does not close) would be reported as a network
        /// failure at `idleTimeout`. On a resumable stream the request ends as after the app's stop (the
        /// `DELETE`, then the close), so that the relay lets go of the provider.
        public var doneGrace: TimeInterval = 2
        /// Tests: see `EventStreamTask.Resume.afterReconnectScheduled`.
        package var afterReconnectScheduled: (@Sendable () -> Void)?

        public init(baseURL: URL, tokenProvider: TokenProvider? = nil) {
            self.baseURL = baseURL
            self.tokenProvider = tokenProvider
        }

        /// The client's session: ephemeral (no cache, no cookies), the idle timeout and connection limit above.
        func sessionConfiguration() -> URLSessionConfiguration {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpMaximumConnectionsPerHost = maxConnectionsPerHost
            configuration.timeoutIntervalForRequest = idleTimeout
            configuration.timeoutIntervalForResource = resourceTimeout
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.urlCache = nil
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            return configuration
        }
    }

    public let configuration: Configuration
    private let session: StreamSession

    public init(configuration: Configuration) {
        self.configuration = configuration
        session = StreamSession(configuration: configuration.sessionConfiguration())
    }

    deinit { session.invalidate() }

    /// The session every stream of this client runs on (for tests).
    package var urlSession: URLSession { session.session }

    public convenience init(baseURL: URL, tokenProvider: TokenProvider? = nil) {
        self.init(configuration: Configuration(baseURL: baseURL, tokenProvider: tokenProvider))
    }

    /// Attempts still held by their session in this process (all clients). It returns to zero shortly after
    /// every stream has ended; a count that keeps growing is a leak. For `relay-chat` and the tests.
    package static var liveStreams: Int { EventStreamTask.live.count }

    /// The same count for this client's streams only: what a test reads while other tests' clients stream.
    package var liveStreamsOfThisClient: Int { session.live.count }

    /// Whether one of this client's running requests has its response head (for tests: no event shows it).
    package var anyLegAnswered: Bool { session.anyLegAnswered }

    // MARK: - Raw events

    /// The events of any `text/event-stream` request through the relay. The client adds the bearer token (when
    /// the request has no `Authorization` and a token provider is set), an `X-Request-Id`, the idle timeout, and
    /// the token-expired retry. Non-2xx answers throw `RelayAPIError`. Holds at most
    /// `Configuration.maxBufferedEvents` events the app has not taken (see the type's summary).
    ///
    /// Only a request to the relay's origin (`baseURL`'s scheme, host and port) gets the token, the proof of the
    /// genuine app, `additionalHeaders` and resumes: one to any other origin goes out as the app built it (with a
    /// request id and the idle timeout), so the user's token never reaches a third party.
    public func events(for request: URLRequest) -> AsyncThrowingStream<SSEEvent, any Error> {
        makeEvents(for: request).stream
    }

    /// `events(for:)` scoped to `body`: the request ends when `body` returns or throws, whatever it did with the
    /// stream.
    public func withEvents<R>(for request: URLRequest, isolation: isolated (any Actor)? = #isolation,
                              _ body: (AsyncThrowingStream<SSEEvent, any Error>) async throws -> R) async throws -> R {
        let (stream, cancel) = makeEvents(for: request)
        defer { cancel() }
        return try await body(stream)
    }

    // MARK: - Chat

    /// An OpenAI chat completion as it streams: `.chunk` per decoded delta, then `.finished` with the usage,
    /// finish reason and the count of skipped malformed chunks. Throws `RelayAPIError` (before or during the
    /// stream), `SSERelayClientError`, `URLError`, or `CancellationError`. Holds at most
    /// `Configuration.maxBufferedEvents` events the app has not taken (see the type's summary).
    public func chat(_ request: ChatRequest) -> AsyncThrowingStream<ChatEvent, any Error> {
        makeChat(request).stream
    }

    /// The answer so far, every time: a view replaces its text with each value. The last value has
    /// `isComplete == true` and the usage. Only the newest snapshot waits for the app: one that reads slowly
    /// skips the ones in between, never the last.
    public func chatSnapshots(_ request: ChatRequest) -> AsyncThrowingStream<ChatSnapshot, any Error> {
        makeSnapshots(request).stream
    }

    /// `chat(_:)` scoped to `body`: the request ends when `body` returns or throws (a `break` included), even if
    /// something else still holds the stream.
    public func withChat<R>(_ request: ChatRequest, isolation: isolated (any Actor)? = #isolation,
                            _ body: (AsyncThrowingStream<ChatEvent, any Error>) async throws -> R) async throws -> R {
        let (stream, cancel) = makeChat(request)
        defer { cancel() }
        return try await body(stream)
    }

    /// `chatSnapshots(_:)` scoped to `body`, like `withChat`.
    public func withChatSnapshots<R>(_ request: ChatRequest, isolation: isolated (any Actor)? = #isolation,
                                     _ body: (AsyncThrowingStream<ChatSnapshot, any Error>) async throws -> R) async throws -> R {
        let (stream, cancel) = makeSnapshots(request)
        defer { cancel() }
        return try await body(stream)
    }

    // MARK: - Building the streams

    package typealias Cancel = @Sendable () -> Void

    func makeEvents(for request: URLRequest) -> (stream: AsyncThrowingStream<SSEEvent, any Error>, cancel: Cancel) {
        Self.makeStream(.bounded(configuration.maxBufferedEvents, bytes: configuration.maxBufferedBytes, size: \.heldBytes)) { sink in
            try await self.runAttempts(request) { events, _, _ in
                for try await event in events { try sink.yield(event) }
            }
        }
    }

    func makeChat(_ request: ChatRequest) -> (stream: AsyncThrowingStream<ChatEvent, any Error>, cancel: Cancel) {
        Self.makeStream(.bounded(configuration.maxBufferedEvents, bytes: configuration.maxBufferedBytes, size: \.heldBytes)) { sink in
            let summary = try await self.runChat(request) { chunk, _ in try sink.yield(.chunk(chunk)) }
            try sink.yield(.finished(summary), final: true)
        }
    }

    /// A bounded stream fed by `produce`, which hands each value to `yield` (true: the last one): the count and
    /// byte bounds without a connection (tests).
    package static func boundedStream<T: Sendable>(
        count: Int, bytes: Int, size: @escaping @Sendable (T) -> Int,
        _ produce: @escaping @Sendable (_ yield: (T, Bool) throws -> Void) async throws -> Void
    ) -> AsyncThrowingStream<T, any Error> {
        makeStream(.bounded(count, bytes: bytes, size: size)) { sink in
            try await produce { value, final in try sink.yield(value, final: final) }
        }.stream
    }

    func makeSnapshots(_ request: ChatRequest) -> (stream: AsyncThrowingStream<ChatSnapshot, any Error>, cancel: Cancel) {
        Self.snapshotStream { onChunk in try await self.runChat(request, onChunk: onChunk) }
    }

    /// The snapshots of one chat, which `chat` runs (calling `onChunk` for each chunk); only the newest waits
    /// for the app. `afterStop` is for tests (see `makeStream`).
    package static func snapshotStream(
        afterStop: (@Sendable () -> Void)? = nil,
        _ chat: @escaping @Sendable (_ onChunk: (ChatChunk, ChatStreamDecoder) throws -> Void) async throws -> ChatSummary
    ) -> (stream: AsyncThrowingStream<ChatSnapshot, any Error>, cancel: Cancel) {
        makeStream(.newestOnly, afterStop: afterStop) { sink in
            var accumulator = ChatTextAccumulator()
            var skipped = 0
            let summary = try await chat { chunk, decoder in
                skipped = decoder.skippedChunks
                guard let piece = chunk.text, !piece.isEmpty else { return }
                try sink.yield(ChatSnapshot(text: accumulator.apply(.delta(piece)), requestID: decoder.requestID,
                                            finishReason: decoder.finishReason, usage: decoder.usage,
                                            skippedChunks: skipped))
            }
            try sink.yield(ChatSnapshot(text: accumulator.text, requestID: summary.requestID, isComplete: true,
                                        finishReason: summary.finishReason, usage: summary.usage,
                                        skippedChunks: summary.skippedChunks))
        }
    }

    /// One chat, attempts included: calls `onChunk` for each decoded chunk of the attempt that answers, and
    /// returns how it ended.
    private func runChat(_ request: ChatRequest,
                         onChunk: (ChatChunk, ChatStreamDecoder) throws -> Void) async throws -> ChatSummary {
        var urlRequest = URLRequest(url: url(for: configuration.chatPath))
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        urlRequest.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        urlRequest.httpBody = try request.jsonBody()
        var summary: ChatSummary?
        let doneGrace = configuration.doneGrace
        try await runAttempts(urlRequest) { events, requestID, endAttempt in
            var decoder = ChatStreamDecoder(requestID: requestID)
            var grace: DispatchWorkItem?
            defer { grace?.cancel() }
            for try await event in events {
                switch try decoder.decode(event) {
                case .chunk(let chunk):
                    try onChunk(chunk, decoder)
                case .done where grace == nil:
                    // The answer is complete; the response's end is only waited for (`Configuration.doneGrace`).
                    let item = DispatchWorkItem(block: endAttempt)
                    grace = item
                    DispatchQueue.global().asyncAfter(deadline: .now() + doneGrace, execute: item)
                case .done, .none:
                    break
                }
            }
            guard decoder.isComplete else { throw SSERelayClientError(code: .streamEndedEarly) }
            summary = ChatSummary(requestID: requestID, finishReason: decoder.finishReason, usage: decoder.usage,
                                  skippedChunks: decoder.skippedChunks)
        }
        guard let summary else { throw CancellationError() }
        return summary
    }

    /// Sends `base`, and once more with a refreshed token if the relay answers 401 `token_expired` (or with a new
    /// proof after an attestation refusal); never once a 2xx answer began. Each attempt gets its own request id
    /// and its own task on the client's session; an attempt's task is ended before the next starts and whenever
    /// `consume` returns or throws (a task ended mid-answer closes its connection). An answer on a resumable
    /// route goes on across dropped connections (`EventStreamTask`). `consume` gets the attempt's events, its
    /// request id, and a way to end it (the events then end cleanly after those already received).
    func runAttempts(_ base: URLRequest,
                     _ consume: (AsyncThrowingStream<SSEEvent, any Error>, String, @escaping Cancel) async throws -> Void) async throws {
        let toRelay = base.url.map { Self.isRelayOrigin($0, base: configuration.baseURL) } ?? false
        let provider = toRelay && base.value(forHTTPHeaderField: "Authorization") == nil ? configuration.tokenProvider : nil
        var refreshed = false
        var reattested = false
        while true {
            try Task.checkCancellation()
            let request = try await prepared(base, provider: provider, refreshed: refreshed, toRelay: toRelay)
            try Task.checkCancellation()
            let attempt = EventStreamTask.start(request, in: session, settings: configuration,
                                                resume: toRelay ? resumption(of: base, provider: provider) : nil)
            AttemptStopper.current?.register(attempt.cancel)
            do {
                defer { attempt.cancel() }
                try await consume(attempt.events, request.value(forHTTPHeaderField: "X-Request-Id") ?? "", attempt.cancel)
                return
            } catch let error as RelayAPIError where !attempt.answered() {
                // Only a refusal of this request is retried. Once it was answered 2xx the provider runs (and is
                // paid): a later refusal (of a resume, say) ends the stream, or the app would see the text twice.
                if error.isTokenExpired && provider != nil && !refreshed {
                    refreshed = true
                } else if error.isAttestationRefusal && !reattested {
                    // Once: the provider registers again or refreshes its token, and a new proof goes with the retry.
                    reattested = true
                    guard await configuration.attestation?.proofRefused(code: error.code ?? "") == true else { throw error }
                } else {
                    throw error
                }
            }
        }
    }

    /// `request` as it goes out: a new request id, the additional headers, `Accept-Encoding: identity` (unless
    /// the caller set one), the bearer token (unless the caller set `Authorization`), the proof of the genuine
    /// app over exactly these bytes, and the idle timeout; to another origin than the relay's (`toRelay` false),
    /// only the request id and the timeout.
    ///
    /// `identity`, as the relay asks of the provider: the relay never compresses, and something in between that
    /// would (an ingress) holds events back to fill its compressor. URLSession's own default asks for gzip and
    /// more.
    private func prepared(_ request: URLRequest, provider: TokenProvider?, refreshed: Bool,
                          toRelay: Bool = true) async throws -> URLRequest {
        var request = request
        request.setValue(configuration.makeRequestID(), forHTTPHeaderField: "X-Request-Id")
        for (name, value) in configuration.additionalHeaders where toRelay && request.value(forHTTPHeaderField: name) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        if toRelay && request.value(forHTTPHeaderField: "Accept-Encoding") == nil {
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        if let provider, let token = try await provider(refreshed) {
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        }
        // A stream stopped while the token provider ran (a resume being built) asks for no proof.
        try Task.checkCancellation()
        if toRelay, let attestation = configuration.attestation {
            for (name, value) in try await attestation.headers(for: AttestedRequest(request)) {
                request.setValue(value, forHTTPHeaderField: name)
            }
        }
        // URLRequest's own default (60 s) would otherwise apply on some platforms.
        request.timeoutInterval = configuration.idleTimeout
        return request
    }

    /// How an answer to `base` resumes and stops, with the same credentials; nil when resuming is off.
    private func resumption(of base: URLRequest, provider: TokenProvider?) -> EventStreamTask.Resume? {
        guard configuration.resumeWindow > 0 else { return nil }
        let callerAuthorization = base.value(forHTTPHeaderField: "Authorization")
        let make: @Sendable (String, String, Bool) async throws -> URLRequest = { method, target, refresh in
            var request = URLRequest(url: self.url(for: target))
            request.httpMethod = method
            if method == "GET" { request.setValue("text/event-stream", forHTTPHeaderField: "Accept") }
            if let callerAuthorization { request.setValue(callerAuthorization, forHTTPHeaderField: "Authorization") }
            return try await self.prepared(request, provider: provider, refreshed: refresh)
        }
        return EventStreamTask.Resume(
            window: configuration.resumeWindow,
            stallTimeout: configuration.stallTimeout,
            request: { id, offset, refresh in
                var request = try await make("GET", StreamWire.resumeTarget(id: id, offset: offset), refresh)
                if self.configuration.stallTimeout > 0 {
                    // Whole seconds, rounded up: Linux's Foundation drops the fraction, and a 0 s timeout fires
                    // at once.
                    request.timeoutInterval = min(request.timeoutInterval, self.configuration.stallTimeout.rounded(.up))
                }
                return request
            },
            stop: { id, refresh in
                var request = try await make("DELETE", StreamWire.stopTarget(id: id), refresh)
                request.timeoutInterval = 5
                return request
            },
            stopGrace: configuration.stopGrace,
            canRefreshToken: provider != nil,
            dropAfterEvents: configuration.dropAfterEvents,
            afterReconnectScheduled: configuration.afterReconnectScheduled)
    }

    /// What a stream holds that the app has not taken yet.
    enum Buffering<T> {
        /// Snapshots: each replaces the one before.
        case newestOnly
        /// Everything, up to `count` values and about `bytes` bytes (a value's `size`; see `Sink.yield`); past
        /// either the stream ends (`SSERelayClientError.consumerTooSlow`).
        case bounded(Int, bytes: Int = .max, size: @Sendable (T) -> Int = { _ in 0 })
    }

    /// The sizes of the values a bounded stream holds, oldest first. The stream says how many it holds after each
    /// yield (`remaining`), and the app takes them oldest first, so those are the newest that many.
    package final class HeldBytes: Sendable {
        private let state = Protected((sizes: [Int](), first: 0, total: 0))

        package init() {}

        /// Adds a value of `size` bytes; `held` values (this one included) are still in the stream. Returns
        /// the bytes they hold.
        package func add(_ size: Int, held: Int) -> Int {
            state.withLock { s in
                s.sizes.append(size)
                s.total += size
                while s.sizes.count - s.first > held {
                    s.total -= s.sizes[s.first]
                    s.first += 1
                }
                if s.first > 64, s.first * 2 > s.sizes.count {
                    s.sizes.removeFirst(s.first)
                    s.first = 0
                }
                return s.total
            }
        }
    }

    /// Where a producer puts a stream's values.
    struct Sink<T: Sendable>: Sendable {
        let continuation: AsyncThrowingStream<T, any Error>.Continuation
        let limit: Int?
        var byteLimit = Int.max
        var size: @Sendable (T) -> Int = { _ in 0 }
        let held = HeldBytes()

        /// Throws `consumerTooSlow` when a bounded stream is full, by count or by bytes; the producer then ends,
        /// and its request.
        ///
        /// By bytes, the values held besides this one decide: the app is still more than `byteLimit` behind when
        /// the next value comes. So one large value the app has not taken yet ends nothing (it may be busy with
        /// the one before), and a `final` value (a chat's `.finished`) never turns a complete answer into an error.
        /// What a stream holds is then at most `byteLimit` and two values.
        func yield(_ value: T, final: Bool = false) throws {
            switch continuation.yield(value) {
            case .dropped:
                if let limit { throw SSERelayClientError(code: .consumerTooSlow, limit: limit) }
            case .enqueued(let remaining):
                guard let limit, byteLimit < .max else { return }
                let bytes = size(value)
                let count = limit - remaining
                let total = held.add(bytes, held: count)
                if !final, count > 1, total - bytes > byteLimit {
                    throw SSERelayClientError(code: .consumerTooSlow, byteLimit: byteLimit)
                }
            case .terminated:
                return
            @unknown default:
                return
            }
        }
    }

    /// Ends a stream's running attempt from the thread that stops the stream. Cancelling the producer Task alone
    /// would close the connection only once that Task runs again (when it was not suspended on the attempt's
    /// events), and that needs a thread of the concurrency pool: blocking work in the app (or a long synchronous
    /// test, under ThreadSanitizer for 90 s and more) would keep the connection, and the provider, going.
    final class AttemptStopper: Sendable {
        // `state` is behind its own lock; the registered closure is Sendable.
        private let state = Protected<(stopped: Bool, cancel: Cancel?)>((false, nil))

        /// The stopper of the stream the current producer Task feeds (`makeStream` sets it).
        @TaskLocal static var current: AttemptStopper?

        /// Makes `cancel` the one `stop` runs; runs it at once if the stream has already stopped.
        func register(_ cancel: @escaping Cancel) {
            let stopped = state.withLock { state -> Bool in
                if !state.stopped { state.cancel = cancel }
                return state.stopped
            }
            if stopped { cancel() }
        }

        /// Ends the registered attempt (idempotent).
        func stop() {
            state.withLock { state -> Cancel? in
                state.stopped = true
                defer { state.cancel = nil }
                return state.cancel
            }?()
        }
    }

    /// A stream fed by a producer Task. The consumer cancelling or dropping the stream cancels the producer
    /// and ends the attempt's request at once, on the thread that stopped (`AttemptStopper`); `cancel` does the
    /// same for the scoped APIs.
    ///
    /// A consumer's cancel ends the stream with `CancellationError`, never with what the producer throws as it
    /// stops: its cancellation ends the attempt's events early, so `runChat` sees a stream without `[DONE]`
    /// (`streamEndedEarly`), and the stream takes a `finish(throwing:)` that comes while its termination handler
    /// (which cancels the producer) still runs on the consumer's side. So the handler finishes the stream first,
    /// and a cancelled producer ends it with `CancellationError` too (for a stream whose first finish does not win).
    ///
    /// `afterStop` (tests) runs in the stream's termination handler right after the producer was cancelled, on the
    /// thread that ended the stream: a test holds it there until the producer has thrown.
    private static func makeStream<T: Sendable>(
        _ buffering: Buffering<T>, afterStop: (@Sendable () -> Void)? = nil,
        _ produce: @escaping @Sendable (Sink<T>) async throws -> Void
    ) -> (stream: AsyncThrowingStream<T, any Error>, cancel: Cancel) {
        var captured: AsyncThrowingStream<T, any Error>.Continuation?
        let policy: AsyncThrowingStream<T, any Error>.Continuation.BufferingPolicy
        let sink: (AsyncThrowingStream<T, any Error>.Continuation) -> Sink<T>
        switch buffering {
        case .newestOnly:
            policy = .bufferingNewest(1)
            sink = { Sink(continuation: $0, limit: nil) }
        case .bounded(let n, let bytes, let size):
            policy = .bufferingOldest(max(1, n))
            sink = { Sink(continuation: $0, limit: max(1, n), byteLimit: max(1, bytes), size: size) }
        }
        let stream = AsyncThrowingStream<T, any Error>(bufferingPolicy: policy) { captured = $0 }
        let continuation = captured!
        let stopper = AttemptStopper()
        let task = Task {
            await AttemptStopper.$current.withValue(stopper) {
                do {
                    try await produce(sink(continuation))
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: Task.isCancelled ? CancellationError() : EventStreamTask.map(error))
                }
            }
        }
        continuation.onTermination = { termination in
            // First finish wins: the consumer's cancel ends the stream before the producer, cancelled next, can.
            if case .cancelled = termination { continuation.finish(throwing: CancellationError()) }
            stopper.stop()
            task.cancel()
            afterStop?()
        }
        return (stream, {
            stopper.stop()
            task.cancel()
            continuation.finish()
        })
    }

    /// Whether `url` has the origin of the relay's `base` (RFC 6454: scheme, host and port, the scheme's default
    /// port when none is written; case-insensitive).
    package static func isRelayOrigin(_ url: URL, base: URL) -> Bool {
        func origin(_ url: URL) -> (scheme: String, host: String, port: Int?)? {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
            return (scheme, host, url.port ?? ["http": 80, "https": 443][scheme])
        }
        guard let a = origin(url), let b = origin(base) else { return false }
        return a.scheme == b.scheme && a.host == b.host && a.port == b.port
    }

    private func url(for path: String) -> URL {
        var base = configuration.baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var tail = Substring(path)
        while tail.hasPrefix("/") { tail.removeFirst() }
        return URL(string: base + "/" + tail) ?? configuration.baseURL
    }
}

extension SSEEvent {
    /// What this event holds while it waits for the app (`Configuration.maxBufferedBytes`): its data, name and id.
    var heldBytes: Int { data.utf8.count + event.utf8.count + id.utf8.count }
}
