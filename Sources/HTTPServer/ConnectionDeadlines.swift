import Support

/// The connection-level timeouts of one client connection, as a value: the server connection reports what it
/// is doing and when, and asks what is due. No timers of its own, so it is tested with plain instants.
///
/// | phase | clock starts | on expiry |
/// |---|---|---|
/// | waiting for a first request | accept | closed quietly (`headerReadSeconds`) |
/// | idle keep-alive | end of the last response | closed quietly (`keepAliveIdleSeconds`) |
/// | reading a head | its first byte (accept, for the first request) | 408, closed (`headerReadSeconds`) |
/// | reading a body | the last body byte | 408, closed (`bodyReadSeconds`) |
/// | responding | no limit of its own (the exchange has the upstream timeouts) | |
/// | client not reading, buffer above high water | the moment it went above | closed, upstream cancelled (`clientWriteStallSeconds`) |
public struct ConnectionDeadlines: Sendable, Equatable {
    public struct Settings: Sendable, Equatable {
        public var headerReadSeconds: Double
        public var bodyReadSeconds: Double
        public var keepAliveIdleSeconds: Double
        public var clientWriteStallSeconds: Double
        public init(headerReadSeconds: Double, bodyReadSeconds: Double, keepAliveIdleSeconds: Double, clientWriteStallSeconds: Double) {
            self.headerReadSeconds = headerReadSeconds
            self.bodyReadSeconds = bodyReadSeconds
            self.keepAliveIdleSeconds = keepAliveIdleSeconds
            self.clientWriteStallSeconds = clientWriteStallSeconds
        }
    }

    public enum Phase: Sendable, Equatable {
        case awaitingFirstRequest(since: Instant)
        case idle(since: Instant)
        case readingHead(since: Instant)
        case readingBody(lastProgress: Instant)
        case responding
    }

    public enum Expiry: Sendable, Equatable {
        /// Nothing was asked: close without a word.
        case closeQuietly
        /// A request was coming too slowly: 408, then close.
        case requestTimeout
        /// The client stopped reading: close (and cancel the upstream).
        case writeStall
    }

    public let settings: Settings
    public private(set) var phase: Phase
    public private(set) var writeStalledSince: Instant?

    public init(settings: Settings, acceptedAt: Instant) {
        self.settings = settings
        self.phase = .awaitingFirstRequest(since: acceptedAt)
    }

    /// Bytes of a new request arrived while idle.
    public mutating func headBytesArrived(now: Instant) {
        switch phase {
        case .awaitingFirstRequest(let since): phase = .readingHead(since: since)   // slowloris: from accept
        case .idle: phase = .readingHead(since: now)
        default: break
        }
    }

    public mutating func headComplete(now: Instant, hasBody: Bool) {
        phase = hasBody ? .readingBody(lastProgress: now) : .responding
    }

    public mutating func bodyProgress(now: Instant) {
        if case .readingBody = phase { phase = .readingBody(lastProgress: now) }
    }

    public mutating func bodyComplete() {
        if case .readingBody = phase { phase = .responding }
    }

    /// The response ended and the connection stays open for another request. A stall goes on: the answer may
    /// still be unread, and only a drained buffer (`writeBufferDrained`) says the client reads again.
    public mutating func responseComplete(now: Instant) {
        phase = .idle(since: now)
    }

    public mutating func writeBufferFull(now: Instant) {
        if writeStalledSince == nil { writeStalledSince = now }
    }

    public mutating func writeBufferDrained() {
        writeStalledSince = nil
    }

    /// The earliest deadline and what happens there.
    public var next: (deadline: Instant, expiry: Expiry)? {
        var best: (Instant, Expiry)?
        func consider(_ deadline: Instant, _ expiry: Expiry) {
            if best == nil || deadline < best!.0 { best = (deadline, expiry) }
        }
        switch phase {
        case .awaitingFirstRequest(let since): consider(since.advanced(bySeconds: settings.headerReadSeconds), .closeQuietly)
        case .idle(let since): consider(since.advanced(bySeconds: settings.keepAliveIdleSeconds), .closeQuietly)
        case .readingHead(let since): consider(since.advanced(bySeconds: settings.headerReadSeconds), .requestTimeout)
        case .readingBody(let last): consider(last.advanced(bySeconds: settings.bodyReadSeconds), .requestTimeout)
        case .responding: break
        }
        if let stalled = writeStalledSince {
            consider(stalled.advanced(bySeconds: settings.clientWriteStallSeconds), .writeStall)
        }
        return best.map { (deadline: $0.0, expiry: $0.1) }
    }

    /// What is due at `now`, if anything. Early calls return nil, so a timer may fire late or spuriously.
    public func expired(now: Instant) -> Expiry? {
        guard let next, now >= next.deadline else { return nil }
        return next.expiry
    }
}
