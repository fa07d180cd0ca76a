#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where lines and events end in an event stream (WHATWG §9.2.5: a line ends with CRLF, LF or CR; an empty line
/// ends an event), found in ONE pass over each delivery. Everything that needs those boundaries reads the same
/// result instead of walking the bytes again: `SSEParser.parse(_:scan:onRawEvent:)` (the relay's usage tap), the
/// usage-event filter (`UsageEventStripper`), and the relay's budget cut and heartbeats, which ask
/// `atEventBoundary` ("may bytes of our own go in now without landing inside an event?").
///
/// A CR that ends one delivery and an LF that starts the next are one line end: the scan of the next delivery
/// says so (`skipsLeadingLF`), so no reader has to look ahead or remember it. A plain value owned by whoever owns
/// the stream (the exchange's queue in the relay); memory is the list of line ends of the last delivery, reused.
public struct SSEBoundaryScanner: Sendable {
    /// One line end in a delivery.
    public struct LineEnd: Sendable, Equatable {
        /// Index of the line end's first byte (CR or LF): the line's text ends here.
        public var end: Int
        /// Index just past the line end (past CRLF when both are in this delivery).
        public var next: Int
        /// The line was empty: this line end ends an event (or an empty block).
        public var endsEvent: Bool

        public init(end: Int, next: Int, endsEvent: Bool) {
            self.end = end
            self.next = next
            self.endsEvent = endsEvent
        }
    }

    /// The boundaries of one delivery, as indices into it.
    public struct Scan: Sendable, Equatable {
        /// The delivery's first byte is an LF that completes a CR ending the previous delivery: not a line end.
        public var skipsLeadingLF: Bool
        /// The delivery ends with a CR whose LF, if any, comes first in the next delivery.
        public var endsWithCR: Bool
        /// Every line end in the delivery, in order.
        public var lineEnds: [LineEnd]

        public init(skipsLeadingLF: Bool = false, endsWithCR: Bool = false, lineEnds: [LineEnd] = []) {
            self.skipsLeadingLF = skipsLeadingLF
            self.endsWithCR = endsWithCR
            self.lineEnds = lineEnds
        }

        /// Where the delivery's bytes start counting as lines (past an LF that belongs to the last CR).
        public var start: Int { skipsLeadingLF ? 1 : 0 }

        /// Index just past the first event end in the delivery; nil when none ends here.
        public var firstEventEnd: Int? {
            for lineEnd in lineEnds where lineEnd.endsEvent { return lineEnd.next }
            return nil
        }

        /// The scan of the delivery's first `count` bytes, `count` being a line end's `next` (or the delivery's
        /// length): for a reader handed only that part.
        public func prefix(_ count: Int) -> Scan {
            var result = Scan(skipsLeadingLF: skipsLeadingLF && count > 0)
            for lineEnd in lineEnds where lineEnd.next <= count { result.lineEnds.append(lineEnd) }
            result.endsWithCR = endsWithCR && result.lineEnds.count == lineEnds.count && lineEnds.last?.next == count
            return result
        }
    }

    /// The last delivery ended with a CR: an LF first in the next one completes that line end.
    private var pendingCR = false
    /// That CR came right after an LF (or first in the stream): `LF CR` may yet be `LF CRLF` (`atSettledEventBoundary`).
    /// Set only when a delivery ends in a CR (no per-delivery bookkeeping for it).
    private var pendingCRAfterLF = false
    /// Bytes came since the last line end (the current line is not empty).
    private var lineHasBytes = false
    /// The last line end ended an event (true at the start: nothing is under way).
    private var lastLineEndedEvent = true
    /// Deliveries scanned, and their bytes: what tests count to show each delivery is walked once.
    public private(set) var scans = 0
    public private(set) var bytesScanned = 0
    /// The last scan's line ends, kept so the next scan reuses their storage.
    private var lineEnds: [LineEnd] = []

    public init() {}

    /// The bytes so far end with a whole event, or nothing came yet: bytes of our own (a comment, a closing event)
    /// can go in here without splitting an event. O(1).
    public var atEventBoundary: Bool { !lineHasBytes && lastLineEndedEvent }

    /// `atEventBoundary`, and no later byte can change where that boundary is: not a lone CR after a line end
    /// (`…\n\r`, `…\r\n\r`), which may be the start of a CRLF whose LF comes next. Bytes of our own written between
    /// the two would read, to parsers that split lines on LF alone, as a line starting with CR (README,
    /// "Heartbeats"; `WrittenTail.atSettledBoundary` is the same rule on the client's bytes). O(1).
    public var atSettledEventBoundary: Bool { atEventBoundary && !(pendingCR && pendingCRAfterLF) }

    /// Finds the line and event ends of the next delivery, exactly as received.
    public mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Scan {
        scans += 1
        bytesScanned += bytes.count
        lineEnds.removeAll(keepingCapacity: true)
        var result = Scan()
        let n = bytes.count
        guard n > 0 else {
            result.endsWithCR = pendingCR
            return result
        }
        var i = 0
        let enteredAfterCR = pendingCR
        if pendingCR {
            pendingCR = false
            if bytes[0] == 0x0A {
                result.skipsLeadingLF = true
                i = 1
            }
        }
        var lineStart = i
        // The next LF and the next CR, each searched for again only once the scan has passed it: every byte is
        // searched at most once for each (a stream of CRs alone costs no more than one of LFs).
        var nextLF = Self.find(0x0A, in: bytes, from: i), nextCR = Self.find(0x0D, in: bytes, from: i)
        while true {
            if nextLF < i { nextLF = Self.find(0x0A, in: bytes, from: i) }
            if nextCR < i { nextCR = Self.find(0x0D, in: bytes, from: i) }
            let at = min(nextLF, nextCR)
            if at == n { break }
            let empty = at == lineStart && !lineHasBytes
            var next = at + 1
            if bytes[at] == 0x0D {
                if next < n {
                    if bytes[next] == 0x0A { next += 1 }
                } else {
                    pendingCR = true
                    // The byte before: in this delivery, or (first here) the last one's, which ended a line with
                    // an LF unless it ended with a CR (then `CR CR`: not a CR after an LF).
                    pendingCRAfterLF = at > 0 ? bytes[at - 1] == 0x0A : empty && !enteredAfterCR
                }
            }
            lineEnds.append(LineEnd(end: at, next: next, endsEvent: empty))
            lastLineEndedEvent = empty
            lineHasBytes = false
            lineStart = next
            i = next
        }
        if lineStart < n { lineHasBytes = true }
        result.endsWithCR = pendingCR
        result.lineEnds = lineEnds
        return result
    }

    public mutating func scan(_ bytes: [UInt8]) -> Scan {
        bytes.withUnsafeBytes { scan($0) }
    }

    /// The stream ended or restarts: forget what was under way.
    public mutating func reset() {
        pendingCR = false
        lineHasBytes = false
        lastLineEndedEvent = true
    }

    /// The index of the first `byte` at or after `from`, or the delivery's length when there is none. `memchr`: a
    /// chat event is a few hundred bytes with two line ends, so finding them is most of a delivery's cost, and
    /// the C library's vector search costs a few instructions per 32 bytes (a word-at-a-time loop in Swift cost
    /// about 600 instructions per event, with both bytes in one loop).
    @inline(__always)
    static func find(_ byte: UInt8, in bytes: UnsafeRawBufferPointer, from: Int) -> Int {
        let n = bytes.count
        guard from < n, let base = bytes.baseAddress, let hit = memchr(base + from, Int32(byte), n - from) else { return n }
        return base.distance(to: UnsafeRawPointer(hit))
    }
}
