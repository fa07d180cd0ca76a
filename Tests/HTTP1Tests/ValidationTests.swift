import HTTP1
import Testing

/// Small limits so every limit row stays short enough to be split at every position.
let smallLimits = RequestLimits(maxHeadBytes: 256, maxHeaderCount: 5, maxURIBytes: 32, maxBodyBytes: 100)

struct RejectCase: Sendable, CustomTestStringConvertible {
    var name: String
    var input: [UInt8]
    var status: Int
    /// How many request heads are delivered before the error (1 when the body is what is wrong).
    var headsBefore = 0
    /// For rows where a wrong rule could still land on the right status, pin down which rule fired.
    var message: String? = nil
    var testDescription: String { name }
}

/// A request with `fields` after a valid Host field (RFC 9112 §3.2), so each row fails on the rule it names.
private func req(_ fields: String, line: String = "GET / HTTP/1.1", host: Bool = true) -> [UInt8] {
    b(line + "\r\n" + (host ? "Host: h\r\n" : "") + fields + "\r\n")
}

private func chunked(_ body: String) -> [UInt8] {
    b("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
}

/// One row per validation rule of the spec. Header values carry "SECRET" to check messages never echo them.
let rejectCases: [RejectCase] = [
    // Request line
    RejectCase(name: "method is not a token", input: b("GE(T / HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "request line starts with a space", input: b(" GET / HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "two spaces after method", input: b("GET  / HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "two spaces before version", input: b("GET /  HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "space after version", input: b("GET / HTTP/1.1 \r\n\r\n"), status: 400),
    RejectCase(name: "tab instead of space", input: b("GET\t/ HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "target not origin-form", input: b("GET index.html HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "authority-form target", input: b("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"), status: 400, message: "CONNECT is not supported"),
    RejectCase(name: "CONNECT with an origin-form target", input: b("CONNECT /v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "CONNECT is not supported"),
    RejectCase(name: "authority-form target without CONNECT", input: b("GET example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "asterisk-form with GET", input: b("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "asterisk-form with POST", input: b("POST * HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), status: 400),
    // Absolute-form (RFC 9112 §3.2.2) is accepted for http and https only, with a host and no userinfo.
    RejectCase(name: "absolute-form with an ftp scheme", input: b("GET ftp://h/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "absolute-form with a ws scheme", input: b("GET ws://h/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "absolute-form with a scheme that only starts like http", input: b("GET httpx://h/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "URN target", input: b("GET urn:isbn:0 HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "scheme starting with a digit", input: b("GET 1http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400),
    RejectCase(name: "absolute-form without //", input: b("GET http:/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "absolute-form request-target has no authority"),
    RejectCase(name: "absolute-form scheme only", input: b("GET http: HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "absolute-form request-target has no authority"),
    RejectCase(name: "absolute-form with an empty host", input: b("GET http:///v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "absolute-form request-target has no host"),
    RejectCase(name: "absolute-form with a port and no host", input: b("GET http://:80/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "absolute-form request-target has no host"),
    RejectCase(name: "absolute-form with userinfo", input: b("GET http://SECRET:pw@h/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "userinfo in request-target"),
    RejectCase(name: "absolute-form with an invalid authority byte", input: b("GET http://a<b/v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), status: 400, message: "invalid authority in request-target"),
    RejectCase(name: "absolute-form target longer than maxURIBytes", input: b("GET http://h/" + String(repeating: "u", count: 24) + " HTTP/1.1\r\nHost: h\r\n\r\n"), status: 414),
    RejectCase(name: "absolute-form on HTTP/1.1 still needs Host", input: b("GET http://h/v1/x HTTP/1.1\r\n\r\n"), status: 400, message: "missing Host field"),
    RejectCase(name: "control byte in target", input: b("GET /a\u{01}b HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "DEL in target", input: b("GET /a\u{7F}b HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "non-ASCII byte in target", input: b("GET /caf") + [0xE9] + b(" HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "target longer than maxURIBytes", input: b("GET /" + String(repeating: "u", count: 32) + " HTTP/1.1\r\n\r\n"), status: 414),
    RejectCase(name: "no HTTP version", input: b("GET /\r\n\r\n"), status: 400),
    RejectCase(name: "HTTP/2.0 is well-formed but unsupported", input: b("GET / HTTP/2.0\r\n\r\n"), status: 505),
    RejectCase(name: "HTTP/1.2 is well-formed but unsupported", input: b("GET / HTTP/1.2\r\n\r\n"), status: 505),
    RejectCase(name: "HTTP/0.9 is well-formed but unsupported", input: b("GET / HTTP/0.9\r\n\r\n"), status: 505),
    RejectCase(name: "lowercase http version", input: b("GET / http/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "version without minor", input: b("GET / HTTP/2\r\n\r\n"), status: 400),
    RejectCase(name: "version with two-digit minor", input: b("GET / HTTP/1.10\r\n\r\n"), status: 400),
    RejectCase(name: "version garbage", input: b("GET / HTTPS/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "two empty lines before request line", input: b("\r\n\r\nGET / HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "bare CR before request line", input: b("\rGET / HTTP/1.1\r\n\r\n"), status: 400),
    RejectCase(name: "bare CR ending request line", input: b("GET / HTTP/1.1\r\r\n\r\n"), status: 400),
    // Field lines
    RejectCase(name: "bare CR in field value", input: req("X-A: SEC\rRET\r\n"), status: 400),
    RejectCase(name: "bare CR as the blank line", input: req("X-A: SECRET\r\n\r\r\n"), status: 400),
    RejectCase(name: "field line without colon", input: req("X-A SECRET\r\n"), status: 400),
    RejectCase(name: "field line without colon or space", input: req("X-SECRET\r\n"), status: 400),
    RejectCase(name: "whitespace between name and colon", input: req("Host : SECRET\r\n"), status: 400),
    RejectCase(name: "tab between name and colon", input: req("Host\t: SECRET\r\n"), status: 400),
    RejectCase(name: "empty field name", input: req(": SECRET\r\n"), status: 400),
    RejectCase(name: "field name not a token", input: req("X(A): SECRET\r\n"), status: 400),
    RejectCase(name: "obs-fold with space", input: req("X-A: a\r\n  SECRET\r\n"), status: 400, message: "obsolete line folding not allowed"),
    RejectCase(name: "obs-fold with tab", input: req("X-A: a\r\n\tSECRET\r\n"), status: 400),
    RejectCase(name: "first field line starts with space", input: req(" X-A: SECRET\r\n"), status: 400),
    RejectCase(name: "NUL in field value", input: req("X-A: SEC\u{0}RET\r\n"), status: 400),
    RejectCase(name: "ESC in field value", input: req("X-A: SEC\u{1B}RET\r\n"), status: 400),
    RejectCase(name: "DEL in field value", input: req("X-A: SEC\u{7F}RET\r\n"), status: 400),
    RejectCase(name: "more than maxHeaderCount fields", input: req((1...6).map { "X-\($0): v\r\n" }.joined()), status: 431),
    RejectCase(name: "head larger than maxHeadBytes", input: req("X-A: " + String(repeating: "v", count: 240) + "\r\n"), status: 431),
    // Host (RFC 9112 §3.2)
    RejectCase(name: "no Host on HTTP/1.1", input: req("Accept: x\r\n", host: false), status: 400, message: "missing Host field"),
    RejectCase(name: "no Host on HTTP/1.1, bare LF head", input: b("GET / HTTP/1.1\nAccept: x\n\n"), status: 400, message: "missing Host field"),
    RejectCase(name: "several Host fields", input: req("Host: a\r\nHost: a\r\n", host: false), status: 400, message: "multiple Host fields"),
    RejectCase(name: "several Host fields with different values", input: req("Host: a\r\nX-A: 1\r\nhost: SECRET\r\n", host: false), status: 400, message: "multiple Host fields"),
    RejectCase(name: "several Host fields on HTTP/1.0", input: req("Host: a\r\nHost: b\r\n", line: "GET / HTTP/1.0", host: false), status: 400, message: "multiple Host fields"),
    RejectCase(name: "Host with userinfo", input: req("Host: SECRET@h\r\n", host: false), status: 400, message: "invalid Host field"),
    RejectCase(name: "Host with a path", input: req("Host: h/SECRET\r\n", host: false), status: 400, message: "invalid Host field"),
    RejectCase(name: "Host with inner whitespace", input: req("Host: a SECRET\r\n", host: false), status: 400, message: "invalid Host field"),
    RejectCase(name: "Host with non-ASCII bytes", input: b("GET / HTTP/1.1\r\nHost: caf") + [0xE9] + b("\r\n\r\n"), status: 400, message: "invalid Host field"),
    // Content-Length / Transfer-Encoding
    RejectCase(name: "Content-Length with Transfer-Encoding", input: req("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", line: "POST / HTTP/1.1") + b("3\r\nabc\r\n0\r\n\r\n"), status: 400),
    RejectCase(name: "two equal Content-Length fields", input: req("Content-Length: 3\r\nContent-Length: 3\r\n", line: "POST / HTTP/1.1") + b("abc"), status: 400),
    RejectCase(name: "Content-Length list value", input: req("Content-Length: 5, 5\r\n", line: "POST / HTTP/1.1") + b("hello"), status: 400),
    RejectCase(name: "Content-Length with plus sign", input: req("Content-Length: +5\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length negative", input: req("Content-Length: -1\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length with inner space", input: req("Content-Length: 1 0\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length empty", input: req("Content-Length:\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length hex", input: req("Content-Length: 0x10\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length 19 digits", input: req("Content-Length: 1000000000000000000\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length beyond Int", input: req("Content-Length: 99999999999999999999999\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Content-Length above maxBodyBytes", input: req("Content-Length: 101\r\n", line: "POST / HTTP/1.1"), status: 413),
    RejectCase(name: "Transfer-Encoding gzip, chunked", input: req("Transfer-Encoding: gzip, chunked\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Transfer-Encoding gzip", input: req("Transfer-Encoding: gzip\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Transfer-Encoding identity", input: req("Transfer-Encoding: identity\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Transfer-Encoding chunked twice in one line", input: req("Transfer-Encoding: chunked, chunked\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Transfer-Encoding on two lines", input: req("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", line: "POST / HTTP/1.1"), status: 400),
    RejectCase(name: "Transfer-Encoding in HTTP/1.0", input: req("Transfer-Encoding: chunked\r\n", line: "POST / HTTP/1.0") + b("0\r\n\r\n"), status: 400),
    // Chunked body: the head is fine, so it is delivered before the error.
    RejectCase(name: "chunk size not hex", input: chunked("zz\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk size missing", input: chunked("\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk size with 17 digits", input: chunked("00000000000000001\r\nx\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk size overflows Int", input: chunked("ffffffffffffffff\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "space after chunk size without extension", input: chunked("3 \r\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "control byte in chunk extension", input: chunked("3;a=\u{1}\r\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk extensions over budget", input: chunked("3;" + String(repeating: "e", count: 300) + "\r\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk extension one byte over budget", input: chunked("3;" + String(repeating: "e", count: 256) + "\r\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1, message: "chunk extensions too long"),
    RejectCase(name: "chunk data not followed by CRLF", input: chunked("3\r\nabcX\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk data followed directly by the next size line", input: chunked("3\r\nabc3\r\nxyz\r\n0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk data followed by CR and junk", input: chunked("3\r\nabc\rX0\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "chunk larger than maxBodyBytes", input: chunked("65\r\n"), status: 413, headsBefore: 1),
    RejectCase(name: "chunks adding up above maxBodyBytes", input: chunked("3c\r\n" + String(repeating: "a", count: 60) + "\r\n3c\r\n"), status: 413, headsBefore: 1),
    // Bare LF in chunked framing (RFC 9112 §7.1 says CRLF; §2.2's bare-LF leniency covers the head only).
    RejectCase(name: "bare LF ending a chunk size line", input: chunked("3\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1, message: "bare LF in chunk size line"),
    RejectCase(name: "bare LF ending a chunk size line with an extension", input: chunked("3;a=b\nabc\r\n0\r\n\r\n"), status: 400, headsBefore: 1, message: "bare LF in chunk size line"),
    RejectCase(name: "bare LF ending the last-chunk line", input: chunked("3\r\nabc\r\n0\n\r\n"), status: 400, headsBefore: 1, message: "bare LF in chunk size line"),
    RejectCase(name: "bare LF ending the first chunk size line", input: chunked("0\n\r\n"), status: 400, headsBefore: 1, message: "bare LF in chunk size line"),
    RejectCase(name: "bare LF after chunk data", input: chunked("3\r\nabc\n0\r\n\r\n"), status: 400, headsBefore: 1, message: "missing CRLF after chunk data"),
    RejectCase(name: "LF CR after chunk data", input: chunked("3\r\nabc\n\r0\r\n\r\n"), status: 400, headsBefore: 1, message: "missing CRLF after chunk data"),
    RejectCase(name: "bare LF ending a trailer field", input: chunked("0\r\nX-T: v\n\r\n"), status: 400, headsBefore: 1, message: "bare LF in trailer section"),
    RejectCase(name: "bare LF as the empty line ending the trailers", input: chunked("0\r\nX-T: v\r\n\n"), status: 400, headsBefore: 1, message: "bare LF in trailer section"),
    RejectCase(name: "bare LF as the empty line after the last chunk", input: chunked("3\r\nabc\r\n0\r\n\n"), status: 400, headsBefore: 1, message: "bare LF in trailer section"),
    RejectCase(name: "malformed trailer field", input: chunked("0\r\nBad Trailer: SECRET\r\n\r\n"), status: 400, headsBefore: 1),
    RejectCase(name: "too many trailer fields", input: chunked("0\r\n" + (1...6).map { "T-\($0): v\r\n" }.joined() + "\r\n"), status: 431, headsBefore: 1),
    RejectCase(name: "trailer section too large", input: chunked("0\r\nT: " + String(repeating: "v", count: 260) + "\r\n\r\n"), status: 431, headsBefore: 1),
]

@Suite("Request validation")
struct ValidationTests {
    @Test(arguments: rejectCases)
    func rejects(_ c: RejectCase) throws {
        let outcome = parseThreeWays(c.input, limits: smallLimits)
        let error = try #require(outcome.error, "expected \(c.status), got \(outcome)")
        #expect(error.status == c.status)
        #expect(outcome.heads.count == c.headsBefore)
        #expect(!error.message.isEmpty)
        #expect(!error.message.contains("SECRET"))
        #expect(!error.message.contains("SEC"))
        if let message = c.message { #expect(error.message == message) }
    }

    @Test("status of every error kind")
    func statuses() {
        let expected: [(HTTPParseError.Kind, Int)] = [
            (.headTooLarge, 431), (.tooManyHeaders, 431), (.uriTooLong, 414),
            (.bodyTooLarge, 413), (.badRequest, 400), (.versionNotSupported, 505),
        ]
        for (kind, status) in expected {
            #expect(HTTPParseError(kind: kind, message: "x").status == status)
        }
    }

    @Test("a limit is inclusive: exactly at each limit is accepted")
    func limitsAreInclusive() throws {
        let target = "/" + String(repeating: "u", count: 31)          // 32 bytes == maxURIBytes
        // Host + 2 numbered fields + Content-Length + padding = 5 == maxHeaderCount; padded to 256 == maxHeadBytes.
        var input = b("POST \(target) HTTP/1.1\r\nHost: h\r\n" + (1...2).map { "X-\($0): v\r\n" }.joined() + "Content-Length: 100\r\n")
        let pad = 256 - input.count - b("X-P: \r\n\r\n").count
        input += b("X-P: " + String(repeating: "p", count: pad) + "\r\n\r\n")
        #expect(input.count == 256)
        let body = [UInt8](repeating: 0x42, count: 100)
        let outcome = parseThreeWays(input + body, limits: smallLimits)
        #expect(outcome.error == nil)
        #expect(outcome.events.count == 3)
        let head = try #require(outcome.heads.first)
        #expect(head.target == target)
        #expect(head.headers.count == 5)
        #expect(head.framing == .contentLength(100))
        #expect(outcome.events.dropFirst().first == .body(body))
    }

    @Test("a chunked body of exactly maxBodyBytes is accepted")
    func chunkedAtBodyLimit() {
        let input = b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n32\r\n" + String(repeating: "a", count: 50)
            + "\r\n32\r\n" + String(repeating: "b", count: 50) + "\r\n0\r\n\r\n")
        let outcome = parseThreeWays(input, limits: smallLimits)
        #expect(outcome.error == nil)
        #expect(outcome.events.dropFirst().first == .body(b(String(repeating: "a", count: 50) + String(repeating: "b", count: 50))))
        #expect(outcome.events.last == .end)
    }
}

@Suite("Limits detected before the input is complete")
struct EarlyLimitTests {
    @Test("head limit fires while the head is still incomplete")
    func headLimitOnPartialHead() throws {
        let limits = RequestLimits(maxHeadBytes: 64)
        var parser = RequestParser(limits: limits)
        let start = b("GET / HTTP/1.1\r\nX-Long: ")
        parser.append(start + [UInt8](repeating: 0x61, count: 64 - start.count))   // exactly 64 bytes, no end
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 64)
        parser.append([0x61])
        #expect(throws: HTTPParseError(kind: .headTooLarge, message: "request head too large")) { try parser.next() }
    }

    @Test("head limit fires inside an endless request line")
    func headLimitOnPartialRequestLine() {
        let limits = RequestLimits(maxHeadBytes: 64, maxURIBytes: 1000)
        let outcome = run([b("GET /" + String(repeating: "a", count: 100))], limits: limits)
        #expect(outcome.error?.kind == .headTooLarge)
        let dripped = run(b("GET /" + String(repeating: "a", count: 100)).map { [$0] }, limits: limits)
        #expect(dripped == outcome)
    }

    @Test("URI limit fires while the request line is incomplete")
    func uriLimitOnPartialRequestLine() throws {
        var parser = RequestParser(limits: RequestLimits(maxURIBytes: 16))
        parser.append(b("GET /" + String(repeating: "a", count: 15)))   // 16-byte target so far, no version
        #expect(try parser.next() == nil)
        parser.append(b("a"))
        #expect(throws: HTTPParseError(kind: .uriTooLong, message: "request-target too long")) { try parser.next() }
    }

    @Test("URI limit fires before the head limit for a long target even when drip-fed")
    func uriLimitDripFed() {
        let input = b("GET /" + String(repeating: "a", count: 200))
        let limits = RequestLimits(maxHeadBytes: 100, maxURIBytes: 50)
        #expect(run(input.map { [$0] }, limits: limits).error?.kind == .uriTooLong)
        #expect(run([input], limits: limits).error?.kind == .uriTooLong)
    }

    @Test("trailer limit fires while the trailer section is incomplete")
    func trailerLimitOnPartialTrailers() throws {
        var parser = RequestParser(limits: RequestLimits(maxHeadBytes: 64))
        parser.append(b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: "))
        #expect(try parser.next() != nil)
        #expect(try parser.next() == nil)
        parser.append([UInt8](repeating: 0x76, count: 61))
        #expect(try parser.next() == nil)                 // 64 bytes of trailer section so far
        parser.append([0x76])
        #expect(throws: HTTPParseError(kind: .headTooLarge, message: "trailer section too large")) { try parser.next() }
    }

    @Test("an endless chunk size line is refused before its end arrives")
    func chunkLineLimitOnPartialLine() throws {
        var parser = RequestParser(limits: RequestLimits(maxHeadBytes: 64))
        parser.append(b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;"))
        #expect(try parser.next() != nil)
        #expect(try parser.next() == nil)
        parser.append([UInt8](repeating: 0x65, count: 200))
        #expect(throws: HTTPParseError.self) { try parser.next() }
        #expect(parser.bufferedByteCount == 0)
    }
}
