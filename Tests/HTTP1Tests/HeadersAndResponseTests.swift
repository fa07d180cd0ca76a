import HTTP1
import Testing
import TestSupportCore

@Suite("HTTPHeaders")
struct HeadersTests {
    private var sample: HTTPHeaders {
        HTTPHeaders([("Host", "a"), ("Accept", "x"), ("accept", "y"), ("X-Id", "1"), ("ACCEPT", "z")])
    }

    @Test func lookupIsCaseInsensitive() {
        let h = sample
        #expect(h.first("host") == "a")
        #expect(h.first("HOST") == "a")
        #expect(h.first("aCcEpT") == "x")
        #expect(h.contains("x-id"))
        #expect(!h.contains("x-i"))
        #expect(!h.contains("x-idd"))
        #expect(h.first("missing") == nil)
    }

    @Test func duplicatesKeptInOrder() {
        let h = sample
        #expect(h.values("accept") == ["x", "y", "z"])
        #expect(h.count == 5)
        #expect(h.map(\.name) == ["Host", "Accept", "accept", "X-Id", "ACCEPT"])
        #expect(h.map(\.value) == ["a", "x", "y", "1", "z"])
    }

    @Test func addAppends() {
        var h = HTTPHeaders()
        #expect(h.count == 0)
        h.add(name: "B", value: "1")
        h.add(name: "A", value: "2")
        h.add(name: "b", value: "3")
        #expect(Array(h) == [HTTPField(name: "B", value: "1"), HTTPField(name: "A", value: "2"), HTTPField(name: "b", value: "3")])
    }

    @Test func removeDropsEveryOccurrence() {
        var h = sample
        h.remove("ACCEPT")
        #expect(h == HTTPHeaders([("Host", "a"), ("X-Id", "1")]))
        h.remove("nothing")
        #expect(h.count == 2)
    }

    @Test func replaceOrAddRemovesAllThenAppends() {
        var h = sample
        h.replaceOrAdd(name: "Accept", value: "only")
        #expect(h == HTTPHeaders([("Host", "a"), ("X-Id", "1"), ("Accept", "only")]))
        h.replaceOrAdd(name: "New", value: "n")
        #expect(h.values("new") == ["n"])
        #expect(h.count == 4)
    }

    @Test func removeAllWhere() {
        var h = sample
        h.removeAll { $0.value == "x" || $0.name == "X-Id" }
        #expect(h == HTTPHeaders([("Host", "a"), ("accept", "y"), ("ACCEPT", "z")]))
    }

    @Test func tokensSplitTrimLowercaseAndDropEmpties() {
        let h = HTTPHeaders([("Connection", " Keep-Alive ,, X-Foo\t"), ("Other", "no"), ("connection", "UPGRADE"), ("Connection", " , ")])
        #expect(h.tokens("connection") == ["keep-alive", "x-foo", "upgrade"])
        #expect(h.tokens("missing") == [])
    }

    @Test func equalityIsExact() {
        #expect(HTTPHeaders([("A", "1"), ("B", "2")]) == HTTPHeaders([("A", "1"), ("B", "2")]))
        #expect(HTTPHeaders([("A", "1"), ("B", "2")]) != HTTPHeaders([("B", "2"), ("A", "1")]))
        #expect(HTTPHeaders([("A", "1")]) != HTTPHeaders([("a", "1")]))
    }

    @Test(arguments: [
        ("text/event-stream", true), ("Text/Event-Stream; charset=utf-8", true), ("TEXT/EVENT-STREAMX", true),
        ("text/event-strea", false), ("", false), ("text/event_stream", false), (" text/event-stream", false),
        ("text/event-str\u{C9}am", false), ("text\u{2F}event-stream", true),
    ])
    func prefixFoldsOnlyTheStringsASCIILetters(_ c: (String, Bool)) {
        #expect(asciiCaseInsensitiveHasPrefix(c.0, lowercasePrefix: "text/event-stream") == c.1)
        // The same answer through a string that is a slice of a longer one.
        let longer = "padding " + c.0
        let sliced = String(longer[longer.index(longer.startIndex, offsetBy: 8)...])
        #expect(asciiCaseInsensitiveHasPrefix(sliced, lowercasePrefix: "text/event-stream") == c.1)
    }

    @Test func nonASCIINamesAreNotCaseFolded() {
        let h = HTTPHeaders([("X-\u{C9}", "1")])
        #expect(h.first("X-\u{C9}") == "1")
        #expect(h.first("x-\u{E9}") == nil)
    }
}

@Suite("HopByHop")
struct HopByHopTests {
    @Test func standardSet() {
        #expect(HopByHop.standard == ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                                      "trailer", "upgrade", "proxy-authenticate", "proxy-authorization"])
    }

    @Test func stripRemovesStandardAndConnectionNamedFields() {
        var h = HTTPHeaders([
            ("Host", "h"), ("Connection", "keep-alive, X-Private"), ("X-Private", "secret"), ("Keep-Alive", "timeout=5"),
            ("TRANSFER-ENCODING", "chunked"), ("TE", "trailers"), ("Trailer", "X"), ("Upgrade", "h2c"),
            ("Proxy-Authorization", "p"), ("Proxy-Authenticate", "q"), ("Proxy-Connection", "close"),
            ("Content-Type", "application/json"), ("connection", "X-Second"), ("x-second", "2"), ("X-Kept", "k"),
        ])
        HopByHop.strip(&h)
        #expect(h == HTTPHeaders([("Host", "h"), ("Content-Type", "application/json"), ("X-Kept", "k")]))
    }

    /// Past `ConnectionNamed.compared` names the list is a set: the same fields go, whatever their case.
    @Test func aLongConnectionListNamesFieldsInAnyCase() {
        let names = (0..<12).map { "X-Hop-\($0)" }
        var h = HTTPHeaders([("Connection", names.joined(separator: ", ")), ("x-hop-3", "a"), ("X-HOP-11", "b"),
                             ("X-Hop-12", "kept"), ("Content-Type", "application/json")])
        HopByHop.strip(&h)
        #expect(h == HTTPHeaders([("X-Hop-12", "kept"), ("Content-Type", "application/json")]))
    }

    @Test func stripLeavesEndToEndFieldsAlone() {
        var h = HTTPHeaders([("Authorization", "Bearer t"), ("Accept", "text/event-stream")])
        let before = h
        HopByHop.strip(&h)
        #expect(h == before)
    }
}

@Suite("ResponseHead")
struct ResponseHeadTests {
    private func text(_ head: ResponseHead) -> String {
        var out: [UInt8] = []
        head.serialize(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func defaultReasonAndHeaders() {
        let head = ResponseHead(status: 200, headers: HTTPHeaders([("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]))
        #expect(text(head) == "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
    }

    @Test func customReasonAndVersion() {
        #expect(text(ResponseHead(status: 404, reason: "Nope", version: .http1_0)) == "HTTP/1.0 404 Nope\r\n\r\n")
        #expect(text(ResponseHead(status: 204, reason: "")) == "HTTP/1.1 204 \r\n\r\n")
    }

    @Test func unknownStatus() {
        #expect(text(ResponseHead(status: 599)) == "HTTP/1.1 599 Unknown\r\n\r\n")
    }

    @Test func appendsWithoutClearing() {
        var out = b("prefix|")
        ResponseHead(status: 100).serialize(into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "prefix|HTTP/1.1 100 Continue\r\n\r\n")
    }

    @Test func lineBreaksCannotInjectFields() {
        let head = ResponseHead(status: 502, reason: "Bad\r\nX: y", headers: HTTPHeaders([("X-A", "v\r\nSet-Cookie: evil"), ("X-B\n", "a\0b")]))
        #expect(text(head) == "HTTP/1.1 502 Bad  X: y\r\nX-A: v  Set-Cookie: evil\r\nX-B : a b\r\n\r\n")
    }

    @Test("standard reason phrases", arguments: [
        (200, "OK"), (204, "No Content"), (400, "Bad Request"), (404, "Not Found"), (413, "Content Too Large"),
        (414, "URI Too Long"), (429, "Too Many Requests"), (431, "Request Header Fields Too Large"),
        (500, "Internal Server Error"), (502, "Bad Gateway"), (503, "Service Unavailable"), (504, "Gateway Timeout"),
        (505, "HTTP Version Not Supported"), (299, "Unknown"), (0, "Unknown"),
    ])
    func reasonPhrases(status: Int, phrase: String) {
        #expect(HTTPStatus.reasonPhrase(status) == phrase)
    }
}

@Suite("ChunkedEncoding")
struct ChunkedEncodingTests {
    @Test("size lines in lowercase hex", arguments: [
        (0, "0"), (1, "1"), (15, "f"), (16, "10"), (26, "1a"), (255, "ff"), (256, "100"), (4096, "1000"),
        (0xDEAD_BEEF, "deadbeef"), (Int.max, "7fffffffffffffff"),
    ])
    func sizeLine(count: Int, hex: String) {
        var out = b("x")
        ChunkedEncoding.appendSizeLine(count, to: &out)
        #expect(out == b("x" + hex + "\r\n"))
    }

    /// The stack-built size line the server writes per event is the same line, for every size up to 70 000 and
    /// at the largest.
    @Test func sizeLineWrittenInPlace() {
        var line = [UInt8](repeating: 0xEE, count: ChunkedEncoding.maxSizeLineBytes)
        for count in Array(0...70_000) + [0xFFFF_FFFF, Int.max] {
            var expected: [UInt8] = []
            ChunkedEncoding.appendSizeLine(count, to: &expected)
            let length = line.withUnsafeMutableBytes { ChunkedEncoding.writeSizeLine(count, into: $0) }
            if Array(line[..<length]) != expected {
                Issue.record("size \(count): \(line[..<length]) against \(expected)")
                return
            }
        }
        #expect(line.withUnsafeMutableBytes { ChunkedEncoding.writeSizeLine(Int.max, into: $0) } == ChunkedEncoding.maxSizeLineBytes)
    }

    @Test func constants() {
        #expect(ChunkedEncoding.crlf == b("\r\n"))
        #expect(ChunkedEncoding.lastChunk == b("0\r\n\r\n"))
    }

    @Test func frame() {
        let payload = b("data: {\"delta\":\"hi\"}\n\n")
        let framed = payload.withUnsafeBytes { ChunkedEncoding.frame($0) }
        #expect(payload.count == 22)
        #expect(framed == b("16\r\n") + payload + b("\r\n"))
        #expect(b("").withUnsafeBytes { ChunkedEncoding.frame($0) } == [])
    }

    @Test("framed chunks parse back to the same payload")
    func roundTrip() {
        var rng = SplitMix64(seed: 7)
        var wire = b("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        var payload: [UInt8] = []
        for _ in 0..<50 {
            let piece = (0..<Int.random(in: 1...700, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            payload += piece
            wire += piece.withUnsafeBytes { ChunkedEncoding.frame($0) }
        }
        wire += ChunkedEncoding.lastChunk
        let outcome = run([wire], limits: RequestLimits(maxBodyBytes: 1 << 22))
        #expect(outcome.error == nil)
        #expect(outcome.events.dropFirst().first == .body(payload))
        #expect(outcome.events.last == .end)
    }
}
