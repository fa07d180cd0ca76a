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
    private var atLineStart = true
    /// The previous byte was a CR ending a non-empty line: an LF now belongs to that line end.
    private var afterCR = false
    /// An event ended with a CR: an LF next completes that line end and goes where the event went.
    private var lineFeedAfterCR: LineFeedAfterCR?

    public init(maxEventBytes: Int = UsageEventStripper.defaultMaxEventBytes) {
        self.maxEventBytes = maxEventBytes
    }

    public mutating func process(_ input: UnsafeRawBufferPointer) -> Output {
        if phase == .passing && lineFeedAfterCR == nil { return .unchanged }
        var out = OutputBuilder()
        var runStart = 0
        var i = 0
        let n = input.count
        while i < n {
            if phase == .passing && lineFeedAfterCR == nil {
                out.emit(input, runStart..<n)
                runStart = n
                break
            }
            let b = input[i]
            if let pending = lineFeedAfterCR {
                lineFeedAfterCR = nil
                if b == 0x0A {
                    if pending == .pass { out.emit(input, i..<(i + 1)) }
                    i += 1
                    runStart = i
                    continue
                }
            }
            if b == 0x0A || b == 0x0D {
                if b == 0x0A && afterCR {
                    afterCR = false
                    i += 1
                    continue
                }
                afterCR = b == 0x0D
                i += 1
                if atLineStart {
                    take(input, runStart..<i, into: &out)
                    runStart = i
                    endEvent(endedWithCR: b == 0x0D, input, into: &out)
                } else {
                    atLineStart = true
                }
            } else {
                atLineStart = false
                afterCR = false
                i += 1
                // The rest of the line in a tight loop: nothing but a line end changes the state.
                while i < n && input[i] != 0x0A && input[i] != 0x0D { i += 1 }
            }
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
        afterCR = false
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
    static func hasFinishReason(_ event: [UInt8]) -> Bool {
        event.withUnsafeBufferPointer { JSONPeek($0).scanKeys(finishKeys).nonEmptyString != 0 }
    }

    /// The event's data is an object whose `choices` is an empty array and whose `usage` is an object.
    static func isUsageOnly(_ event: [UInt8]) -> Bool {
        guard let data = dataField(of: event) else { return false }
        return data.withUnsafeBufferPointer { buffer in
            let p = JSONPeek(buffer)
            let root = p.root
            guard let choices = p.member("choices", inObjectAt: root), p.isEmptyArray(at: choices),
                  let usage = p.member("usage", inObjectAt: root), p.isObject(at: usage)
            else { return false }
            return true
        }
    }

    /// The event's `data` lines joined with LF (WHATWG §9.2.6), or nil if it has none or names an event type
    /// other than "message" (not a chat chunk).
    static func dataField(of event: [UInt8]) -> [UInt8]? {
        var data: [UInt8] = []
        var lines = 0
        var start = 0
        var i = 0
        func line(_ range: Range<Int>) -> Bool {
            let l = event[range]
            guard !l.isEmpty, l.first != UInt8(ascii: ":") else { return true }
            let colon = l.firstIndex(of: UInt8(ascii: ":")) ?? l.endIndex
            let name = l[l.startIndex..<colon]
            var valueStart = colon < l.endIndex ? colon + 1 : colon
            if valueStart < l.endIndex && event[valueStart] == 0x20 { valueStart += 1 }
            let value = event[valueStart..<l.endIndex]
            if name.elementsEqual("data".utf8) {
                if lines > 0 { data.append(0x0A) }
                data.append(contentsOf: value)
                lines += 1
            } else if name.elementsEqual("event".utf8) {
                return value.isEmpty || value.elementsEqual("message".utf8)
            }
            return true
        }
        while i < event.count {
            let b = event[i]
            if b == 0x0A || b == 0x0D {
                if !line(start..<i) { return nil }
                i += (b == 0x0D && i + 1 < event.count && event[i + 1] == 0x0A) ? 2 : 1
                start = i
            } else {
                i += 1
            }
        }
        if start < event.count, !line(start..<event.count) { return nil }
        return lines > 0 ? data : nil
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
