import Foundation
import RelayTestSupport
import SSE
import SSERelayClient
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
        try await eventually("the session is invalidated", timeout: 5) { session.delegate == nil }
    }

    @Test("an app that falls behind a chat stream ends its request; it gets every event held, then the error")
    func aConsumerThatFallsBehindEndsTheRequest() async throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try ClientThroughRelayTests.chunksThenWaitForClose((0..<20).map { "w\($0) " }, closed: closed, timeout: 10)
        let client = Self.client(upstream) { $0.maxBufferedEvents = 4 }
        let stream = client.chat(Self.question)
        // Nothing reads yet: the client ends the request itself rather than hold a fifth chunk.
        try await eventually("the upstream saw the request end", timeout: 10) { closed.count == 1 }
        var texts: [String] = []
        do {
            for try await event in stream {
                if case .chunk(let chunk) = event { texts.append(chunk.text ?? "") }
            }
            Issue.record("expected consumerTooSlow")
        } catch SSERelayClientError.consumerTooSlow {
        }
        #expect(texts == ["w0 ", "w1 ", "w2 ", "w3 "])
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
        try await eventually("all chunks produced", timeout: 10) { produced.count == 1 }
        var snapshots: [ChatSnapshot] = []
        for try await snapshot in stream { snapshots.append(snapshot) }
        #expect(snapshots.count <= 2, "\(snapshots.count) snapshots waited for the app")
        #expect(snapshots.last?.isComplete == true)
        #expect(snapshots.last?.text == (0..<100).map { "\($0) " }.joined())
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
    }
}
