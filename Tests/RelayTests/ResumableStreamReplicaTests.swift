import Foundation
import HTTP1
@testable import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore
import Transport

/// Resumable streams across replicas (README, "Resumable streams"): two relays on one real redis-server, the
/// stream started on A, resumed or stopped on B. Each of these got 404 on B before the streams were copied to Redis.
@Suite("Resumable streams across replicas", .serialized)
struct ResumableStreamReplicaTests {
    typealias R = ResumableStreamTests
    static let prefix = "resume-replica-test:"

    static func shared(_ redis: RedisServerProcess) -> (inout RelayConfiguration) -> Void {
        { config in
            var settings = StateConfiguration.Redis(host: "127.0.0.1", port: redis.port)
            settings.keyPrefix = prefix
            settings.timeoutMilliseconds = 2000
            config.state.backend = .redis(settings)
        }
    }

    /// Bytes written that the stream's record in Redis names (a sync point: a resume elsewhere can ask for them).
    static func writtenInRedis(_ redis: RedisServerProcess, _ id: String) throws -> Int {
        let script = #""local m = redis.call('GET', KEYS[1]) if not m then return -1 end return tonumber(string.match(m, '^v1 %S+ %S+ %d+ (%d+)'))""#
        let reply = try redis.command("EVAL \(script) 1 \(prefix)stream:\(id):meta")
        return Int(reply.dropFirst()) ?? -2
    }

    /// Two relays on one Redis and one provider; a stream started on A whose first part has reached Redis.
    static func started(_ redis: RedisServerProcess, closed: Mailbox<PeerClose>? = nil,
                        copyLagAtB: Double = ResumableStreams.defaultCopyLagSeconds)
        throws -> (next: Mailbox<Int>, upstream: ScriptedUpstream, a: RelayFixture, b: RelayFixture, client: TestClient, id: String) {
        let next = Mailbox<Int>()
        let upstream = try R.upstream(next: next, closed: closed)
        let a = try R.relay(upstream, configure: shared(redis))
        let b = try R.relay(upstream, copyLagSeconds: copyLagAtB, configure: shared(redis))
        let (client, id) = try R.start(a)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        try eventually("part 1 in redis", timeout: 5) { try writtenInRedis(redis, id) == R.part1.count }
        return (next, upstream, a, b, client, id)
    }

    @Test("start on A, drop after K bytes, resume on B at K: the bytes before K and B's are the provider's, one request",
          arguments: [0, 9, R.offsets[3], R.part1.count])
    func resumeOnAnotherReplica(k: Int) throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        let before = Array(R.part1.prefix(k))
        client.close()
        let (resumed, head) = try R.call(b, id: id, offset: k)
        #expect(head.status == 200)
        #expect(head.header("X-Relay-Stream") == id)
        next.put(1)
        let rest = try resumed.readBody(head: head)
        #expect(before + rest == R.provider, "K=\(k)")
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1, "the provider saw one request")
        #expect(a.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""detached_ms""#) })
        try eventually("B's resume line", timeout: 5) {
            b.logs.lines.contains { $0.contains(#""result":"resumed""#) && $0.contains(#""from_redis":true"#) }
        }
        a.assertNoSecretLeaks(clients: [client, resumed], secrets: [R.tokenA])
        b.assertNoSecretLeaks(clients: [resumed], secrets: [R.tokenA])
        // The record names the identity by a hash only.
        #expect(try redis.command("EXISTS \(Self.prefix)stream:\(id):meta") == ":1")
        let identityInRedis = try redis.command(#"EVAL "return string.find(redis.call('GET', KEYS[1]), 'app%-a') and 1 or 0" 1 "#
                                                + "\(Self.prefix)stream:\(id):meta")
        #expect(identityInRedis == ":0")
    }

    @Test("a resume on B while A's client still reads takes it over: A's connection closes, B reads on to the end")
    func takeOverAcrossReplicas() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, _, a, b, client, id) = try Self.started(redis)
        let (resumed, head) = try R.call(b, id: id, offset: R.part1.count)
        #expect(head.status == 200)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // taken over: no clean end
        next.put(1)
        #expect(try resumed.readBody(head: head) == R.part2)
        try a.waitUntilIdle(timeout: 5)
    }

    @Test("DELETE on B: A cancels the upstream within a bound, answers 204, and the stream is gone everywhere")
    func stopOnAnotherReplica() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let closed = Mailbox<PeerClose>()
        let (_, _, a, b, client, id) = try Self.started(redis, closed: closed)
        // The owner polls every 25 ms; the helper's bound leaves room for a loaded machine.
        try R.stopAndTimeTheCancel(b, id: id, closed: closed)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // A's client: no clean end
        try a.waitUntilIdle(timeout: 5)
        #expect(a.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
        for relay in [a, b] {
            let (c, after) = try R.call(relay, id: id, offset: 0)
            #expect(after.status == 404)
            #expect(try R.errorCode(c, after) == "stream_not_found")
        }
    }

    @Test("on B another identity, or none, gets 404 for a resume and a stop; the edges are A's; the owner's resume works")
    func identityAndEdgesOnAnotherReplica() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, _, a, b, client, id) = try Self.started(redis)
        defer { withExtendedLifetime(a) {} }   // a fixture's end stops the provider both share
        try R.expectNotFoundForOtherIdentities(b, id: id)
        let (c416, h416) = try R.call(b, id: id, offset: R.part1.count + 1)
        #expect(h416.status == 416)
        #expect(try R.errorCode(c416, h416) == "offset_out_of_range")
        let (c, head) = try R.call(b, id: id, offset: 0)
        #expect(head.status == 200, "the identity that started it resumes on B")
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }
        next.put(1)
        #expect(try c.readBody(head: head) == R.provider)
    }

    /// How many `MGET`s Redis has answered: only an owner's poll sends them, so two more than at some moment mean
    /// a poll sent after that moment has been answered and handled (the next poll is armed after the handling).
    static func mgetCalls(_ redis: RedisServerProcess) throws -> Int {
        let script = #""local s = redis.call('INFO', 'commandstats') return tonumber(string.match(s, 'cmdstat_mget:calls=(%d+)') or 0)""#
        return Int(try redis.command("EVAL \(script) 0").dropFirst()) ?? -1
    }

    static func ownerPolled(_ redis: RedisServerProcess) throws {
        let seen = try mgetCalls(redis)
        try eventually("two owner polls", timeout: 5) { try mgetCalls(redis) >= seen + 2 }
    }

    /// Resumes at another replica taking the stream, as their replicas' `RedisStreamMirror.claim` does, one after
    /// the other in one script: Redis runs it whole, so no owner poll falls between them. The script is the
    /// relay's own `claimScript`, run once for each token.
    static func claim(_ redis: RedisServerProcess, _ id: String, tokens: [String], ttlMilliseconds: Int) throws {
        let body = RedisStreamMirror.claimScript.replacingOccurrences(of: "\n", with: " ")
        let keys = RedisStreamMirror.claimKeys.map { "'\(prefix)stream:\(id):\($0)'" }.joined(separator: ", ")
        let calls = tokens.map { "n = claim({\(keys)}, {'\($0)', '\(ttlMilliseconds)'})" }.joined(separator: " ")
        let script = "local function claim(KEYS, ARGV) \(body) end local n \(calls) return n"
        #expect(try redis.command("EVAL \"\(script)\" 0") == ":\(tokens.count)", "the claims count")
    }

    /// Lets the provider finish the stream started on A, then checks it made one request and A logged the stream
    /// once, with `resumes`.
    static func finish(_ next: Mailbox<Int>, _ upstream: ScriptedUpstream, _ a: RelayFixture, expectingResumes resumes: Int) throws {
        next.put(1)
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1)
        let lines = a.logs.lines.filter { $0.contains(#""resumes":"#) }
        #expect(lines.count == 1)
        #expect(lines.first?.contains(#""resumes":\#(resumes)"#) == true, "\(lines)")
    }

    /// Two resumes at other replicas before the owner's next poll (it polls every 25 ms): the owner sees only the
    /// second token, and counts both from the claims count.
    @Test("two resumes elsewhere between two of the owner's polls are both counted")
    func twoResumesBetweenPollsAreCounted() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        try Self.claim(redis, id, tokens: ["reader-on-b", "reader-on-c"], ttlMilliseconds: 60_000)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // taken over
        #expect(a.server.detachedStreamCount() == 0, "read elsewhere")
        try Self.finish(next, upstream, a, expectingResumes: 2)
    }

    /// A reader at another replica that stops polling for longer than its token's expiry (its client reads slowly,
    /// or Redis did not answer for a while) sets the same token again when it goes on: the owner sees the reader
    /// leave and come back, which is one resume, not two. The reader here is the test, writing the reader key as a
    /// replica's reader does (`RedisStreamMirror.claimScript`, then the key set again as `keepScript` does).
    @Test("a reader elsewhere whose token expired and came back is counted once")
    func readerTokenExpiryIsNotASecondResume() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        let readerKey = "\(Self.prefix)stream:\(id):reader"
        try Self.claim(redis, id, tokens: ["reader-on-b"], ttlMilliseconds: 60_000)
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // taken over by the reader
        #expect(a.server.detachedStreamCount() == 0, "read at B")
        #expect(try redis.command("DEL \(readerKey)") == ":1")   // its expiry
        try Self.ownerPolled(redis)
        #expect(a.server.detachedStreamCount() == 1, "the reader left: the window runs")
        #expect(try redis.command("SET \(readerKey) reader-on-b PX 60000") == "+OK")   // the same reader goes on
        try Self.ownerPolled(redis)
        #expect(a.server.detachedStreamCount() == 0, "read at B again")
        try Self.finish(next, upstream, a, expectingResumes: 1)
    }

    /// A stream started on A whose provider sent part 1 and 8 MB more, then waits for `next`; A's client gone
    /// after part 1, and a resume on B at its end whose client reads nothing, until B's reader is behind it (B
    /// holds its high-water mark). 8 MB is twice what the loopback socket buffers between B and its client can
    /// hold (a 4 MiB send buffer at most; the receive buffer of a client that reads nothing does not grow).
    @Test("a reader elsewhere whose client is behind keeps its token alive, and its client then reads every byte")
    func readerBehindItsClientKeepsItsToken() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let event = Array(("data: {\"t\":\"" + String(repeating: "x", count: 1000) + "\"}\n\n").utf8)
        let big = Array([[UInt8]](repeating: event, count: 8_000).joined())
        let next = Mailbox<Int>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(R.part1)
            try connection.write(ChunkedReader.encodeChunk(big), timeout: 30)
            _ = try next.take(timeout: 30)
            try connection.writeChunk(R.part2)
            try connection.writeLastChunk()
        }
        let a = try R.relay(upstream, resume: RouteResume(windowSeconds: 30, maxBufferBytes: 32 * 1024 * 1024),
                            configure: Self.shared(redis))
        let b = try R.relay(upstream) { config in
            Self.shared(redis)(&config)
            config.buffers.highWaterBytes = 64 * 1024
            config.buffers.lowWaterBytes = 16 * 1024
        }
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        let (client, id) = try R.start(a)
        _ = try client.readChunkedBody(until: "€\"}\n\n")
        client.close()
        try eventually("the body in redis", timeout: 30) { try Self.writtenInRedis(redis, id) == R.part1.count + big.count }
        let (resumed, head) = try R.call(b, id: id, offset: R.part1.count)
        #expect(head.status == 200)
        try eventually("B's reader behind its client", timeout: 30) { b.server.maxPendingBytesObserved() >= 64 * 1024 }
        try Self.expectTokenAlive(redis, id)
        next.put(1)
        let exact = try resumed.readBody(head: head, timeout: 60) == big + R.part2   // (a failure would print 8 MB)
        #expect(exact, "every byte, in order")
        try a.waitUntilIdle(timeout: 10)
        #expect(upstream.requests.count == 1)
        #expect(a.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""resumes":1"#) }, "\(a.logs.lines.suffix(3))")
    }

    /// Watches the reader's token in Redis for longer than its time to live (sampled every 20 ms): a reader that
    /// stopped refreshing it would let it expire within that time.
    static func expectTokenAlive(_ redis: RedisServerProcess, _ id: String) throws {
        let deadline = Date().addingTimeInterval(Double(RedisStreamMirror.readerTTLMilliseconds) / 1000 * 1.5)
        while Date() < deadline {
            let ttl = Int(try redis.command("PTTL \(prefix)stream:\(id):reader").dropFirst()) ?? -3
            guard ttl > 0 else {
                Issue.record("the reader's token expired (PTTL \(ttl))")
                return
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// A resume at B played through a fake client side on B's own loop, so that the test says when its client is
    /// behind (`isAboveHighWater`) without filling socket buffers.
    static func remoteReader(_ b: RelayFixture, id: String, offset: Int) throws -> (writer: FakeResponseWriter, loop: EventLoop) {
        let loop = b.server.loopStates[0].loop
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "Bearer \(R.tokenA)")
        let head = RequestHead(method: "GET", target: "/v1/relay/streams/\(id)?offset=\(offset)", headers: headers)
        let writer = loop.queue.sync {
            let writer = FakeResponseWriter(scheduler: loop)
            StreamEndpoint(head: head, requestID: "reader-on-b", writer: writer, server: b.server).requestEnd()
            return writer
        }
        try eventually("B's reader attached", timeout: 5) { loop.queue.sync { writer.events.first == .head(200, .chunked) } }
        return (writer, loop)
    }

    /// A stream started on A whose client left after part 1, and a resume at B (`remoteReader`) whose client is
    /// behind from the start.
    static func behindAtB(_ redis: RedisServerProcess) throws
        -> (next: Mailbox<Int>, upstream: ScriptedUpstream, a: RelayFixture, b: RelayFixture, id: String,
            writer: FakeResponseWriter, loop: EventLoop) {
        let (next, upstream, a, b, client, id) = try started(redis)
        client.close()
        let (writer, loop) = try remoteReader(b, id: id, offset: R.part1.count)
        loop.queue.sync { writer.isAboveHighWater = true }
        return (next, upstream, a, b, id, writer, loop)
    }

    /// A client that took some bytes but not enough to reach the low-water mark (which is what calls
    /// `clientDrained`) has room again: the reader must go on (and so refresh its token) without that call.
    @Test("a reader elsewhere keeps its token while its client is behind, and goes on when it has room but did not drain")
    func readerBehindThenWithRoom() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, id, writer, loop) = try Self.behindAtB(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        try Self.expectTokenAlive(redis, id)
        loop.queue.sync { writer.isAboveHighWater = false }   // below the high-water mark, no drain notice
        try Self.expectTokenAlive(redis, id)
        next.put(1)
        try eventually("B's reader at the end", timeout: 5) { loop.queue.sync { writer.events.last == .finish(keepAlive: true) } }
        #expect(loop.queue.sync { writer.body } == R.part2)
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1)
    }

    /// The same reader, behind, when another resume takes the stream (here at the owner): its next refresh finds
    /// the token taken, and it ends its client's response as a poll would have.
    @Test("a reader elsewhere that is behind its client and taken over ends at its next refresh")
    func readerBehindItsClientTakenOver() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, _, a, b, id, writer, loop) = try Self.behindAtB(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        try Self.ownerPolled(redis)   // A has seen B's reader (one resume) before the next one comes
        let (local, localHead) = try R.call(a, id: id, offset: R.part1.count)
        #expect(localHead.status == 200)
        try eventually("B's reader taken over", timeout: 5) { loop.queue.sync { writer.events.last == .abort } }
        #expect(b.logs.lines.contains { $0.contains(#""outcome":"taken_over""#) })
        next.put(1)
        #expect(try local.readBody(head: localHead) == R.part2)
        try a.waitUntilIdle(timeout: 5)
        #expect(a.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""resumes":2"#) }, "\(a.logs.lines.suffix(3))")
    }

    /// A resume at the owner takes the stream from a reader elsewhere by setting its own token (`local-…`). That
    /// token is refreshed while the resume reads, like a reader elsewhere refreshes its own: otherwise it expired
    /// after a second, and a reader elsewhere that had missed the takeover (its replica cut off from Redis for that
    /// second) found the key empty at its next refresh, set its token again, and the owner closed the newer resume.
    /// The reader elsewhere is the test, writing the reader key as a replica's reader does (`claimScript`, then
    /// `keepScript`).
    @Test("a resume at the owner keeps its token while it reads: a reader elsewhere that missed it cannot take the stream back")
    func localResumeKeepsItsToken() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        let readerKey = "\(Self.prefix)stream:\(id):reader"
        let ttl = RedisStreamMirror.readerTTLMilliseconds
        func keepAtB() throws -> String {
            try redis.command("EVAL \"\(RedisStreamMirror.keepScript.replacingOccurrences(of: "\n", with: " "))\" 1 \(readerKey) reader-on-b \(ttl)")
        }
        try Self.claim(redis, id, tokens: ["reader-on-b"], ttlMilliseconds: ttl)   // B's reader takes the stream
        #expect(throws: (any Error).self) { while try client.readChunk() != nil {} }   // A's client is taken over
        let (local, localHead) = try R.call(a, id: id, offset: R.part1.count)   // then a resume at A takes it back
        #expect(localHead.status == 200)
        let isLocal = #""local v = redis.call('GET', KEYS[1]) if v and string.sub(v, 1, 6) == 'local-' then return 1 end return 0""#
        try eventually("A's token set", timeout: 5) { try redis.command("EVAL \(isLocal) 1 \(readerKey)") == ":1" }
        try Self.expectTokenAlive(redis, id)   // more than a token's life with no word from B
        #expect(try keepAtB() == ":0", "B's stale reader set its token again")
        try Self.ownerPolled(redis)
        next.put(1)
        #expect(try local.readBody(head: localHead) == R.part2, "A's resume was closed")
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1)
        #expect(a.logs.lines.contains { $0.contains(#""outcome":"completed""#) && $0.contains(#""resumes":2"#) }, "\(a.logs.lines.suffix(3))")
    }

    /// The owner's append answers the body's length in Redis; one shorter than what was written means bytes are
    /// missing there (Redis restarted without them, an operator deleted the key): the body is dropped and the copy
    /// flagged owner_only, so no replica serves a body with a hole, none answers 404 for a stream the owner holds,
    /// and the owner's own client is not touched.
    @Test("a body that lost bytes in Redis is dropped, never served with a hole: elsewhere 503 (ask again, not the 404 that ends the answer), at the owner every byte")
    func bodyWithAHoleIsLeftToTheOwner() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        _ = try redis.command("DEL \(Self.prefix)stream:\(id):body")
        next.put(1)
        #expect(try client.readChunkedBody(until: "[DONE]\n\n") == R.provider, "the owner's client gets every byte")
        try eventually("the lost copy logged", timeout: 5) {
            a.logs.lines.contains { $0.contains("resumable stream copy in redis lost") }
        }
        try eventually("the copy flagged owner_only", timeout: 5) {
            try redis.command("EXISTS \(Self.prefix)stream:\(id):owner_only") == ":1"
        }
        let (elsewhere, unavailable) = try R.call(b, id: id, offset: 0)
        #expect(unavailable.status == 503, "no resume from a copy with a hole, and no 404 either: the owner holds the stream")
        #expect(try R.errorCode(elsewhere, unavailable) == "state_unavailable")
        // A write sent before the loss that lands after the flag (a dropped connection's bytes, late) does not make
        // the copy whole again: here a record of the ended stream and a body of the wrong bytes.
        _ = try redis.command("SET \(Self.prefix)stream:\(id):body xxxxxxxx")
        let completed = #""local m = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], (string.gsub(m, '%S+$', 'completed'))) return 1""#
        #expect(try redis.command("EVAL \(completed) 1 \(Self.prefix)stream:\(id):meta") == ":1")
        let (late, stillUnavailable) = try R.call(b, id: id, offset: 0)
        #expect(stillUnavailable.status == 503, "the flag decides, whatever the record says")
        #expect(try R.errorCode(late, stillUnavailable) == "state_unavailable")
        let (other, refused) = try R.call(b, id: id, offset: 0, token: R.tokenB)
        #expect(refused.status == 404, "another identity learns nothing")
        #expect(try R.errorCode(other, refused) == "stream_not_found")
        let (resumed, head) = try R.call(a, id: id, offset: 0)
        #expect(head.status == 200, "the owner serves it from memory")
        #expect(try resumed.readChunkedBody(until: "[DONE]\n\n") == R.provider)
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1)
    }

    /// The owner learns of a hole from its append's reply and flags the copy a round trip later; meanwhile the
    /// append must not have written. An `APPEND` after the hole made a body of the new bytes alone and set the record
    /// to its length, so a reader elsewhere got bytes at offsets they do not have in the stream (a new resume at 0
    /// got the middle of the stream as its start). The script appends only onto the body it expects.
    @Test("an append onto a body that lost bytes writes nothing, so no reader gets bytes at the wrong offset")
    func appendAfterAHoleWritesNothing() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (body, meta) = ("\(Self.prefix)stream:x:body", "\(Self.prefix)stream:x:meta")
        let script = String(decoding: RedisStreamMirror.appendScript, as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
        func append(_ bytes: String, after written: Int) throws -> String {
            try redis.command("EVAL \"\(script)\" 2 \(body) \(meta) \(bytes) \"v1 o h 0 \" \" running\" 20000 \(written)")
        }
        #expect(try append("abc", after: 0) == ":3")
        #expect(try append("de", after: 3) == ":5")
        _ = try redis.command("DEL \(body)")
        #expect(try append("fg", after: 5) == ":-1")
        #expect(try redis.command("EXISTS \(body)") == ":0", "a body of the bytes after the hole")
        #expect(try Self.writtenInRedis(redis, "x") == 5, "the record names what the owner wrote before the hole")
    }

    @Test("Redis going away does not cut the stream; a resume on the owner replica still works, and it is logged")
    func redisOutage() throws {
        let redis = try RedisServerProcess()
        let (next, upstream, a, b, client, id) = try Self.started(redis)
        defer { withExtendedLifetime(b) {} }   // a fixture's end stops the provider both share
        redis.stop()
        client.close()
        try eventually("A's stream detached", timeout: 5) { a.server.detachedStreamCount() == 1 }
        let (resumed, head) = try R.call(a, id: id, offset: 10)
        #expect(head.status == 200)
        next.put(1)
        #expect(try resumed.readBody(head: head) == Array(R.provider.dropFirst(10)))
        try a.waitUntilIdle(timeout: 5)
        #expect(upstream.requests.count == 1)
        // The loss is noticed when a write to Redis fails or times out, which on a slow machine (a sanitizer run)
        // can come after the stream ended.
        try eventually("the lost copy logged", timeout: 10) {
            a.logs.lines.contains { $0.contains("resumable stream copy in redis lost") }
        }
    }
}
