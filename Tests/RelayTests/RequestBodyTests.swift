// The relay reads the whole request body before it calls the provider (nginx's `proxy_request_buffering on`):
// a slow client costs a socket, never a provider connection (a body that stops arriving: HostileClientTests).
// GET and HEAD carry no body.
import Foundation
import RelayTestSupport
import TestHarness
import Testing

@Suite("Request bodies")
struct RequestBodyTests {
    static let body = Array(String(repeating: #"{"pad":"0123456789"}"#, count: 50).utf8)

    static func head(_ method: String = "POST", length: Int) -> String {
        "\(method) /v1/uploads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n"
    }

    @Test("20 clients trickling their bodies hold no provider connection; each body then goes whole")
    func tricklingClientsHoldNoProviderConnection() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try RequestForwardingTests.echoUpstream(requests: requests)
        let relay = try RelayFixture(upstream: upstream)
        let half = Self.body.count / 2
        let clients = try (0..<20).map { _ in try relay.client() }
        for client in clients {
            try client.send(Array(Self.head(length: Self.body.count).utf8) + Self.body[..<half])
        }
        // Every head has been read and its exchange begun, and no provider call was made.
        try relay.waitUntil("holding 20 exchanges") { $0.exchanges == 20 }
        #expect(relay.server.liveCounts().transfers == 0)
        #expect(upstream.acceptedConnections == 0)

        for (i, client) in clients.enumerated() {
            try client.send(Array(Self.body[half...]))
            let head = try client.readHead()
            #expect(head.status == 200)
            _ = try client.readBody(head: head)
            let request = try requests.take()
            #expect(request.body == Self.body, "request \(i) reached the provider whole")
            #expect(request.header("Content-Length") == "\(Self.body.count)")
            #expect(request.header("Transfer-Encoding") == nil)
        }
        #expect(upstream.requests.count == 20)
    }

    @Test("a client that leaves mid-body cancels nothing: the provider was never called")
    func clientLeavingMidBody() throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.send(Array(Self.head(length: Self.body.count).utf8) + Self.body[..<10])
        try relay.waitUntil("holding the exchange") { $0.exchanges == 1 }
        client.reset()
        try relay.waitUntilIdle()
        relay.server.shutdown()
        try upstream.waitForScriptsToFinish()
        #expect(upstream.acceptedConnections == 0)
        #expect(!relay.server.metrics.render().contains("sse_relay_cancellations_total{"))
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
    }

    @Test("a chunked body goes upstream with its length, never chunked")
    func chunkedBodyGetsALength() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try RelayFixture(upstream: try RequestForwardingTests.echoUpstream(requests: requests))
        let client = try relay.client()
        try client.sendRequest(path: "/v1/uploads", body: Self.body, chunked: true)
        #expect(try client.readHead().status == 200)
        let request = try requests.take()
        #expect(request.body == Self.body)
        #expect(request.header("Content-Length") == "\(Self.body.count)")
        #expect(request.header("Transfer-Encoding") == nil)
    }

    @Test("GET or HEAD with a body: 400 invalid_request, the provider is never called",
          arguments: ["GET", "HEAD"], [false, true])
    func bodyOnGetOrHeadIsRejected(_ method: String, _ chunked: Bool) throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(method: method, path: "/v1/models", body: Array("{}".utf8), chunked: chunked)
        let head = try client.readHead(timeout: 2)
        #expect(head.status == 400)
        #expect(head.header("Connection") == "close")   // the unread body ends the connection
        if method == "GET" {
            let error = try UpstreamFaultTests.errorJSON(try client.readBody(head: head))
            #expect(error["code"] as? String == "invalid_request")
            #expect(error["type"] as? String == "invalid_request_error")
        }
        try relay.waitUntilIdle()
        #expect(upstream.acceptedConnections == 0)
        #expect(relay.logs.lines.contains { $0.contains(#""reason":"body_not_allowed""#) })
    }

    @Test("HEAD, GET with Content-Length: 0, and an empty POST are forwarded; the connection serves on")
    func bodilessRequestsAreForwarded() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 5) {
                requests.put(request)
                try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "2")])
                if request.method != "HEAD" { try connection.write("{}") }
            }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()

        try client.sendRequest(method: "HEAD", path: "/v1/models")
        let headAnswer = try client.readHead(timeout: 2)
        #expect(headAnswer.status == 200)
        #expect(try requests.take().method == "HEAD")

        try client.sendRequest(method: "GET", path: "/v1/models", headers: [("Content-Length", "0")])
        let getAnswer = try client.readHead(timeout: 2)
        #expect(getAnswer.status == 200)
        #expect(try client.readBody(head: getAnswer) == Array("{}".utf8))
        let get = try requests.take()
        #expect(get.method == "GET")
        #expect(get.body.isEmpty)

        try client.sendRequest(method: "POST", path: "/v1/chat/completions", headers: [("Content-Length", "0")])
        let postAnswer = try client.readHead(timeout: 2)
        #expect(postAnswer.status == 200)
        let post = try requests.take()
        #expect(post.method == "POST")
        #expect(post.header("Content-Length") == "0")
    }
}
