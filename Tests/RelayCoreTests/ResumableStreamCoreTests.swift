// The pure parts of resumable streams: the replay buffer's offsets and bounds, the request's id and offset.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing
import Support
import Transport

private extension ReplayBuffer {
    mutating func append(_ text: String) -> Int { Array(text.utf8).withUnsafeBytes { append($0) } }
}

@Suite struct ReplayBufferTests {
    @Test func everyOffsetUpToWhatWasWrittenReplaysTheRest() {
        var b = ReplayBuffer(maxBytes: 1024)
        #expect(b.append("data: é\n\n") == 10)
        #expect(b.append(": keep-alive\n\n") == 14)
        let all = Array("data: é\n\n: keep-alive\n\n".utf8)
        for offset in 0...all.count {
            #expect(b.position(offset) == .replay(offset))
            #expect(Array(b.read(from: offset, limit: 1 << 20)) == Array(all[offset...]))
        }
        #expect(b.position(all.count + 1) == .beyondWritten)
        #expect(Array(b.read(from: 3, limit: 4)) == Array(all[3..<7]))
    }

    @Test func outgrowingTheBufferDropsItAndEveryResumeIsExpired() {
        var b = ReplayBuffer(maxBytes: 10)
        #expect(b.append("12345678") == 8)
        #expect(b.append("abc") == -8, "the bytes held are freed")
        #expect(b.overflowed && b.heldBytes == 0 && b.written == 11)
        #expect(b.append("more") == 0)
        #expect(b.position(0) == .expired)
        #expect(b.position(15) == .expired)
        #expect(b.position(16) == .beyondWritten)
        #expect(b.read(from: 0, limit: 100).isEmpty)
    }
}

@Suite struct StreamRequestTests {
    static let id = StreamIDs.make()

    @Test func idsAre128RandomBitsInBase64URL() {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = StreamIDs.make()
            #expect(id.utf8.count == 22)
            #expect(StreamIDs.isWellFormed(Substring(id)))
            #expect(id.utf8.allSatisfy { b in (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || b == 0x2D || b == 0x5F })
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    @Test func aResumeAndAStop() {
        let path = StreamRequest.pathPrefix + Self.id
        #expect(StreamRequest.parse(method: "GET", path: path, query: "offset=0") == .resume(id: Self.id, offset: 0))
        #expect(StreamRequest.parse(method: "GET", path: path, query: "x=1&offset=123456789012345") == .resume(id: Self.id, offset: 123_456_789_012_345))
        #expect(StreamRequest.parse(method: "DELETE", path: path, query: nil) == .stop(id: Self.id))
    }

    @Test(arguments: ["", "abc", String(repeating: "A", count: 21), String(repeating: "A", count: 23),
                      String(repeating: "A", count: 21) + "+", String(repeating: "A", count: 21) + "=",
                      String(repeating: "A", count: 21) + "/", String(repeating: "A", count: 20) + "%41",
                      "AAAAAAAAAAAAAAAAAAAAAB", "../../../../etc/passwd", "AAAAAAAAAAAAAAAAAAAAA\u{e9}"])
    func idsNotSpelledAsIdsAreNotFound(id: String) {
        #expect(StreamRequest.parse(method: "GET", path: StreamRequest.pathPrefix + id, query: "offset=0")
                == .invalid(StreamRequest.streamNotFound, result: "not_found"))
        #expect(StreamRequest.parse(method: "DELETE", path: StreamRequest.pathPrefix + id, query: nil)
                == .invalid(StreamRequest.streamNotFound, result: "not_found"))
    }

    @Test(arguments: [nil, "", "offset=", "offset=-1", "offset=+1", "offset=1e3", "offset=%31", "offset= 1", "offset=0x10",
                      "offset=1234567890123456", "offset=99999999999999999999999", "offset=1&offset=1", "Offset=1", "offset"])
    func offsetsNotSpelledAsDecimalDigitsAreRefused(query: String?) {
        #expect(StreamRequest.parse(method: "GET", path: StreamRequest.pathPrefix + Self.id, query: query)
                == .invalid(StreamRequest.invalidOffset, result: "invalid"))
    }

    @Test func otherMethodsGet405() {
        let r = StreamRequest.parse(method: "POST", path: StreamRequest.pathPrefix + Self.id, query: "offset=0")
        guard case .invalid(let error, _) = r else { Issue.record("\(r)"); return }
        #expect(error.status == 405)
    }
}

/// `ResumableStream` and its registry without sockets: a reader that records what it is told, an owner whose
/// notices are counted on its loop.
@Suite struct ResumableStreamStateTests {
    final class Reader: StreamReader, @unchecked Sendable {
        // Invariant: touched on the test's thread only (the stream calls it synchronously, outside its lock).
        var wakes = 0
        var takenOvers = 0
        func wake() { wakes += 1 }
        func takenOver() { takenOvers += 1 }
    }

    final class Owner: StreamOwner, @unchecked Sendable {
        // Invariant: `notices` is touched on `loop.queue` only.
        let loop = EventLoop(index: 0)
        var ownerLoop: any LoopScheduler { loop }
        var notices: [String] = []
        func readerAttached() { notices.append("attached") }
        func readerLeft() { notices.append("left") }
        func originalTakenOver() { notices.append("originalTakenOver") }
        func stopRequested() { notices.append("stop") }
        var seen: [String] { loop.queue.sync { notices } }
    }

    static func stream(maxBytes: Int = 1024, cap: Int = 1 << 20) -> (ResumableStreams, ResumableStream, Owner) {
        let registry = ResumableStreams(capBytes: cap)
        let owner = Owner()
        let stream = registry.open(identity: "static:a", route: .init(prefix: "/v1/", upstream: "u"),
                                   resume: RouteResume(maxBufferBytes: maxBytes), owner: owner)!
        return (registry, stream, owner)
    }

    static func append(_ stream: ResumableStream, _ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { stream.append($0) } }

    @Test func aResumeTakesOverAndTheOneBeforeIsClosed() {
        let (registry, stream, owner) = Self.stream()
        #expect(!Self.append(stream, "data: a\n\n"))
        #expect(registry.totalHeldBytes == 9)
        let first = Reader(), second = Reader()
        guard case .failed(.beyondWritten) = stream.attach(first, offset: 10) else { Issue.record("416 expected"); return }
        guard case .attached = stream.attach(first, offset: 3) else { Issue.record("attach"); return }
        #expect(stream.read(first, from: 3, limit: 100).bytes == Array("a: a\n\n".utf8))
        guard case .attached = stream.attach(second, offset: 9) else { Issue.record("attach"); return }
        #expect(first.takenOvers == 1)
        #expect(!stream.read(first, from: 9, limit: 100).current, "the first reader no longer reads")
        #expect(owner.seen == ["originalTakenOver", "attached", "attached"])
    }

    @Test func theEndCountsTheResumesThatAttachedBeforeItEvenIfTheirNoticesHaveNotArrived() {
        let (_, stream, owner) = Self.stream()
        _ = Self.append(stream, "data: a\n\n")
        let first = Reader(), second = Reader()
        // The owner's loop is held: the `readerAttached` notices wait behind this block, as they may wait behind
        // the turn that reads the provider's last bytes.
        let counted: Int = owner.loop.queue.sync {
            guard case .attached = stream.attach(first, offset: 0), case .attached = stream.attach(second, offset: 9) else {
                Issue.record("attach")
                return -1
            }
            let n = stream.finish(.completed)
            #expect(owner.notices.isEmpty, "no notice has run yet")
            return n
        }
        #expect(counted == 2)
        guard case .attached = stream.attach(Reader(), offset: 0) else { Issue.record("a replay after the end"); return }
        #expect(stream.finish(.completed) == 2, "a replay after the end is not a resume of the running upstream")
        #expect(owner.seen == ["originalTakenOver", "attached", "attached"])
    }

    @Test func wakesAreCoalescedUntilTheReaderReads() {
        let (_, stream, _) = Self.stream()
        let reader = Reader()
        _ = stream.attach(reader, offset: 0)
        _ = Self.append(stream, "a")
        _ = Self.append(stream, "b")
        #expect(reader.wakes == 1)
        let r = stream.read(reader, from: 0, limit: 100)
        #expect(r.bytes == Array("ab".utf8) && r.end == nil && r.current)
        _ = Self.append(stream, "c")
        #expect(reader.wakes == 2)
        stream.finish(.completed)
        let end = stream.read(reader, from: 3, limit: 100)
        #expect(end.bytes.isEmpty && end.end == .completed)
    }

    @Test func outgrowingTheBufferClosesTheReaderAndFreesTheBytes() {
        let (registry, stream, _) = Self.stream(maxBytes: 1024)
        let reader = Reader()
        _ = stream.attach(reader, offset: 0)
        #expect(!Self.append(stream, String(repeating: "x", count: 1000)))
        #expect(Self.append(stream, String(repeating: "y", count: 100)), "nobody reads it now, nobody ever can")
        #expect(reader.takenOvers == 1)
        #expect(registry.totalHeldBytes == 0)
        guard case .failed(.expired) = stream.attach(Reader(), offset: 0) else { Issue.record("410 expected"); return }
    }

    @Test func aStopClosesTheReaderAndTellsTheOwner() {
        let (registry, stream, owner) = Self.stream()
        let reader = Reader()
        _ = stream.attach(reader, offset: 0)
        stream.stop()
        registry.remove(stream)
        #expect(reader.takenOvers == 1)
        guard case .gone = stream.attach(Reader(), offset: 0) else { Issue.record("gone expected"); return }
        #expect(registry.lookup(stream.id) == nil)
        #expect(owner.seen == ["originalTakenOver", "attached", "stop"])
    }

    /// A `DELETE` on another loop forgets the stream at once; the owner learns of it a loop turn later and may write
    /// a delivery meanwhile. Those bytes can never be read: kept, they stayed counted toward the cap for good (or,
    /// when they overflowed the buffer, were taken off the total a second time).
    @Test(arguments: [1024, 12])
    func bytesWrittenAfterAStopAreNeitherKeptNorCounted(maxBytes: Int) {
        let (registry, stream, owner) = Self.stream(maxBytes: maxBytes)
        _ = Self.append(stream, "data: a\n\n")
        stream.stop()
        registry.remove(stream)
        #expect(registry.totalHeldBytes == 0)
        _ = Self.append(stream, "data: b\n\n")   // the owner's delivery before the stop's notice
        #expect(registry.totalHeldBytes == 0)
        #expect(stream.heldBytes == 0)
        #expect(owner.seen == ["stop"])
    }

    /// Its window passed while a resume still reads it (a slow client far behind): the reader goes on, and the
    /// bytes it holds count toward `resumeBufferBytes` until it leaves, so slow readers cannot pin buffers past the
    /// cap. A resume that looked the stream up before it was forgotten and attaches after gets 404.
    @Test func aForgottenStreamStillReadCountsUntilItsReaderLeaves() {
        let (registry, stream, _) = Self.stream()
        _ = Self.append(stream, "data: a\n\n")
        stream.finish(.completed)
        let reader = Reader()
        guard case .attached = stream.attach(reader, offset: 0) else { Issue.record("attach"); return }
        registry.remove(stream)
        #expect(registry.lookup(stream.id) == nil)
        #expect(registry.totalHeldBytes == 9, "the reader still holds them")
        #expect(stream.read(reader, from: 0, limit: 100).bytes == Array("data: a\n\n".utf8))
        guard case .gone = stream.attach(Reader(), offset: 0) else { Issue.record("gone expected"); return }
        #expect(reader.takenOvers == 0)
        stream.readerLeft(reader)
        #expect(registry.totalHeldBytes == 0)
    }

    /// A `DELETE` that comes just after the window passed, while a resume still reads (a slow client, or one that
    /// reads nothing): the reader is closed without leaving through `readerLeft`, so the stop takes the bytes off
    /// the total. Kept counted, a few such races would fill `resumeBufferBytes` and leave every new stream on the
    /// replica unresumable until a restart.
    @Test func aStopOfAForgottenStreamStillReadFreesItsBytes() {
        let (registry, stream, _) = Self.stream()
        _ = Self.append(stream, "data: a\n\n")
        stream.finish(.completed)
        let reader = Reader()
        guard case .attached = stream.attach(reader, offset: 0) else { Issue.record("attach"); return }
        registry.remove(stream)   // the window passed
        #expect(registry.totalHeldBytes == 9, "the reader still holds them")
        stream.stop()             // the DELETE, which found the stream before it was forgotten
        registry.remove(stream)
        #expect(reader.takenOvers == 1)
        #expect(registry.totalHeldBytes == 0)
        #expect(stream.heldBytes == 0)
        stream.readerLeft(reader) // its connection's end comes later and changes nothing
        #expect(registry.totalHeldBytes == 0)
    }

    @Test func theDetachWindowEndsOnlyWhenNobodyReads() {
        let (_, stream, _) = Self.stream()
        #expect(stream.originalLeft() == .detached)
        let reader = Reader()
        _ = stream.attach(reader, offset: 0)
        #expect(!stream.abandonIfUnread(), "a resume came in time")
        stream.readerLeft(reader)
        #expect(stream.abandonIfUnread())
        guard case .failed = stream.attach(Reader(), offset: 1) else { Issue.record("416 expected"); return }
    }

    @Test func pastTheCapNewStreamsAreNotResumable() {
        let registry = ResumableStreams(capBytes: 10)
        let owner = Owner()
        let route = RelayConfiguration.Route(prefix: "/v1/", upstream: "u")
        let a = registry.open(identity: nil, route: route, resume: RouteResume(), owner: owner)!
        #expect(!Self.append(a, "0123456789"))
        #expect(registry.open(identity: nil, route: route, resume: RouteResume(), owner: owner) == nil)
        registry.remove(a)
        #expect(registry.totalHeldBytes == 0)
        #expect(registry.open(identity: nil, route: route, resume: RouteResume(), owner: owner) != nil)
    }
}

/// The owner's view of the reader token in Redis: what is a resume, what is the same reader coming back.
@Suite struct RemoteReaderWatchTests {
    @Test func aReaderWhoseTokenExpiredAndComesBackIsNotASecondResume() {
        var watch = RemoteReaderWatch()
        #expect(watch.observe(nil, claims: nil) == (nil, 0), "no reader yet")
        #expect(watch.observe("t1", claims: 1) == (.attached, 1))
        #expect(watch.observe("t1", claims: 1) == (nil, 0), "refreshed: nothing new")
        #expect(watch.observe(nil, claims: 1) == (.left, 0), "its key expired: the stream is detached again")
        #expect(watch.observe(nil, claims: 1) == (nil, 0))
        #expect(watch.observe("t1", claims: 1) == (.attached, 0), "the same reader went on: attached, no claim")
        #expect(watch.observe("t2", claims: 2) == (.attached, 1), "another reader took it over: a resume")
        #expect(watch.observe(nil, claims: 2) == (.left, 0))
        #expect(watch.observe("t1", claims: 2) == (.attached, 0), "an earlier reader that missed the takeover: no claim")
    }

    /// The owner polls every 25 ms; resumes in between are counted however many there were.
    @Test func resumesBetweenTwoPollsAreEachCounted() {
        var watch = RemoteReaderWatch()
        #expect(watch.observe("t3", claims: 3) == (.attached, 3), "three resumes, the last one holds the stream")
        #expect(watch.observe("local-a", claims: 4) == (nil, 1), "a resume elsewhere, then one at the owner")
        #expect(watch.observe("t5", claims: 5) == (.attached, 1))
        #expect(watch.observe("t5", claims: 2) == (nil, 2), "a count below the last: the key was lost and set again")
    }

    @Test func localReadersAreTheOwnersOwnAndChangeNothingHere() {
        var watch = RemoteReaderWatch()
        #expect(watch.observe("local-a", claims: nil) == (nil, 0))
        #expect(watch.observe("t1", claims: 1) == (.attached, 1))
        #expect(watch.observe("local-b", claims: 1) == (nil, 0), "a local resume counts itself and closes the remote reader")
        #expect(watch.observe("t1", claims: 1) == (nil, 0), "the remote token seen last is unchanged")
        #expect(watch.observe(nil, claims: 1) == (.left, 0))
    }
}

/// The owner's refresh of a resume-here token, fed the clock at each poll answer. Its poll is re-armed only when
/// Redis answered, so the answers come 25 ms apart at best and as far apart as Redis is slow.
@Suite struct RefreshCadenceTests {
    /// Refresh instants for answers `spacing` seconds apart over `total` seconds.
    static func refreshes(spacing: Double, total: Double, interval: Double = RedisStreamMirror.keepSeconds) -> [Double] {
        var cadence = RefreshCadence(interval: interval)
        let start = Instant(nanoseconds: 1_000_000_000)
        return stride(from: 0, through: total, by: spacing).filter { cadence.isDue(at: start.advanced(bySeconds: $0)) }
    }

    @Test(arguments: [0.025, 0.06, 0.1, 0.25, 0.4, 0.9])
    func aTokenIsRefreshedWithinItsLifeHoweverSlowRedisAnswers(spacing: Double) {
        let life = Double(RedisStreamMirror.readerTTLMilliseconds) / 1000
        let at = Self.refreshes(spacing: spacing, total: 10)
        #expect(at.first == 0, "the first answer refreshes")
        let gaps = zip(at.dropFirst(), at).map { $0 - $1 }
        #expect(!gaps.isEmpty)
        for gap in gaps {
            #expect(gap >= RedisStreamMirror.keepSeconds - 1e-9 || spacing >= RedisStreamMirror.keepSeconds,
                    "not more often than every third of the life")
            #expect(gap < RedisStreamMirror.keepSeconds + spacing + 1e-9, "at the first answer after a third of the life")
            #expect(gap < life, "refreshed before it expires (answers \(spacing) s apart)")
        }
    }

    /// The owned streams' keys expire `expiryMarginSeconds` after the window; the poll pushes that back once a
    /// second by the clock, so a stalled provider's stream keeps its record however slowly Redis answers the polls
    /// (40 polls, as before, were 10 s at 250 ms answers: the whole margin).
    @Test(arguments: [0.025, 0.25, 1.5, 5.0])
    func aStalledStreamsRecordIsRefreshedWithinTheMargin(spacing: Double) {
        let at = Self.refreshes(spacing: spacing, total: 30, interval: RedisStreamMirror.recordKeepSeconds)
        let gaps = zip(at.dropFirst(), at).map { $0 - $1 }
        #expect(gaps.count >= 5)
        for gap in gaps {
            #expect(gap < RedisStreamMirror.recordKeepSeconds + spacing + 1e-9)
            #expect(gap < RedisStreamMirror.expiryMarginSeconds)
        }
    }

    @Test func answersFartherApartThanTheIntervalRefreshEachTime() {
        let at = Self.refreshes(spacing: 0.5, total: 3)
        #expect(at == [0, 0.5, 1, 1.5, 2, 2.5, 3])
    }
}
