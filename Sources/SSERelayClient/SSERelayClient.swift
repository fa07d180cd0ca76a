import Foundation
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
/// holds at most `Configuration.maxBufferedEvents` values the app has not taken yet; a consumer that falls
/// further behind ends its request, and the stream throws `SSERelayClientError.consumerTooSlow` after the values
/// it holds. Snapshot streams never fall behind: they keep only the newest snapshot.
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
        /// Sent with every request (an app version, an `OpenAI-Beta` value). The client's own headers win.
        public var additionalHeaders: [String: String] = [:]
        /// How much of a non-2xx body is read to build the error.
        public var maxErrorBodyBytes = 64 * 1024
        /// The bound on one event (see `SSEParser.maxEventBytes`).
        public var maxEventBytes = SSEParser.defaultMaxEventBytes
        /// The most events (`events(for:)`) or chat events (`chat(_:)`) a stream holds that the app has not taken
        /// yet; past it the request ends with `SSERelayClientError.consumerTooSlow`. A chat answer streams tens
        /// of chunks a second, so the default is many seconds of a consumer that does not keep up.
        public var maxBufferedEvents = 1024
        /// Streams at once to one relay host over HTTP/1.1, each holding a connection for its whole answer (more
        /// wait for a free one; HTTP/2 carries them all on one). URLSession's default, 4 to 6, would make a 7th
        /// concurrent stream wait silently.
        public var maxConnectionsPerHost = 16
        /// A new `X-Request-Id` per attempt: 1–64 of `[A-Za-z0-9._-]`, so the relay keeps it and logs it.
        public var makeRequestID: @Sendable () -> String = { "app-" + UUID().uuidString.lowercased() }

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

    // MARK: - Raw events

    /// The events of any `text/event-stream` request through the relay. The client adds the bearer token (when
    /// the request has no `Authorization` and a token provider is set), an `X-Request-Id`, the idle timeout, and
    /// the token-expired retry. Non-2xx answers throw `RelayAPIError`. Holds at most
    /// `Configuration.maxBufferedEvents` events the app has not taken (see the type's summary).
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
        Self.makeStream(.bounded(configuration.maxBufferedEvents)) { sink in
            try await self.runAttempts(request) { events, _ in
                for try await event in events { try sink.yield(event) }
            }
        }
    }

    func makeChat(_ request: ChatRequest) -> (stream: AsyncThrowingStream<ChatEvent, any Error>, cancel: Cancel) {
        Self.makeStream(.bounded(configuration.maxBufferedEvents)) { sink in
            let summary = try await self.runChat(request) { chunk, _ in try sink.yield(.chunk(chunk)) }
            try sink.yield(.finished(summary))
        }
    }

    func makeSnapshots(_ request: ChatRequest) -> (stream: AsyncThrowingStream<ChatSnapshot, any Error>, cancel: Cancel) {
        Self.snapshotStream { onChunk in try await self.runChat(request, onChunk: onChunk) }
    }

    /// The snapshots of one chat, which `chat` runs (calling `onChunk` for each chunk); only the newest waits
    /// for the app.
    package static func snapshotStream(
        _ chat: @escaping @Sendable (_ onChunk: (ChatChunk, ChatStreamDecoder) throws -> Void) async throws -> ChatSummary
    ) -> (stream: AsyncThrowingStream<ChatSnapshot, any Error>, cancel: Cancel) {
        makeStream(.newestOnly) { sink in
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
        try await runAttempts(urlRequest) { events, requestID in
            var decoder = ChatStreamDecoder(requestID: requestID)
            for try await event in events {
                if case .chunk(let chunk) = try decoder.decode(event) { try onChunk(chunk, decoder) }
            }
            guard decoder.isComplete else { throw SSERelayClientError(code: .streamEndedEarly) }
            summary = ChatSummary(requestID: requestID, finishReason: decoder.finishReason, usage: decoder.usage,
                                  skippedChunks: decoder.skippedChunks)
        }
        guard let summary else { throw CancellationError() }
        return summary
    }

    /// Sends `base`, and once more with a refreshed token if the relay answers 401 `token_expired`. Each attempt
    /// gets its own request id and its own task on the client's session; an attempt's task is ended before the
    /// next starts and whenever `consume` returns or throws (a task ended mid-answer closes its connection).
    func runAttempts(_ base: URLRequest,
                     _ consume: (AsyncThrowingStream<SSEEvent, any Error>, String) async throws -> Void) async throws {
        let provider = base.value(forHTTPHeaderField: "Authorization") == nil ? configuration.tokenProvider : nil
        var refreshed = false
        var reattested = false
        while true {
            try Task.checkCancellation()
            var request = base
            let requestID = configuration.makeRequestID()
            request.setValue(requestID, forHTTPHeaderField: "X-Request-Id")
            for (name, value) in configuration.additionalHeaders where request.value(forHTTPHeaderField: name) == nil {
                request.setValue(value, forHTTPHeaderField: name)
            }
            if let provider, let token = try await provider(refreshed) {
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            }
            if let attestation = configuration.attestation {
                for (name, value) in try await attestation.headers(for: AttestedRequest(request)) {
                    request.setValue(value, forHTTPHeaderField: name)
                }
            }
            // URLRequest's own default (60 s) would otherwise apply on some platforms.
            request.timeoutInterval = configuration.idleTimeout
            try Task.checkCancellation()
            let attempt = EventStreamTask.start(request, in: session, settings: configuration)
            do {
                defer { attempt.cancel() }
                try await consume(attempt.events, requestID)
                return
            } catch let error as RelayAPIError where error.isTokenExpired && provider != nil && !refreshed {
                refreshed = true
            } catch let error as RelayAPIError where error.isAttestationRefusal && !reattested {
                // Once: the provider registers again or refreshes its token, and a new proof goes with the retry.
                reattested = true
                guard await configuration.attestation?.proofRefused(code: error.code ?? "") == true else { throw error }
            }
        }
    }

    /// What a stream holds that the app has not taken yet.
    enum Buffering {
        /// Snapshots: each replaces the one before.
        case newestOnly
        /// Everything, up to this many; one more ends the stream (`SSERelayClientError.consumerTooSlow`).
        case bounded(Int)
    }

    /// Where a producer puts a stream's values.
    struct Sink<T: Sendable>: Sendable {
        let continuation: AsyncThrowingStream<T, any Error>.Continuation
        let limit: Int?

        /// Throws `consumerTooSlow` when a bounded stream is full; the producer then ends, and its request.
        func yield(_ value: T) throws {
            if case .dropped = continuation.yield(value), let limit {
                throw SSERelayClientError(code: .consumerTooSlow, limit: limit)
            }
        }
    }

    /// A stream fed by a producer Task. The consumer cancelling or dropping the stream cancels the producer
    /// (and with it the attempt's request); `cancel` does the same for the scoped APIs.
    private static func makeStream<T: Sendable>(
        _ buffering: Buffering, _ produce: @escaping @Sendable (Sink<T>) async throws -> Void
    ) -> (stream: AsyncThrowingStream<T, any Error>, cancel: Cancel) {
        var captured: AsyncThrowingStream<T, any Error>.Continuation?
        let policy: AsyncThrowingStream<T, any Error>.Continuation.BufferingPolicy
        let limit: Int?
        switch buffering {
        case .newestOnly: (policy, limit) = (.bufferingNewest(1), nil)
        case .bounded(let n): (policy, limit) = (.bufferingOldest(max(1, n)), max(1, n))
        }
        let stream = AsyncThrowingStream<T, any Error>(bufferingPolicy: policy) { captured = $0 }
        let continuation = captured!
        let task = Task {
            do {
                try await produce(Sink(continuation: continuation, limit: limit))
                continuation.finish()
            } catch {
                continuation.finish(throwing: EventStreamTask.map(error))
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return (stream, {
            task.cancel()
            continuation.finish()
        })
    }

    private func url(for path: String) -> URL {
        var base = configuration.baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var tail = Substring(path)
        while tail.hasPrefix("/") { tail.removeFirst() }
        return URL(string: base + "/" + tail) ?? configuration.baseURL
    }
}
