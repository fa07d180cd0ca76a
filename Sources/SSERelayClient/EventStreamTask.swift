import Foundation
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
/// The event stream is unbounded but never holds much: the client library's own task takes each event as it
/// arrives (`SSERelayClient` bounds what waits for the app).
final class EventStreamTask: @unchecked Sendable {
    // Invariant for `@unchecked Sendable`: `parser`, `response`, `status`, `errorBody` and `started` are read and
    // written only inside `received` and `completed`, which the session's serial delegate queue runs one at a
    // time (maxConcurrentOperationCount = 1). `continuation` is Sendable; `requestID` and `maxErrorBodyBytes` are
    // immutable.
    private let continuation: AsyncThrowingStream<SSEEvent, any Error>.Continuation
    private let requestID: String?
    private let maxErrorBodyBytes: Int
    private var parser: SSEParser
    private var started = false
    private var status = 0
    private var response: HTTPURLResponse?
    private var errorBody: [UInt8] = []

    private init(continuation: AsyncThrowingStream<SSEEvent, any Error>.Continuation, requestID: String?,
                 maxErrorBodyBytes: Int, maxEventBytes: Int) {
        self.continuation = continuation
        self.requestID = requestID
        self.maxErrorBodyBytes = maxErrorBodyBytes
        parser = SSEParser(maxEventBytes: maxEventBytes)
        Self.live.add(1)
    }

    deinit { Self.live.add(-1) }

    /// Attempts alive: each is held by its session's delegate until its task completes, so a count that does not
    /// return to zero is a task that never ended (see `SSERelayClient.liveStreams`).
    static let live = LiveCounter()

    /// One started attempt: its events, and a way to end it early from outside the stream.
    struct Attempt: Sendable {
        var events: AsyncThrowingStream<SSEEvent, any Error>
        /// Closes the connection and ends `events`; idempotent.
        var cancel: @Sendable () -> Void
    }

    /// Starts the request at once on `session`. It ends when the stream ends, from either side: a consumer that
    /// cancels its Task or drops the stream, or `cancel`, closes the connection.
    static func start(_ request: URLRequest, in session: StreamSession, settings: SSERelayClient.Configuration) -> Attempt {
        var captured: AsyncThrowingStream<SSEEvent, any Error>.Continuation?
        let events = AsyncThrowingStream<SSEEvent, any Error>(bufferingPolicy: .unbounded) { captured = $0 }
        let continuation = captured!
        let attempt = EventStreamTask(continuation: continuation, requestID: request.value(forHTTPHeaderField: "X-Request-Id"),
                                      maxErrorBodyBytes: settings.maxErrorBodyBytes, maxEventBytes: settings.maxEventBytes)
        let task = session.start(request, for: attempt)
        continuation.onTermination = { _ in
            // Either side ended the stream: close the request (the relay then cancels the provider within
            // milliseconds). A task that already completed ignores this.
            task.cancel()
        }
        return Attempt(events: events, cancel: { continuation.finish() })
    }

    func received(_ data: Data, on task: URLSessionTask) {
        if !started { start(task) }
        if !(200..<300).contains(status) {
            let room = maxErrorBodyBytes - errorBody.count
            if room > 0 { errorBody.append(contentsOf: data.prefix(room)) }
            return
        }
        do {
            try data.withUnsafeBytes { buffer in
                try parser.parse(buffer) { continuation.yield($0) }
            }
        } catch let error as SSEParser.EventTooLarge {
            continuation.finish(throwing: SSERelayClientError(code: .eventTooLarge, limit: error.limit))
        } catch {
            continuation.finish(throwing: error)
        }
    }

    func completed(_ task: URLSessionTask, error: (any Error)?) {
        if let error {
            continuation.finish(throwing: Self.map(error))
            return
        }
        if !started { start(task) }
        if !(200..<300).contains(status) {
            continuation.finish(throwing: RelayAPIError.response(status: status, headers: response?.allHeaderFields ?? [:],
                                                                 body: errorBody, requestID: requestID))
            return
        }
        // An event without its closing empty line is discarded, as the standard says; the chat layer notices a
        // missing [DONE].
        parser.finish()
        continuation.finish()
    }

    /// The head is known once the first body bytes (or the end) arrive; reading it there avoids the
    /// `didReceive response:completionHandler:` callback, whose signature differs between Foundations.
    private func start(_ task: URLSessionTask) {
        started = true
        response = task.response as? HTTPURLResponse
        status = response?.statusCode ?? 0
        if (200..<300).contains(status) {
            let contentType = response.flatMap { RelayAPIError.header("Content-Type", in: $0.allHeaderFields) }
            if !(contentType?.lowercased().hasPrefix("text/event-stream") ?? false) {
                continuation.finish(throwing: SSERelayClientError(code: .notAnEventStream, status: status, contentType: contentType))
                status = -1
            }
        }
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

/// A count shared by every stream.
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
