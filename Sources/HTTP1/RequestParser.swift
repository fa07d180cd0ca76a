/// Incremental HTTP/1.1 request parser: bytes in, `RequestEvent`s out, any segmentation gives the same events.
/// Framing and syntax follow RFC 9112 (§2 message format, §3 request line, §5 field lines, §6 body length,
/// §7.1 chunked coding) and field rules follow RFC 9110 §5; anything ambiguous is refused rather than guessed,
/// because a relay that reads a message differently from the next hop is a request-smuggling vector.
///
/// A value type; whoever owns it feeds bytes with `append` and pulls events with `next()` until it returns nil.
/// Unconsumed bytes live in one array with a head index, so consuming never shifts memory; the array is
/// compacted on `append` once the consumed prefix is at least half of it.
public struct RequestParser: Sendable {
    // The stored state below is internal, not private, only so the parser's facets in RequestParser+*.swift
    // (request line, head, chunked body) can reach it; nothing else in the module touches it.
    let limits: RequestLimits
    var buffer: [UInt8] = []
    /// First unconsumed byte in `buffer`. Every offset kept below is relative to it, so compaction moves nothing.
    var start = 0
    var state: State = .head
    var requestLine = RequestLineScan()
    var line = LineCursor()
    var head = HeadAccumulator()
    /// Chunk-extension bytes seen in this message; extensions are skipped, so without a budget they are free memory.
    var extensionBytes = 0
    /// Sum of announced chunk sizes in this message, to refuse an oversized chunked body before reading it.
    var decodedBodyBytes = 0

    public init(limits: RequestLimits = RequestLimits()) {
        self.limits = limits
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if case .failed = state { return }
        guard !bytes.isEmpty else { return }
        compact()
        bytes.withMemoryRebound(to: UInt8.self) { buffer.append(contentsOf: $0) }
    }

    public mutating func append(_ bytes: [UInt8]) {
        if case .failed = state { return }
        guard !bytes.isEmpty else { return }
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next event, or nil if more bytes are needed. After a throw the parser stays failed (throws again).
    public mutating func next() throws(HTTPParseError) -> RequestEvent? {
        if case .failed(let error) = state { throw error }
        do {
            return try step()
        } catch {
            // The connection is going to be closed after the error response; keep nothing a client sent.
            state = .failed(error)
            buffer = []
            start = 0
            throw error
        }
    }

    /// Bytes appended but not yet consumed by events.
    public var bufferedByteCount: Int { buffer.count - start }

    /// No message in progress and no partial bytes buffered.
    public var isBetweenMessages: Bool {
        if case .head = state { return buffer.count == start }
        return false
    }

    // MARK: - State machine

    /// Where the parser is in the current message. `.head` → `.endPending` (no body or Content-Length: 0),
    /// `.contentBody` (→ `.endPending`) or `.chunkSizeLine`; the chunked states cycle
    /// `.chunkSizeLine` → `.chunkData` → `.chunkDataEnd` → `.chunkSizeLine` until a zero-size chunk leads to
    /// `.trailers`; `.endPending` and `.trailers` return to `.head`. Any error ends in `.failed`, for good.
    enum State: Sendable {
        case head
        case contentBody(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case endPending
        case failed(HTTPParseError)
    }

    private mutating func step() throws(HTTPParseError) -> RequestEvent? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .head:
                guard let parsed = try parseHead() else { return nil }
                return .head(parsed)
            case .contentBody(let remaining):
                guard let bytes = takeBody(upTo: remaining) else { return nil }
                state = bytes.count == remaining ? .endPending : .contentBody(remaining: remaining - bytes.count)
                return .body(bytes)
            case .chunkData(let remaining):
                guard let bytes = takeBody(upTo: remaining) else { return nil }
                state = bytes.count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - bytes.count)
                return .body(bytes)
            case .chunkSizeLine:
                guard try parseChunkSizeLine() else { return nil }
            case .chunkDataEnd:
                guard try consumeChunkDataEnd() else { return nil }
                state = .chunkSizeLine
            case .trailers:
                guard try parseTrailers() else { return nil }
                finishMessage()
                return .end
            case .endPending:
                finishMessage()
                return .end
            }
        }
    }

    private mutating func finishMessage() {
        state = .head
        requestLine = RequestLineScan()
        line = LineCursor()
        head = HeadAccumulator()
        extensionBytes = 0
        decodedBodyBytes = 0
    }

    /// Whatever is buffered, up to `limit`: bodies stream instead of waiting to be complete.
    private mutating func takeBody(upTo limit: Int) -> [UInt8]? {
        let available = buffer.count - start
        guard available > 0 else { return nil }
        let n = min(available, limit)
        let bytes = Array(buffer[start..<(start + n)])
        start += n
        return bytes
    }

    private mutating func compact() {
        if start == 0 { return }
        if start == buffer.count {
            // A large body leaves a large capacity behind; idle keep-alive connections should not hold it.
            if buffer.capacity > 64 * 1024 {
                buffer = []
            } else {
                buffer.removeAll(keepingCapacity: true)
            }
            start = 0
        } else if start >= 4096 && start >= buffer.count / 2 {
            // Amortised O(1) per byte: we only move the live tail once the dead prefix is at least as large.
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }

    /// Position in the line being parsed: shared by the head's field lines, the chunk-size lines and trailers.
    struct LineCursor: Sendable {
        /// Start of the next unparsed line, relative to `start`.
        var lineStart = 0
        /// Where the search for that line's LF resumes, so drip-fed input is scanned once, not once per byte.
        var scanFrom = 0
        var fieldCount = 0
    }
}
