import Support

/// What the owner of a resumable stream makes of what it polls from Redis (README, "Resumable streams"): the reader
/// token (`stream:<id>:reader`) and the count of resumes at other replicas (`stream:<id>:claims`). A value fed one
/// poll's pair at a time, returning what the stream should hear.
///
/// A reader at another replica keeps its token alive with a short expiry (`RedisStreamMirror.readerTTLMilliseconds`),
/// refreshed with each poll and, while its client is behind, on a timer. A reader whose refreshes do not reach Redis
/// for longer (Redis did not answer for a while) lets the key expire, then sets the same token again when it goes
/// on. The owner then sees the token go and come back: the reader left and returned.
///
/// Resumes are counted from the claims count, which each resume at another replica raises once, in the script that
/// sets its token (`RedisStreamMirror.claimScript`); a token that comes back is no claim. The token alone would
/// miss a resume that is taken over before the owner's next poll (25 ms): the owner sees only the last token.
///
/// Tokens that start with `local-` are readers at the owner's own replica, which count themselves and raise no
/// claim.
package struct RemoteReaderWatch: Equatable, Sendable {
    package enum Change: Equatable, Sendable {
        /// A reader elsewhere holds the stream (a new token).
        case attached
        /// The reader elsewhere is gone (its token expired): the stream is detached again.
        case left
    }

    /// The remote token seen last; nil once the key was seen absent. A local reader's token leaves it as it was
    /// (that reader's own replica counts it and closes the remote one).
    private(set) var current: String?
    /// The claims count seen last.
    private(set) var claims = 0

    package init() {}

    /// One poll's token and claims count (each nil when its key is absent): the reader's change, if any, and how
    /// many resumes elsewhere there were since the last poll.
    package mutating func observe(_ token: String?, claims: Int?) -> (change: Change?, resumes: Int) {
        var resumes = 0
        if let claims {
            // A count below the last one is a key that expired and was set again (the owner refreshes its expiry
            // with the stream's record, so this is Redis losing it): what it holds now is new.
            resumes = claims >= self.claims ? claims - self.claims : claims
            self.claims = claims
        }
        let remote = token.flatMap { $0.hasPrefix("local-") ? nil : $0 }
        guard let remote else {
            // Absent, or a local reader's (which came in through the owner's own replica and says so there).
            guard token == nil, current != nil else { return (nil, resumes) }
            current = nil
            return (.left, resumes)
        }
        guard remote != current else { return (nil, resumes) }
        current = remote
        return (.attached, resumes)
    }
}

/// When a token with a short life is refreshed from a loop that runs at its own pace (the owner's poll, re-armed
/// only when Redis answered the last one): by the clock, at the first turn `interval` seconds or more after the
/// last refresh. Counting turns instead would stretch with Redis's round trip: 13 polls of 25 ms are 325 ms, but
/// with 100 ms answers they are 1.6 s, past the token's 1 s life. A plain value fed the clock's readings.
package struct RefreshCadence: Equatable, Sendable {
    package let interval: Double
    private var last: Instant?

    package init(interval: Double) { self.interval = interval }

    /// True (and counted as the refresh) when `interval` has passed since the last refresh, or at the first call.
    package mutating func isDue(at now: Instant) -> Bool {
        if let last, now.seconds(since: last) < interval { return false }
        last = now
        return true
    }
}
