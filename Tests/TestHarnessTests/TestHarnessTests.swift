// The test harness on its own: TestClient ↔ ScriptedUpstream directly, no relay involved.
import Dispatch
import Foundation
import TestHarness
import Testing
import TestSupportCore

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

private func lines(_ headers: [(name: String, value: String)]) -> [String] {
    headers.map { "\($0.name): \($0.value)" }
}

private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    haystack.contains(subsequence: bytes(needle))
}

@Suite struct TestHarnessTests {
    // MARK: Requests

    @Test func contentLengthRequestRoundTripsWithExactHeadersAndBody() throws {
        let upstream = try ScriptedUpstream { connection in
            let request = try connection.readRequest()
            let reply = bytes("echo:") + request.body
            try connection.writeHead(
                status: 201,
                headers: [
                    ("Content-Type", "text/plain"), ("Content-Length", "\(reply.count)"), ("X-Multi", "a"),
                    ("x-multi", "b"),
                ])
            try connection.write(reply)
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(
            path: "/v1/chat?x=1",
            headers: [("Authorization", "Bearer sk-test"), ("X-Case", "MiXeD"), ("x-case", "second")],
            body: bytes("hello body"))
        let head = try client.readHead()
        #expect(head.version == "HTTP/1.1")
        #expect(head.status == 201)
        #expect(head.reason == "Created")
        #expect(lines(head.headers) == ["Content-Type: text/plain", "Content-Length: 15", "X-Multi: a", "x-multi: b"])
        #expect(head.headerValues("X-MULTI") == ["a", "b"])
        #expect(head.header("content-type") == "text/plain")
        #expect(
            head.rawHead
                == bytes(
                    "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 15\r\nX-Multi: a\r\n"
                        + "x-multi: b\r\n\r\n"))
        #expect(try client.readBody(head: head) == bytes("echo:hello body"))

        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors == [])
        let requests = upstream.requests
        try #require(requests.count == 1)
        let request = requests[0]
        #expect(request.method == "POST")
        #expect(request.target == "/v1/chat?x=1")
        #expect(request.version == "HTTP/1.1")
        #expect(request.connection == 0)
        #expect(
            lines(request.headers) == [
                "Host: 127.0.0.1:\(upstream.port)", "Authorization: Bearer sk-test", "X-Case: MiXeD",
                "x-case: second", "Content-Length: 10",
            ])
        #expect(request.header("x-CASE") == "MiXeD")
        #expect(request.headerValues("X-Case") == ["MiXeD", "second"])
        #expect(request.header("missing") == nil)
        #expect(
            request.rawHead
                == bytes(
                    "POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:\(upstream.port)\r\n"
                        + "Authorization: Bearer sk-test\r\nX-Case: MiXeD\r\nx-case: second\r\nContent-Length: 10\r\n\r\n"))
        #expect(request.body == bytes("hello body"))
    }

    @Test func chunkedRequestsRoundTripOnOneKeepAliveConnection() throws {
        let upstream = try ScriptedUpstream { connection in
            for _ in 0..<2 {
                _ = try connection.readRequest()
                try connection.writeHead(status: 204, headers: [])
            }
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        let alphabet = "abcdefghijklmnopqrstuvwxyz"
        try client.send(
            "PUT /raw HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1A\r\n\(alphabet)\r\n"
                + "0\r\nX-Trailer: t1\r\n\r\n")
        let first = try client.readHead()
        #expect(first.status == 204)
        #expect(try client.readBody(head: first) == [])

        try client.sendRequest(path: "/second", body: bytes("chunked body"), chunked: true)
        #expect(try client.readHead().rawHead == bytes("HTTP/1.1 204 No Content\r\n\r\n"))

        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors == [])
        #expect(upstream.acceptedConnections == 1)
        let requests = upstream.requests
        try #require(requests.count == 2)
        #expect(requests[0].method == "PUT")
        #expect(requests[0].body == bytes("hello" + alphabet))
        #expect(lines(requests[0].trailers) == ["X-Trailer: t1"])
        #expect(requests[1].target == "/second")
        #expect(requests[1].connection == 0)
        #expect(requests[1].header("transfer-encoding") == "chunked")
        #expect(requests[1].header("content-length") == nil)
        #expect(requests[1].body == bytes("chunked body"))
    }

    @Test func expectContinueGetsAnInterim100HeadReturnedOnItsOwn() throws {
        let upstream = try ScriptedUpstream { connection in
            let request = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Length", "\(request.body.count)")])
            try connection.write(request.body)
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.send("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        let interim = try client.readHead()
        #expect(interim.status == 100)
        #expect(interim.rawHead == bytes("HTTP/1.1 100 Continue\r\n\r\n"))
        #expect(try client.readBody(head: interim) == [])
        try client.send("abcde")
        let final = try client.readHead()
        #expect(final.status == 200)
        #expect(try client.readBody(head: final) == bytes("abcde"))
    }

    // MARK: Chunked responses

    @Test func chunkedResponseWrittenOneByteAtATimeDecodesExactly() throws {
        let chunk1 = bytes("data: 1\n\n")
        let chunk2 = bytes(String(repeating: "x", count: 26))
        let chunk3 = (0..<255).map { UInt8($0) }
        let head = bytes("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        let body =
            bytes("9\r\n") + chunk1 + bytes("\r\n1A\r\n") + chunk2 + bytes("\r\nff\r\n") + chunk3
            + bytes("\r\n0\r\nX-Checksum: abc\r\n\r\n")
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write(head)
            for byte in body { try connection.write([byte]) }
            _ = try connection.waitForPeerClose()
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(method: "GET", path: "/stream")
        let response = try client.readHead()
        #expect(response.header("transfer-encoding") == "chunked")
        #expect(try client.readChunk() == chunk1)
        #expect(try client.readChunk() == chunk2)
        #expect(try client.readChunk() == chunk3)
        #expect(try client.readChunk() == nil)
        #expect(try client.readChunk() == nil)
        #expect(lines(client.trailers) == ["X-Checksum: abc"])
        #expect(client.receivedBytes == head + body)
    }

    /// Raw chunked-body prefixes after which the upstream closes (FIN): all must read as truncated.
    static let truncations = [
        "9\r\ndata: 1\n\n\r\n", "9\r\ndata: 1\n\n\r\n1", "9\r\ndata: 1\n\n\r\n1a\r", "9\r\ndata:", "9\r\ndata: 1\n\n",
        "9\r\ndata: 1\n\n\r", "9\r\ndata: 1\n\n\r\n0\r\n", "9\r\ndata: 1\n\n\r\n0\r\nX-T: 1\r\n", "",
    ]

    @Test(arguments: truncations)
    func chunkedBodyClosedBeforeTheLastChunkThrowsTruncated(prefix: String) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + prefix)
            connection.close()
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(path: "/")
        _ = try client.readHead()
        var chunks: [[UInt8]] = []
        #expect(throws: HarnessError.truncated) {
            while let chunk = try client.readChunk() { chunks.append(chunk) }
        }
        let complete = prefix.hasPrefix("9\r\ndata: 1\n\n\r\n")
        #expect(chunks == (complete ? [bytes("data: 1\n\n")] : []))
        #expect(throws: HarnessError.truncated) { try ChunkedReader.decode(bytes(prefix)) }
    }

    @Test func chunkedBodyEndedByResetThrowsConnectionReset() throws {
        let gate = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
            try gate.wait()
            connection.reset()
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(path: "/")
        _ = try client.readHead()
        #expect(try client.readChunk() == bytes("abc"))
        gate.signal()
        #expect(throws: HarnessError.connectionReset) { try client.readChunk() }
    }

    @Test func silenceIsATimeoutNotATruncationAndTheStreamStillContinues() throws {
        let gate = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
            try gate.wait()
            try connection.writeChunk("def")
            try connection.writeLastChunk()
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(path: "/")
        _ = try client.readHead()
        #expect(try client.readChunk() == bytes("abc"))
        #expect(throws: HarnessError.timeout) { try client.readChunk(timeout: 0.2) }
        gate.signal()
        #expect(try client.readChunk() == bytes("def"))
        #expect(try client.readChunk() == nil)
    }

    @Test func malformedResponseFramingThrowsMalformed() throws {
        let responses = [
            "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
            "HTTP/1.1 200\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello!\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello",
        ]
        let upstream = try ScriptedUpstream { connection in
            let request = try connection.readRequest()
            try connection.write(responses[Int(request.target.dropFirst())!])
            _ = try connection.waitForPeerClose()
        }
        defer { upstream.shutdown() }
        for index in responses.indices {
            let client = try TestClient(port: upstream.port)
            defer { client.close() }
            try client.sendRequest(method: "GET", path: "/\(index)")
            var caught: (any Error)?
            do {
                let head = try client.readHead()
                _ = try client.readBody(head: head)
            } catch {
                caught = error
            }
            guard case .malformed = caught as? HarnessError else {
                Issue.record("response \(index): expected .malformed, got \(String(describing: caught))")
                continue
            }
        }
    }

    @Test func contentLengthBodyCutShortThrowsTruncated() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }
        try client.sendRequest(path: "/")
        let head = try client.readHead()
        #expect(throws: HarnessError.truncated) { try client.readBody(head: head) }
        // A failed read consumes nothing: the partial body is still there, then the FIN.
        let (rest, wasReset) = try client.readUntilClose()
        #expect(rest == bytes("partial"))
        #expect(!wasReset)
        #expect(throws: HarnessError.connectionClosed) { try client.readHead() }
    }

    // MARK: Lock-step

    @Test func gateDrivesALockStepStream() throws {
        let gate = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(
                status: 200, headers: [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
            for k in 1...3 {
                try connection.writeChunk("data: \(k)\n\n")
                try gate.wait()
            }
            try connection.writeLastChunk()
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(path: "/v1/stream")
        #expect(try client.readHead().status == 200)
        var expected = ""
        for k in 1...3 {
            expected += "data: \(k)\n\n"
            #expect(try client.readChunkedBody(until: "\n\n") == bytes(expected))
            #expect(!contains(client.receivedBytes, "data: \(k + 1)"))
            gate.signal()
        }
        #expect(try client.readChunk() == nil)
        #expect(throws: HarnessError.bodyEnded) { try client.readChunkedBody(until: "never") }
        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors == [])
        #expect(gate.pendingSignals == 0)
    }

    @Test func gateCountsSignalsAndTimesOut() throws {
        let gate = Gate()
        #expect(throws: HarnessError.timeout) { try gate.wait(timeout: 0.05) }
        gate.signal(2)
        try gate.wait(timeout: 0)
        try gate.wait(timeout: 0)
        #expect(throws: HarnessError.timeout) { try gate.wait(timeout: 0.05) }
        let mailbox = Mailbox<Int>()
        mailbox.put(1)
        mailbox.put(2)
        #expect(try mailbox.take() == 1)
        #expect(try mailbox.take() == 2)
        #expect(throws: HarnessError.timeout) { try mailbox.take(timeout: 0.05) }
    }

    // MARK: Closing

    @Test(arguments: [false, true])
    func upstreamObservesFinVersusReset(reset: Bool) throws {
        let closes = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Length", "0")])
            closes.put(try connection.waitForPeerClose())
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)

        try client.sendRequest(path: "/")
        #expect(try client.readHead().status == 200)
        try client.send("ignored bytes")
        let before = DispatchTime.now().uptimeNanoseconds
        if reset { client.reset() } else { client.close() }
        let close = try closes.take()
        #expect(close.kind == (reset ? .reset : .fin))
        #expect(close.atNanoseconds >= before)
        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors == [])
    }

    @Test(arguments: [false, true])
    func clientObservesFinVersusReset(reset: Bool) throws {
        let gate = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            try gate.wait()
            if reset { connection.reset() } else { connection.close() }
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }

        try client.sendRequest(path: "/")
        let head = try client.readHead()
        gate.signal()
        let (rest, wasReset) = try client.readUntilClose()
        #expect(wasReset == reset)
        #expect(rest == bytes("partial"))
        #expect(client.receivedBytes == head.rawHead + bytes("partial"))
    }

    @Test func waitForBytesOrCloseReportsDataThenClose() throws {
        let activity = Mailbox<PeerActivity>()
        let upstream = try ScriptedUpstream { connection in
            activity.put(try connection.waitForBytesOrClose())
            activity.put(try connection.waitForBytesOrClose())
        }
        defer { upstream.shutdown() }
        let client = try TestClient(port: upstream.port)
        try client.send("hi")
        #expect(try activity.take() == .bytes(bytes("hi")))
        client.close()
        guard case .closed(let close) = try activity.take() else {
            Issue.record("expected .closed")
            return
        }
        #expect(close.kind == .fin)
    }

    // MARK: Upstream bookkeeping

    @Test func connectionsAreCountedAndScriptErrorsRecorded() throws {
        let upstream = try ScriptedUpstream { connection in
            if connection.index == 1 { throw HarnessError.malformed("boom") }
        }
        defer { upstream.shutdown() }
        #expect(upstream.baseURL == "http://127.0.0.1:\(upstream.port)")
        #expect(throws: HarnessError.timeout) { try upstream.waitForConnections(1, timeout: 0.05) }
        let first = try TestClient(port: upstream.port)
        let second = try TestClient(port: upstream.port)
        try upstream.waitForConnections(2)
        #expect(upstream.acceptedConnections == 2)
        try upstream.waitForScriptsToFinish()
        #expect(upstream.finishedScripts == 2)
        #expect(upstream.scriptErrors == ["connection #1: malformed HTTP: boom"])
        // Each connection is closed with FIN once its script is over.
        for client in [first, second] {
            let (rest, wasReset) = try client.readUntilClose()
            #expect(rest == [])
            #expect(!wasReset)
        }
    }

    @Test func shutdownWakesABlockedScriptAndClosesTheListener() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 60)
        }
        let client = try TestClient(port: upstream.port)
        defer { client.close() }
        try upstream.waitForConnections(1)
        upstream.shutdown()
        let (rest, wasReset) = try client.readUntilClose()
        #expect(rest == [])
        #expect(!wasReset)
        try upstream.waitForScriptsToFinish()
        #expect(upstream.scriptErrors == [])
        #expect(throws: HarnessError.self) { try TestClient(port: upstream.port, timeout: 1) }
    }

    // MARK: Pure framing

    @Test func chunkedDecoderAcceptsValidBodiesExactly() throws {
        let decoded = try ChunkedReader.decode(
            bytes("3\r\nabc\r\n00A\r\n0123456789\r\n0\r\nX-A: 1\r\nx-b:2 \r\n\r\nNEXT"))
        #expect(decoded.chunks == [bytes("abc"), bytes("0123456789")])
        #expect(decoded.body == bytes("abc0123456789"))
        #expect(lines(decoded.trailers) == ["X-A: 1", "x-b: 2"])
        #expect(decoded.rest == bytes("NEXT"))
        #expect(ChunkedReader.encode([bytes("abc"), [], bytes("0123456789")]) == bytes(
            "3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n"))
        #expect(try ChunkedReader.parseSizeLine(bytes("fFfF")) == 0xFFFF)
    }

    static let malformedChunked = [
        "5;ext=1\r\nhello\r\n0\r\n\r\n", " 5\r\nhello\r\n0\r\n\r\n", "5 \r\nhello\r\n0\r\n\r\n",
        "0x5\r\nhello\r\n0\r\n\r\n", "g\r\n", "\r\nhello\r\n", "5\nhello\r\n0\r\n\r\n",
        "5\r\nhello\n0\r\n\r\n", "5\r\nhello!\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\nBad Name: x\r\n\r\n",
        "5\r\nhello\r\n0\r\n\n", "10000000000000000\r\n", "5\r\nhello\r\n0\r\n\r\r\n",
    ]

    @Test(arguments: malformedChunked)
    func chunkedDecoderRejectsMalformedFraming(input: String) {
        do {
            let decoded = try ChunkedReader.decode(bytes(input))
            Issue.record("accepted \(input.debugDescription) as \(decoded.body)")
        } catch HarnessError.malformed {
        } catch {
            Issue.record("\(input.debugDescription): expected .malformed, got \(error)")
        }
    }
}

/// The built relay binary as a process: what the multi-replica tests start three of.
@Suite struct RelayProcessTests {
    @Test func relayProcessForwardsToAScriptedUpstreamAndDiesOnKill() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
            try connection.write(bytes("ok"))
        }
        defer { upstream.shutdown() }
        let relay = try RelayProcess(configuration: """
            {"listen": {"host": "127.0.0.1", "port": 0},
             "upstreams": {"up": {"baseURL": "http://127.0.0.1:\(upstream.port)", "key": {"env": "PROCESS_TEST_KEY"}}},
             "routes": [{"prefix": "/v1/", "upstream": "up", "auth": "none"}]}
            """, environment: ["PROCESS_TEST_KEY": "sk-process-test"])
        let client = try TestClient(port: relay.port)
        defer { client.close() }
        try client.sendRequest(method: "GET", path: "/v1/models", headers: [("Host", "relay")])
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == bytes("ok"))
        try relay.waitForLog("\"outcome\":\"completed\"")
        #expect(relay.isRunning)
        relay.kill()
        #expect(!relay.isRunning)
        #expect(throws: (any Error).self) { _ = try TestClient(port: relay.port) }
    }

    @Test func intFieldReadsANumberFromALogLine() {
        #expect(RelayProcess.intField("port", in: #"{"message":"relay listening","port":4242,"admin_port":17}"#) == 4242)
        #expect(RelayProcess.intField("admin_port", in: #"{"port":1,"admin_port":17}"#) == 17)
        #expect(RelayProcess.intField("port", in: #"{"message":"x"}"#) == nil)
    }
}
