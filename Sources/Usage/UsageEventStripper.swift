import JSON
import SSE

/// Removes from an OpenAI chat stream the one event the relay caused by injecting
/// `stream_options.include_usage`: `data: {…,"choices":[],"usage":{…}}` and the empty line that ends it. Every other
/// byte passes unchanged, in order. A plain value owned by the exchange's queue; bytes in, bytes out.
///
/// Not delaying normal events: until a chunk with a non-null `finish_reason` has ended, bytes pass through as they
/// arrive (and a copy of the current event is kept to look for that `finish_reason`). OpenAI sends the usage event
/// after the last choice finished, so from then on each event is held until its empty line and dropped if it is
/// the usage-only event; once it has been dropped, everything passes again. A usage event arriving before any
/// `finish_reason` (not what OpenAI does) is therefore left in the stream: the filter never guesses.
///
/// Line ends are CRLF, LF or CR, as in `SSEParser`, including a CR ending one chunk and its LF starting the next.
/// An event is the bytes up to and including the empty line that ends it. At the end of the stream an unfinished
/// event is handed back by `finish()`, never swallowed. Memory is bounded by `maxEventBytes`: an event longer than
/// that makes the filter give up and pass everything through.
public struct UsageEventStripper: Sendable {
    public static let defaultMaxEventBytes = 1 << 20

    /// What to send to the client for one input chunk.
    public enum Output: Sendable, Equatable {
        /// Exactly the input chunk (nothing held or removed): forward the original buffer, no copy made.
        case unchanged
        /// These bytes instead (possibly empty: everything is held).
        case bytes([UInt8])
    }

    private enum Phase: Sendable {
        /// Before the last choice finished: pass through, watch for `finish_reason`.
        case watching
        /// Hold each event to its end; drop the usage-only one.
        case holding
        /// Pass everything (dropped the event, or gave up).
        case passing
    }

    private enum LineFeedAfterCR: Sendable {
        case pass, drop
    }

    public let maxEventBytes: Int
    /// The usage-only event was removed.
    public private(set) var removedUsageEvent = false
    /// An event outgrew `maxEventBytes`; the filter stopped looking.
    public private(set) var gaveUp = false

    private var phase = Phase.watching
    /// The current event's bytes so far: a copy while watching, the held bytes while holding.
    private var event: [UInt8] = []
    /// An event ended with a CR: an LF next completes that line end and goes where the event went.
    private var lineFeedAfterCR: LineFeedAfterCR?
    /// Line ends of what `process(_:)` is fed; unused when the caller passes its own scans.
    private var scanner = SSEBoundaryScanner()
    /// Deliveries this filter scanned itself: zero for a filter handed its scans.
    public var ownScans: Int { scanner.scans }

    public init(maxEventBytes: Int = UsageEventStripper.defaultMaxEventBytes) {
        self.maxEventBytes = maxEventBytes
    }

    public mutating func process(_ input: UnsafeRawBufferPointer) -> Output {
        if phase == .passing && lineFeedAfterCR == nil { return .unchanged }
        let scan = scanner.scan(input)
        return process(input, scan: scan)
    }

    /// The same, on a delivery whose line ends the caller found (`SSEBoundaryScanner`, once per delivery and
    /// shared with the usage tap). A stream is fed with scans or without, never both.
    public mutating func process(_ input: UnsafeRawBufferPointer, scan: SSEBoundaryScanner.Scan) -> Output {
        if phase == .passing && lineFeedAfterCR == nil { return .unchanged }
        let n = input.count
        guard n > 0 else { return .unchanged }
        var out = OutputBuilder()
        var runStart = 0
        if let pending = lineFeedAfterCR {
            lineFeedAfterCR = nil
            if scan.skipsLeadingLF {
                if pending == .pass { out.emit(input, 0..<1) }
                runStart = 1
            }
        }
        for lineEnd in scan.lineEnds where lineEnd.endsEvent {
            if phase == .passing { break }
            if phase == .watching && event.isEmpty {
                // The whole event is in this delivery: passed on and read where it lies, not copied.
                let whole = runStart..<lineEnd.next
                out.emit(input, whole)
                if whole.count > maxEventBytes {
                    giveUp()
                } else if Self.hasFinishReason(UnsafeRawBufferPointer(rebasing: input[whole])) {
                    phase = .holding
                }
                runStart = lineEnd.next
                if scan.endsWithCR && lineEnd.next == n { lineFeedAfterCR = .pass }
                continue
            }
            take(input, runStart..<lineEnd.next, into: &out)
            runStart = lineEnd.next
            endEvent(endedWithCR: scan.endsWithCR && lineEnd.next == n, input, into: &out)
        }
        take(input, runStart..<n, into: &out)
        return out.result(input)
    }

    public mutating func process(_ input: [UInt8]) -> Output {
        input.withUnsafeBytes { process($0) }
    }

    /// The stream ended: the bytes still held (an event without its closing empty line), to send as they are.
    public mutating func finish() -> [UInt8] {
        let held = phase == .holding ? event : []
        event = []
        phase = .passing
        lineFeedAfterCR = nil
        return held
    }

    /// Bytes of the current event: passed on and copied while watching, held while holding.
    private mutating func take(_ input: UnsafeRawBufferPointer, _ range: Range<Int>, into out: inout OutputBuilder) {
        guard !range.isEmpty else { return }
        switch phase {
        case .passing:
            out.emit(input, range)
        case .watching:
            out.emit(input, range)
            if event.count + range.count > maxEventBytes {
                giveUp()
            } else {
                event.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[range]))
            }
        case .holding:
            if event.count + range.count > maxEventBytes {
                out.emit(held: event, input)
                out.emit(input, range)
                giveUp()
            } else {
                event.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[range]))
            }
        }
    }

    private mutating func giveUp() {
        gaveUp = true
        phase = .passing
        event = []
    }

    /// An empty line ended the current event (its bytes, that line's end included, are in `event`).
    private mutating func endEvent(endedWithCR: Bool, _ input: UnsafeRawBufferPointer, into out: inout OutputBuilder) {
        var dropped = false
        switch phase {
        case .watching:
            if Self.hasFinishReason(event) { phase = .holding }
        case .holding:
            if Self.isUsageOnly(event) {
                dropped = true
                removedUsageEvent = true
                phase = .passing
            } else {
                out.emit(held: event, input)
            }
        case .passing:
            break
        }
        event.removeAll(keepingCapacity: event.capacity <= 64 * 1024)
        if endedWithCR { lineFeedAfterCR = dropped ? .drop : .pass }
    }

    private static let finishKeys = JSONPeek.KeySet(["finish_reason"])

    /// A chunk in which some choice finished (`"finish_reason"` with a string value, not null).
    ///
    /// Every OpenAI chunk names `finish_reason` (null until the last), so this runs on every event of a watched
    /// stream. `JSONPeek.mayHaveNonEmptyString` rules the common event out first (a `memchr`, not a walk over every
    /// string of the chunk); only an event it cannot rule out, in practice the finishing one, is scanned.
    static func hasFinishReason(_ event: [UInt8]) -> Bool {
        event.withUnsafeBytes { hasFinishReason($0) }
    }

    static func hasFinishReason(_ event: UnsafeRawBufferPointer) -> Bool {
        let p = JSONPeek(event.bindMemory(to: UInt8.self))
        return p.mayHaveNonEmptyString(quotedKey: finishKeyQuoted) && p.scanKeys(finishKeys).nonEmptyString != 0
    }

    private static let finishKeyQuoted: StaticString = "\"finish_reason\""


    /// The event's data is an object whose `choices` is an empty array and whose `usage` is an object. The event
    /// is read by `SSEParser` (its `data` lines joined with LF, WHATWG §9.2.6); one that names an event type other
    /// than "message" is not a chat chunk.
    static func isUsageOnly(_ event: [UInt8]) -> Bool {
        var parser = SSEParser(maxEventBytes: max(event.count, 1))
        var usageOnly = false
        _ = try? event.withUnsafeBytes { bytes in
            try parser.parse(bytes, onRawEvent: { raw in
                guard raw.type == nil || raw.type == "message" else { return }
                let p = JSONPeek(raw.data.bindMemory(to: UInt8.self))
                let root = p.root
                guard let choices = p.member("choices", inObjectAt: root), p.isEmptyArray(at: choices),
                      let usage = p.member("usage", inObjectAt: root), p.isObject(at: usage)
                else { return }
                usageOnly = true
            })
        }
        return usageOnly
    }
}

/// The bytes for one input chunk, copied only once they stop being a prefix of the input.
private struct OutputBuilder {
    /// Output so far equals `input[0..<prefix]` (nothing copied yet).
    private var prefix = 0
    private var bytes: [UInt8]?

    mutating func emit(_ input: UnsafeRawBufferPointer, _ range: Range<Int>) {
        guard !range.isEmpty else { return }
        if bytes == nil && range.lowerBound == prefix {
            prefix = range.upperBound
            return
        }
        materialize(input)
        bytes!.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[range]))
    }

    /// Bytes held from this or earlier chunks; they follow whatever of this chunk was emitted before them.
    mutating func emit(held: [UInt8], _ input: UnsafeRawBufferPointer) {
        guard !held.isEmpty else { return }
        materialize(input)
        bytes!.append(contentsOf: held)
    }

    private mutating func materialize(_ input: UnsafeRawBufferPointer) {
        if bytes == nil { bytes = Array(UnsafeRawBufferPointer(rebasing: input[0..<prefix])) }
    }

    func result(_ input: UnsafeRawBufferPointer) -> UsageEventStripper.Output {
        if let bytes { return .bytes(bytes) }
        return prefix == input.count ? .unchanged : .bytes(Array(UnsafeRawBufferPointer(rebasing: input[0..<prefix])))
    }
}
