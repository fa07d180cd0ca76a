import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore
import Upstream

/// Providers are HTTPS and offer HTTP/2. Against a TLS upstream speaking either version, a client's cancel
/// reaches the provider at once, in every phase and whatever comes next (nothing waits for a later request to
/// carry a queued RST_STREAM), and a connection the provider closed while idle never fails a request.
@Suite("TLS upstream")
struct TLSUpstreamTests {
    static let versions: [UpstreamHTTPVersion] = [.http1_1, .http2]

    enum Phase: String, CaseIterable, Sendable {
        /// The provider read the request and has not answered.
        case beforeHead
        /// Events are flowing.
        case streaming
    }

    /// One worker, so that every request goes through one curl multi handle and can share its connections.
    static func relay(_ upstream: TLSUpstream, _ version: UpstreamHTTPVersion, caFile: Bool = true) throws -> RelayFixture {
        try RelayFixture(upstream: nil, baseURL: upstream.baseURL) { configuration in
            configuration.workers = 1
            configuration.upstreams["test"]?.httpVersion = version
            if caFile { configuration.upstreams["test"]?.caFile = upstream.caFile }
        }
    }

    /// Sends a request for `path` (unique within the test) and waits until the upstream has it.
    static func start(_ client: TestClient, _ path: String, on upstream: TLSUpstream) throws -> TLSUpstreamEvent {
        try client.sendRequest(path: path, body: chatBody)
        return try upstream.waitFor(timeout: 10, "request for \(path)") { $0.kind == "request" && $0.detail == path }
    }

    /// The upstream's view of a cancel: its stream reset, or its connection closed.
    @discardableResult
    static func cancelObserved(_ upstream: TLSUpstream, _ request: TLSUpstreamEvent) throws -> TLSUpstreamEvent {
        try upstream.waitFor(timeout: 5, "reset or close of c\(request.connection) s\(request.stream)") { event in
            event.connection == request.connection
                && ((event.kind == "reset" && event.stream == request.stream) || event.kind == "closed")
        }
    }

    @Test("a client's cancel reaches the TLS upstream", arguments: versions, Phase.allCases)
    func cancelReachesUpstream(version: UpstreamHTTPVersion, phase: Phase) throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, version)
        let client = try relay.client()
        let path = phase == .beforeHead ? "/v1/hold" : "/v1/stream"
        let request = try Self.start(client, path, on: upstream)
        let open = try upstream.waitFor { $0.kind == "open" && $0.connection == request.connection }
        #expect(open.detail == (version == .http2 ? "h2" : "http/1.1"))
        if phase == .streaming {
            #expect(try client.readHead().status == 200)
            _ = try client.readChunkedBody(until: "data: event 2\n\n")
        }
        let leftAt = monotonicNanoseconds()
        client.close()
        let cancel = try Self.cancelObserved(upstream, request)
        let ms = Double(cancel.atNanoseconds &- leftAt) / 1e6
        print("TLS cancel latency (HTTP/\(version.rawValue), \(phase)): \(cancel.kind) after \(String(format: "%.2f", ms)) ms")
        #expect(ms < 1000, "upstream saw the cancel \(ms) ms after the client left")
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
        relay.assertNoSecretLeaks(clients: [client])
    }

    /// Two silent streams multiplexed on one HTTP/2 connection: the cancelled one is reset at once (its
    /// RST_STREAM does not wait for traffic on the connection), and the other one lives on.
    @Test("HTTP/2: a cancelled stream is reset at once beside a silent one, which lives on")
    func resetBesideSilentStream() throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, .http2)
        let silent = try relay.client()
        let silentRequest = try Self.start(silent, "/v1/hold/silent", on: upstream)
        let cancelled = try relay.client()
        // Silent too: a stream that still receives would carry the reset out with its next frame.
        let cancelledRequest = try Self.start(cancelled, "/v1/hold/cancelled", on: upstream)
        #expect(cancelledRequest.connection == silentRequest.connection, "the two streams share one connection")

        let leftAt = monotonicNanoseconds()
        cancelled.close()
        let reset = try upstream.waitFor(timeout: 5, "RST_STREAM for s\(cancelledRequest.stream)") {
            $0.kind == "reset" && $0.stream == cancelledRequest.stream
        }
        let ms = Double(reset.atNanoseconds &- leftAt) / 1e6
        print("TLS cancel latency (HTTP/2 RST_STREAM beside a silent stream): \(String(format: "%.2f", ms)) ms")
        #expect(ms < 1000, "RST_STREAM arrived \(ms) ms after the client left")
        #expect(!upstream.allEvents.contains { $0.kind == "closed" }, "the shared connection stays open")

        // The silent stream is still served: its cancel now closes the connection it had to itself.
        silent.close()
        try Self.cancelObserved(upstream, silentRequest)
        try relay.waitUntilIdle()
    }

    /// Three streams cancelled one after another, each observed by the upstream before the next request starts:
    /// none waits for a later request to carry it (the last one, in particular). The pool is sound afterwards.
    @Test("consecutive cancels each reach the upstream on their own", arguments: versions)
    func consecutiveCancels(version: UpstreamHTTPVersion) throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, version)
        for round in 0..<3 {
            let client = try relay.client()
            let request = try Self.start(client, "/v1/stream/\(round)", on: upstream)
            #expect(try client.readHead().status == 200)
            _ = try client.readChunkedBody(until: "data: event 1\n\n")
            client.close()
            try Self.cancelObserved(upstream, request)
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/after", body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(String(decoding: try client.readBody(head: head), as: UTF8.self) == #"{"ok":true}"#)
        try relay.waitUntilIdle()
    }

    /// The provider closes idle connections (its keep-alive timeout; on HTTP/2 a GOAWAY first): the next
    /// requests, a POST among them, go out on a new connection and succeed.
    @Test("a request after the provider closed an idle connection succeeds", arguments: versions)
    func requestAfterIdleClose(version: UpstreamHTTPVersion) throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, version)
        let client = try relay.client()
        for round in 0..<3 {
            try client.sendRequest(path: "/v1/quick/\(round)", body: chatBody)
            let head = try client.readHead()
            #expect(head.status == 200, "round \(round)")
            #expect(String(decoding: try client.readBody(head: head), as: UTF8.self) == #"{"ok":true}"#)
            let request = try upstream.waitFor { $0.kind == "request" && $0.detail == "/v1/quick/\(round)" }
            let served = try upstream.waitFor {
                $0.kind == "done" && $0.connection == request.connection && $0.stream == request.stream
            }
            try upstream.closeIdle()
            try upstream.waitFor(timeout: 5, "idle close of c\(served.connection)") {
                $0.kind == "idle-closed" && $0.connection == served.connection
            }
        }
        try relay.waitUntilIdle()
        #expect(!relay.logs.lines.contains { $0.contains(#""outcome":"upstream_error""#) })
    }

    /// A provider that sent GOAWAY on an idle HTTP/2 connection and left it open: the next request, a POST,
    /// starts no stream there (it would be refused) and succeeds on a new connection.
    @Test("HTTP/2: a request after the provider's GOAWAY on an idle connection succeeds")
    func requestAfterGoAway() throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, .http2)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/quick/first", body: chatBody)
        var head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let first = try upstream.waitFor { $0.kind == "request" && $0.detail == "/v1/quick/first" }
        try upstream.waitFor { $0.kind == "done" && $0.connection == first.connection }
        try upstream.goAwayIdle()
        try upstream.waitFor { $0.kind == "goaway" && $0.connection == first.connection }

        try client.sendRequest(path: "/v1/quick/second", body: chatBody)
        head = try client.readHead()
        #expect(head.status == 200)
        #expect(String(decoding: try client.readBody(head: head), as: UTF8.self) == #"{"ok":true}"#)
        let second = try upstream.waitFor { $0.kind == "request" && $0.detail == "/v1/quick/second" }
        #expect(second.connection != first.connection)
        try relay.waitUntilIdle()
    }

    /// Certificate verification stays on: without `caFile` the test's private CA is not trusted.
    @Test("an upstream certificate from an untrusted CA is refused")
    func untrustedCertificate() throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, .http1_1, caFile: false)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/quick", body: chatBody)
        #expect(try client.readHead().status == 502)
        #expect(!upstream.allEvents.contains { $0.kind == "request" })
    }

    @Test("a second TLS connection to the provider resumes the first one's session (no full handshake)")
    func secondConnectionResumesTheTLSSession() throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, .http1_1)
        // One request, answered: its connection and its curl handle go back to their pools.
        let first = try relay.client()
        try first.sendRequest(path: "/v1/first", body: chatBody)
        #expect(try first.readHead().status == 200)
        // Two held at once: one reuses the idle connection (and the pooled handle); the other needs a new
        // connection from a new handle, which can resume only from a session cache the handles share.
        let held = try [relay.client(), relay.client()]
        _ = try Self.start(held[0], "/v1/hold-1", on: upstream)
        _ = try Self.start(held[1], "/v1/hold-2", on: upstream)
        let opens = upstream.allEvents.filter { $0.kind == "open" }
        #expect(opens.count == 2, "\(opens)")
        #expect(opens.first?.sessionResumed == false, "the first connection has nothing to resume")
        #expect(opens.last?.sessionResumed == true, "the second connection made a full handshake: \(opens)")
        for client in held { client.close() }
        first.close()
    }

    /// A body curl reads in place and an empty one (curl resends those without a rewind: the send count stops
    /// it), and one read through the callback, which the relay refuses to rewind.
    @Test("a POST whose reused TLS connection dies mid-request reaches the provider once (no resend)",
          arguments: versions, [chatBody.count, 0, Transfer.inlineBodyLimit + 1])
    func postOnADyingConnectionIsSentOnce(version: UpstreamHTTPVersion, bodyBytes: Int) throws {
        let upstream = try TLSUpstream()
        let relay = try Self.relay(upstream, version)
        // A first request leaves a connection in the pool; the POST goes out on it, and the provider drops it
        // after reading the request: curl's own retry of a request on a reused connection must not fire.
        let first = try relay.client()
        try first.sendRequest(path: "/v1/first", body: chatBody)
        #expect(try first.readHead().status == 200)
        let client = try relay.client()
        let body = bodyBytes == chatBody.count ? chatBody : [UInt8](repeating: UInt8(ascii: "b"), count: bodyBytes)
        try client.sendRequest(path: "/v1/drop", body: body)
        #expect(try client.readHead(timeout: 10).status == 502)
        try relay.waitUntilIdle()
        // The provider's events arrive through a pipe a reader thread drains: wait for the request to be seen, then
        // for a later request's, so that a resend (made before the 502 was answered) would have been read too.
        try upstream.waitFor(timeout: 10, "the dropped request") { $0.kind == "request" && $0.detail == "/v1/drop" }
        let marker = try relay.client()
        try marker.sendRequest(path: "/v1/marker", body: chatBody)
        #expect(try marker.readHead(timeout: 10).status == 200)
        try upstream.waitFor(timeout: 10, "the marker request") { $0.kind == "request" && $0.detail == "/v1/marker" }
        marker.close()
        let sent = upstream.allEvents.filter { $0.kind == "request" && $0.detail == "/v1/drop" }
        #expect(sent.count == 1, "the POST reached the provider \(sent.count) times: \(upstream.allEvents)")
        relay.assertNoSecretLeaks(clients: [first, client])
    }

    /// HTTPS, HTTP/1.1: a provider writes a second answer nobody asked for on an idle connection (its own TLS
    /// record, waiting in the relay's socket). libcurl 7.88 would reuse that connection (its OpenSSL liveness check
    /// counts readable as alive) and hand the stale answer to the next request; the relay drops it and the next
    /// request, a POST, is answered on a new connection, once. The same with HTTP/2 asked for from a provider
    /// that offers only HTTP/1.1.
    @Test("HTTP/1.1 over TLS: an answer left on an idle connection is never the next request's",
          arguments: [UpstreamHTTPVersion.http1_1, .http2])
    func staleAnswerOnIdleConnection(asked: UpstreamHTTPVersion) throws {
        let upstream = try TLSUpstream(http2: false)
        let relay = try Self.relay(upstream, asked)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/quick/first", body: chatBody)
        var head = try client.readHead()
        #expect(head.status == 200)
        _ = try client.readBody(head: head)
        let first = try upstream.waitFor { $0.kind == "request" && $0.detail == "/v1/quick/first" }
        try upstream.waitFor { $0.kind == "done" && $0.connection == first.connection }
        try relay.waitUntilIdle()
        try upstream.staleIdle()
        try upstream.waitFor(timeout: 10, "the stale answer in the relay's socket") { $0.kind == "stale" && $0.connection == first.connection }

        try client.sendRequest(path: "/v1/quick/second", body: chatBody)
        head = try client.readHead()
        #expect(head.status == 200)
        #expect(String(decoding: try client.readBody(head: head), as: UTF8.self) == #"{"ok":true}"#)
        let second = try upstream.waitFor { $0.kind == "request" && $0.detail == "/v1/quick/second" }
        #expect(second.connection != first.connection)
        #expect(upstream.allEvents.filter { $0.kind == "request" && $0.detail == "/v1/quick/second" }.count == 1)
        try relay.waitUntilIdle()
    }
}

extension TLSUpstreamTests {
    /// A request for `path` (unique within the test), answered 200: the answer's body and the upstream's view of it.
    static func answered(_ client: TestClient, _ path: String, on upstream: TLSUpstream) throws -> (body: String, request: TLSUpstreamEvent) {
        try client.sendRequest(path: path, body: chatBody)
        let head = try client.readHead()
        #expect(head.status == 200)
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        return (body, try upstream.waitFor { $0.kind == "request" && $0.detail == path })
    }

    /// HTTPS, HTTP/1.1: a provider writes a second answer right after an answer's last byte, in the same TLS record.
    /// libcurl 7.88 reads a Content-Length body no further than its length, so OpenSSL decrypts the whole record and
    /// keeps the rest: nothing waits in the socket, yet the connection holds bytes. Reused, the next request (maybe
    /// another user's) would read them first, as its answer. It is answered by the provider, on a new connection; a
    /// connection whose TLS holds nothing is reused as before.
    ///
    /// The same with HTTP/2 asked for (the default for https://) from a provider that offers only HTTP/1.1: curl
    /// speaks HTTP/1.1 on a connection it keeps, which is checked as any HTTP/1.1 one.
    @Test("HTTP/1.1 over TLS: bytes OpenSSL holds past an answer are never the next request's",
          arguments: [UpstreamHTTPVersion.http1_1, .http2])
    func excessHeldByTLS(asked: UpstreamHTTPVersion) throws {
        let upstream = try TLSUpstream(http2: false)
        let relay = try Self.relay(upstream, asked)
        let client = try relay.client()
        let first = try Self.answered(client, "/v1/excess/first", on: upstream)
        #expect(first.body == #"{"ok":true}"#)
        try relay.waitUntilIdle()

        let second = try Self.answered(client, "/v1/quick/second", on: upstream)
        #expect(second.body == #"{"ok":true}"#, "the second request got the bytes left after the first answer")
        #expect(second.request.connection != first.request.connection)
        #expect(upstream.allEvents.filter { $0.kind == "request" && $0.detail == "/v1/quick/second" }.count == 1)
        try relay.waitUntilIdle()

        let third = try Self.answered(client, "/v1/quick/third", on: upstream)
        #expect(third.body == #"{"ok":true}"#)
        #expect(third.request.connection == second.request.connection, "a clean TLS connection was dropped")
        try relay.waitUntilIdle()
    }
}
