import Support

/// When a quiet event stream gets the relay's own `: keep-alive` comment (README, "Heartbeats"). A value: the
/// exchange tells it about provider deliveries and about the bytes the client was sent, asks it at its timer, and
/// writes the comment when told to. SSE parsers ignore comment lines (WHATWG HTML §9.2.6), so a heartbeat changes
/// no event; it only keeps idle-timeout proxies (ALB 60 s, nginx 60 s, Cloudflare 100 s, Azure Front Door 30 s)
/// from cutting a stream whose model is thinking.
///
/// Rules: a heartbeat only after `intervalSeconds` with no provider byte and no heartbeat; only where the bytes
/// written so far end an event (never inside one: a provider that stops mid-event gets none until it finishes
/// that event); and only where that end is unambiguous to every parser in use (`atHeartbeatBoundary`). One
/// deadline at a time (`nextDue`), so an idle stream costs one timer wake-up per interval, a busy one at most one.
///
/// Owned by its exchange (the exchange's loop queue).
package struct HeartbeatSchedule: Sendable, Equatable {
    /// The bytes of one heartbeat: a comment line and the blank line after it.
    package static let comment: [UInt8] = Array(": keep-alive\n\n".utf8)

    package let intervalSeconds: Double
    /// The last provider byte or heartbeat: the silence is measured from here.
    private(set) var lastActivity: Instant
    /// Heartbeats written (the access log's `heartbeats`).
    private(set) var count = 0
    /// Where the bytes the client was sent end (a stream's start is a boundary).
    private var boundary = WrittenTail()

    package init(intervalSeconds: Double, now: Instant) {
        self.intervalSeconds = intervalSeconds
        self.lastActivity = now
    }

    /// A delivery from the provider (whatever became of its bytes): the silence starts again.
    package mutating func providerDelivered(now: Instant) {
        if now > lastActivity { lastActivity = now }
    }

    /// Bytes the client was sent (the provider's, after filters; a closing event): only their end matters.
    package mutating func wrote(_ bytes: UnsafeRawBufferPointer) { boundary.feed(bytes) }

    /// The bytes so far end with an empty line that no later byte can change the meaning of
    /// (`WrittenTail.atSettledBoundary`). A lone CR after a line end (`LF CR`, `CR LF CR`) may still be the start
    /// of a CRLF: a comment written there would make parsers that split on LF alone read a line `CR: keep-alive`,
    /// so the heartbeat waits for the next byte.
    package var atHeartbeatBoundary: Bool { boundary.atSettledBoundary }

    /// When the timer should next ask; nil while an event is half-sent (the provider's next delivery asks again).
    package var nextDue: Instant? {
        atHeartbeatBoundary ? lastActivity.advanced(bySeconds: intervalSeconds) : nil
    }

    /// Asked at (or after) `nextDue`: true means write `comment` now (one write), counted here. Early calls, calls
    /// inside an event and calls while the client is not reading (`clientBackedUp`: bytes are queued for it, the
    /// proxy in front is not idle; it is asked again an interval later) return false.
    package mutating func due(now: Instant, clientBackedUp: Bool) -> Bool {
        guard let due = nextDue, now >= due else { return false }
        lastActivity = now
        guard !clientBackedUp else { return false }
        count += 1
        boundary = WrittenTail()   // the comment ends with its blank line
        return true
    }
}

/// Where the bytes written to the client end, from their last three bytes: whether they end a whole event (an empty
/// line: LF or CR or CRLF after a line end, as `SSEParser` reads it). Not a scanner: it looks at the tail of each
/// write only (the events themselves are found once per delivery by `SSEBoundaryScanner`); it follows the bytes
/// the client was sent, heartbeats included, rather than the provider's.
struct WrittenTail: Sendable, Equatable {
    private var b1: UInt8 = 0x0A
    private var b2: UInt8 = 0x0A
    private var b3: UInt8 = 0

    init() {}

    /// The bytes so far end with a whole event (or nothing has passed yet).
    var atBoundary: Bool {
        switch (b2, b1) {
        case (0x0A, 0x0A), (0x0D, 0x0D), (0x0A, 0x0D): true
        case (0x0D, 0x0A): b3 == 0x0D || b3 == 0x0A
        default: false
        }
    }

    /// A boundary no later byte can move: not a lone CR after a line end, which may yet be the start of a CRLF.
    var atSettledBoundary: Bool { atBoundary && !(b2 == 0x0A && b1 == 0x0D) }

    /// Notes bytes that passed.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        if n >= 3 {
            (b3, b2, b1) = (bytes[n - 3], bytes[n - 2], bytes[n - 1])
        } else {
            for byte in bytes { (b3, b2, b1) = (b2, b1, byte) }
        }
    }
}
