import Redis
import RelayCore
import Support
import Transport

/// Resumable streams across replicas (`state.backend: "redis"`; README, "Resumable streams"): every stream this
/// replica owns is copied to Redis, so a resume or a stop can arrive at any replica. Layout under the key prefix:
/// - `stream:<id>:body`: the body bytes, appended by the owner at most once per loop turn;
/// - `stream:<id>:meta`: a `StreamMeta` line, set with each append, in the same script (`appendScript`: one command
///   per loop turn), to the body's length after it (so a reader that reads the record first and the body next
///   never asks for bytes the body does not hold yet: Redis runs every command and script one at a time);
/// - `stream:<id>:stop`: set by a `DELETE` on any replica; the owner polls for it;
/// - `stream:<id>:gone`: set by the owner when it forgets the stream; no new resume finds it after that;
/// - `stream:<id>:owner_only`: set by the owner, every second from the moment a write of the copy failed until it
///   forgets the stream; lookups and polls read it whatever the record says (`MirroredStream.markOwnerOnly`);
/// - `stream:<id>:reader`: the token of the reader on another replica, which refreshes it each poll (1 s expiry);
///   the owner polls for it so that a detached stream read elsewhere is not cancelled when its window ends;
/// - `stream:<id>:claims`: how many resumes at other replicas took the stream, raised by each in the script that
///   sets its token (`claimScript`); the owner polls it to count them (`RemoteReaderWatch`).
/// Body, record and claims expire `windowSeconds + expiryMarginSeconds` after the last write, refreshed every
/// second while the stream runs.
///
/// Polling, not pub/sub: our RESP client is a pipelined request/reply connection per loop, and a subscriber needs
/// a connection of its own in another mode with its own reconnect story. One `MGET` per `pollSeconds` covers every
/// stream this replica owns, which meets "the owner learns of a stop within 100 ms" with room to spare.
///
/// Redis going away never cuts a stream: a failed write is logged, the stream's Redis body is dropped (so no
/// replica serves a copy with a hole) and it is flagged `…:owner_only` (a resume elsewhere gets 503 and asks
/// again, rather than a 404 that would end an answer the owner still holds), and resumes at this replica go on
/// from its memory.
package final class RedisStreamMirror: @unchecked Sendable {
    // Invariant: `owned` only inside its lock; `readers`, `pollArmed`, `recordKeep` and `localKeep` on
    // `pollLoop.queue` only.
    package static let pollSeconds = 0.025
    package static let expiryMarginSeconds = 10.0
    package static let readerTTLMilliseconds = 1_000
    /// A reader's token is refreshed every third of its life: a resume here at the first poll answer after that
    /// (`localKeep`), a reader elsewhere whose client is behind on a timer (`StreamEndpoint`).
    package static let keepSeconds = Double(readerTTLMilliseconds) / 1000 / 3
    /// How often the expiry of an owned stream's keys is pushed back while the stream runs (the append does it too).
    package static let recordKeepSeconds = 1.0

    package let replicaID = StreamIDs.make()
    /// The reader token of a resume at this replica (`RemoteReaderWatch` leaves tokens of this form to their owner).
    package var localToken: String { "local-" + replicaID }
    package let keyPrefix: String
    package let pollLoop: EventLoop
    private let connection: @Sendable (any LoopScheduler) -> RedisClient
    package let logger: Logger
    /// Every stream owned here, with the keys its poll reads (made once, not on each poll).
    private let owned = Locked<[String: Owned]>([:])

    private struct Owned {
        let stream: ResumableStream
        let stopKey: [UInt8]
        let readerKey: [UInt8]
        let claimsKey: [UInt8]
        let metaKey: [UInt8]
        let bodyKey: [UInt8]
        let ttl: [UInt8]
    }
    /// Each owned stream's reader token as the polls have seen it (`RemoteReaderWatch`).
    private var readers: [String: RemoteReaderWatch] = [:]
    private var pollArmed = false
    /// When the owned streams' body, record and claims have their expiry refreshed (every second), and when the
    /// tokens of resumes here are: by the clock, not by counting polls (a poll waits for Redis's answer).
    private var recordKeep = RefreshCadence(interval: recordKeepSeconds)
    private var localKeep = RefreshCadence(interval: keepSeconds)

    package init(keyPrefix: String, pollLoop: EventLoop, connection: @escaping @Sendable (any LoopScheduler) -> RedisClient, logger: Logger) {
        self.keyPrefix = keyPrefix
        self.pollLoop = pollLoop
        self.connection = connection
        self.logger = logger
    }

    package func key(_ id: String, _ part: String) -> String { keyPrefix + "stream:" + id + ":" + part }

    private static let mget = Array("MGET".utf8), pexpire = Array("PEXPIRE".utf8)

    /// Sends one command on `loop`'s connection (call on `loop`); nil when Redis did not answer or answered an error.
    package func send(_ arguments: [[UInt8]], on loop: any LoopScheduler, _ completion: @escaping (RESPValue?) -> Void) {
        connection(loop).send(arguments) { result in
            switch result {
            case .success(.error): completion(nil)
            case .success(let value): completion(value)
            case .failure: completion(nil)
            }
        }
    }

    package func send(_ arguments: [String], on loop: any LoopScheduler, _ completion: @escaping (RESPValue?) -> Void = { _ in }) {
        send(arguments.map { Array($0.utf8) }, on: loop, completion)
    }

    package static func ttlMilliseconds(_ windowSeconds: Double) -> String {
        String(Int((windowSeconds + expiryMarginSeconds) * 1000))
    }

    // MARK: The owner's side

    /// Starts watching `stream` (owned here) for stops and readers elsewhere.
    package func track(_ stream: ResumableStream) {
        let entry = Owned(stream: stream, stopKey: Array(key(stream.id, "stop").utf8), readerKey: Array(key(stream.id, "reader").utf8),
                          claimsKey: Array(key(stream.id, "claims").utf8), metaKey: Array(key(stream.id, "meta").utf8), bodyKey: Array(key(stream.id, "body").utf8),
                          ttl: Array(Self.ttlMilliseconds(stream.windowSeconds).utf8))
        owned.withLock { $0[stream.id] = entry }
        pollLoop.execute { self.armPoll() }
    }

    package func untrack(_ id: String) { owned.withLock { $0[id] = nil } }

    private func armPoll() {
        guard !pollArmed else { return }
        pollArmed = true
        _ = pollLoop.schedule(afterSeconds: Self.pollSeconds) { self.poll() }
    }

    /// One `MGET` of every owned stream's stop flag, reader token and claims count; once a second (`recordKeep`)
    /// the poll also refreshes their expiry.
    private func poll() {
        pollArmed = false
        let entries = owned.withLock { Array($0.values) }
        if !readers.isEmpty {
            let ids = Set(entries.map(\.stream.id))
            readers = readers.filter { ids.contains($0.key) }
        }
        guard !entries.isEmpty else { return }
        if recordKeep.isDue(at: pollLoop.clock.now()) {
            for entry in entries {
                send([Self.pexpire, entry.metaKey, entry.ttl], on: pollLoop) { _ in }
                send([Self.pexpire, entry.bodyKey, entry.ttl], on: pollLoop) { _ in }
                send([Self.pexpire, entry.claimsKey, entry.ttl], on: pollLoop) { _ in }
            }
        }
        var command: [[UInt8]] = [Self.mget]
        command.reserveCapacity(1 + 3 * entries.count)
        for entry in entries {
            command.append(entry.stopKey)
            command.append(entry.readerKey)
            command.append(entry.claimsKey)
        }
        let streams = entries.map(\.stream)
        send(command, on: pollLoop) { reply in
            defer { self.armPoll() }
            guard let values = reply?.array, values.count == streams.count * 3 else { return }
            var keepDue: Bool?   // decided at the first resume here in this answer
            for (i, stream) in streams.enumerated() {
                if values[3 * i].string != nil {
                    self.untrack(stream.id)
                    stream.stopAndForget()
                    continue
                }
                let token = values[3 * i + 1].string
                // A resume here keeps its token alive as a reader elsewhere keeps its own (`keepSeconds`), and sets it
                // again at once if it expired: a reader elsewhere that missed the takeover then finds the key taken
                // at its next refresh, and ends, instead of setting its token again and closing the newer resume.
                if token == nil || token == self.localToken, stream.isReadByLocalResume {
                    let due = keepDue ?? self.localKeep.isDue(at: self.pollLoop.clock.now())
                    keepDue = due
                    if token == nil || due { self.keep(stream.id, token: self.localToken, on: self.pollLoop) { _ in } }
                }
                // Kept only for streams a reader elsewhere has touched (most have none).
                var watch = self.readers[stream.id] ?? RemoteReaderWatch()
                let seen = watch.observe(token, claims: values[3 * i + 2].string.flatMap { Int($0) })
                guard seen.change != nil || seen.resumes > 0 else { continue }
                self.readers[stream.id] = watch
                stream.remoteResumed(seen.resumes)
                switch seen.change {
                case .attached: stream.remoteAttached()
                case .left: stream.remoteLeft()
                case nil: break
                }
            }
        }
    }

    // MARK: A reader's side (any replica, on the reader's loop)

    package enum Lookup: Equatable {
        case found(StreamMeta)
        /// No record, or a stop was asked.
        case missing
        case unavailable
    }

    /// Whether a stop was asked for the stream at any replica: true, false, or nil when Redis did not answer.
    package func stopAsked(_ id: String, on loop: any LoopScheduler, _ completion: @escaping (Bool?) -> Void) {
        send(["EXISTS", key(id, "stop")], on: loop) { completion($0?.integer.map { $0 != 0 }) }
    }

    /// The stream's record, unless it is gone (its owner forgot it) or stopped; its state is `ownerOnly` when the
    /// owner flagged the copy lost (`…:owner_only`), whatever the record says: a write sent before the loss may land
    /// after the flag (a dropped connection's bytes), and must not make the copy look whole again.
    package func lookup(_ id: String, on loop: any LoopScheduler, _ completion: @escaping (Lookup) -> Void) {
        let meta = ReplyBox<RESPValue?>(nil), stop = ReplyBox<Int64?>(nil)
        send(["GET", key(id, "meta")], on: loop) { meta.value = $0 }
        send(["EXISTS", key(id, "stop"), key(id, "gone")], on: loop) { stop.value = $0?.integer }
        send(["EXISTS", key(id, "owner_only")], on: loop) { ownerOnly in   // replies come in order: the others are set
            guard let record = meta.value, let stopped = stop.value, let lost = ownerOnly?.integer else { return completion(.unavailable) }
            guard stopped == 0, let text = record.string, var decoded = StreamMeta.decode(text) else { return completion(.missing) }
            // An overflowed record stays overflowed: 410 everywhere, as at the owner.
            if lost != 0, decoded.state != .overflowed { decoded.state = .ownerOnly }
            completion(.found(decoded))
        }
    }

    /// A `DELETE` here for a stream owned elsewhere: the owner's poll sees the flag and cancels. True when stored.
    package func requestStop(_ id: String, windowSeconds: Double, on loop: any LoopScheduler, _ completion: @escaping (Bool) -> Void) {
        send(["SET", key(id, "stop"), "1", "PX", Self.ttlMilliseconds(windowSeconds)], on: loop) { completion($0?.string == "OK") }
    }

    /// KEYS[1] the reader key, KEYS[2] the claims count, KEYS[3] the record. ARGV: token, expiry ms. Sets the
    /// token and raises the count, which expires with the record (the owner refreshes both while the stream runs).
    package static let claimScript = """
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        local n = redis.call('INCR', KEYS[2])
        local ttl = redis.call('PTTL', KEYS[3])
        if ttl < 1 then ttl = tonumber(ARGV[2]) end
        redis.call('PEXPIRE', KEYS[2], ttl)
        return n
        """

    /// A resume at this replica takes over a stream owned elsewhere (whoever read it before sees its token replaced
    /// and closes; the owner counts the claim as a resume).
    package func claim(_ id: String, token: String, on loop: any LoopScheduler) {
        send(["EVAL", Self.claimScript, "3"] + Self.claimKeys.map { key(id, $0) } + [token,
              String(Self.readerTTLMilliseconds)], on: loop)
    }

    package static let claimKeys = ["reader", "claims", "meta"]

    /// A resume at the owner takes the stream back (a reader elsewhere sees its token replaced and closes); it
    /// counts itself, so no claim.
    package func claimLocally(_ id: String, on loop: any LoopScheduler) {
        send(["SET", key(id, "reader"), localToken, "PX", String(Self.readerTTLMilliseconds)], on: loop)
    }

    /// KEYS[1] the reader key. ARGV: token, expiry ms. 1 (and the expiry refreshed) while the token is the reader's.
    package static let keepScript = """
        local v = redis.call('GET', KEYS[1])
        if v and v ~= ARGV[1] then return 0 end
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        return 1
        """

    private func keepCommand(_ id: String, token: String) -> [String] {
        ["EVAL", Self.keepScript, "1", key(id, "reader"), token, String(Self.readerTTLMilliseconds)]
    }

    /// Refreshes a reader's token while it takes no bytes: true while the token is the reader's, false when
    /// another reader took the stream, nil when Redis did not answer.
    package func keep(_ id: String, token: String, on loop: any LoopScheduler, _ completion: @escaping (Bool?) -> Void) {
        send(keepCommand(id, token: token), on: loop) { completion($0?.integer.map { $0 == 1 }) }
    }

    package struct Poll {
        package var meta: StreamMeta?
        /// A stop was asked (a copy the owner flagged lost shows as `meta`'s state `ownerOnly`).
        package var stopped: Bool
        package var claimed: Bool
        package var bytes: [UInt8]
    }

    /// KEYS[1] the body, KEYS[2] the record. ARGV: the bytes, the record's text before and after its count, the
    /// expiry in ms, the body's length before these bytes. Appends, refreshes both expiries, sets the record to the
    /// body's new length; returns the length. A body of another length lost bytes (or has bytes it should not): the
    /// script writes nothing and returns -1, so no reader ever gets bytes at an offset they do not have in the stream
    /// in the round trip before the owner flags the copy lost (`MirroredStream.markOwnerOnly`).
    package static let appendScript = Array("""
        if redis.call('STRLEN', KEYS[1]) ~= tonumber(ARGV[5]) then return -1 end
        local n = redis.call('APPEND', KEYS[1], ARGV[1])
        redis.call('PEXPIRE', KEYS[1], ARGV[4])
        redis.call('SET', KEYS[2], ARGV[2] .. n .. ARGV[3], 'PX', ARGV[4])
        return n
        """.utf8)

    /// One poll of a reader at `offset`: still the reader, the record (its state `ownerOnly` when the copy is
    /// flagged lost), the stop, and up to `limit` bytes. Nil when Redis did not answer.
    package func poll(_ id: String, token: String, from offset: Int, limit: Int, on loop: any LoopScheduler, _ completion: @escaping (Poll?) -> Void) {
        let claimed = ReplyBox<Int64?>(nil), meta = ReplyBox<RESPValue?>(nil), stop = ReplyBox<Int64?>(nil)
        let ownerOnly = ReplyBox<Int64?>(nil)
        send(keepCommand(id, token: token), on: loop) { claimed.value = $0?.integer }
        send(["GET", key(id, "meta")], on: loop) { meta.value = $0 }
        send(["EXISTS", key(id, "stop")], on: loop) { stop.value = $0?.integer }
        send(["EXISTS", key(id, "owner_only")], on: loop) { ownerOnly.value = $0?.integer }
        send(["GETRANGE", key(id, "body"), String(offset), String(offset + limit - 1)], on: loop) { body in
            guard let claimed = claimed.value, let record = meta.value, let stopped = stop.value, let lost = ownerOnly.value,
                  let body else { return completion(nil) }
            let bytes: [UInt8]
            if case .bulkString(let b) = body { bytes = b } else { bytes = [] }
            // The flag wins over whatever the record says, as in `lookup` (an overflowed copy stays overflowed).
            var decoded = record.string.flatMap(StreamMeta.decode)
            if lost != 0, let state = decoded?.state, state != .overflowed { decoded?.state = .ownerOnly }
            completion(Poll(meta: decoded, stopped: stopped != 0, claimed: claimed == 1, bytes: bytes))
        }
    }
}

/// One stream's copy in Redis, as its owner writes it. Owned by the owner's loop (`loop.queue`): every method runs
/// there.
package final class MirroredStream: @unchecked Sendable {
    // Invariant: every `var` is touched on `loop.queue` only.
    package let mirror: RedisStreamMirror
    package let loop: any LoopScheduler
    package let id: String
    private var meta: StreamMeta
    private let windowSeconds: Double
    /// The append script's fixed arguments: the keys, the running record around its count, the expiry.
    private let appendArguments: [[UInt8]]
    private var pending: [UInt8] = []
    private var flushQueued = false
    /// A write failed: the copy may have a hole, so its body is deleted (until Redis answers) and never written
    /// again, and the copy is flagged `…:owner_only`, set again every second until the stream is forgotten
    /// (`markOwnerOnly`).
    private var lost = false
    private var bodyDeleted = false
    /// The registry forgot the stream and it was marked gone (`forgotten`): nothing is written again (a delivery
    /// that comes before the owner's cancel would otherwise write a record anew).
    private var forgot = false

    package init(mirror: RedisStreamMirror, loop: any LoopScheduler, id: String, identity: String?, routeIndex: Int, windowSeconds: Double) {
        self.mirror = mirror
        self.loop = loop
        self.id = id
        self.windowSeconds = windowSeconds
        meta = StreamMeta(owner: mirror.replicaID, identityHash: StreamMeta.identityHash(identity), routeIndex: routeIndex,
                          written: 0, state: .running)
        let record = meta.encodedAround()
        appendArguments = [Array(mirror.key(id, "body").utf8), Array(mirror.key(id, "meta").utf8), Array(record.beforeWritten.utf8),
                           Array(record.afterWritten.utf8), Array(RedisStreamMirror.ttlMilliseconds(windowSeconds).utf8)]
    }

    package var ttl: String { RedisStreamMirror.ttlMilliseconds(windowSeconds) }

    package func opened() { writeMeta() }

    /// Bytes the owner wrote: queued, and sent with the others of this loop turn in one `APPEND`.
    package func append(_ bytes: UnsafeRawBufferPointer, overflowed: Bool) {
        guard meta.state == .running, !forgot else { return }
        if overflowed {
            pending = []
            meta.state = .overflowed
            mirror.send(["DEL", mirror.key(id, "body")], on: loop) { _ in }
            return writeMeta()
        }
        pending.append(contentsOf: bytes)
        guard !flushQueued else { return }
        flushQueued = true
        loop.execute { self.flush() }
    }

    private func flush() {
        flushQueued = false
        guard !forgot else { return }
        if lost {   // nothing more is written; the flag is kept by `markOwnerOnly`'s own timer
            pending = []
            return
        }
        guard !pending.isEmpty, meta.state == .running else { return }
        let bytes = pending
        pending = []
        let before = Array(String(meta.written).utf8)
        meta.written += bytes.count
        let expected = meta.written
        let a = appendArguments
        mirror.send([Self.eval, RedisStreamMirror.appendScript, Self.two, a[0], a[1], bytes, a[2], a[3], a[4], before], on: loop) { reply in
            // A body shorter than what was written (Redis restarted, or the key expired) has a hole: lost.
            self.check(reply?.integer == Int64(expected) ? reply : nil)
        }
    }

    private static let eval = Array("EVAL".utf8), two = Array("2".utf8)

    private func writeMeta() {
        guard !forgot else { return }
        guard !lost else { return }
        mirror.send(["SET", mirror.key(id, "meta"), meta.encoded(), "PX", ttl], on: loop) { self.check($0) }
    }

    /// The upstream is over: the record says how (after the last bytes). The owner's poll no longer looks for a
    /// stop asked elsewhere (nothing to cancel) unless a resume here reads the stream (`keepWatching`, `watch`):
    /// a stop must close that reader. A new resume here asks Redis itself (`StreamEndpoint`).
    package func finish(clean: Bool, keepWatching: Bool = false) {
        if !keepWatching { mirror.untrack(id) }
        flush()
        guard meta.state == .running else { return }
        meta.state = clean ? .completed : .broken
        writeMeta()
    }

    /// A `DELETE` at this replica: readers elsewhere see the flag.
    package func stopped() {
        mirror.untrack(id)
        mirror.send(["SET", mirror.key(id, "stop"), "1", "PX", ttl], on: loop) { self.check($0) }
    }

    /// The registry forgot the stream (its window passed, it was abandoned or stopped): no new resume may find it
    /// at any replica, as none finds it here, so it is marked gone (`lookup` takes the mark for a stop). A reader
    /// already replaying it elsewhere reads on until the copy expires, as one here reads on from memory.
    package func forgotten() {
        mirror.untrack(id)
        pending = []
        forgot = true
        mirror.send(["SET", mirror.key(id, "gone"), "1", "PX", ttl], on: loop) { _ in }
    }

    /// A resume here reads the ended stream: the owner's poll looks for a stop asked elsewhere again, until the
    /// reader leaves (`unwatch`) or the stream is forgotten.
    package func watch(_ stream: ResumableStream) {
        guard !forgot, meta.state != .running else { return }
        mirror.track(stream)
    }

    /// The resume here that read the ended stream left.
    package func unwatch() {
        guard meta.state != .running else { return }
        mirror.untrack(id)
    }

    /// A resume at this replica took the stream: a reader elsewhere sees its token replaced and closes.
    package func claimedLocally() {
        mirror.claimLocally(id, on: loop)
    }

    private func check(_ reply: RESPValue?) {
        guard reply == nil, !lost else { return }
        lost = true
        mirror.logger.warning("resumable stream copy in redis lost; resumes go on at this replica only",
                              [("stream", .string(id)), ("written", .int(meta.written))])
        markOwnerOnly()
    }

    /// The copy lost bytes: its body goes (until Redis confirms it), and the flag `…:owner_only` is set, with a new
    /// expiry, now and every second until the stream is forgotten. Lookups and polls read the flag whatever the
    /// record says: a write sent before the loss may still land after it. Set on a timer rather than with later
    /// writes: the first try may find the connection down (it is often a timeout that found the loss), and a
    /// stream may write nothing for longer than the flag's expiry (a silent provider, heartbeats off), while the
    /// record it flags is kept alive every second by the owner's poll.
    private func markOwnerOnly() {
        guard !forgot else { return }
        if !bodyDeleted {
            mirror.send(["DEL", mirror.key(id, "body")], on: loop) { reply in
                if reply?.integer != nil { self.bodyDeleted = true }
            }
        }
        mirror.send(["SET", mirror.key(id, "owner_only"), "1", "PX", ttl], on: loop) { _ in }
        guard !flagTimerArmed else { return }
        flagTimerArmed = true
        _ = loop.schedule(afterSeconds: 1) {
            self.flagTimerArmed = false
            self.markOwnerOnly()
        }
    }

    /// `markOwnerOnly` runs again within a second.
    private var flagTimerArmed = false
}

/// A reference for the replies of one pipelined poll, filled in order on one loop.
final class ReplyBox<Value>: @unchecked Sendable {
    // Invariant: touched on the one loop whose connection's completions fill and read it.
    var value: Value
    init(_ value: Value) { self.value = value }
}

extension ResumableStreams {
    /// The registry when a route has `resume`, copied to Redis when `state.backend` is `redis` (the admission
    /// store's connections, one per loop, under its key prefix).
    package static func make(_ configuration: RelayConfiguration, redis: RedisAdmissionStore?, loop: EventLoop,
                     logger: Logger, copyLagSeconds: Double = defaultCopyLagSeconds) -> ResumableStreams? {
        guard configuration.routes.contains(where: { $0.resume != nil }) else { return nil }
        let mirror = redis.map { store in
            RedisStreamMirror(keyPrefix: store.settings.keyPrefix, pollLoop: loop, connection: { store.client(for: $0) }, logger: logger)
        }
        return ResumableStreams(capBytes: configuration.limits.resumeBufferBytes, routes: configuration.routes, mirror: mirror,
                                copyLagSeconds: copyLagSeconds)
    }
}
