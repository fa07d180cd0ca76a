import Auth
import RelayCore
import Support

import Transport

/// The exchange that owns a resumable stream's upstream, as the stream sees it. Each method is called on the
/// owner's loop (`ownerLoop`), dispatched there by `ResumableStream`.
package protocol StreamOwner: AnyObject, Sendable {
    var ownerLoop: any LoopScheduler { get }
    /// A resume attached a reader: the stream is no longer detached.
    func readerAttached()
    /// The resumed reader left before the end: the detach window starts again.
    func readerLeft()
    /// A resume took over while the original client was still connected: close that connection.
    func originalTakenOver()
    /// `DELETE /v1/relay/streams/<id>`: cancel the upstream now.
    func stopRequested()
}

/// A connection reading a stream through a resume (`StreamEndpoint`). Called from any loop; each implementation
/// hops to its own.
package protocol StreamReader: AnyObject, Sendable {
    /// New bytes, or the end, are there to read.
    func wake()
    /// Another resume (or a stop) took the stream: close this connection without a clean end.
    func takenOver()
}

/// One resumable stream (README, "Resumable streams"): its id, who may resume it, its replay buffer and who reads
/// it now. Shared between the owner's loop (which appends) and whatever loop a resume or a stop arrives on, so
/// its state sits behind one lock; callbacks run outside the lock, on their own loops.
package final class ResumableStream: @unchecked Sendable {
    // Invariant: `state` is touched only inside `locked`; the `let`s are set before the stream is published.
    package let id: String
    /// The identity of the request that started it (nil on an `auth: none` route): a resume or a stop must match.
    package let identity: String?
    /// The route it was started on: its `auth` checks a resume's credentials.
    package let route: RelayConfiguration.Route
    package let windowSeconds: Double
    private weak var registry: ResumableStreams?

    /// How a stream ended, for its readers.
    package enum End: Equatable, Sendable {
        /// The provider finished (or the relay ended it cleanly): a reader gets the terminal chunk.
        case completed
        /// The upstream failed or was cancelled: a reader's connection closes without a clean end.
        case broken
        /// A stop: the stream is gone.
        case stopped
    }

    package enum Reader {
        case none
        case original
        case resumer(any StreamReader)
        /// A reader on another replica, following the stream's copy in Redis (`RedisStreamMirror`).
        case remote
    }

    package struct State {
        var buffer: ReplayBuffer
        var reader = Reader.original
        var end: End?
        var wakePending = false
        /// Resumes that attached before the end (here or, through Redis, at another replica).
        var resumes = 0
        weak var owner: (any StreamOwner)?
        /// The registry forgot the stream (`ResumableStreams.remove`): no resume attaches, no byte is kept any more.
        var forgotten = false
        /// Its bytes no longer count toward the registry's total: forgotten, and no resume reads them.
        var released = false

        /// Forgotten and read by nobody here: the bytes it holds are freed, and leave the registry's total (once).
        mutating func release() -> Int {
            guard forgotten, !released else { return 0 }
            if case .resumer = reader { return 0 }
            released = true
            return buffer.free()
        }
    }

    private let locked: Locked<State>
    /// The stream's copy in Redis (`state.backend: "redis"`), written on the owner's loop.
    package let mirrored: MirroredStream?

    package init(id: String, identity: String?, route: RelayConfiguration.Route, resume: RouteResume, owner: any StreamOwner,
         registry: ResumableStreams) {
        self.id = id
        mirrored = registry.mirror.map { mirror in
            MirroredStream(mirror: mirror, loop: owner.ownerLoop, id: id, identity: identity,
                           routeIndex: registry.routes.firstIndex(of: route) ?? 0, windowSeconds: resume.windowSeconds)
        }
        self.identity = identity
        self.route = route
        self.windowSeconds = resume.windowSeconds
        self.registry = registry
        var state = State(buffer: ReplayBuffer(maxBytes: resume.maxBufferBytes))
        state.owner = owner
        locked = Locked(state)
    }

    // MARK: The owner's side (its loop)

    /// Body bytes the owner wrote. Wakes a resumed reader; on the append that outgrows the buffer, cuts it (the
    /// bytes it has not read are gone). True when the stream outgrew its buffer and nobody reads it: nobody ever
    /// can again, so the owner cancels the upstream. A forgotten stream (stopped: the owner cancels a loop turn
    /// later) keeps nothing more: no resume can read it, and its registry no longer counts it.
    package func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let (delta, unread, wake, cut, overflowed) = locked.withLock {
            s -> (Int, Bool, (any StreamReader)?, (any StreamReader)?, Bool) in
            if s.forgotten { return (0, false, nil, nil, true) }
            let delta = s.buffer.append(bytes)
            var wake: (any StreamReader)?, cut: (any StreamReader)?
            if case .resumer(let reader) = s.reader {
                if s.buffer.overflowed {
                    cut = reader
                    s.reader = .none
                } else if !s.wakePending {
                    s.wakePending = true
                    wake = reader
                }
            }
            var unread = false
            if case .none = s.reader { unread = s.buffer.overflowed }
            return (delta, unread, wake, cut, s.buffer.overflowed)
        }
        mirrored?.append(bytes, overflowed: overflowed)
        registry?.held(delta)
        wake?.wake()
        cut?.takenOver()
        return unread
    }

    /// Whether the stream outgrew its buffer: no resume can be answered but 410.
    package var isOverflowed: Bool { locked.withLock { $0.buffer.overflowed } }

    /// What the owner does when its original client leaves.
    package enum Departure: Equatable { case detached, unresumable, stillRead }

    /// The original client left: the stream is detached (the window starts), cannot be resumed (overflowed: cancel
    /// now), or a resume already reads it.
    package func originalLeft() -> Departure {
        locked.withLock { s in
            if case .original = s.reader { s.reader = .none }
            guard case .none = s.reader else { return .stillRead }
            return s.buffer.overflowed ? .unresumable : .detached
        }
    }

    /// The detach window passed: true (and the stream is ended) if still nobody reads it, so the owner cancels.
    package func abandonIfUnread() -> Bool {
        locked.withLock { s in
            guard case .none = s.reader, s.end == nil else { return false }
            s.end = .broken
            return true
        }
    }

    /// The upstream is over. Wakes a reader to take the rest and the end. Returns how many resumes attached
    /// while it ran: counted here, under the lock, because the owner's `readerAttached` notice hops to its loop,
    /// where the upstream's end can come first (a resume attached on another loop just before the last bytes).
    @discardableResult
    package func finish(_ end: End) -> Int {
        if let mirrored {
            let (first, readHere) = locked.withLock { s -> (Bool, Bool) in
                if case .resumer = s.reader { return (s.end == nil, true) }
                return (s.end == nil, false)
            }
            mirrored.finish(clean: end == .completed && first, keepWatching: readHere)
        }
        let (wake, resumes) = locked.withLock { s -> ((any StreamReader)?, Int) in
            guard s.end == nil else { return (nil, s.resumes) }
            s.end = end
            s.owner = nil
            if case .resumer(let reader) = s.reader { s.wakePending = true; return (reader, s.resumes) }
            return (nil, s.resumes)
        }
        wake?.wake()
        return resumes
    }

    // MARK: A reader's side (any loop)

    /// What a resume at `offset` found.
    package enum Attach {
        case attached
        case failed(ReplayBuffer.Position)
        case gone
        /// The stream broke (the provider failed) and the reader has every byte: nothing can follow.
        case brokenAtEnd
    }

    /// A resume at `offset`: `reader` takes the stream over from whoever read it (told to close).
    package func attach(_ reader: any StreamReader, offset: Int) -> Attach {
        let result = locked.withLock { s -> (Attach, previous: Reader, owner: (any StreamOwner)?, ended: Bool) in
            if s.end == .stopped || s.forgotten { return (.gone, .none, nil, false) }
            let position = s.buffer.position(offset)
            guard case .replay(let at) = position else { return (.failed(position), .none, nil, false) }
            if s.end == .broken && at == s.buffer.written { return (.brokenAtEnd, .none, nil, false) }
            let previous = s.reader
            s.reader = .resumer(reader)
            s.wakePending = false
            if s.end == nil { s.resumes += 1 }
            return (.attached, previous, s.end == nil ? s.owner : nil, s.end != nil)
        }
        guard case .attached = result.0 else { return result.0 }
        if let mirrored {
            // An ended stream read here is watched again for a stop asked elsewhere, while it is read.
            mirrored.loop.execute {
                mirrored.claimedLocally()
                if result.ended { mirrored.watch(self) }
            }
        }
        switch result.previous {
        case .original: notify(result.owner) { $0.originalTakenOver() }
        case .resumer(let old): old.takenOver()
        case .none, .remote: break
        }
        notify(result.owner) { $0.readerAttached() }
        return .attached
    }

    /// Up to `limit` bytes from `offset` for `reader`, and the end when every byte has been read; `current` is
    /// false when another reader took the stream.
    package func read(_ reader: any StreamReader, from offset: Int, limit: Int) -> (bytes: [UInt8], end: End?, current: Bool) {
        locked.withLock { s in
            guard case .resumer(let r) = s.reader, r === reader else { return ([], nil, false) }
            s.wakePending = false
            let bytes = Array(s.buffer.read(from: offset, limit: limit))
            let atEnd = offset + bytes.count >= s.buffer.written
            return (bytes, atEnd ? s.end : nil, true)
        }
    }

    /// The reader's connection ended (or it read the end). Starts the owner's detach window if the stream runs on;
    /// a stream forgotten while it read stops counting toward the registry's total now.
    package func readerLeft(_ reader: any StreamReader) {
        let (owner, freed, ended) = locked.withLock { s -> ((any StreamOwner)?, Int, Bool) in
            guard case .resumer(let r) = s.reader, r === reader else { return (nil, 0, false) }
            s.reader = .none
            return (s.end == nil ? s.owner : nil, s.release(), s.end != nil)
        }
        registry?.held(-freed)
        notify(owner) { $0.readerLeft() }
        if ended, let mirrored { mirrored.loop.execute { mirrored.unwatch() } }
    }

    /// The registry forgets the stream: the bytes to take off its total now (none while a resume still reads them:
    /// they are taken off when it leaves, so a slow reader far behind cannot hold buffers past the cap).
    fileprivate func forget() -> Int {
        locked.withLock { s in
            s.forgotten = true
            return s.release()
        }
    }

    /// `DELETE`: the stream ends now; its reader is closed, its owner cancels the upstream. A stream forgotten
    /// while a resume read it (its window passed meanwhile) kept its bytes counted for that reader, which is gone
    /// now: they leave the registry's total here, since its `readerLeft` will no longer find it the reader.
    package func stop() {
        let (reader, owner, freed) = locked.withLock { s -> ((any StreamReader)?, (any StreamOwner)?, Int) in
            let owner = s.end == nil ? s.owner : nil
            s.end = .stopped
            s.owner = nil
            let previous = s.reader
            s.reader = .none
            let freed = s.release()
            if case .resumer(let r) = previous { return (r, owner, freed) }
            return (nil, owner, freed)
        }
        registry?.held(-freed)
        reader?.takenOver()
        notify(owner) { $0.stopRequested() }
        if let mirrored { mirrored.loop.execute { mirrored.stopped() } }
    }

    /// A stop asked at another replica (seen by `RedisStreamMirror`'s poll): as `stop`, and forgotten here.
    package func stopAndForget() {
        stop()
        registry?.remove(self)
    }

    // MARK: A reader on another replica (`RedisStreamMirror`'s poll)

    /// Resumes at other replicas since the last poll (`RemoteReaderWatch`), counted while the stream runs.
    package func remoteResumed(_ count: Int) {
        guard count > 0 else { return }
        locked.withLock { s in if s.end == nil { s.resumes += count } }
    }

    /// A reader elsewhere took the stream: whoever read it here is closed; the stream is no longer detached.
    package func remoteAttached() {
        let result = locked.withLock { s -> (previous: Reader, owner: (any StreamOwner)?)? in
            guard s.end == nil else { return nil }
            let previous = s.reader
            s.reader = .remote
            s.wakePending = false
            return (previous, s.owner)
        }
        guard let result else { return }
        switch result.previous {
        case .original: notify(result.owner) { $0.originalTakenOver() }
        case .resumer(let old): old.takenOver()
        case .none, .remote: break
        }
        notify(result.owner) { $0.readerAttached() }
    }

    /// The reader elsewhere left (its token expired): the detach window starts again.
    package func remoteLeft() {
        let owner = locked.withLock { s -> (any StreamOwner)? in
            guard case .remote = s.reader else { return nil }
            s.reader = .none
            return s.end == nil ? s.owner : nil
        }
        notify(owner) { $0.readerLeft() }
    }

    /// A resume at this replica reads the stream (its token in Redis is the owner's to keep alive).
    package var isReadByLocalResume: Bool {
        locked.withLock { s in
            if case .resumer = s.reader { return s.end == nil }
            return false
        }
    }

    /// Bytes the buffer holds (for the registry's total when the stream leaves it).
    package var heldBytes: Int { locked.withLock { $0.buffer.heldBytes } }

    private func notify(_ owner: (any StreamOwner)?, _ call: @escaping @Sendable (any StreamOwner) -> Void) {
        guard let owner else { return }
        owner.ownerLoop.execute { call(owner) }
    }
}

/// Every resumable stream of this process, by id, and the bytes their buffers hold together (capped by
/// `limits.resumeBufferBytes`: past it new streams are not resumable; running ones are not cut). With
/// `state.backend: "redis"` each stream is also copied to Redis (`mirror`), where a resume or a stop at another
/// replica finds it; without, a resume or a stop must reach the replica that started the stream (README,
/// "Resumable streams"). This replica's memory is always asked first, so a Redis outage leaves same-replica
/// resumes working.
package final class ResumableStreams: @unchecked Sendable {
    // Invariant: `streams` is touched only inside its lock; `heldBytes` is atomic; the `let`s are set at init.
    package let capBytes: Int
    package let mirror: RedisStreamMirror?
    /// The configuration's routes: a stream's copy names its route by index.
    package let routes: [RelayConfiguration.Route]
    private let streams = Locked<[String: ResumableStream]>([:])
    private let heldBytes = Locked(0)

    /// How far a stream's copy in Redis may trail what its owner's client received: the owner sends bytes (and
    /// the stream's id, in the head) to its client before Redis has them (`MirroredStream` writes once per loop
    /// turn, a round trip later). At another replica a stream not found yet, or a resume past what its record says
    /// was written while it runs, is looked up again for this long before 404 or 416 (`StreamEndpoint`); so that
    /// the wait tells nothing, every 404 of a replica with Redis comes this long after its request.
    package static let defaultCopyLagSeconds = 0.1
    package let copyLagSeconds: Double
    /// Every resumable route authenticates with JWTs: a resume's expired token is refused before its stream is
    /// looked up (`StreamEndpoint`).
    package let everyRouteTakesJWTs: Bool

    package init(capBytes: Int, routes: [RelayConfiguration.Route] = [], mirror: RedisStreamMirror? = nil,
                 copyLagSeconds: Double = defaultCopyLagSeconds) {
        self.capBytes = capBytes
        self.routes = routes
        self.mirror = mirror
        self.copyLagSeconds = copyLagSeconds
        let resumable = routes.filter { $0.resume != nil }
        everyRouteTakesJWTs = !resumable.isEmpty && resumable.allSatisfy { $0.auth == .jwt }
    }

    /// Starts keeping a stream, or nil when the buffers together are at the cap.
    package func open(identity: String?, route: RelayConfiguration.Route, resume: RouteResume, owner: any StreamOwner) -> ResumableStream? {
        guard heldBytes.load(ordering: .relaxed) < capBytes else { return nil }
        let stream = ResumableStream(id: StreamIDs.make(), identity: identity, route: route, resume: resume, owner: owner, registry: self)
        streams.withLock { $0[stream.id] = stream }
        if let mirrored = stream.mirrored {
            mirrored.opened()   // on the owner's loop: `open` is called there, at the provider's head
            mirrored.mirror.track(stream)
        }
        return stream
    }

    package func lookup(_ id: String) -> ResumableStream? { streams.withLock { $0[id] } }

    /// Forgets `stream` (its window passed, it was stopped or abandoned); its bytes are freed.
    package func remove(_ stream: ResumableStream) {
        let removed = streams.withLock { s -> Bool in
            guard s[stream.id] === stream else { return false }
            s[stream.id] = nil
            return true
        }
        guard removed else { return }
        held(-stream.forget())
        if let mirrored = stream.mirrored { mirrored.loop.execute { mirrored.forgotten() } }
    }

    /// Bytes held by every buffer together.
    package var totalHeldBytes: Int { heldBytes.load(ordering: .relaxed) }
    package var count: Int { streams.withLock { $0.count } }

    /// The `/metrics` lines: the streams kept and the bytes their buffers hold together, against
    /// `limits.resumeBufferBytes`, past which new streams get no id.
    package func renderMetrics() -> String {
        "# HELP sse_relay_resumable_streams Resumable streams kept (running, or ended and within their window).\n"
            + "# TYPE sse_relay_resumable_streams gauge\nsse_relay_resumable_streams \(count)\n"
            + "# HELP sse_relay_resume_buffer_bytes Bytes the replay buffers hold together; at limits.resumeBufferBytes new streams are not resumable.\n"
            + "# TYPE sse_relay_resume_buffer_bytes gauge\nsse_relay_resume_buffer_bytes \(totalHeldBytes)\n"
    }

    fileprivate func held(_ delta: Int) {
        if delta != 0 { heldBytes.wrappingAdd(delta, ordering: .relaxed) }
    }
}
