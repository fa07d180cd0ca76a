import Auth
import COpenSSL
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import SSE
import SSERelayClient
import Support
import TestHarness
import Testing
import TestSupportCore

/// The client library against the real relay on port 0, in front of either the relay's dev fake provider or a
/// scripted upstream. Serialized: the leak check reads process-wide counts of the client's streams.
@Suite("Client through the relay", .serialized)
struct ClientThroughRelayTests {
    // MARK: Fixtures

    /// The relay in front of its own dev fake provider, as `sse-relay --dev` runs it.
    final class DevRelay: Sendable {
        let provider: FakeProvider
        let relay: RelayFixture

        init(paceSeconds: Double = 0.001, configure: (inout RelayConfiguration) -> Void = { _ in }) throws {
            provider = FakeProvider(paceSeconds: paceSeconds, logger: Logger(label: "fake", level: .error, sink: MemoryLogSink()))
            try provider.start()
            relay = try RelayFixture(upstream: nil, baseURL: provider.baseURL) { configuration in
                configuration.upstreams["test"]!.key = Secret(FakeProvider.devKey)
                configure(&configuration)
            }
        }

        deinit { provider.shutdown() }
    }

    static func client(_ port: Int, configure: (inout SSERelayClient.Configuration) -> Void = { _ in }) -> SSERelayClient {
        var configuration = SSERelayClient.Configuration(baseURL: URL(string: "http://127.0.0.1:\(port)")!)
        configure(&configuration)
        return SSERelayClient(configuration: configuration)
    }

    static let question = ChatRequest(model: "gpt-4o-mini", messages: [.user("hi")])

    /// `sanitizerSlowdown`: the bounds of waits and latency checks that cross the relay's threads are multiplied
    /// by it.
    static let slowdown = sanitizerSlowdown

    static func event(_ json: String) -> String { "data: \(json)\n\n" }

    static func chunk(_ text: String, finish: String? = nil) -> String { event(ChatStreamDecoderTests.chunk(text, finish: finish)) }

    /// An upstream that streams one chat chunk per text, then waits (up to `timeout` s) for the peer to close its
    /// connection and reports the close to `closed`. The bound is long: the client reads the chunks in a Task, and
    /// under a sanitizer a long synchronous test can hold the concurrency pool's threads for 90 s and more; the
    /// wait ends at the close. A peer that closes while chunks are still to be written (a client that ends its
    /// request after the first few) is that close too: a write after it fails with EPIPE or ECONNRESET, and the
    /// script would otherwise end there without reporting it. `afterChunk` (tests) runs after each chunk written,
    /// with its index.
    static func chunksThenWaitForClose(_ texts: [String], closed: Mailbox<PeerClose>, timeout: Double = 300,
                                       afterChunk: (@Sendable (Int, UpstreamConnection) -> Void)? = nil) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            writing: for (i, text) in texts.enumerated() {
                do {
                    try connection.writeChunk(Self.chunk(text))
                } catch HarnessError.brokenPipe, HarnessError.connectionReset {
                    break writing
                }
                afterChunk?(i, connection)
            }
            closed.put(try connection.waitForPeerClose(timeout: timeout))
        }
    }

    /// The fake provider's answer as the tokens it streams (words with their leading space).
    static var fakeTokens: [String] {
        var tokens: [String] = []
        var current = ""
        for ch in FakeProvider.answer {
            if ch == " " && !current.isEmpty {
                tokens.append(current)
                current = ""
            }
            current.append(ch)
        }
        tokens.append(current)
        return tokens
    }

    /// Waits (bounded) until every stream of the client library has released its URLSession.
    /// `client`'s streams are all let go (counted per client: other suites' clients stream meanwhile).
    static func waitForNoLiveStreams(_ client: SSERelayClient, timeout: Double = 2 * slowdown) async throws {
        try await eventually("every stream released: \(client.liveStreamsOfThisClient) live", timeout: timeout) {
            client.liveStreamsOfThisClient == 0
        }
    }

    // MARK: Streaming

    @Test("snapshots: every value is the whole answer so far, and the last equals the fake provider's text")
    func snapshotsEqualProviderText() async throws {
        let dev = try DevRelay()
        let client = Self.client(dev.relay.port)
        var snapshots: [ChatSnapshot] = []
        for try await snapshot in client.chatSnapshots(Self.question) { snapshots.append(snapshot) }
        // Only the newest snapshot waits for the reader, so one may be skipped; each is the answer so far, at a
        // token boundary, longer than the one before.
        let tokens = Self.fakeTokens
        let prefixes = (1...tokens.count).map { tokens[0..<$0].joined() }
        #expect(snapshots.count >= 1 && snapshots.count <= tokens.count + 1)
        var previous = -1
        for (i, snapshot) in snapshots.dropLast().enumerated() {
            let index = prefixes.firstIndex(of: snapshot.text)
            #expect(index != nil, "snapshot \(i) is not the answer so far")
            #expect((index ?? -1) > previous, "snapshot \(i) is not newer than the one before")
            previous = index ?? previous
            #expect(!snapshot.isComplete)
        }
        let last = try #require(snapshots.last)
        #expect(last.text == FakeProvider.answer)
        #expect(last.isComplete && last.finishReason == "stop" && last.skippedChunks == 0)
        #expect(Set(snapshots.map(\.requestID)).count == 1)

        // The delta stream: appended once, the same text; `.finished` is the last element.
        var text = ""
        var summary: ChatSummary?
        for try await event in client.chat(Self.question) {
            switch event {
            case .chunk(let chunk): text += chunk.text ?? ""
            case .finished(let s): summary = s
            }
        }
        #expect(text == FakeProvider.answer)
        #expect(summary?.finishReason == "stop")
        try dev.relay.waitUntilIdle()
        #expect(dev.relay.logs.lines.filter { $0.contains(#""outcome":"completed""#) }.count == 2)
    }

    @Test("Stop after 3 events in withChat: the relay logs client_cancelled and the upstream sees its connection close")
    func stopAfterThreeEvents() async throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try Self.chunksThenWaitForClose(["One", " two", " three"], closed: closed)
        let relay = try RelayFixture(upstream: upstream)
        let client = Self.client(relay.port)
        var kept: AsyncThrowingStream<ChatEvent, any Error>?
        var received: [String] = []
        try await client.withChat(Self.question) { stream in
            // Something else still holds the stream: a plain `break` alone would not end the request here.
            kept = stream
            for try await event in stream {
                if case .chunk(let chunk) = event { received.append(chunk.text ?? "") }
                if received.count == 3 { break }
            }
        }
        let stoppedAt = monotonicNanoseconds()
        try await eventually("the upstream saw the close", timeout: 2 * Self.slowdown) { closed.count == 1 }
        let close = try closed.take(timeout: 0)
        let ms = Double(close.atNanoseconds - min(close.atNanoseconds, stoppedAt)) / 1e6
        #expect(received == ["One", " two", " three"])
        #expect(ms < 1000 * Self.slowdown, "upstream closed \(ms) ms after Stop")
        try relay.waitUntilIdle(timeout: 2 * Self.slowdown)
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
        withExtendedLifetime(kept) {}
        try await Self.waitForNoLiveStreams(client)
    }

    @Test("cancelling the consuming Task ends the request; the upstream sees its connection close")
    func taskCancellation() async throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try Self.chunksThenWaitForClose(["a", "b", "c"], closed: closed)
        let relay = try RelayFixture(upstream: upstream)
        let client = Self.client(relay.port)
        let (reachedThree, signal) = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var last = ""
            for try await snapshot in client.chatSnapshots(Self.question) {
                // Only the newest snapshot waits for a reader, so a slow one may skip "a" or "ab", never "abc".
                last = snapshot.text
                if last == "abc" { signal.yield() }
            }
            return last
        }
        for await _ in reachedThree { break }
        consumer.cancel()
        try await eventually("the upstream saw the close", timeout: 2 * Self.slowdown) { closed.count == 1 }
        // The loop ends without more values (or with CancellationError, never a URLError).
        switch await consumer.result {
        case .success(let last): #expect(last == "abc")
        case .failure(let error): #expect(error is CancellationError, "\(error)")
        }
        try relay.waitUntilIdle(timeout: 2 * Self.slowdown)
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
    }

    // MARK: Errors

    static let hmacSecret = "a-test-hmac-secret-of-at-least-32-bytes!"

    static func hs256(expiresIn seconds: Double) -> String {
        let now = Date().timeIntervalSince1970
        func b64(_ object: [String: Any]) -> String {
            Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        }
        let input = b64(["alg": "HS256", "typ": "JWT"]) + "."
            + b64(["iss": "test-issuer", "aud": "relay", "sub": "user-1", "iat": Int(now) - 10, "exp": Int(now + seconds)])
        let key = Array(hmacSecret.utf8)
        let message = Array(input.utf8)
        var mac = [UInt8](repeating: 0, count: 32)
        _ = cossl_hmac_sha256(key, key.count, message, message.count, &mac)
        return input + "." + Base64URL.encode(mac)
    }

    static func jwtRelay() throws -> DevRelay {
        try DevRelay { configuration in
            configuration.routes = [.init(prefix: "/v1/", upstream: "test", auth: .jwt)]
            configuration.clients.jwt = .init(settings: .init(algorithms: [.hs256], issuers: ["test-issuer"], audiences: ["relay"]),
                                              hmacSecret: Secret(hmacSecret))
        }
    }

    /// Records the token provider's calls and hands out request ids "attempt-1", "attempt-2", ….
    final class Recorder: Sendable {
        let calls = HarnessMonitor<[Bool]>([])
        let ids = HarnessMonitor(0)
        func nextID() -> String { ids.withLock { $0 += 1; return "attempt-\($0)" } }
    }

    @Test("401 token_expired: exactly one refresh through the token provider, then the answer; each attempt has its own request id")
    func tokenExpiredRefreshesOnce() async throws {
        let dev = try Self.jwtRelay()
        let recorder = Recorder()
        let client = Self.client(dev.relay.port) { configuration in
            configuration.tokenProvider = { refresh in
                recorder.calls.withLock { $0.append(refresh) }
                return refresh ? Self.hs256(expiresIn: 600) : Self.hs256(expiresIn: -3600)
            }
            configuration.makeRequestID = { recorder.nextID() }
        }
        var last: ChatSnapshot?
        for try await snapshot in client.chatSnapshots(Self.question) { last = snapshot }
        #expect(last?.text == FakeProvider.answer)
        #expect(last?.requestID == "attempt-2")
        #expect(recorder.calls.withLock { $0 } == [false, true])
        try dev.relay.waitUntilIdle()
        let lines = dev.relay.logs.lines
        #expect(lines.contains { $0.contains(#""request_id":"attempt-1""#) && $0.contains(#""status":401"#) })
        #expect(lines.contains { $0.contains(#""request_id":"attempt-2""#) && $0.contains(#""status":200"#) })

        // A token that is still expired after the refresh: one refresh only, then the typed error.
        let stale = Recorder()
        let stuck = Self.client(dev.relay.port) { configuration in
            configuration.tokenProvider = { refresh in
                stale.calls.withLock { $0.append(refresh) }
                return Self.hs256(expiresIn: -3600)
            }
        }
        await #expect(throws: RelayAPIError.self) {
            for try await _ in stuck.chat(Self.question) {}
        }
        do {
            for try await _ in stuck.chat(Self.question) {}
        } catch let error as RelayAPIError {
            #expect(error.kind == .tokenExpired && error.status == 401)
        }
        #expect(stale.calls.withLock { $0 } == [false, true, false, true])
    }

    @Test("403 model_not_allowed from the relay and 429 with Retry-After from the provider are typed errors")
    func httpErrors() async throws {
        let dev = try DevRelay { configuration in
            configuration.routes = [.init(prefix: "/v1/", upstream: "test", bodyPolicy: BodyPolicy(models: ["gpt-4o-mini"]))]
        }
        let client = Self.client(dev.relay.port)
        do {
            for try await _ in client.chat(ChatRequest(model: "gpt-5", messages: [.user("hi")])) {}
            Issue.record("expected an error")
        } catch let error as RelayAPIError {
            #expect(error.kind == .modelNotAllowed && error.status == 403)
        }

        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            let body = #"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#
            try connection.writeHead(status: 429, headers: [("Content-Type", "application/json"), ("Retry-After", "7"),
                                                            ("Content-Length", String(body.utf8.count))])
            try connection.write(body)
        }
        let relay = try RelayFixture(upstream: upstream)
        do {
            for try await _ in Self.client(relay.port).chatSnapshots(Self.question) {}
            Issue.record("expected an error")
        } catch let error as RelayAPIError {
            #expect(error.kind == .rateLimited && error.status == 429 && error.retryAfter == 7 && error.code == "rate_limit_exceeded")
        }
    }

    @Test("a malformed chunk mid-stream is skipped and counted; the answer goes on")
    func malformedChunkSkipped() async throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(Self.chunk("Hello"))
            try connection.writeChunk("data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"brok\n\n")
            try connection.writeChunk(Self.chunk(" world", finish: "stop"))
            try connection.writeChunk("data: [DONE]\n\n")
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        var snapshots: [ChatSnapshot] = []
        for try await snapshot in Self.client(relay.port).chatSnapshots(Self.question) { snapshots.append(snapshot) }
        // A reader slower than the stream may miss the earlier snapshots (only the newest waits), never the last.
        #expect(snapshots.last?.text == "Hello world")
        #expect(snapshots.dropLast().allSatisfy { ["Hello", "Hello world"].contains($0.text) })
        #expect(snapshots.last?.isComplete == true)
        #expect(snapshots.last?.skippedChunks == 1)
    }

    @Test("budget_exhausted as a mid-stream error event ends the answer with a typed error")
    func budgetExhaustedMidStream() async throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(Self.chunk("Partial"))
            try connection.writeChunk(Self.event(#"{"error":{"message":"Budget used up.","type":"insufficient_quota","code":"budget_exhausted"}}"#))
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        var texts: [String] = []
        do {
            for try await snapshot in Self.client(relay.port).chatSnapshots(Self.question) { texts.append(snapshot.text) }
            Issue.record("expected an error")
        } catch let error as RelayAPIError {
            #expect(error.kind == .budgetExhausted && error.status == nil && error.message == "Budget used up.")
        }
        #expect(texts == ["Partial"])
    }

    @Test("a stream that ends without [DONE] or a finish reason is reported, not shown as complete")
    func truncatedStream() async throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(Self.chunk("Half an"))
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        await #expect(throws: SSERelayClientError(code: .streamEndedEarly)) {
            for try await _ in Self.client(relay.port).chatSnapshots(Self.question) {}
        }
    }

    @Test("the idle timeout is the configured one: a silent stream fails after it with URLError.timedOut")
    func idleTimeout() async throws {
        // The silence is timed at the upstream, on its own thread: from the last byte it sent to the close that
        // the client's timeout caused (through the relay's cancel). Timed in the test's task instead, it would
        // include the wait for a free thread of the async pool to resume the task, which tests blocking those
        // threads (two on a 2-core machine) stretched past 5 s under load.
        let closed = Mailbox<(sentAt: UInt64, close: PeerClose)>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            // Stamped before the write: the client cannot have the byte earlier, so a pause of this thread
            // after the write cannot shorten the silence measured.
            let sentAt = DispatchTime.now().uptimeNanoseconds   // PeerClose's clock
            try connection.writeChunk(Self.chunk("thinking"))
            closed.put((sentAt, try connection.waitForPeerClose(timeout: 10 * Self.slowdown)))
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = Self.client(relay.port) { $0.idleTimeout = 1 }
        do {
            for try await _ in client.chat(Self.question) {}
            Issue.record("expected a timeout")
        } catch let error as URLError {
            #expect(error.code == .timedOut)
        }
        try await eventually("the upstream saw the close", timeout: 2 * Self.slowdown) { closed.count == 1 }
        let (sentAt, close) = try closed.take(timeout: 0)
        let seconds = Double(Int64(bitPattern: close.atNanoseconds &- sentAt)) / 1e9
        // Not the 60 s URLSession default, nor the library's 310 s: the configured second.
        #expect(seconds >= 0.9 && seconds < 5 * Self.slowdown, "the upstream saw the close \(seconds) s after its last byte")
    }

    // MARK: Resources

    @Test("100 open-cancel cycles leave no URLSession, no client socket and no relay exchange behind",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func openCancelCycles() async throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(Self.chunk("first"))
            _ = try connection.waitForPeerClose(timeout: 10)
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = Self.client(relay.port)
        func cycle() async throws {
            try await client.withChat(Self.question) { stream in
                for try await _ in stream { break }
            }
        }
        for _ in 0..<5 { try await cycle() }
        try await Self.waitForNoLiveStreams(client)
        try relay.waitUntilIdle()
        for _ in 0..<100 { try await cycle() }
        try await Self.waitForNoLiveStreams(client)
        try relay.waitUntilIdle()
        try upstream.waitForScriptsToFinish(timeout: 5)
        #expect(upstream.acceptedConnections == 105)
        #expect(upstream.scriptErrors.isEmpty, "\(upstream.scriptErrors)")
        #expect(Self.clientSocketCount(relayPort: relay.port) == 0)
        #expect(relay.logs.lines.filter { $0.contains(#""outcome":"client_cancelled""#) }.count == 105)
    }

    /// Open descriptors of this process that are TCP sockets connected to the relay's port (the client's side).
    static func clientSocketCount(relayPort: Int) -> Int {
        (tcpSocketTable() ?? []).filter { $0.isOpenInThisProcess && $0.remotePort == relayPort }.count
    }
}
