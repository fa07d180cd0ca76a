// One chat request never reaches the provider twice. libcurl resends a request by itself when a reused
// connection dies before the first response byte; the relay lets that happen only for a replayable request
// (GET, HEAD, OPTIONS, TRACE; never a POST, whatever Idempotency-Key the app sends), and only once.
import Foundation
import RelayTestSupport
import TestHarness
import Testing
import Upstream

@Suite("Upstream resends")
struct UpstreamResendTests {
    enum Death: String, Sendable, CaseIterable { case close, reset }

    /// What a connection does with the request that kills it.
    static func die(_ connection: UpstreamConnection, _ death: Death) {
        switch death {
        case .close: connection.close()
        case .reset: connection.reset()
        }
    }

    /// Answers `ok` with a length, keeping the connection.
    static func answerOK(_ connection: UpstreamConnection) throws {
        try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
        try connection.write("ok")
    }

    /// Connection 0 answers its first request, then reads the second and dies without a byte of answer: the
    /// provider that took the request and dropped the connection. Later connections answer (`servesLater`),
    /// or only record whatever reaches them, which must be nothing.
    static func reusedThenDies(_ death: Death, servesLater: Bool, laterBytes: HarnessMonitor<Int>) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            if connection.index == 0 {
                _ = try connection.readRequest()
                try answerOK(connection)
                _ = try connection.readRequest()
                die(connection, death)
            } else if servesLater {
                while (try? connection.readRequest(timeout: 10)) != nil { try answerOK(connection) }
            } else if case .bytes(let bytes) = try connection.waitForBytesOrClose(timeout: 10) {
                laterBytes.withLock { $0 += bytes.count }
            }
        }
    }

    /// Everything the upstream will ever see: the relay's pooled connections are closed, every script ended.
    static func settle(_ relay: RelayFixture, _ upstream: ScriptedUpstream) throws {
        relay.server.shutdown()
        try upstream.waitForScriptsToFinish(timeout: 10)
    }

    static func expectConnectionReset(_ client: TestClient, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let head = try client.readHead()
        #expect(head.status == 502, sourceLocation: sourceLocation)
        let error = try UpstreamFaultTests.errorJSON(try client.readBody(head: head))
        #expect(error["code"] as? String == "upstream_connection_reset", sourceLocation: sourceLocation)
        #expect(error["message"] as? String
                == "the provider closed the connection before answering; the request may have been processed",
                sourceLocation: sourceLocation)
    }

    struct PostCase: Sendable, CustomTestStringConvertible {
        var death: Death
        /// 0: `Content-Length: 0`, sent with the head, so curl resends it without asking to rewind.
        var bodyBytes: Int
        var testDescription: String { "\(death), \(bodyBytes)-byte body" }
    }

    /// Bodies read by curl in place (up to `Transfer.inlineBodyLimit`) and through the read callback, on both
    /// sides of the limit.
    static let postCases: [PostCase] = Death.allCases.flatMap { death in
        [0, 40, Transfer.inlineBodyLimit, Transfer.inlineBodyLimit + 1, 200_000].map { PostCase(death: death, bodyBytes: $0) }
    }

    @Test("a POST whose reused connection dies after reading it is sent once: 502", arguments: postCases)
    func postOnReusedConnection(_ c: PostCase) throws {
        let laterBytes = HarnessMonitor(0)
        let upstream = try Self.reusedThenDies(c.death, servesLater: false, laterBytes: laterBytes)
        let relay = try RelayFixture(upstream: upstream) { $0.workers = 1 }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let first = try client.readHead()
        #expect(first.status == 200)
        _ = try client.readBody(head: first)

        // Any bytes: an upload path, where the relay forwards the body unread (transport, not body rules, is tested).
        let body = [UInt8](repeating: UInt8(ascii: "b"), count: c.bodyBytes)
        try client.sendRequest(path: "/v1/uploads", body: body)
        try Self.expectConnectionReset(client)
        try Self.settle(relay, upstream)
        #expect(upstream.requests.count == 2)
        #expect(upstream.requests.map(\.connection) == [0, 0])
        #expect(upstream.requests.last?.body == body)
        #expect(laterBytes.withLock { $0 } == 0, "a byte of the request reached the provider again")
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"upstream_error""#) })
    }

    @Test("a POST whose fresh connection dies after reading it: 502, nothing resent", arguments: Death.allCases)
    func postOnFreshConnection(_ death: Death) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            Self.die(connection, death)
        }
        let relay = try RelayFixture(upstream: upstream) { $0.workers = 1 }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        try Self.expectConnectionReset(client)
        try Self.settle(relay, upstream)
        #expect(upstream.requests.count == 1)
        #expect(upstream.acceptedConnections == 1)
    }

    @Test("a GET is resent once on a fresh connection; a POST with an idempotency key from the app is not",
          arguments: [("GET", ""), ("POST", "Idempotency-Key"), ("POST", "X-Idempotency-Key")])
    func replayableIsResent(_ method: String, _ keyHeader: String) throws {
        let laterBytes = HarnessMonitor(0)
        let upstream = try Self.reusedThenDies(.close, servesLater: true, laterBytes: laterBytes)
        let relay = try RelayFixture(upstream: upstream) { $0.workers = 1 }
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/models")
        let first = try client.readHead()
        #expect(first.status == 200)
        _ = try client.readBody(head: first)

        let body = method == "GET" ? [] : Array(#"{"n":2,"pad":"\#(String(repeating: "x", count: 3000))"}"#.utf8)
        try client.sendRequest(method: method, path: "/v1/files", headers: keyHeader.isEmpty ? [] : [(keyHeader, "k-1")], body: body)
        guard method == "GET" else {
            try Self.expectConnectionReset(client)
            try Self.settle(relay, upstream)
            #expect(upstream.requests.map(\.connection) == [0, 0], "the POST was sent again")
            #expect(laterBytes.withLock { $0 } == 0)
            return
        }
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == Array("ok".utf8))
        try Self.settle(relay, upstream)
        #expect(upstream.requests.map(\.connection) == [0, 0, 1])
        #expect(upstream.requests.dropFirst().allSatisfy { $0.body == body }, "the resend carries the whole body")
        #expect(upstream.requests.dropFirst().map(\.method) == [method, method])
    }

    /// Two pooled connections, both dying on their next request: curl's resend lands on the second one and
    /// would go on to a third attempt (it tries up to five); a replayable request is sent at most twice.
    @Test("a replayable request is resent at most once")
    func replayableAtMostTwice() throws {
        let firstRequests = HarnessMonitor(0)
        let upstream = try ScriptedUpstream { connection in
            guard (try? connection.readRequest()) != nil else { return }   // a third attempt never sends one
            firstRequests.withLock { $0 += 1 }
            // The two first requests hold their connections until both arrived, so the pool gets two.
            try firstRequests.wait(timeout: 5) { $0 >= 2 ? true : nil }
            try Self.answerOK(connection)
            guard (try? connection.readRequest()) != nil else { return }
            connection.close()
        }
        let relay = try RelayFixture(upstream: upstream) { $0.workers = 1 }
        let clients = try (0..<2).map { _ in try relay.client() }
        for client in clients { try client.sendRequest(method: "GET", path: "/v1/models") }
        for client in clients {
            let head = try client.readHead()
            #expect(head.status == 200)
            _ = try client.readBody(head: head)
        }
        #expect(upstream.acceptedConnections == 2)

        try clients[0].sendRequest(method: "GET", path: "/v1/models")
        try Self.expectConnectionReset(clients[0])
        try Self.settle(relay, upstream)
        #expect(upstream.requests.count == 4, "two first requests, then the GET sent exactly twice")
    }
}
