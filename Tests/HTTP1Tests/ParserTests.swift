import HTTP1
import Testing

private func head(
    _ method: String, _ target: String, version: HTTPVersion = .http1_1, _ fields: [(String, String)] = [],
    framing: BodyFraming = .none, keepAlive: Bool = true, expectsContinue: Bool = false
) -> RequestHead {
    RequestHead(method: method, target: target, version: version, headers: HTTPHeaders(fields),
                framing: framing, keepAlive: keepAlive, expectsContinue: expectsContinue)
}

/// The Host field every HTTP/1.1 input carries (RFC 9112 §3.2).
let host = ("Host", "h")

struct AcceptCase: Sendable, CustomTestStringConvertible {
    var name: String
    var input: [UInt8]
    var events: [RequestEvent]
    var testDescription: String { name }
}

/// Inputs that look odd but are valid (or tolerated on purpose), with the exact events expected.
let acceptCases: [AcceptCase] = [
    AcceptCase(name: "simple GET", input: b("GET /v1/models HTTP/1.1\r\nHost: api\r\nAccept: */*\r\n\r\n"),
               events: [.head(head("GET", "/v1/models", [("Host", "api"), ("Accept", "*/*")])), .end]),
    AcceptCase(name: "one leading CRLF is ignored", input: b("\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/", [host])), .end]),
    AcceptCase(name: "one leading bare LF is ignored", input: b("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/", [host])), .end]),
    // RFC 9112 §2.2 lets a recipient take a bare LF as the end of the start-line and of field lines; nginx does.
    AcceptCase(name: "bare LF terminators in the head", input: b("POST /x HTTP/1.1\nHost: h\nContent-Length: 2\nX-A: b\n\nhi"),
               events: [.head(head("POST", "/x", [host, ("Content-Length", "2"), ("X-A", "b")], framing: .contentLength(2))), .body(b("hi")), .end]),
    AcceptCase(name: "OPTIONS *", input: b("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("OPTIONS", "*", [host])), .end]),
    AcceptCase(name: "unusual token method", input: b("M-SEARCH! /x HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("M-SEARCH!", "/x", [host])), .end]),
    AcceptCase(name: "value trimmed, inner whitespace kept", input: b("GET / HTTP/1.1\r\nHost: h\r\nX-A: \t a \t b \t\r\nX-B:c\r\n\r\n"),
               events: [.head(head("GET", "/", [host, ("X-A", "a \t b"), ("X-B", "c")])), .end]),
    AcceptCase(name: "empty value", input: b("GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Blank:   \r\n\r\n"),
               events: [.head(head("GET", "/", [host, ("X-Empty", ""), ("X-Blank", "")])), .end]),
    AcceptCase(name: "name case kept", input: b("GET / HTTP/1.1\r\nhOsT: h\r\nx-MiXeD: v\r\n\r\n"),
               events: [.head(head("GET", "/", [("hOsT", "h"), ("x-MiXeD", "v")])), .end]),
    AcceptCase(name: "obs-text valid UTF-8", input: b("GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\u{E9}\r\n\r\n"),
               events: [.head(head("GET", "/", [host, ("X-Name", "caf\u{E9}")])), .end]),
    AcceptCase(name: "obs-text Latin-1", input: b("GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf") + [0xE9, 0x20, 0xFF] + b("\r\n\r\n"),
               events: [.head(head("GET", "/", [host, ("X-Name", "caf\u{E9} \u{FF}")])), .end]),
    // RFC 9112 §3.2: Host is required from HTTP/1.1 on; 1.0 clients predate it.
    AcceptCase(name: "no Host on HTTP/1.0", input: b("GET / HTTP/1.0\r\nAccept: x\r\n\r\n"),
               events: [.head(head("GET", "/", version: .http1_0, [("Accept", "x")], keepAlive: false)), .end]),
    AcceptCase(name: "empty Host (a URI without authority)", input: b("GET / HTTP/1.1\r\nHost:\r\n\r\n"),
               events: [.head(head("GET", "/", [("Host", "")])), .end]),
    AcceptCase(name: "Host with an IPv6 literal and a port", input: b("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
               events: [.head(head("GET", "/", [("Host", "[::1]:8080")])), .end]),
    // RFC 9112 §3.2.2: absolute-form is accepted; the target becomes its origin-form, the authority is dropped.
    AcceptCase(name: "absolute-form: routed on its path and query",
               input: b("POST http://api.example.com/v1/chat/completions?x=1 HTTP/1.1\r\nHost: other\r\nContent-Length: 2\r\n\r\nhi"),
               events: [.head(head("POST", "/v1/chat/completions?x=1", [("Host", "other"), ("Content-Length", "2")], framing: .contentLength(2))), .body(b("hi")), .end]),
    AcceptCase(name: "absolute-form: scheme and host in any case, with a port",
               input: b("GET HTTPS://API.Example.COM:8443/v1/models HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/v1/models", [host])), .end]),
    AcceptCase(name: "absolute-form: empty path is /", input: b("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/", [host])), .end]),
    AcceptCase(name: "absolute-form: empty path with a query", input: b("GET http://h?a=b HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/?a=b", [host])), .end]),
    AcceptCase(name: "absolute-form: IPv6 literal authority", input: b("GET http://[::1]:8080/x HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/x", [host])), .end]),
    AcceptCase(name: "absolute-form: the path is passed on unnormalised, for the relay to judge",
               input: b("GET http://h/v1/../x HTTP/1.1\r\nHost: h\r\n\r\n"),
               events: [.head(head("GET", "/v1/../x", [host])), .end]),
    AcceptCase(name: "absolute-form on HTTP/1.0 without Host", input: b("GET http://h/v1/models HTTP/1.0\r\n\r\n"),
               events: [.head(head("GET", "/v1/models", version: .http1_0, keepAlive: false)), .end]),
    AcceptCase(name: "Transfer-Encoding is case-insensitive", input: b("POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding: Chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("transfer-encoding", "Chunked")], framing: .chunked)), .body(b("z")), .end]),
    AcceptCase(name: "Content-Length with leading zeros", input: b("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 003\r\n\r\nabc"),
               events: [.head(head("POST", "/", [host, ("Content-Length", "003")], framing: .contentLength(3))), .body(b("abc")), .end]),
    AcceptCase(name: "Content-Length 0 has no body event", input: b("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Content-Length", "0")], framing: .contentLength(0))), .end]),
    AcceptCase(name: "Expect: 100-continue on 1.1", input: b("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx"),
               events: [.head(head("POST", "/", [host, ("Expect", "100-Continue"), ("Content-Length", "1")], framing: .contentLength(1), expectsContinue: true)), .body(b("x")), .end]),
    AcceptCase(name: "Expect: 100-continue ignored on 1.0", input: b("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx"),
               events: [.head(head("POST", "/", version: .http1_0, [("Expect", "100-continue"), ("Content-Length", "1")], framing: .contentLength(1), keepAlive: false)), .body(b("x")), .end]),
    AcceptCase(name: "other Expect values are not 100-continue", input: b("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue-ish\r\n\r\n"),
               events: [.head(head("GET", "/", [host, ("Expect", "100-continue-ish")])), .end]),
    AcceptCase(name: "chunked with extensions and trailers",
               input: b("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "5;name=value;flag\r\nhello\r\n6 ; q=\"a b\"\r\n world\r\nA\r\n0123456789\r\n0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"),
               events: [.head(head("POST", "/c", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("hello world0123456789")), .end]),
    AcceptCase(name: "chunked data may contain CRLF bytes", input: b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n\r\n\r\n\r\n0\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("\r\n\r\n")), .end]),
    AcceptCase(name: "chunked data may contain bare LF bytes", input: b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n\n\n\r\n0\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("\n\n")), .end]),
    // Bare LF stays tolerated in the head only; the chunked framing after it must use CRLF (rejection rows).
    AcceptCase(name: "bare LF in the head, CRLF in the chunked framing", input: b("POST / HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n\n3\r\nabc\r\n0\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("abc")), .end]),
    AcceptCase(name: "chunk sizes in upper and lower case hex with leading zeros", input: b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0a\r\n0123456789\r\nB\r\nabcdefghijk\r\n000\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("0123456789abcdefghijk")), .end]),
    AcceptCase(name: "body bytes that look like a request stay body", input: b("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18\r\n\r\nGET / HTTP/1.1\r\n\r\n"),
               events: [.head(head("POST", "/", [host, ("Content-Length", "18")], framing: .contentLength(18))), .body(b("GET / HTTP/1.1\r\n\r\n")), .end]),
]

@Suite("Request parsing")
struct ParserTests {
    @Test(arguments: acceptCases)
    func accepts(_ c: AcceptCase) {
        let outcome = parseThreeWays(c.input)
        #expect(outcome == Outcome(events: c.events, error: nil))
    }

    @Test("three pipelined requests in one buffer are answered in order")
    func pipelined() {
        let input = b("GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
            + "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
            + "POST /three HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            + "\r\nGET /four HTTP/1.0\r\n\r\n")
        let outcome = parseThreeWays(input)
        #expect(outcome == Outcome(events: [
            .head(head("GET", "/one", [("Host", "h")])), .end,
            .head(head("POST", "/two", [host, ("Content-Length", "5")], framing: .contentLength(5))), .body(b("hello")), .end,
            .head(head("POST", "/three", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)), .body(b("abc")), .end,
            .head(head("GET", "/four", version: .http1_0, keepAlive: false)), .end,
        ], error: nil))
    }

    @Test("a Content-Length body stops at its length; the next request's bytes stay buffered")
    func contentLengthThenNextRequest() throws {
        var parser = RequestParser()
        let next = b("GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
        parser.append(b("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc") + next)
        #expect(try parser.next() == .head(head("POST", "/", [host, ("Content-Length", "3")], framing: .contentLength(3))))
        #expect(try parser.next() == .body(b("abc")))
        #expect(parser.bufferedByteCount == next.count)
        #expect(try parser.next() == .end)
        #expect(parser.bufferedByteCount == next.count)
        #expect(!parser.isBetweenMessages)
        #expect(try parser.next() == .head(head("GET", "/next", [host])))
        #expect(try parser.next() == .end)
        #expect(try parser.next() == nil)
        #expect(parser.isBetweenMessages)
    }

    @Test("Content-Length body events stream before the body is complete")
    func contentLengthStreams() throws {
        var parser = RequestParser()
        parser.append(b("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n012"))
        #expect(try parser.next() == .head(head("POST", "/", [host, ("Content-Length", "10")], framing: .contentLength(10))))
        #expect(try parser.next() == .body(b("012")))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 0)
        #expect(!parser.isBetweenMessages)
        parser.append(b("3456"))
        #expect(try parser.next() == .body(b("3456")))
        #expect(try parser.next() == nil)
        parser.append(b("789GET"))
        #expect(try parser.next() == .body(b("789")))
        #expect(try parser.next() == .end)
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 3)
    }

    @Test("chunked body events stream before the chunk is complete")
    func chunkedStreams() throws {
        var parser = RequestParser()
        parser.append(b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\na;x=y\r\n0123"))
        #expect(try parser.next() == .head(head("POST", "/", [host, ("Transfer-Encoding", "chunked")], framing: .chunked)))
        #expect(try parser.next() == .body(b("0123")))
        #expect(try parser.next() == nil)
        parser.append(b("456789\r"))
        #expect(try parser.next() == .body(b("456789")))
        #expect(try parser.next() == nil)
        parser.append(b("\n2\r\nab\r\n0\r\nX-T: 1\r\n"))
        #expect(try parser.next() == .body(b("ab")))
        #expect(try parser.next() == nil)
        parser.append(b("\r\n"))
        #expect(try parser.next() == .end)
        #expect(parser.isBetweenMessages)
    }

    @Test("a large body is delivered piecewise as it arrives, never buffered whole")
    func largeBodyStreams() throws {
        var parser = RequestParser()
        parser.append(b("PUT /big HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000\r\n\r\n"))
        #expect(try parser.next() != nil)
        var received = 0
        var piece = [UInt8](repeating: 0, count: 4096)
        while received < 1_000_000 {
            let n = min(piece.count, 1_000_000 - received)
            piece[0] = UInt8(truncatingIfNeeded: received)
            piece.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            let event = try parser.next()
            #expect(event == .body(Array(piece[..<n])))
            #expect(parser.bufferedByteCount == 0)
            received += n
        }
        #expect(try parser.next() == .end)
    }

    struct KeepAliveCase: Sendable, CustomTestStringConvertible {
        var version: String
        var connection: [String]
        var keepAlive: Bool
        var testDescription: String { "\(version) Connection: \(connection) → keepAlive \(keepAlive)" }
    }

    @Test("keep-alive rules for HTTP/1.1 and HTTP/1.0", arguments: [
        KeepAliveCase(version: "HTTP/1.1", connection: [], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.1", connection: ["close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: ["Close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: ["keep-alive"], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.1", connection: ["te, close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: ["te", "close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: ["closed"], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: [], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.0", connection: ["keep-alive"], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: ["Keep-Alive"], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: ["foo ,  keep-alive "], keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: ["keep-alive, close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.0", connection: ["keep-alive", "close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.0", connection: ["close"], keepAlive: false),
        KeepAliveCase(version: "HTTP/1.0", connection: ["keep-alives"], keepAlive: false),
    ])
    func keepAlive(_ c: KeepAliveCase) throws {
        let input = b("GET / \(c.version)\r\nHost: h\r\n" + c.connection.map { "Connection: \($0)\r\n" }.joined() + "\r\n")
        let outcome = parseThreeWays(input)
        let parsed = try #require(outcome.heads.first)
        #expect(parsed.keepAlive == c.keepAlive)
        #expect(parsed.version == (c.version == "HTTP/1.0" ? .http1_0 : .http1_1))
    }

    @Test("path and query split at the first '?'", arguments: [
        ("/a?b=c", "/a", "b=c" as String?),
        ("/v1/chat/completions", "/v1/chat/completions", nil),
        ("/a?", "/a", ""),
        ("/a?b?c", "/a", "b?c"),
        ("/?", "/", ""),
        ("*", "*", nil),
        ("/é/ü?q=€", "/é/ü", "q=€"),
    ])
    func pathAndQuery(target: String, path: String, query: String?) {
        let h = RequestHead(method: "GET", target: target)
        #expect(h.path == path)
        #expect(h.query == query)
    }

    @Test("a failed parser stays failed and drops what it buffered")
    func failedStaysFailed() {
        var parser = RequestParser()
        parser.append(b("GET / HTTP/1.1\r\nBad Name: v\r\n\r\nGET / HTTP/1.1\r\n\r\n"))
        #expect(throws: HTTPParseError(kind: .badRequest, message: "whitespace in field name")) { try parser.next() }
        #expect(parser.bufferedByteCount == 0)
        parser.append(b("GET / HTTP/1.1\r\n\r\n"))
        #expect(parser.bufferedByteCount == 0)
        #expect(!parser.isBetweenMessages)
        #expect(throws: HTTPParseError(kind: .badRequest, message: "whitespace in field name")) { try parser.next() }
    }

    @Test("bufferedByteCount and isBetweenMessages track partial input")
    func bookkeeping() throws {
        var parser = RequestParser()
        #expect(parser.isBetweenMessages)
        #expect(parser.bufferedByteCount == 0)
        #expect(try parser.next() == nil)
        parser.append([UInt8]())
        #expect(parser.isBetweenMessages)
        parser.append(b("GET / HT"))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 8)
        #expect(!parser.isBetweenMessages)
        let rest = b("TP/1.1\r\nHost: h\r\n\r\n")
        rest.withUnsafeBytes { parser.append($0) }
        #expect(parser.bufferedByteCount == 27)
        #expect(try parser.next() == .head(head("GET", "/", [host])))
        #expect(parser.bufferedByteCount == 0)
        #expect(!parser.isBetweenMessages)               // the message has not ended yet
        #expect(try parser.next() == .end)
        #expect(parser.isBetweenMessages)
    }

    @Test("requests straddling reads: compaction keeps the live tail intact")
    func compactionKeepsPartialBytes() throws {
        var wire: [UInt8] = []
        for i in 0..<3000 {
            wire += b("POST /r\(i) HTTP/1.1\r\nHost: h\r\nX-Pad: \(String(repeating: "p", count: i % 97))\r\nContent-Length: \(i % 13)\r\n\r\n")
            wire += [UInt8](repeating: UInt8(i % 251), count: i % 13)
        }
        var parser = RequestParser()
        var targets: [String] = []
        var bodies: [[UInt8]] = []
        var offset = 0
        while offset < wire.count {
            // Reads of 5000 bytes with a slow consumer: several messages and a partial one sit in the buffer.
            let end = min(wire.count, offset + 5000)
            parser.append(Array(wire[offset..<end]))
            offset = end
            while let event = try parser.next() {
                switch event {
                case .head(let h):
                    targets.append(h.target)
                    bodies.append([])
                case .body(let bytes): bodies[bodies.count - 1] += bytes
                case .end: break
                }
            }
        }
        #expect(targets == (0..<3000).map { "/r\($0)" })
        #expect(bodies == (0..<3000).map { [UInt8](repeating: UInt8($0 % 251), count: $0 % 13) })
        #expect(parser.isBetweenMessages)
    }

    @Test("many small pipelined requests through one parser keep memory bounded and order intact")
    func manyRequests() throws {
        var parser = RequestParser()
        var ends = 0
        var targets: [String] = []
        for i in 0..<2000 {
            parser.append(b("POST /r\(i) HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"))
            while let event = try parser.next() {
                switch event {
                case .head(let h): targets.append(h.target)
                case .body(let bytes): #expect(bytes == b("body"))
                case .end: ends += 1
                }
            }
        }
        #expect(ends == 2000)
        #expect(targets == (0..<2000).map { "/r\($0)" })
        #expect(parser.bufferedByteCount == 0)
    }
}
