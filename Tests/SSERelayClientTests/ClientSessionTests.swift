import Foundation
import RelayTestSupport
import SSE
import SSERelayClient
import Support
import TestHarness
import Testing
import TestSupportCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client's one URLSession (connections reused across messages, released with the client), what a stream
/// holds for an app that reads slowly, and the error types apps switch over. The client talks to a scripted
/// upstream directly: these are the client's own rules, not the relay's.
@Suite("Client session and buffering", .serialized)
struct ClientSessionTests {
    static let question = ChatRequest(model: "gpt-4o-mini", messages: [.user("hi")])

    static func client(_ upstream: ScriptedUpstream, configure: (inout SSERelayClient.Configuration) -> Void = { _ in }) -> SSERelayClient {
        var configuration = SSERelayClient.Configuration(baseURL: URL(string: upstream.baseURL)!)
        configure(&configuration)
        return SSERelayClient(configuration: configuration)
    }

    /// A whole short answer, chunked, after which the connection can carry the next request. The wait for the
    /// request is long: a stalled test process (a sanitizer run with every suite at once) must not turn a kept-alive
    /// connection into a closed one, which would look like a connection not reused.
    static func answer(_ connection: UpstreamConnection, _ text: String) throws {
        _ = try connection.readRequest(timeout: 120)
        try connection.writeHead(status: 200, headers: sseHead)
        try connection.writeChunk(ClientThroughRelayTests.chunk(text, finish: "stop"))
        try connection.writeChunk("data: [DONE]\n\n")
        try connection.writeLastChunk()
    }

    @Test("three messages from one client travel on one connection")
    func messagesReuseTheConnection() async throws {
        let upstream = try ScriptedUpstream { connection in
            for i in 1...3 { try Self.answer(connection, "answer \(i)") }
            _ = try connection.waitForPeerClose(timeout: 120)
        }
        let client = Self.client(upstream)
        for i in 1...3 {
            var last: ChatSnapshot?
            for try await snapshot in client.chatSnapshots(Self.question) { last = snapshot }
            #expect(last?.text == "answer \(i)" && last?.isComplete == true)
        }
        #expect(upstream.requests.count == 3)
        #expect(upstream.acceptedConnections == 1, "a connection per message: TCP (and TLS) set up again each time")
    }

    @Test("a released client invalidates its session once its streams have ended")
    func releasedClientInvalidatesItsSession() async throws {
        let upstream = try ScriptedUpstream { connection in
            try Self.answer(connection, "bye")
            _ = try connection.waitForPeerClose(timeout: 10)
        }
        var client: SSERelayClient? = Self.client(upstream)
        let session = client!.urlSession
        for try await _ in client!.chat(Self.question) {}
        #expect(session.delegate != nil)
        client = nil
        // A session holds its delegate until it is invalidated (and on Apple platforms itself too: a leak per
        // client); invalidation lets go of the delegate.
        try await eventually("the session is invalidated", timeout: 5 * ClientThroughRelayTests.slowdown) { session.delegate == nil }
    }

    @Test("an app that falls behind a chat stream ends its request; it gets every event held, then the error")
    func aConsumerThatFallsBehindEndsTheRequest() async throws {
        let (texts, error) = try await Self.fallBehind((0..<20).map { "w\($0) " }, closedAfter: 4) { $0.maxBufferedEvents = 4 }
        #expect(texts == ["w0 ", "w1 ", "w2 ", "w3 "])
        #expect(error?.limit == 4 && error?.byteLimit == nil)
    }

    @Test("an app that falls behind by bytes ends its request: every event held, then the error with the byte bound")
    func aConsumerThatFallsBehindByBytesEndsTheRequest() async throws {
        // Twenty chunks of 10 000 bytes of text each, and a bound of 25 000 bytes: the three held before the
        // fourth pass it, so the fourth ends the request.
        let sent = (0..<20).map { String(repeating: Character(String($0 % 10)), count: 10_000) }
        let (texts, error) = try await Self.fallBehind(sent, closedAfter: 3) { $0.maxBufferedBytes = 25_000 }
        #expect(texts == Array(sent.prefix(4)))
        #expect(error?.byteLimit == 25_000 && error?.limit == nil)
    }

    /// A chat of `sent` chunks that nothing reads until the client has ended its request (the upstream is held
    /// after chunk `closedAfter` until that close, so its next writes always find the connection gone: the order
    /// a loaded machine gave at times, when the upstream's script ended there without reporting it). Returns the
    /// texts the app then gets and the `consumerTooSlow` that ends them.
    static func fallBehind(_ sent: [String], closedAfter: Int, configure: (inout SSERelayClient.Configuration) -> Void)
        async throws -> (texts: [String], error: SSERelayClientError?) {
        let closed = Mailbox<PeerClose>()
        let upstream = try ClientThroughRelayTests.chunksThenWaitForClose(sent, closed: closed) { i, connection in
            if i == closedAfter { _ = try? connection.waitForPeerClose(timeout: 300) }
        }
        let client = Self.client(upstream, configure: configure)
        let stream = client.chat(Self.question)
        // Nothing reads yet: the client ends the request itself rather than hold more.
        try await eventually("the upstream saw the request end (script errors: \(upstream.scriptErrors))", timeout: 300) {
            closed.count == 1
        }
        var texts: [String] = []
        do {
            for try await event in stream {
                if case .chunk(let chunk) = event { texts.append(chunk.text ?? "") }
            }
            Issue.record("expected consumerTooSlow")
            return (texts, nil)
        } catch let error as SSERelayClientError where error.code == .consumerTooSlow {
            return (texts, error)
        }
    }

    /// Values of their own size, yielded with nothing reading; then read. Returns what the app got and the error.
    static func boundedRun(bytes: Int, _ values: [(Int, Bool)]) async throws -> (values: [Int], error: SSERelayClientError?) {
        let done = Mailbox<Int>()
        let stream = SSERelayClient.boundedStream(count: 100, bytes: bytes, size: { (v: Int) in v }) { yield in
            defer { done.put(1) }
            for (value, final) in values { try yield(value, final) }
        }
        try await eventually("every value produced", timeout: 10 * ClientThroughRelayTests.slowdown) { done.count == 1 }
        var got: [Int] = []
        do {
            for try await value in stream { got.append(value) }
            return (got, nil)
        } catch let error as SSERelayClientError {
            return (got, error)
        }
    }

    @Test("by bytes: the values held before the next one decide; a chat's last value never becomes an error")
    func theByteBoundWaitsForTheNextValue() async throws {
        let behind = try await Self.boundedRun(bytes: 15, [(10, false), (10, false), (10, false)])
        #expect(behind.values == [10, 10, 10])
        #expect(behind.error?.code == .consumerTooSlow && behind.error?.byteLimit == 15)
        let complete = try await Self.boundedRun(bytes: 15, [(10, false), (10, false), (10, true)])
        #expect(complete.values == [10, 10, 10] && complete.error == nil)
        let oneLarge = try await Self.boundedRun(bytes: 15, [(100, false)])
        #expect(oneLarge.values == [100] && oneLarge.error == nil, "one value larger than the bound, held alone")
    }

    @Test("by bytes: a large value the app has taken does not count; the next one alone ends nothing")
    func aTakenValueNoLongerCounts() async throws {
        let yielded = Mailbox<Int>()
        let taken = Mailbox<Int>()
        let stream = SSERelayClient.boundedStream(count: 100, bytes: 15, size: { (v: Int) in v }) { yield in
            try yield(100, false)
            yielded.put(1)
            try await eventually("the app took the first value", timeout: 60) { taken.count == 1 }
            try yield(1, false)
            try yield(1, false)
        }
        try await eventually("the first value is held", timeout: 10 * ClientThroughRelayTests.slowdown) { yielded.count == 1 }
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == 100)
        taken.put(1)
        var rest: [Int] = []
        while let value = try await iterator.next() { rest.append(value) }
        #expect(rest == [1, 1])
    }

    /// What a bounded stream counts as held: the newest `held` values' sizes, the older ones taken by the app.
    @Test func heldBytesCountsOnlyTheValuesStillHeld() {
        let held = SSERelayClient.HeldBytes()
        #expect(held.add(100, held: 1) == 100)
        #expect(held.add(50, held: 2) == 150)
        #expect(held.add(10, held: 1) == 10, "the app took the first two")
        #expect(held.add(7, held: 0) == 0, "handed straight to a waiting app")
        // A consumer that keeps up: a thousand values, never more than three held, the total stays theirs.
        var total = 0
        for i in 0..<1_000 {
            total = held.add(i, held: min(3, i + 1))
        }
        #expect(total == 997 + 998 + 999)
    }

    @Test("an app that reads snapshots slowly gets the newest one, not a backlog, and always the last")
    func slowSnapshotReaderGetsTheNewest() async throws {
        let produced = Mailbox<Int>()
        let (stream, _) = SSERelayClient.snapshotStream { onChunk in
            var decoder = ChatStreamDecoder(requestID: "r")
            for i in 0..<100 {
                if case .chunk(let chunk) = try decoder.decode(SSEEvent(data: ChatStreamDecoderTests.chunk("\(i) "))) {
                    try onChunk(chunk, decoder)
                }
            }
            produced.put(100)
            return ChatSummary(requestID: "r", finishReason: "stop", usage: nil, skippedChunks: 0)
        }
        // Every chunk was handed over before the app reads anything (the last snapshot follows the return).
        try await eventually("all chunks produced", timeout: 10 * ClientThroughRelayTests.slowdown) { produced.count == 1 }
        var snapshots: [ChatSnapshot] = []
        for try await snapshot in stream { snapshots.append(snapshot) }
        #expect(snapshots.count <= 2, "\(snapshots.count) snapshots waited for the app")
        #expect(snapshots.last?.isComplete == true)
        #expect(snapshots.last?.text == (0..<100).map { "\($0) " }.joined())
    }

    /// A producer's wait for its own cancellation.
    final class CancellationPoint: Sendable {
        private struct State {
            var waiter: CheckedContinuation<Void, Never>?
            var cancelled = false
        }
        private let state = HarnessMonitor(State())
        /// Put when the producer is suspended waiting.
        let waiting = Mailbox<Void>()

        func waitForCancellation() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                    let early = state.withLock { state -> Bool in
                        if state.cancelled { return true }
                        state.waiter = waiter
                        return false
                    }
                    if early { waiter.resume() } else { waiting.put(()) }
                }
            } onCancel: {
                state.withLock { state -> CheckedContinuation<Void, Never>? in
                    state.cancelled = true
                    defer { state.waiter = nil }
                    return state.waiter
                }?.resume()
            }
        }
    }

    /// The test's cancelling thread while it runs, by its pthread id (a Thread's `name` does not name it on Linux).
    /// Not `Thread.current.threadDictionary`: asked on a pool thread, that makes Foundation state for the pool thread,
    /// torn down at its exit, where ThreadSanitizer has crashed on Foundation's run loop before (`waitForExit`).
    static func currentThreadID() -> UInt {
        #if canImport(Glibc)
        UInt(pthread_self())   // an integer there
        #else
        UInt(bitPattern: pthread_self())   // a pointer on Darwin and musl
        #endif
    }

    @Test("a consumer cancelled while its producer ends the stream with another error gets CancellationError")
    func aCancelledConsumerGetsCancellationError() async throws {
        // What the client's own stack does on a cancel: the producer's cancellation ends the attempt's events early
        // and `runChat` throws streamEndedEarly. Here the producer throws it once cancelled, and the stream's
        // termination handler (which cancelled the producer) is held until the producer has thrown, so the
        // producer's error reaches the stream while the cancel is still in progress: the order TSan's timing
        // showed once, and the consumer then got streamEndedEarly. The producer needs a thread of the concurrency
        // pool, which a long synchronous test elsewhere can hold for up to 110 s under TSan: hence the 300 s bounds
        // (each wait ends as soon as its condition holds).
        var forcedRuns = 0
        for _ in 0..<20 where forcedRuns == 0 {
            // "ended" (held on the test's thread until the producer threw), "pool" (the handler ran on a thread of
            // the pool, which the producer may need: not held), or "timeout".
            let how = Mailbox<String>()
            let point = CancellationPoint()
            let threw = Mailbox<Void>()
            let canceller = Locked<UInt?>(nil)   // cleared before the thread ends, so a reused id is no match
            let afterStop: @Sendable () -> Void = {
                guard canceller.withLock({ $0 }) == Self.currentThreadID() else { return how.put("pool") }
                how.put((try? threw.take(timeout: 300)) != nil ? "ended" : "timeout")
            }
            let (stream, _) = SSERelayClient.snapshotStream(afterStop: afterStop) { onChunk in
                var decoder = ChatStreamDecoder(requestID: "r")
                if case .chunk(let chunk) = try decoder.decode(SSEEvent(data: ChatStreamDecoderTests.chunk("a"))) {
                    try onChunk(chunk, decoder)
                }
                await point.waitForCancellation()
                threw.put(())
                throw SSERelayClientError(code: .streamEndedEarly)
            }
            let seen = Mailbox<String>()
            let consumer = Task {
                for try await snapshot in stream { seen.put(snapshot.text) }
            }
            try await eventually("the first snapshot read", timeout: 300) { seen.count == 1 }
            try await eventually("the producer waiting", timeout: 300) { point.waiting.count == 1 }
            // Cancelled from a thread outside the pool; the consumer is then normally suspended in `next()`, and the
            // stream's termination handler runs on this thread.
            Thread {
                canceller.withLock { $0 = Self.currentThreadID() }
                consumer.cancel()
                canceller.withLock { $0 = nil }
            }.start()
            let result = await consumer.result
            try await eventually("the cancel handled", timeout: 300) { how.count == 1 }
            let outcome = try how.take(timeout: 0)
            guard outcome != "timeout" else {
                Issue.record("the producer did not end while the cancel was held")
                break
            }
            guard outcome == "ended" else { continue }
            forcedRuns += 1
            switch result {
            case .success: Issue.record("the cancelled consumer's loop ended without CancellationError")
            case .failure(let error): #expect(error is CancellationError, "\(error)")
            }
        }
        #expect(forcedRuns == 1, "the order was forced in one of 20 runs")
    }

    @Test("error codes and kinds match in catch and switch; an unknown one reaches default")
    func errorsAreOpenSets() {
        func classify(_ error: any Error) -> String {
            switch error {
            case SSERelayClientError.streamEndedEarly: return "early"
            case SSERelayClientError.consumerTooSlow: return "slow"
            case let error as RelayAPIError:
                switch error.kind {
                case .rateLimited: return "wait"
                case .unauthorized, .tokenExpired: return "sign in"
                default: return "api"
                }
            default: return "other"
            }
        }
        #expect(classify(SSERelayClientError(code: .consumerTooSlow, limit: 4)) == "slow")
        #expect(classify(SSERelayClientError(code: .streamEndedEarly)) == "early")
        #expect(classify(SSERelayClientError(code: .init(rawValue: "added_later"))) == "other")
        #expect(classify(RelayAPIError(status: 429, type: nil, code: nil, message: "slow down")) == "wait")
        #expect(classify(RelayAPIError(status: 401, type: nil, code: "token_expired", message: "")) == "sign in")
        #expect(classify(RelayAPIError(status: 409, type: nil, code: nil, message: "")) == "api")
        #expect(classify(CancellationError()) == "other")
        #expect(SSERelayClientError(code: .consumerTooSlow, limit: 4).description == "the app fell 4 events behind the stream")
        #expect(SSERelayClientError(code: .consumerTooSlow, byteLimit: 8 << 20).description == "the app fell 8388608 bytes behind the stream")
    }
}
