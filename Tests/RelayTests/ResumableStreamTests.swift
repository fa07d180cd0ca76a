import Auth
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore

/// Resumable streams end to end (README, "Resumable streams"): a real relay, a scripted provider that writes the
/// answer in two parts (the second when the test says), clients that drop and resume.
@Suite("Resumable streams")
struct ResumableStreamTests {
    static let tokenA = "resume-token-A-0c1d2e3f"
    static let tokenB = "resume-token-B-4a5b6c7d"
    /// The first part: multi-byte characters, so offsets fall inside them.
    static let part1 = Array("data: {\"t\":\"héllo\"}\n\ndata: {\"t\":\"wörld €\"}\n\n".utf8)
    static let part2 = Array("data: {\"t\":\"😀 end\"}\n\ndata: [DONE]\n\n".utf8)
    static var provider: [UInt8] { part1 + part2 }

    /// A provider that writes `first`, waits for `next`, writes `second`, and ends; `closed` gets its peer's close
    /// when the relay cancels instead.
    static func upstream(_ first: [UInt8] = part1, _ second: [UInt8] = part2, next: Mailbox<Int>,
                         closed: Mailbox<PeerClose>? = nil) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(first)
            if let closed {
                closed.put(try connection.waitForPeerClose(timeout: 10))
                return
            }
            _ = try next.take(timeout: 10)
            try connection.writeChunk(second)
            try connection.writeLastChunk()
        }
    }

    static func relay(_ upstream: ScriptedUpstream, clock: any Clock = MonotonicClock(), resume: RouteResume = RouteResume(),
                      copyLagSeconds: Double = ResumableStreams.defaultCopyLagSeconds,
                      configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, clock: clock, streamCopyLagSeconds: copyLagSeconds) { config in
            config.clients.tokens = [.init(id: "app-a", sha256Hex: ClientAuthTests.sha256Hex(tokenA)),
                                     .init(id: "app-b", sha256Hex: ClientAuthTests.sha256Hex(tokenB))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.routes[0].resume = resume
            config.routes[0].heartbeatSeconds = 0
            configure(&config)
        }
    }

    static func auth(_ token: String?) -> [(String, String)] { token.map { [("Authorization", "Bearer \($0)")] } ?? [] }

    /// Starts a stream and reads its head; returns the client and the stream's id. A refusal is reported with its
    /// body and the relay's Redis log lines: a 503's code (`state_unavailable`, `too_many_connections`, …) and why
    /// Redis did not answer are what tell a rare failure's causes apart.
    static func start(_ relay: RelayFixture, token: String? = tokenA,
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> (client: TestClient, id: String) {
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: auth(token), body: chatBody)
        let head = try client.readHead()
        if head.status != 200 {
            let body = (try? client.readBody(head: head)).map { String(decoding: $0, as: UTF8.self) } ?? "(body unreadable)"
            let redis = relay.logs.lines.filter { $0.contains("redis") }.suffix(5)
            Issue.record("the stream's start got \(head.status): \(body) redis: \(Array(redis))", sourceLocation: sourceLocation)
        }
        let ids = head.headerValues("X-Relay-Stream")
        #expect(ids.count == 1)
        return (client, ids.first ?? "")
    }

    /// The usual provider and relay, and a stream started on them.
    static func startedStream() throws -> (Mailbox<Int>, ScriptedUpstream, RelayFixture, TestClient, String) {
        let next = Mailbox<Int>()
        let upstream = try upstream(next: next)
        let relay = try relay(upstream)
        let (client, id) = try start(relay)
        return (next, upstream, relay, client, id)
    }

    /// A resume (or another method) on a new connection: its head.
    static func call(_ relay: RelayFixture, _ method: String = "GET", id: String, offset: Int? = nil, query: String? = nil,
                     token: String? = tokenA) throws -> (client: TestClient, head: ResponseHeadResult) {
        let client = try relay.client()
        let q = query ?? offset.map { "?offset=\($0)" } ?? ""
        try client.sendRequest(method: method, path: "/v1/relay/streams/\(id)\(q)", headers: auth(token))
        return (client, try client.readHead())
    }

    static func errorCode(_ client: TestClient, _ head: ResponseHeadResult) throws -> String {
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return ((json?["error"] as? [String: Any])?["code"] as? String) ?? body
    }

    /// A DELETE of `id` at `relay`: 204, and the provider sees its connection closed within a bound (loose: the
    /// suite shares two cores).
    static func stopAndTimeTheCancel(_ relay: RelayFixture, id: String, closed: Mailbox<PeerClose>) throws {
        let sentAt = monotonicNanoseconds()
        let (_, head) = try call(relay, "DELETE", id: id)
        #expect(head.status == 204)
        let close = try closed.take(timeout: 2)
        let ms = Double(close.atNanoseconds - min(close.atNanoseconds, sentAt)) / 1e6
        #expect(ms < 1000, "upstream closed \(ms) ms after the DELETE")
    }

    /// Another identity, none, or a token that is not one: 404 `stream_not_found` for a resume and for a stop.
    static func expectNotFoundForOtherIdentities(_ relay: RelayFixture, id: String) throws {
        for token in [tokenB, nil, "not-a-token"] {
            let (c, head) = try call(relay, id: id, offset: 0, token: token)
            #expect(head.status == 404)
            #expect(try errorCode(c, head) == "stream_not_found")
            let (d, stop) = try call(relay, "DELETE", id: id, token: token)
            #expect(stop.status == 404)
            #expect(try errorCode(d, stop) == "stream_not_found")
        }
    }

    enum Leave: String, CaseIterable, Sendable { case fin, rst }

    /// K across the first part: the start, mid-line, inside "é" (its second byte), inside "€", between the two
    /// LFs of a blank line, and the end.
    static let offsets: [Int] = {
        let text = part1
        let e = text.firstIndex(of: 0xC3)!          // é
        let euro = text.firstIndex(of: 0xE2)!       // €
        return [0, 1, 9, e + 1, euro + 2, 20, text.count - 1, text.count]
    }()

    @Test("a drop after K bytes, then a resume at K: the bytes before K and the resumed ones are the provider's",
          arguments: offsets, Leave.allCases)
    func resumeAtK(k: Int, leave: Leave) throws {
        let (next, upstream, relay, client, id) = try Self.startedStream()
        let seen = try client.readChunkedBody(until: "€\"}\n\n")
        let before = Array(seen.prefix(k))
        if leave == .fin { client.close() } else { client.reset() }
        next.put(1)
        let (resumed, head) = try Self.call(relay, id: id, offset: k)
        #expect(head.status == 200)
        #expect(head.header("Content-Type") == "text/event-stream")
        #expect(head.header("X-Relay-Stream") == id)
        let rest = try resumed.readBody(head: head)
        #expect(before + rest == Self.provider, "K=\(k)")
        try relay.waitUntilIdle()
        #expect(upstream.requests.count == 1, "the provider saw one request")
        // The provider may have finished before the resume came (then the exchange's line counts no resume): the
        // resume has its own line.
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""detached_ms""#) })
        #expect(relay.logs.lines.contains { $0.contains(#""result":"resumed""#) && $0.contains(#""resume_offset":\#(k)"#) })
        relay.assertNoSecretLeaks(clients: [client, resumed], secrets: [Self.tokenA])
    }

    @Test("two drops in one answer")
    func twoDrops() throws {
        let (next, upstream, relay, client, id) = try Self.startedStream()
        let first = Array(try client.readChunkedBody(until: "€\"}\n\n").prefix(5))
        client.reset()
        let (second, head) = try Self.call(relay, id: id, offset: 5)
        #expect(head.status == 200)
        let middle = Array(try second.readChunkedBody(until: "€\"}\n\n").prefix(20))
        second.close()
        let (third, head3) = try Self.call(relay, id: id, offset: 25)
        #expect(head3.status == 200)
        next.put(1)   // after the resume attached: the exchange, still running, counts it
        #expect(first + middle + (try third.readBody(head: head3)) == Self.provider)
        try relay.waitUntilIdle()
        #expect(upstream.requests.count == 1)
        let lines = relay.logs.lines.filter { $0.contains(#""resumes":"#) }
        #expect(lines.count == 1, "one access-log line for the exchange: its usage and budget settle once")
        #expect(lines.first?.contains(#""resumes":2"#) == true, "\(relay.logs.lines)")
    }

    @Test("a resume after the provider finished replays the rest and ends cleanly")
    func afterTheProviderFinished() throws {
        let (next, _, relay, client, id) = try Self.startedStream()
        let seen = try client.readChunkedBody(until: "€\"}\n\n")
        client.close()
        next.put(1)
        try relay.waitUntilIdle()   // the exchange ended; the bytes wait
        #expect(relay.server.resumableStreamCounts.streams == 1)
        let (resumed, head) = try Self.call(relay, id: id, offset: seen.count)
        #expect(try resumed.readBody(head: head) == Self.part2)
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""resumes":0"#) })
        // And again, from the start: the buffer is kept for the whole window.
        let (again, head2) = try Self.call(relay, id: id, offset: 0)
        #expect(try again.readBody(head: head2) == Self.provider)
    }

    @Test("no resume: the upstream is cancelled when the window ends, not before")
    func windowEnds() throws {
        let clock = ManualClock()
        let next = Mailbox<Int>()
        let closed = Mailbox<PeerClose>()
        let relay = try Self.relay(Self.upstream(next: next, closed: closed), clock: clock, resume: RouteResume(windowSeconds: 2))
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        client.close()
        try eventually("detached") { relay.server.detachedStreamCount() == 1 }
        clock.advance(bySeconds: 1.9)
        relay.server.runDueTimers()
        #expect(relay.server.detachedStreamCount() == 1, "still waiting for a resume")
        #expect(relay.server.liveCounts().transfers == 1)
        clock.advance(bySeconds: 0.2)
        relay.server.runDueTimers()
        _ = try closed.take(timeout: 2)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) && $0.contains(#""detached_ms":2"#) })
        let (late, head) = try Self.call(relay, id: id, offset: 0)
        #expect(head.status == 404)
        #expect(try Self.errorCode(late, head) == "stream_not_found")
        #expect(relay.server.resumableStreamCounts == (0, 0))
    }

    @Test("DELETE cancels the upstream at once and answers 204")
    func stop() throws {
        let next = Mailbox<Int>()
        let closed = Mailbox<PeerClose>()
        let relay = try Self.relay(Self.upstream(next: next, closed: closed))
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        let kept = try TestClient.get(port: relay.port, path: "/metrics").body
        let bytes = relay.server.resumableStreamCounts.bytes
        #expect(bytes > 0)
        #expect(kept.contains("sse_relay_resumable_streams 1\n") && kept.contains("sse_relay_resume_buffer_bytes \(bytes)\n"), "\(kept)")
        try Self.stopAndTimeTheCancel(relay, id: id, closed: closed)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // no clean end
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
        let (_, after) = try Self.call(relay, id: id, offset: 0)
        #expect(after.status == 404)
        let metrics = try TestClient.get(port: relay.port, path: "/metrics").body
        #expect(metrics.contains(#"sse_relay_stream_resumes_total{result="stopped"} 1"#))
        #expect(metrics.contains(#"sse_relay_stream_resumes_total{result="not_found"} 1"#))
        #expect(metrics.contains("sse_relay_resumable_streams 0\n") && metrics.contains("sse_relay_resume_buffer_bytes 0\n"))
    }

    @Test("another identity, or none, gets 404 for a resume and for a stop")
    func otherIdentity() throws {
        let (next, _, relay, client, id) = try Self.startedStream()
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        try Self.expectNotFoundForOtherIdentities(relay, id: id)
        next.put(1)
        var body = Self.part1
        while let chunk = try client.readChunk() { body += chunk.isEmpty ? [] : chunk }
        #expect(body.count >= Self.part1.count)
        #expect(try client.readChunk() == nil, "the stream ran on, untouched")
    }

    @Test("416 past what was written, 200 at its end, and the first connection closed by the second")
    func offsetEdges() throws {
        let next = Mailbox<Int>()
        let relay = try Self.relay(Self.upstream(next: next))
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        let (c416, h416) = try Self.call(relay, id: id, offset: Self.part1.count + 1)
        #expect(h416.status == 416)
        #expect(try Self.errorCode(c416, h416) == "offset_out_of_range")
        let (c, head) = try Self.call(relay, id: id, offset: Self.part1.count)
        #expect(head.status == 200)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // taken over: closed, no clean end
        next.put(1)
        #expect(try c.readBody(head: head) == Self.part2)
    }

    @Test("a stream past maxBufferBytes is no longer resumable: 410, and a detached one is cancelled at once")
    func maxBufferBytes() throws {
        let next = Mailbox<Int>()
        let closed = Mailbox<PeerClose>()
        let big = Array(("data: " + String(repeating: "x", count: 1100) + "\n\n").utf8)
        let relay = try Self.relay(Self.upstream(big, next: next, closed: closed), resume: RouteResume(maxBufferBytes: 1024))
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "x\n\n")
        for offset in [0, 500, big.count] {
            let (c, head) = try Self.call(relay, id: id, offset: offset)
            #expect(head.status == 410)
            #expect(try Self.errorCode(c, head) == "stream_expired")
        }
        let (c416, h416) = try Self.call(relay, id: id, offset: big.count + 1)
        #expect(h416.status == 416)
        _ = try Self.errorCode(c416, h416)
        #expect(relay.server.resumableStreamCounts.bytes == 0, "the overflowed buffer is freed")
        client.close()
        _ = try closed.take(timeout: 2)   // nobody can resume it: no window
        try relay.waitUntilIdle()
    }

    @Test("past limits.resumeBufferBytes new streams are not resumable; running ones run on")
    func resumeBufferBytes() throws {
        let next = Mailbox<Int>()
        let big = Array(("data: " + String(repeating: "y", count: 1200) + "\n\n").utf8)
        let relay = try Self.relay(Self.upstream(big, next: next), resume: RouteResume(maxBufferBytes: 4096)) { config in
            config.limits.resumeBufferBytes = 1000
        }
        let (first, id) = try Self.start(relay)
        _ = try first.readChunkedBody(until: "y\n\n")
        #expect(relay.server.resumableStreamCounts.bytes == big.count)
        let second = try relay.client()
        try second.sendRequest(path: "/v1/chat/completions", headers: Self.auth(Self.tokenA), body: chatBody)
        let head = try second.readHead()
        #expect(head.status == 200)
        #expect(head.header("X-Relay-Stream") == nil)
        next.put(1)
        next.put(2)
        #expect(try first.readChunkedBody(until: "[DONE]\n\n").count == big.count + Self.part2.count)
        #expect(try first.readChunk() == nil)
        _ = try second.readBody(head: head)
        let (c, h) = try Self.call(relay, id: id, offset: 0)
        #expect(h.status == 200)
        #expect(try c.readBody(head: h) == big + Self.part2)
    }

    @Test("bad ids and offsets get clear answers; a stream of a non-resumable route has no id")
    func badInput() throws {
        let next = Mailbox<Int>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead + [("X-Relay-Stream", "from-the-provider")])
            try connection.writeChunk("data: a\n\n")
            _ = try next.take(timeout: 10)
            try connection.writeLastChunk()
        }
        let relay = try Self.relay(upstream) { config in
            config.routes.append(.init(prefix: "/plain/", upstream: "test", auth: .token))
        }
        let (client, id) = try Self.start(relay)
        #expect(id != "from-the-provider" && id.utf8.count == 22, "the provider's header never passes")
        _ = try client.readChunkedBody(until: "data: a\n\n")
        for bad in ["abc", String(id.dropLast()), id + "A", String(id.dropLast()) + "+", String(id.dropLast()) + "%2F"] {
            let (c, head) = try Self.call(relay, id: bad, offset: 0)
            #expect(head.status == 404, "\(bad)")
            #expect(try Self.errorCode(c, head) == "stream_not_found")
        }
        for query in ["", "?offset=-1", "?offset=99999999999999999999", "?offset=abc", "?offset=1&offset=2", "?offset=%30"] {
            let (c, head) = try Self.call(relay, id: id, query: query)
            #expect(head.status == 400, "\(query)")
            #expect(try Self.errorCode(c, head) == "invalid_offset")
        }
        let (c405, h405) = try Self.call(relay, "POST", id: id, offset: 0)
        #expect(h405.status == 405)
        _ = try Self.errorCode(c405, h405)

        let plain = try relay.client()
        try plain.sendRequest(path: "/plain/chat", headers: Self.auth(Self.tokenA), body: chatBody)
        let head = try plain.readHead()
        #expect(head.status == 200)
        #expect(head.header("X-Relay-Stream") == nil, "not resumable, and the provider's header is dropped")
        next.put(1)
        next.put(2)
    }

    /// With `state.backend: "redis"` another replica finds the stream (`ResumableStreamReplicaTests`).
    @Test("with state.backend memory, streams live in the replica that started them: another replica answers 404")
    func anotherReplica() throws {
        let next = Mailbox<Int>()
        let a = try Self.relay(Self.upstream(next: next))
        let b = try Self.relay(Self.upstream(next: next))
        let (client, id) = try Self.start(a)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        let (c, head) = try Self.call(b, id: id, offset: 0)
        #expect(head.status == 404)
        #expect(try Self.errorCode(c, head) == "stream_not_found")
        let (_, stop) = try Self.call(b, "DELETE", id: id)
        #expect(stop.status == 404)
        next.put(1)
        #expect(try client.readChunkedBody(until: "[DONE]\n\n") == Self.provider, "the stream on A is untouched")
    }

    @Test("a dropped and resumed stream settles its budget once, with the provider's usage")
    func budgetsSettleOnce() throws {
        let next = Mailbox<Int>()
        let usage = Array(#"data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":11,"total_tokens":18}}"#.utf8) + [0x0A, 0x0A]
        let relay = try Self.relay(Self.upstream(Self.part1, Self.part2 + usage, next: next)) { config in
            config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 100_000))
            config.admin = .init(host: "127.0.0.1", port: 0)
        }
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        client.reset()
        let (resumed, head) = try Self.call(relay, id: id, offset: Self.part1.count)
        #expect(head.status == 200)
        next.put(1)
        _ = try resumed.readBody(head: head)
        try relay.waitUntilIdle()
        let (status, body, _) = try TestClient.get(port: relay.server.adminPort ?? 0, path: "/usage?identity=static%3Aapp-a")
        #expect(status == 200)
        #expect(body.contains(#""openStreams":0"#))
        #expect(body.contains(#""used":18,"reserved":0"#), "\(body)")
        #expect(relay.logs.lines.filter { $0.contains(#""prompt_tokens":7"#) && $0.contains(#""completion_tokens":11"#) }.count == 1)
    }

    /// A detached stream is abandoned at the delivery that overflows its buffer, from inside that delivery's write
    /// (found by a review): the delivery carries the finish and the provider's usage, and the exchange must count
    /// them (drain for the counts, log the provider's usage) as it did when the tap read before the write.
    @Test("a detached stream abandoned at the delivery that overflows its buffer counts that delivery's usage")
    func abandonAtOverflowCountsTheDelivery() throws {
        let next = Mailbox<Int>()
        let finish = Array(("data: {\"choices\":[{\"delta\":{\"content\":\"" + String(repeating: "x", count: 1100)
                            + "\"},\"finish_reason\":\"stop\"}]}\n\n").utf8)
        let usage = Array(#"data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":11,"total_tokens":18}}"#.utf8) + [0x0A, 0x0A]
        let relay = try Self.relay(Self.upstream(Self.part1, finish + usage, next: next), resume: RouteResume(maxBufferBytes: 1024))
        let (client, _) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        client.reset()
        try eventually("the stream detached", timeout: 5) { relay.server.detachedStreamCount() == 1 }
        next.put(1)
        try relay.waitUntilIdle()
        let lines = relay.logs.lines.filter { $0.contains("usage_source") }
        #expect(lines.count == 1)
        #expect(lines.first?.contains(#""prompt_tokens":7"#) == true, "\(lines)")
        #expect(lines.first?.contains(#""completion_tokens":11"#) == true, "\(lines)")
        #expect(lines.first?.contains(#""usage_source":"provider""#) == true, "\(lines)")
    }

    @Test("a stream whose provider failed replays what it had, then a resume at its end gets 502 stream_broken")
    func providerFailed() throws {
        let fail = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(Self.part1)
            try fail.wait(timeout: 10)
            connection.reset()
        }
        let relay = try Self.relay(upstream)
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        fail.signal()
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // truncated, no clean end
        try relay.waitUntilIdle()
        let (replay, head) = try Self.call(relay, id: id, offset: 0)
        #expect(head.status == 200)
        #expect(throws: (any Error).self) { _ = try replay.readBody(head: head) }
        #expect(replay.receivedBytes.count > Self.part1.count, "the bytes it had, then a close without a clean end")
        let (end, endHead) = try Self.call(relay, id: id, offset: Self.part1.count)
        #expect(endHead.status == 502)
        #expect(try Self.errorCode(end, endHead) == "stream_broken")
    }
}

extension ResumableStreamTests {
    /// A relay that takes the test JWTs (`ClientAuthTests.jwt`) at a fixed time, with `routes`, the first resumable.
    static func jwtRelay(_ next: Mailbox<Int>, routes: [RelayConfiguration.Route],
                         configure: (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        typealias A = ClientAuthTests
        return try RelayFixture(upstream: upstream(next: next), fixedWallClock: A.now) { config in
            let keys = try! JWKSet(json: Data(contentsOf: A.fixtures.appendingPathComponent("jwks.json")))
            config.clients.jwt = .init(settings: .init(algorithms: [.rs256], issuers: [A.issuer], audiences: [A.audience]), keys: keys)
            config.routes = routes
            config.routes[0].resume = RouteResume()
            config.routes[0].heartbeatSeconds = 0
            configure(&config)
        }
    }

    /// A resume is cheap for the app and not for the relay (at another replica it replays from Redis): each proven
    /// one takes a token of its stream's bucket. A stop never does, and a refusal of the proof is the failure
    /// bucket's (the caller is not known to own the stream). Another stream of the same identity has its own.
    @Test("resumes beyond rateLimits.resumesPerStream get 429 with Retry-After; a stop still goes through")
    func resumesAreRateLimitedPerStream() throws {
        let next = Mailbox<Int>()
        let relay = try Self.relay(try Self.upstream(next: next)) { config in
            config.rateLimits.resumesPerStream = RateLimits(requestsPerMinute: 1, burst: 2)
        }
        let (client, id) = try Self.start(relay)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        for _ in 0..<2 {
            let (c, head) = try Self.call(relay, id: id, offset: 0)
            #expect(head.status == 200)
            c.close()
        }
        let (limited, head) = try Self.call(relay, id: id, offset: 0)
        #expect(head.status == 429)
        // 60 s for the token at 1 a minute, less the time since the first resume took one (a loaded machine: 59).
        #expect(["59", "60"].contains(head.header("Retry-After") ?? ""), "\(head.header("Retry-After") ?? "none")")
        #expect(try Self.errorCode(limited, head) == "rate_limit_exceeded")
        let (stranger, notTheirs) = try Self.call(relay, id: id, offset: 0, token: Self.tokenB)
        #expect(notTheirs.status == 404, "another identity's request is not the stream's resume: the failure bucket's")
        #expect(try Self.errorCode(stranger, notTheirs) == "stream_not_found")
        let (other, unknown) = try Self.call(relay, id: StreamIDs.make(), offset: 0)
        #expect(unknown.status == 404, "an unknown id is not the stream's resume: not counted, not refused for it")
        #expect(try Self.errorCode(other, unknown) == "stream_not_found")
        // The same identity's next stream has a bucket of its own (a static token is every install's identity).
        let (second, secondID) = try Self.start(relay)
        _ = try second.readChunkedBody(until: "€\"}\n\n")
        let (resumed, ok) = try Self.call(relay, id: secondID, offset: 0)
        #expect(ok.status == 200)
        resumed.close()
        let (stopper, stopped) = try Self.call(relay, "DELETE", id: id)
        #expect(stopped.status == 204, "a stop is never rate-limited")
        stopper.close()
        #expect(relay.logs.lines.contains { $0.contains(#""result":"resume_limited""#) && $0.contains(#""status":429"#) })
        withExtendedLifetime(client) { for _ in 0..<2 { next.put(1) } }   // both providers' scripts end
    }

    /// A phone away for longer than its token lives comes back with an expired token. The stream is still there,
    /// so the answer is 401 `token_expired` (the client refreshes and resumes), not the 404 that ends it; and it is
    /// given before any lookup, for any id, so it tells nothing about ids.
    @Test("a resume or a stop with an expired JWT: 401 token_expired for any id; a fresh token resumes; a forged one gets 404")
    func expiredTokenOnAResume() throws {
        typealias A = ClientAuthTests
        let next = Mailbox<Int>()
        let relay = try Self.jwtRelay(next, routes: [.init(prefix: "/v1/", upstream: "test", auth: .jwt)]) { config in
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 1, burst: 6)
        }
        let fresh = A.jwt(), expired = A.jwt(["exp": A.now - 60, "iat": A.now - 660])
        // Expired, and signed with a key the relay does not trust (rsa-2 under rsa-1's kid): not the relay's token.
        let forged = A.jwt(key: "rsa-2.pem", ["exp": A.now - 60, "iat": A.now - 660])
        let (client, id) = try Self.start(relay, token: fresh)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        for (method, target) in [("GET", id), ("GET", StreamIDs.make()), ("DELETE", id), ("DELETE", StreamIDs.make())] {
            let (c, head) = try Self.call(relay, method, id: target, offset: method == "GET" ? 0 : nil, token: expired)
            #expect(head.status == 401, "\(method), \(target == id ? "the stream" : "an unknown id")")
            #expect(head.header("WWW-Authenticate")?.contains("invalid_token") == true)
            #expect(try Self.errorCode(c, head) == "token_expired")
        }
        let (f, forgedHead) = try Self.call(relay, id: id, offset: 0, token: forged)
        #expect(forgedHead.status == 404)
        #expect(try Self.errorCode(f, forgedHead) == "stream_not_found")
        let (resumed, head) = try Self.call(relay, id: id, offset: Self.part1.count, token: fresh)
        #expect(head.status == 200, "the stream was there all along")
        next.put(1)
        #expect(try resumed.readBody(head: head) == Self.part2)
        // Each 401 cost the address a failed-authentication token, as any refused credential: 4 + the forged one's
        // 404 + this one make 6, the burst; the next request is refused before anything else.
        let (last, lastHead) = try Self.call(relay, id: id, offset: 0, token: expired)
        #expect(lastHead.status == 401)
        let (limited, limitedHead) = try Self.call(relay, id: id, offset: 0, token: fresh)
        #expect(limitedHead.status == 429)
        #expect(try Self.errorCode(limited, limitedHead) == "rate_limit_exceeded")
        relay.assertNoSecretLeaks(clients: [client, resumed, f, last, limited], secrets: [fresh, expired, forged])
        let metrics = try TestClient.get(port: relay.port, path: "/metrics").body
        #expect(metrics.contains(#"sse_relay_stream_resumes_total{result="token_expired"} 5"#), "\(metrics)")
    }

    /// Where a resumable route takes no JWT, a stream may not need the token at all: nothing is refused for it
    /// before the lookup (a 401 for some ids but not others would tell them apart).
    @Test("a resumable route that takes no JWT: an expired JWT sent along changes nothing")
    func expiredTokenWhereNoneIsNeeded() throws {
        typealias A = ClientAuthTests
        let next = Mailbox<Int>()
        let relay = try Self.jwtRelay(next, routes: [.init(prefix: "/v1/", upstream: "test", auth: .none),
                                                     .init(prefix: "/jwt/", upstream: "test", auth: .jwt)])
        let expired = A.jwt(["exp": A.now - 60, "iat": A.now - 660])
        let (client, id) = try Self.start(relay, token: nil)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        let (resumed, head) = try Self.call(relay, id: id, offset: Self.part1.count, token: expired)
        #expect(head.status == 200)
        next.put(1)
        #expect(try resumed.readBody(head: head) == Self.part2)
        let (unknown, unknownHead) = try Self.call(relay, id: StreamIDs.make(), offset: 0, token: expired)
        #expect(unknownHead.status == 404)
        #expect(try Self.errorCode(unknown, unknownHead) == "stream_not_found")
    }
}
