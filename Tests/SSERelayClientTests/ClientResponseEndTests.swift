import Foundation
import RelayTestSupport
import SSERelayClient
import TestHarness
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a response that does not end as it should still ends the request in time: an answer held open after
/// `[DONE]`, an error body that does not end. And what the client asks of the answer's encoding. The client talks
/// to a scripted upstream directly: these are the client's own rules.
///
/// Each scripted server holds its connection open until the client closes it, and the client's idle timeout is
/// long (30 s): without the rule under test the stream would end only at that timeout, and with a `URLError`.
@Suite("Client: responses that do not end", .serialized)
struct ClientResponseEndTests {
    static let question = ChatRequest(model: "gpt-4o-mini", messages: [.user("hi")])

    static func client(_ upstream: ScriptedUpstream, configure: (inout SSERelayClient.Configuration) -> Void = { _ in }) -> SSERelayClient {
        var configuration = SSERelayClient.Configuration(baseURL: URL(string: upstream.baseURL)!)
        configuration.idleTimeout = 30
        configure(&configuration)
        return SSERelayClient(configuration: configuration)
    }

    @Test("an answer held open after [DONE] is complete: the client ends the request doneGrace later, not at the idle timeout")
    func answerHeldOpenAfterDone() async throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 30)
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(ClientThroughRelayTests.chunk("the whole answer", finish: "stop"))
            try connection.writeChunk("data: [DONE]\n\n")
            closed.put(try connection.waitForPeerClose(timeout: 60))
        }
        let client = Self.client(upstream) { $0.doneGrace = 0.2 }
        var text = ""
        var summary: ChatSummary?
        for try await event in client.chat(Self.question) {
            switch event {
            case .chunk(let chunk): text += chunk.text ?? ""
            case .finished(let finished): summary = finished
            }
        }
        #expect(text == "the whole answer")
        #expect(summary?.finishReason == "stop")
        // The connection, which could not be reused, is closed by the client.
        _ = try closed.take(timeout: 30)
    }

    @Test("an answer that ends right after [DONE] leaves its connection for the next one (the grace is not waited out)")
    func answerEndingAfterDoneKeepsTheConnection() async throws {
        let upstream = try ScriptedUpstream { connection in
            for i in 1...2 { try ClientSessionTests.answer(connection, "answer \(i)") }
            _ = try connection.waitForPeerClose(timeout: 120)
        }
        // A grace far longer than the test: an answer that waited it out would fail the test's time limit.
        let client = Self.client(upstream) { $0.doneGrace = 600 }
        for i in 1...2 {
            var last: ChatSnapshot?
            for try await snapshot in client.chatSnapshots(Self.question) { last = snapshot }
            #expect(last?.text == "answer \(i)" && last?.isComplete == true)
        }
        #expect(upstream.acceptedConnections == 1)
    }

    @Test("an error answer longer than maxErrorBodyBytes ends once that much is read; a body that never ends is not waited for",
          arguments: [false, true])
    func errorBodyPastTheBound(chunked: Bool) async throws {
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 30)
            let body = #"{"error":{"message":"the provider is busy","type":"overloaded","code":"busy"}}"#
                + String(repeating: " ", count: 4000)
            if chunked {
                try connection.writeHead(status: 503, headers: [("Content-Type", "application/json"),
                                                                ("Transfer-Encoding", "chunked")])
                try connection.writeChunk(body)
            } else {
                // A length it never reaches.
                try connection.writeHead(status: 503, headers: [("Content-Type", "application/json"),
                                                                ("Content-Length", "10000000")])
                try connection.write(body)
            }
            closed.put(try connection.waitForPeerClose(timeout: 60))
        }
        let client = Self.client(upstream) { $0.maxErrorBodyBytes = 1000 }
        do {
            for try await _ in client.chat(Self.question) {}
            Issue.record("expected the 503")
        } catch let error as RelayAPIError {
            #expect(error.status == 503)
            #expect(error.code == "busy" && error.message == "the provider is busy")
        }
        _ = try closed.take(timeout: 30)
    }

    @Test("an error body within the bound is read to its end, as before, and its connection kept")
    func errorBodyWithinTheBound() async throws {
        let upstream = try ScriptedUpstream { connection in
            let body = #"{"error":{"message":"slow down","type":"rate_limit","code":"rate_limited"}}"#
            _ = try connection.readRequest(timeout: 30)
            try connection.writeHead(status: 429, headers: [("Content-Type", "application/json"),
                                                            ("Content-Length", String(body.utf8.count))])
            try connection.write(body)
            try ClientSessionTests.answer(connection, "after")
            _ = try connection.waitForPeerClose(timeout: 120)
        }
        let client = Self.client(upstream) { $0.maxErrorBodyBytes = 1000 }
        await #expect(throws: RelayAPIError.self) { for try await _ in client.chat(Self.question) {} }
        var last: ChatSnapshot?
        for try await snapshot in client.chatSnapshots(Self.question) { last = snapshot }
        #expect(last?.text == "after")
        #expect(upstream.acceptedConnections == 1)
    }

    @Test("requests to the relay ask for the identity encoding; an app's own choice is kept")
    func asksForIdentity() async throws {
        let upstream = try ScriptedUpstream { connection in
            for i in 1...2 { try ClientSessionTests.answer(connection, "answer \(i)") }
            _ = try connection.waitForPeerClose(timeout: 120)
        }
        let client = Self.client(upstream)
        for try await _ in client.chat(Self.question) {}
        var request = URLRequest(url: URL(string: upstream.baseURL + "/v1/chat/completions")!)
        request.httpMethod = "POST"
        request.httpBody = try Self.question.jsonBody()
        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        for try await _ in client.events(for: request) {}
        let requests = upstream.requests
        try #require(requests.count == 2)
        #expect(requests[0].headerValues("Accept-Encoding") == ["identity"])
        #expect(requests[1].headerValues("Accept-Encoding") == ["gzip"])
    }
}
