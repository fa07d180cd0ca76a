/// An incremental parser of the WHATWG event-stream format (HTML Living Standard, "Server-sent events" §9.2.5
/// "Parsing an event stream" and §9.2.6 "Interpreting an event stream"): bytes in, events out, in chunks of any
/// size split anywhere.
///
/// The rules it keeps, each a place where stream clients have broken:
/// - A line ends with CRLF, LF or CR. A CR that ends one chunk and an LF that starts the next are one line end
///   (`SSEBoundaryScanner` finds the line ends, once per chunk, and remembers a trailing CR).
/// - A UTF-8 byte order mark is skipped only at the very start of the stream (it may itself arrive split).
/// - Text is decoded as UTF-8 per complete line (invalid sequences become U+FFFD), never per chunk, so a
///   character split across two chunks survives.
/// - `field: value` loses exactly one leading space; a line without a colon is a field with an empty value; a
///   line starting with a colon is a comment; unknown fields are ignored.
/// - `data` lines are joined with "\n"; an empty line dispatches the event, unless no `data` line came (then the
///   block is dropped, though its `id` and `retry` still apply).
/// - `event` defaults to "message"; `id` containing NUL is ignored; `retry` is honoured only if all ASCII digits.
/// - At end of stream an event without its closing empty line is discarded (`finish()`): a truncated stream
///   never yields a half event.
///
/// A plain value with no I/O and no Foundation: it works on raw buffers and never indexes `Data`. Memory is
/// bounded by `maxEventBytes` (one event's pending line plus its data). Past it the parser throws, or, made with
/// `skipsOversizedEvents`, drops that event and reads on from the empty line that ends it (`skippedEvents`).
public struct SSEParser: Sendable {
    /// A line or an event grew past `maxEventBytes` before it ended.
    public struct EventTooLarge: Error, Sendable, Equatable {
        public var limit: Int
    }

    /// The default bound on one event: far above any chat chunk, small enough that a stream without line ends
    /// cannot exhaust a phone's memory.
    public static let defaultMaxEventBytes = 8 * 1024 * 1024

    public let maxEventBytes: Int
    /// An event past `maxEventBytes` is dropped and the stream read on from its end, instead of an error: for a
    /// reader of a copy (the relay's usage tap), for which one huge event must not hide the ones after it.
    public let skipsOversizedEvents: Bool
    /// Events dropped for their size (`skipsOversizedEvents`).
    public private(set) var skippedEvents = 0
    /// Inside a dropped event: every line is ignored up to the empty line that ends it.
    private var skipping = false
    /// The last event ID buffer: the latest valid `id` field. Kept across `finish()`, for a reconnect's
    /// `Last-Event-ID`.
    public private(set) var lastEventID = ""
    /// The latest valid `retry` value (milliseconds). Kept across `finish()`.
    public private(set) var reconnectionTime: Int?

    /// Bytes of a line that has not ended yet (only when a line spans chunks).
    private var partialLine: [UInt8] = []
    /// The `data` lines of the current block, joined with LF.
    private var data: [UInt8] = []
    private var dataLines = 0
    private var eventType: String?
    private var retrySinceDispatch: Int?
    /// Line ends of what `parse(_:onRawEvent:)` is fed; unused when the caller passes its own scan.
    private var scanner = SSEBoundaryScanner()
    /// Deliveries this parser scanned itself (`parse(_:onRawEvent:)`): zero for a reader handed its scans.
    package var ownScans: Int { scanner.scans }
    /// How many bytes of a BOM matched at stream start; `nil` once the start has been decided.
    private var bomMatched: Int? = 0

    public init(maxEventBytes: Int = SSEParser.defaultMaxEventBytes, skipsOversizedEvents: Bool = false) {
        self.maxEventBytes = maxEventBytes
        self.skipsOversizedEvents = skipsOversizedEvents
    }

    /// Feeds the next bytes of the stream; calls `onEvent` for every event they complete, in order.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer, onEvent: (SSEEvent) throws -> Void) throws {
        try parse(bytes, onRawEvent: { raw in
            try onEvent(SSEEvent(event: raw.type ?? "message", data: String(decoding: raw.data, as: UTF8.self), id: raw.id,
                                 retry: raw.retry))
        })
    }

    /// One dispatched event as the parser holds it, for readers that want the data's bytes without a String made
    /// per event (the relay's usage tap): `data` is valid only during the callback.
    public struct RawEvent {
        /// The `event` field's value; nil when the block had none or an empty one ("message").
        public var type: String?
        /// The `data` lines joined with LF, as bytes (not checked to be UTF-8).
        public var data: UnsafeRawBufferPointer
        public var id: String
        public var retry: Int?
    }

    /// The same parse, each event handed over as a `RawEvent`.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer, onRawEvent onEvent: (RawEvent) throws -> Void) throws {
        let scan = scanner.scan(bytes)
        try parse(bytes, scan: scan, onRawEvent: onEvent)
    }

    /// The same parse on a delivery whose line ends the caller already found (`SSEBoundaryScanner`, run once per
    /// delivery and shared with the other readers of the stream). A stream is fed either this way or the other,
    /// never both: the scanner remembers a CR ending one delivery.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer, scan: SSEBoundaryScanner.Scan,
                               onRawEvent onEvent: (RawEvent) throws -> Void) throws {
        var start = scan.start
        let end = bytes.count
        if start >= end { return }
        if let matched = bomMatched {
            // UTF-8 BOM EF BB BF, only as the stream's first bytes; it may arrive one byte per chunk.
            let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
            var m = matched
            while start < end, m < 3, bytes[start] == bom[m] {
                m += 1
                start += 1
            }
            if m == 3 {
                bomMatched = nil
            } else if start == end {
                bomMatched = m
                return
            } else {
                // Not a BOM: the bytes held back are ordinary text (neither is CR or LF).
                bomMatched = nil
                partialLine.append(contentsOf: bom[0..<m])
            }
        }
        // A block's only `data` line, read whole from this delivery, is handed over where it lies: `held` points into
        // `bytes` and is copied into `data` only when the block goes on (a second data line, or past this delivery).
        var held: UnsafeRawBufferPointer?
        defer { if let h = held { data.append(contentsOf: h) } }
        var lineStart = start
        for lineEnd in scan.lineEnds {
            if skipping {
                // The scanner knows an empty line across deliveries: the dropped event ends there, unseen.
                if lineEnd.endsEvent { skipping = false }
                lineStart = lineEnd.next
                continue
            }
            if partialLine.isEmpty {
                try processLine(UnsafeRawBufferPointer(rebasing: bytes[lineStart..<lineEnd.end]), inDelivery: true,
                                held: &held, onEvent: onEvent)
            } else {
                partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[lineStart..<lineEnd.end]))
                try checkSize(partialLine.count)
                if skipping {
                    lineStart = lineEnd.next
                    continue
                }
                let line = partialLine
                partialLine.removeAll(keepingCapacity: true)
                try line.withUnsafeBytes { try processLine($0, inDelivery: false, held: &held, onEvent: onEvent) }
            }
            lineStart = lineEnd.next
        }
        if let h = held {
            data.append(contentsOf: h)
            held = nil
        }
        if lineStart < end && !skipping {
            partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[lineStart..<end]))
            try checkSize(partialLine.count)
        }
    }

    /// Feeds bytes and returns the events they complete.
    public mutating func parse(_ bytes: [UInt8]) throws -> [SSEEvent] {
        var events: [SSEEvent] = []
        try bytes.withUnsafeBytes { try parse($0) { events.append($0) } }
        return events
    }

    /// The stream ended: an unfinished line or event is discarded (§9.2.6: "If the file ends in the middle of an
    /// event, before the final empty line, the incomplete event is not dispatched"). Returns whether anything
    /// was discarded. The parser is then ready for a new stream (a reconnect); `lastEventID` and
    /// `reconnectionTime` are kept.
    @discardableResult
    public mutating func finish() -> Bool {
        let discarded = !partialLine.isEmpty || dataLines > 0 || eventType != nil || (bomMatched ?? 0) > 0
        partialLine.removeAll()
        data.removeAll()
        dataLines = 0
        eventType = nil
        retrySinceDispatch = nil
        skipping = false
        scanner.reset()
        bomMatched = 0
        return discarded
    }

    private mutating func checkSize(_ lineBytes: Int) throws {
        guard lineBytes + data.count > maxEventBytes else { return }
        guard skipsOversizedEvents else { throw EventTooLarge(limit: maxEventBytes) }
        skipping = true
        skippedEvents += 1
        partialLine.removeAll()
        data.removeAll()
        dataLines = 0
        eventType = nil
    }

    /// One line. `inDelivery`: `line` lies in the delivery being parsed, so a first `data` value may be held there
    /// (`held`, see `parse(_:scan:onRawEvent:)`) instead of copied.
    private mutating func processLine(_ line: UnsafeRawBufferPointer, inDelivery: Bool, held: inout UnsafeRawBufferPointer?,
                                      onEvent: (RawEvent) throws -> Void) throws {
        if line.isEmpty {
            try dispatch(held: &held, onEvent)
            return
        }
        if line[0] == 0x3A { return }  // ":" starts a comment (relays send ": keep-alive")
        var colon = 0
        while colon < line.count, line[colon] != 0x3A { colon += 1 }
        let name = UnsafeRawBufferPointer(rebasing: line[0..<colon])
        var valueStart = colon + 1
        if valueStart < line.count, line[valueStart] == 0x20 { valueStart += 1 }
        let value = valueStart < line.count ? UnsafeRawBufferPointer(rebasing: line[valueStart...]) : UnsafeRawBufferPointer(start: nil, count: 0)
        switch Field(name) {
        case .data:
            // No data line yet means `data` is empty: the value is the whole of it so far.
            if inDelivery && dataLines == 0 && value.count <= maxEventBytes {
                held = value
                dataLines = 1
                return
            }
            if let h = held {
                data.append(contentsOf: h)
                held = nil
            }
            if dataLines > 0 { data.append(0x0A) }
            data.append(contentsOf: value)
            dataLines += 1
            try checkSize(0)
        case .event:
            eventType = String(decoding: value, as: UTF8.self)
        case .id:
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        case .retry:
            if let milliseconds = Self.digits(value) {
                reconnectionTime = milliseconds
                retrySinceDispatch = milliseconds
            }
        case .other:
            break
        }
    }

    private mutating func dispatch(held: inout UnsafeRawBufferPointer?, _ onEvent: (RawEvent) throws -> Void) throws {
        let lone = held
        held = nil
        defer {
            if !data.isEmpty { data.removeAll(keepingCapacity: data.capacity <= 64 * 1024) }
            dataLines = 0
            eventType = nil
        }
        guard dataLines > 0 else { return }
        let type = eventType.flatMap { $0.isEmpty ? nil : $0 }
        let id = lastEventID, retry = retrySinceDispatch
        retrySinceDispatch = nil
        if let lone {
            try onEvent(RawEvent(type: type, data: lone, id: id, retry: retry))
            return
        }
        try data.withUnsafeBytes { bytes in
            try onEvent(RawEvent(type: type, data: bytes, id: id, retry: retry))
        }
    }

    /// A base-ten integer made of ASCII digits only; nil for anything else, an empty value, or an overflow.
    private static func digits(_ value: UnsafeRawBufferPointer) -> Int? {
        guard !value.isEmpty else { return nil }
        var result = 0
        for byte in value {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            let (times10, o1) = result.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int(byte - 0x30))
            if o1 || o2 { return nil }
            result = sum
        }
        return result
    }

    private enum Field {
        case data, event, id, retry, other

        /// Field names compare byte for byte, case-sensitively, as the standard says. (Against a `StaticString`'s
        /// bytes: `elementsEqual` with a `String.UTF8View` cost 300 instructions per event.)
        init(_ name: UnsafeRawBufferPointer) {
            switch name.count {
            case 2 where Self.equal(name, "id"): self = .id
            case 4 where Self.equal(name, "data"): self = .data
            case 5 where Self.equal(name, "event"): self = .event
            case 5 where Self.equal(name, "retry"): self = .retry
            default: self = .other
            }
        }

        /// `name` has `literal`'s length (the caller's `switch`); true when the bytes are the same.
        @inline(__always)
        private static func equal(_ name: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
            let bytes = literal.utf8Start
            for i in 0..<name.count where name[i] != bytes[i] { return false }
            return true
        }
    }
}
