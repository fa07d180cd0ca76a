/// What the owner of a resumable stream makes of the reader token it polls from Redis (`stream:<id>:reader`,
/// README, "Resumable streams"): a value fed one poll's token at a time, returning what the stream should hear.
///
/// A reader at another replica keeps its token alive with a short expiry (`RedisStreamMirror.readerTTLMilliseconds`),
/// refreshed with each poll and, while its client is behind, on a timer. A reader whose refreshes do not reach Redis
/// for longer (Redis did not answer for a while) lets the key expire, then sets the same token again when it goes
/// on. The owner then sees the token go and come back: the reader left and returned, but no new reader resumed, so
/// that return is not counted as a resume. A token the owner has not counted before is a resume (a reader on another
/// replica took the stream over, or the first one attached).
///
/// Tokens that start with `local-` are readers at the owner's own replica, which count themselves.
package struct RemoteReaderWatch: Equatable, Sendable {
    package enum Change: Equatable, Sendable {
        /// A reader elsewhere holds the stream; `counted` when it is a resume not counted before.
        case attached(counted: Bool)
        /// The reader elsewhere is gone (its token expired): the stream is detached again.
        case left
    }

    /// The remote token seen last; nil once the key was seen absent. A local reader's token leaves it as it was
    /// (that reader's own replica counts it and closes the remote one).
    private(set) var current: String?
    /// The last token counted as a resume.
    private(set) var counted: String?

    package init() {}

    /// One poll's token (nil when the key is absent); nil when nothing changed.
    package mutating func observe(_ token: String?) -> Change? {
        let remote = token.flatMap { $0.hasPrefix("local-") ? nil : $0 }
        guard let remote else {
            // Absent, or a local reader's (which came in through the owner's own replica and says so there).
            guard token == nil, current != nil else { return nil }
            current = nil
            return .left
        }
        guard remote != current else { return nil }
        current = remote
        let isNew = remote != counted
        counted = remote
        return .attached(counted: isNew)
    }
}
