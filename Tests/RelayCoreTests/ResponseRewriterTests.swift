// ResponseRewriter: the head the client receives and how its body is framed.
import HTTP1
import HTTPServer
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing
import TestSupportCore

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

    /// RFC 9110, 8.6: a server MUST NOT send `Content-Length` with a 1xx or 204, whatever the provider sent; a 304
    /// keeps it, as a HEAD does.
    @Test(arguments: [(204, "POST", false), (204, "HEAD", false), (103, "GET", false), (304, "GET", true)])
    func aNoContentAnswerCarriesNoLength(_ status: Int, _ method: String, _ keeps: Bool) {
        let r = clientHead(status: status, [("Content-Type", "application/json"), ("Content-Length", "0")], method: method)
        #expect(r.mode == ResponseBodyMode.none)
        #expect(r.head.headers.values("Content-Length") == (keeps ? ["0"] : []))
        #expect(r.keepAlive)
    }

    @Test(arguments: [0, 1, 1234, 10_000_000])
    func jsonWithContentLengthKeepsIt(_ n: Int) {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "\(n)")])
        #expect(r.mode == .contentLength(n))
        #expect(r.head.headers.values("Content-Length") == ["\(n)"])
        #expect(!r.head.headers.contains("Transfer-Encoding"))
        #expect(r.keepAlive)
    }

    @Test(arguments: [[String](), ["abc"], ["-1"], ["1.5"], ["10", "10"], ["10", "20"], ["99999999999999999999999"],
                      ["+5"], [" 5"], ["5, 5"], [""]])
    func noUsableLengthOnHTTP11IsChunked(_ lengths: [String]) {
        let r = clientHead([("Content-Type", "application/json")] + lengths.map { ("Content-Length", $0) })
        #expect(r.mode == .chunked)
        #expect(r.head.headers.values("Transfer-Encoding") == ["chunked"])
        #expect(!r.head.headers.contains("Content-Length"))
        #expect(r.keepAlive)
        #expect(!r.head.headers.contains("Connection"))
    }

    /// A provider's `Connection` that names `Content-Length` drops it (RFC 9110, 7.6.1): the body cannot be framed
    /// by a length the client never sees (it would read to a close that a kept-alive connection never makes).
    @Test func aLengthNamedByConnectionIsDroppedAndTheBodyChunked() {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "5"), ("Connection", "content-length")])
        #expect(r.mode == .chunked)
        #expect(!r.head.headers.contains("Content-Length"))
        #expect(r.head.headers.values("Transfer-Encoding") == ["chunked"])
        #expect(r.keepAlive)
    }

    @Test func aLengthBesideATransferCodingIsDropped() {
        let r = clientHead([("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"), ("Content-Length", "5")])
        #expect(r.mode == .chunked)
        #expect(r.head.headers.values("Content-Length") == [])
        #expect(r.head.headers.values("Transfer-Encoding") == ["chunked"])
        #expect(ResponseRewriter.contentType(headers([("Content-Type", "text/event-stream"), ("Connection", "Content-Type")])) == nil)
        #expect(ResponseRewriter.contentType(headers([("Content-Type", "text/event-stream"), ("Connection", "close")])) == "text/event-stream")
    }

    @Test func aHeadsLengthThatIsNotOnePlainNumberIsDropped() {
        let r = clientHead([("Content-Type", "application/json"), ("Content-Length", "+5")], method: "HEAD")
        #expect(r.mode == ResponseBodyMode.none)
        #expect(!r.head.headers.contains("Content-Length"))
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

/// The rewrite as it was written rule by rule (one look at the list per rule), kept as the reference the two-pass
/// `ResponseRewriter.clientHead` is compared with.
private func referenceClientHead(
    status: Int, upstreamHeaders: HTTPHeaders, requestMethod: String, clientVersion: HTTPVersion,
    keepAlive: Bool, requestID: String, extraHeaders: HTTPHeaders
) -> (head: ResponseHead, mode: ResponseBodyMode, keepAlive: Bool) {
    var headers = upstreamHeaders
    HopByHop.strip(&headers)
    headers.remove("X-Request-Id")
    let upstreamLength = headers.values("Content-Length")   // what passes: `Connection` may have named it
    let plainLength = !upstreamHeaders.contains("Transfer-Encoding") && upstreamLength.count == 1 && !upstreamLength[0].isEmpty
        && upstreamLength[0].allSatisfy { "0123456789".contains($0) } ? Int(upstreamLength[0]) : nil
    if !upstreamLength.isEmpty && plainLength == nil { headers.remove("Content-Length") }
    let isEventStream = headers.first("Content-Type").map { $0.lowercased().hasPrefix("text/event-stream") } ?? false
    var mode: ResponseBodyMode
    var keepAlive = keepAlive
    if requestMethod == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status) {
        mode = .none
        if status == 204 || status < 200 { headers.remove("Content-Length") }
    } else if !isEventStream, let n = plainLength {
        mode = .contentLength(n)
    } else {
        headers.remove("Content-Length")
        if clientVersion == .http1_1 {
            mode = .chunked
            headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            mode = .closeDelimited
            keepAlive = false
        }
    }
    if isEventStream {
        headers.remove("Content-Length")
        headers.replaceOrAdd(name: "Cache-Control", value: "no-cache")
        headers.replaceOrAdd(name: "X-Accel-Buffering", value: "no")
    }
    headers.add(name: "X-Request-Id", value: requestID)
    for field in extraHeaders {
        headers.remove(field.name)
        headers.add(name: field.name, value: field.value)
    }
    if !keepAlive {
        headers.add(name: "Connection", value: "close")
    } else if clientVersion == .http1_0 {
        headers.add(name: "Connection", value: "keep-alive")
    }
    return (ResponseHead(status: status, version: .http1_1, headers: headers), mode, keepAlive)
}

extension ResponseRewriterTests {
    /// 20 000 provider heads drawn from the fields the rules are about (in any case, repeated, named by
    /// `Connection`, a content type and a length among them that `Connection` drops, lengths that are not one plain
    /// number), every status class, method, client version,
    /// keep-alive and extra fields that collide with the relay's own: the same head, field for field and in order,
    /// the same framing, the same keep-alive as the rule-by-rule rewrite.
    @Test func theTwoPassRewriteIsTheRuleByRuleOne() {
        let names = ["Content-Type", "content-type", "Content-Length", "CONTENT-LENGTH", "Connection", "Keep-Alive",
                     "Transfer-Encoding", "X-Request-Id", "x-request-id", "Cache-Control", "X-Accel-Buffering", "Date",
                     "X-Trace", "Retry-After", "TE", "Upgrade", "Proxy-Connection", "CONNECTION"]
        let values: [String: [String]] = [
            "content-type": ["text/event-stream", "TEXT/Event-Stream; charset=utf-8", "application/json", "text/event-streamx"],
            "content-length": ["5", "0", "abc", "-1", "99999999999999999999999", "5, 5", " 5", "+5", "", "007"],
            "transfer-encoding": ["chunked", "gzip, chunked"],
            "connection": ["keep-alive", "close, X-Trace", "Content-Type", "x-trace, cache-control", ", ,", "Content-Length",
                           "x-request-id, X-Accel-Buffering", "CONTENT-length , date"],
        ]
        let extras = [HTTPHeaders(), headers([("Access-Control-Allow-Origin", "*")]),
                      headers([("Cache-Control", "private"), ("X-Request-Id", "extra"), ("Transfer-Encoding", "gzip")]),
                      headers([("Vary", "Origin"), ("Vary", "Accept")])]
        var random = SplitMix64(seed: 24)
        for _ in 0..<20_000 {
            var pairs: [(String, String)] = []
            for _ in 0..<Int(random.next() % 8) {
                let name = names[Int(random.next() % UInt64(names.count))]
                let choices = values[name.lowercased()] ?? ["v\(random.next() % 3)"]
                pairs.append((name, choices[Int(random.next() % UInt64(choices.count))]))
            }
            let status = [200, 204, 304, 101, 429, 500][Int(random.next() % 6)]
            let method = random.next() % 4 == 0 ? "HEAD" : "POST"
            let version: HTTPVersion = random.next() % 3 == 0 ? .http1_0 : .http1_1
            let keepAlive = random.next() % 2 == 0
            let extra = extras[Int(random.next() % UInt64(extras.count))]
            let got = ResponseRewriter.clientHead(status: status, upstreamHeaders: headers(pairs), requestMethod: method,
                                                  clientVersion: version, keepAlive: keepAlive, requestID: "rid-9",
                                                  extraHeaders: extra)
            let want = referenceClientHead(status: status, upstreamHeaders: headers(pairs), requestMethod: method,
                                           clientVersion: version, keepAlive: keepAlive, requestID: "rid-9",
                                           extraHeaders: extra)
            let same = got.head.headers == want.head.headers && got.mode == want.mode && got.keepAlive == want.keepAlive
            #expect(same, "\(status) \(method) \(version) keepAlive \(keepAlive) \(pairs) extra \(Array(extra.map { $0.name }))")
            if !same { return }
        }
    }
}
