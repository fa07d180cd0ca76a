// ResponseRewriter: the head the client receives and how its body is framed.
import HTTP1
import HTTPServer
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

private func clientHead(
    status: Int = 200, _ pairs: [(String, String)], method: String = "POST", version: HTTPVersion = .http1_1,
    keepAlive: Bool = true
) -> (head: ResponseHead, mode: ResponseBodyMode, keepAlive: Bool) {
    ResponseRewriter.clientHead(
        status: status, upstreamHeaders: headers(pairs), requestMethod: method, clientVersion: version,
        keepAlive: keepAlive, requestID: "rid-9")
}

@Suite struct ResponseRewriterTests {
    @Test func rateLimitKeepsRetryAfterAndItsBody() {
        let r = clientHead(status: 429, [
            ("Content-Type", "application/json"), ("Retry-After", "20"), ("x-ratelimit-remaining-requests", "0"),
            ("Content-Length", "87"),
        ])
        #expect(r.head.status == 429)
        #expect(r.head.version == .http1_1)
        #expect(r.mode == .contentLength(87))
        #expect(r.keepAlive)
        #expect(lines(r.head.headers) == [
            "Content-Type: application/json", "Retry-After: 20", "x-ratelimit-remaining-requests: 0",
            "Content-Length: 87", "X-Request-Id: rid-9",
        ])
    }

    @Test func hopByHopFieldsAreRemoved() {
        let r = clientHead([
            ("Connection", "keep-alive, X-Trace"), ("Keep-Alive", "timeout=5"), ("X-Trace", "abc"),
            ("Transfer-Encoding", "chunked"), ("Trailer", "X-Sum"), ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic"),
            ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("Content-Type", "application/json"),
            ("X-Request-Id", "upstream-id"), ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"),
        ])
        #expect(r.mode == .chunked)
        #expect(lines(r.head.headers) == [
            "Content-Type: application/json", "Date: Mon, 01 Jan 2024 00:00:00 GMT", "Transfer-Encoding: chunked",
            "X-Request-Id: rid-9",
        ])
    }

    struct NoBodyCase: Sendable, CustomTestStringConvertible {
        var method: String
        var status: Int
        var testDescription: String { "\(method) → \(status)" }
    }

    @Test(arguments: [
        NoBodyCase(method: "HEAD", status: 200), NoBodyCase(method: "HEAD", status: 404),
        NoBodyCase(method: "POST", status: 204), NoBodyCase(method: "GET", status: 304),
        NoBodyCase(method: "GET", status: 103),
    ])
    func responsesWithoutBodyHaveNoFraming(_ c: NoBodyCase) {
        let r = clientHead(status: c.status, [("Content-Type", "text/event-stream")], method: c.method)
        #expect(r.mode == ResponseBodyMode.none)
        #expect(!r.head.headers.contains("Transfer-Encoding"))
        #expect(!r.head.headers.contains("Content-Length"))
        #expect(r.keepAlive)
        #expect(!r.head.headers.contains("Connection"))
    }

    @Test func headKeepsTheUpstreamsContentLength() {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "1234")], method: "HEAD")
        #expect(r.mode == ResponseBodyMode.none)
        #expect(r.head.headers.values("Content-Length") == ["1234"])
    }

    @Test(arguments: [0, 1, 1234, 10_000_000])
    func jsonWithContentLengthKeepsIt(_ n: Int) {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "\(n)")])
        #expect(r.mode == .contentLength(n))
        #expect(r.head.headers.values("Content-Length") == ["\(n)"])
        #expect(!r.head.headers.contains("Transfer-Encoding"))
        #expect(r.keepAlive)
    }

    @Test(arguments: [[String](), ["abc"], ["-1"], ["1.5"], ["10", "10"], ["10", "20"], ["99999999999999999999999"]])
    func noUsableLengthOnHTTP11IsChunked(_ lengths: [String]) {
        let r = clientHead([("Content-Type", "application/json")] + lengths.map { ("Content-Length", $0) })
        #expect(r.mode == .chunked)
        #expect(r.head.headers.values("Transfer-Encoding") == ["chunked"])
        #expect(!r.head.headers.contains("Content-Length"))
        #expect(r.keepAlive)
        #expect(!r.head.headers.contains("Connection"))
    }

    @Test func http10WithoutLengthIsCloseDelimited() {
        let r = clientHead([("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")], version: .http1_0)
        #expect(r.mode == .closeDelimited)
        #expect(r.keepAlive == false)
        #expect(r.head.version == .http1_1)
        #expect(lines(r.head.headers) == ["Content-Type: text/plain", "X-Request-Id: rid-9", "Connection: close"])
    }

    @Test func http10SSEIsCloseDelimitedWithoutBuffering() {
        let r = clientHead([("Content-Type", "text/event-stream"), ("Content-Length", "50")], version: .http1_0)
        #expect(r.mode == .closeDelimited)
        #expect(!r.keepAlive)
        #expect(lines(r.head.headers) == [
            "Content-Type: text/event-stream", "Cache-Control: no-cache", "X-Accel-Buffering: no", "X-Request-Id: rid-9",
            "Connection: close",
        ])
    }

    @Test func http10WithLengthAndKeepAliveSaysKeepAlive() {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "5")], version: .http1_0)
        #expect(r.mode == .contentLength(5))
        #expect(r.keepAlive)
        #expect(r.head.headers.values("Connection") == ["keep-alive"])
    }

    @Test func clientAskingToCloseGetsConnectionClose() {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "5")], keepAlive: false)
        #expect(r.mode == .contentLength(5))
        #expect(!r.keepAlive)
        #expect(r.head.headers.values("Connection") == ["close"])
    }

    @Test(arguments: ["text/event-stream", "text/event-stream; charset=utf-8", "Text/Event-Stream"])
    func eventStreamWithUpstreamContentLengthIsChunkedWithoutIt(_ contentType: String) {
        let r = clientHead([
            ("Content-Type", contentType), ("Content-Length", "512"), ("Cache-Control", "no-store, private"),
            ("X-Accel-Buffering", "yes"),
        ])
        #expect(r.mode == .chunked)
        #expect(lines(r.head.headers) == [
            "Content-Type: \(contentType)", "Transfer-Encoding: chunked", "Cache-Control: no-cache",
            "X-Accel-Buffering: no", "X-Request-Id: rid-9",
        ])
    }

    @Test func nonEventStreamKeepsItsCacheControl() {
        let r = clientHead([("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("Content-Length", "2")])
        #expect(r.head.headers.values("Cache-Control") == ["no-store"])
        #expect(!r.head.headers.contains("X-Accel-Buffering"))
    }
}
