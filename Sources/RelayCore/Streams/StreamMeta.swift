import Auth

/// The small record a resumable stream keeps in Redis beside its bytes (README, "Resumable streams", replicas): who
/// owns the upstream, who may resume it (a hash of the identity key, never a credential), the route it ran on, how
/// many body bytes were written, and how it stands. A value, encoded as one line of text; written by the owner's
/// replica, read by any replica that gets a resume or a stop.
package struct StreamMeta: Equatable, Sendable {
    package enum State: String, Sendable, CaseIterable {
        /// The upstream runs: bytes may follow.
        case running
        /// The provider finished (or the relay ended it cleanly): a reader gets the terminal chunk.
        case completed
        /// The upstream failed or was cancelled: a reader's connection closes without a clean end.
        case broken
        /// The stream outgrew `maxBufferBytes`: its bytes are gone, a resume gets 410.
        case overflowed
        /// The copy lost bytes (a write to Redis failed, or Redis lost what it held): its body is deleted, never
        /// served with a hole, and only the owner, from its memory copy, serves the stream. A resume elsewhere
        /// gets 503 `state_unavailable`: the stream is there, and a retry may reach the owner. Not written in a
        /// record: a lookup reads it from the flag beside it (`RedisStreamMirror.lookup`).
        case ownerOnly = "owner_only"
    }

    /// The owning replica's id (random per process).
    package var owner: String
    /// `identityHash(_:)` of the identity that started the stream.
    package var identityHash: String
    /// The index of its route in `routes` (every replica runs the same configuration).
    package var routeIndex: Int
    /// Body bytes written so far (the Redis body holds exactly these, unless overflowed).
    package var written: Int
    package var state: State

    package init(owner: String, identityHash: String, routeIndex: Int, written: Int, state: State) {
        self.owner = owner
        self.identityHash = identityHash
        self.routeIndex = routeIndex
        self.written = written
        self.state = state
    }

    package static let version = "v1"

    /// `v1 <owner> <identityHash> <routeIndex> <written> <state>`.
    package func encoded() -> String {
        let parts = encodedAround()
        return parts.beforeWritten + String(written) + parts.afterWritten
    }

    /// The record's text on either side of `written`: what the owner's append script completes with the body's
    /// length in Redis (`MirroredStream`), so a record and its body cannot disagree.
    package func encodedAround() -> (beforeWritten: String, afterWritten: String) {
        (Self.version + " " + owner + " " + identityHash + " " + String(routeIndex) + " ", " " + state.rawValue)
    }

    /// Nil for anything but a record `encoded()` wrote.
    package static func decode(_ text: String) -> StreamMeta? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == version, !parts[1].isEmpty, !parts[2].isEmpty,
              let route = Int(parts[3]), route >= 0, let written = Int(parts[4]), written >= 0,
              let state = State(rawValue: String(parts[5])) else { return nil }
        return StreamMeta(owner: String(parts[1]), identityHash: String(parts[2]), routeIndex: route, written: written, state: state)
    }

    /// What a resume at `offset` gets, by the memory buffer's rule (`ReplayBuffer.position`), with one difference:
    /// an overflowed record is 410 at every offset. The owner stops writing the copy when the stream overflows, so
    /// the record's `written` stays where it was while the owner's goes on; an offset the client did receive can be
    /// past it, and must get the 410 the owner would answer, not 416.
    /// (An `ownerOnly` record has no offsets to give: the reader answers 503 before it asks.)
    package func position(_ offset: Int) -> ReplayBuffer.Position {
        if state == .overflowed { return .expired }
        if offset > written { return .beyondWritten }
        return .replay(offset)
    }

    /// The identity as the record names it: hex SHA-256 of its key, "-" for none (an `auth: none` route).
    package static func identityHash(_ identity: String?) -> String {
        guard let identity else { return "-" }
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        for byte in Digest.sha256(Array(identity.utf8)) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: hex, as: UTF8.self)
    }
}

/// A reader on another replica, following a stream through Redis: what it does after one poll (pure).
package enum RemoteFollow {
    package enum Step: Equatable, Sendable {
        /// Write this many of the poll's bytes (cut to what the record says was written), then poll again at once.
        case write(Int)
        /// Nothing new yet: poll again after the interval.
        case wait
        /// Every byte is read and the stream ended: a clean end (true) or a close without one (false).
        case end(clean: Bool)
        /// Another resume or a stop took the stream: close without a clean end.
        case takenOver
        /// The copy cannot be read on: its record is gone, it overflowed, its owner flagged it lost
        /// (`ownerOnly`), or its body expired under the record. Close without a clean end; the client resumes, and
        /// the owner (or nobody) answers.
        case copyLost
    }

    /// - Parameters: `meta` the record (nil: gone, expired), `stopped` a stop was asked, `claimed` this reader is
    ///   still the stream's reader, `offset` the next byte it needs, `fetched` bytes the poll returned from `offset`.
    package static func step(meta: StreamMeta?, stopped: Bool, claimed: Bool, offset: Int, fetched: Int) -> Step {
        guard !stopped, claimed else { return .takenOver }
        guard let meta, meta.state != .overflowed, meta.state != .ownerOnly else { return .copyLost }
        let usable = max(0, min(fetched, meta.written - offset))
        if usable > 0 { return .write(usable) }
        switch meta.state {
        case .running: return .wait
        // Ended with bytes unread that the poll did not return: the body expired under the record; nothing follows.
        case .completed: return offset >= meta.written ? .end(clean: true) : .copyLost
        case .broken: return offset >= meta.written ? .end(clean: false) : .copyLost
        case .overflowed, .ownerOnly: return .copyLost
        }
    }
}
