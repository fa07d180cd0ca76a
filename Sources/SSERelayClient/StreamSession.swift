import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A client's one `URLSession`: every stream of an `SSERelayClient` is a data task of it, so connections (and TLS
/// sessions) are reused from one message to the next instead of being opened for each.
///
/// The session's delegate (`Router`) is session-level, the one kind that streams on every platform (see
/// `EventStreamTask`), and hands each task's callbacks to the attempt that started it. The session holds its
/// delegate strongly until it is invalidated: `invalidate()`, which the client's `deinit` calls, lets the running
/// tasks finish and then releases both.
struct StreamSession: Sendable {
    let session: URLSession
    private let router: Router
    /// Attempts of this session still alive (`SSERelayClient.liveStreamsOfThisClient`).
    let live = LiveCounter()

    init(configuration: URLSessionConfiguration) {
        router = Router()
        let queue = OperationQueue()
        queue.name = "SSERelayClient.session"
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    /// Creates the task for `request`, hands its callbacks to `attempt`, and starts it.
    func start(_ request: URLRequest, for attempt: EventStreamTask) -> URLSessionDataTask {
        let task = session.dataTask(with: request)
        // Before `resume()`: no callback of the task can arrive earlier.
        router.add(attempt, for: task)
        task.resume()
        return task
    }

    /// Sends a request whose answer is only looked at for one thing (a stop); `done` runs on the delegate queue
    /// once it answered or failed, true when the answer was 401 `token_expired`. A callback, not an `async`
    /// function: resuming a continuation would need a thread of the concurrency pool, which blocking work in the
    /// app can hold.
    func send(_ request: URLRequest, done: @escaping @Sendable (_ tokenExpired: Bool) -> Void) {
        session.dataTask(with: request) { data, response, _ in
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            done(status == 401 && RelayAPIError.response(status: status, headers: [:], body: data.map { Array($0) } ?? [],
                                                         requestID: nil).isTokenExpired)
        }.resume()
    }

    /// Runs `body` on the delegate queue after `delay`, one at a time with the tasks' callbacks. A Dispatch timer,
    /// not a Task: a concurrency pool kept busy by blocking work in the app cannot hold it up.
    func onDelegateQueue(after delay: TimeInterval, _ body: @escaping @Sendable () -> Void) {
        let queue = session.delegateQueue
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, delay)) { queue.addOperation(body) }
    }

    func invalidate() { session.finishTasksAndInvalidate() }

    /// Whether a running leg has its response head (`URLSessionTask.response` may be read on any thread). For
    /// tests: `URLSession.getAllTasks` reads the session's task registry off its queue on swift-corelibs-foundation,
    /// and crashed under AddressSanitizer while tasks came and went.
    var anyLegAnswered: Bool { router.anyTask { $0.response != nil } }

    /// The session-level delegate. Callbacks arrive one at a time on the session's serial queue.
    final class Router: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        // Invariant for `@unchecked Sendable`: `attempts` is read and written only while `lock` is held (attempts
        // are added on the caller's thread, found and removed on the delegate queue).
        private let lock = NSLock()
        private var attempts: [Int: (attempt: EventStreamTask, task: URLSessionTask)] = [:]

        func add(_ attempt: EventStreamTask, for task: URLSessionTask) {
            lock.lock()
            attempts[task.taskIdentifier] = (attempt, task)
            lock.unlock()
        }

        private func attempt(for task: URLSessionTask, removing: Bool) -> EventStreamTask? {
            lock.lock()
            defer { lock.unlock() }
            return removing ? attempts.removeValue(forKey: task.taskIdentifier)?.attempt : attempts[task.taskIdentifier]?.attempt
        }

        /// Whether a task not yet completed satisfies `test`.
        func anyTask(_ test: (URLSessionTask) -> Bool) -> Bool {
            lock.lock()
            defer { lock.unlock() }
            return attempts.values.contains { test($0.task) }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            attempt(for: dataTask, removing: false)?.received(data, on: dataTask)
        }

        /// Redirects are never followed, for every task of the session (streams, resumes, stops): the 3xx is the
        /// answer (a `RelayAPIError` for a stream). The relay never redirects, so one comes from something in
        /// between (a captive portal, a proxy, an attacker on a plain-HTTP path), and following it would send the
        /// request again, with its bearer token, App Check token or assertion, to wherever `Location` points:
        /// swift-corelibs-foundation copies every header to any host, and a 301/302/303 would also turn the POST
        /// into a GET without its body. The same policy on every platform, because this is the session's delegate.
        /// (The handler is not `@Sendable` here: a witness taking any closure matches both SDKs' requirement.)
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
            completionHandler(nil)
        }

        /// Terminal: the attempt is let go here, whatever ended the task.
        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            attempt(for: task, removing: true)?.completed(task, error: error)
        }
    }
}
