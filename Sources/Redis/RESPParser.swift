/// Why a byte stream is not RESP2. Any of these ends the connection: after a framing error, where the next reply
/// starts is unknowable, so replies could no longer be matched to commands.
public struct RESPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "malformed RESP: \(reason)" }
}

/// An incremental RESP2 reply parser: bytes in (as they arrive, split anywhere), whole values out, in order.
/// Pure: no sockets, no clock. Owned by whoever feeds it (the client's loop queue).
///
/// A value that is not complete yet is parsed again from its start when more bytes arrive: replies here are small
/// (a script's answer, an integer), and re-reading one is cheaper than keeping a resumable stack. Memory is
/// bounded by `Limits`: a bulk string or an array announcing more than the limits allow, a line without CRLF
/// longer than `maxLineLength`, or nesting deeper than `maxDepth` is an error, never an allocation.
public struct RESPParser: Sendable {
    public struct Limits: Sendable {
        public var maxBulkLength: Int
        public var maxArrayCount: Int
        public var maxDepth: Int
        public var maxLineLength: Int

        public init(maxBulkLength: Int = 64 << 20, maxArrayCount: Int = 1 << 20, maxDepth: Int = 32, maxLineLength: Int = 64 << 10) {
            self.maxBulkLength = maxBulkLength
            self.maxArrayCount = maxArrayCount
            self.maxDepth = maxDepth
            self.maxLineLength = maxLineLength
        }
    }

    public let limits: Limits
    private var buffer: [UInt8] = []
    private var head = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet returned as a value.
    public var bufferedByteCount: Int { buffer.count - head }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    public mutating func feed(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete value, or nil until more bytes arrive.
    public mutating func next() throws(RESPParseError) -> RESPValue? {
        guard head < buffer.count else { return nil }
        guard let (value, end) = try parse(at: head, depth: 0) else { return nil }
        head = end
        compact()
        return value
    }

    private mutating func compact() {
        if head == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
            head = 0
        } else if head >= 64 << 10 && head * 2 >= buffer.count {
            buffer.removeSubrange(0..<head)
            head = 0
        }
    }

    /// The value starting at `i` and the index just past it; nil when the buffer ends first.
    private func parse(at i: Int, depth: Int) throws(RESPParseError) -> (RESPValue, Int)? {
        guard i < buffer.count else { return nil }
        let type = buffer[i]
        guard let (lineEnd, next) = try line(from: i + 1) else { return nil }
        switch type {
        case UInt8(ascii: "+"):
            return (.simpleString(text(i + 1, lineEnd)), next)
        case UInt8(ascii: "-"):
            return (.error(text(i + 1, lineEnd)), next)
        case UInt8(ascii: ":"):
            return (.integer(try integer(i + 1, lineEnd)), next)
        case UInt8(ascii: "$"):
            let length = try integer(i + 1, lineEnd)
            if length == -1 { return (.null, next) }
            guard length >= 0 else { throw RESPParseError("negative bulk length \(length)") }
            guard length <= limits.maxBulkLength else { throw RESPParseError("bulk length \(length) over the limit") }
            let end = next + Int(length)
            guard end + 2 <= buffer.count else { return nil }
            guard buffer[end] == 13, buffer[end + 1] == 10 else { throw RESPParseError("bulk string not followed by CRLF") }
            return (.bulkString(Array(buffer[next..<end])), end + 2)
        case UInt8(ascii: "*"):
            let count = try integer(i + 1, lineEnd)
            if count == -1 { return (.null, next) }
            guard count >= 0 else { throw RESPParseError("negative array length \(count)") }
            guard count <= limits.maxArrayCount else { throw RESPParseError("array length \(count) over the limit") }
            guard depth < limits.maxDepth else { throw RESPParseError("arrays nested deeper than \(limits.maxDepth)") }
            var elements: [RESPValue] = []
            elements.reserveCapacity(min(Int(count), 1024))
            var position = next
            for _ in 0..<count {
                guard let (element, after) = try parse(at: position, depth: depth + 1) else { return nil }
                elements.append(element)
                position = after
            }
            return (.array(elements), position)
        default:
            throw RESPParseError("unknown type byte \(type)")
        }
    }

    /// The CR ending the line that starts at `start`, and the index after its LF; nil when the CRLF has not
    /// arrived. A CR not followed by LF is an error (RESP lines end with CRLF, nothing else).
    private func line(from start: Int) throws(RESPParseError) -> (cr: Int, next: Int)? {
        var i = start
        let limit = min(buffer.count, start + limits.maxLineLength)
        while i < limit {
            if buffer[i] == 13 {
                guard i + 1 < buffer.count else { return nil }
                guard buffer[i + 1] == 10 else { throw RESPParseError("CR without LF") }
                return (i, i + 2)
            }
            if buffer[i] == 10 { throw RESPParseError("LF without CR") }
            i += 1
        }
        if buffer.count - start >= limits.maxLineLength { throw RESPParseError("line longer than \(limits.maxLineLength) bytes") }
        return nil
    }

    private func text(_ start: Int, _ end: Int) -> String {
        String(decoding: buffer[start..<end], as: UTF8.self)
    }

    private func integer(_ start: Int, _ end: Int) throws(RESPParseError) -> Int64 {
        var i = start
        var negative = false
        if i < end && buffer[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        guard i < end else { throw RESPParseError("empty integer") }
        var value: Int64 = 0
        while i < end {
            let digit = buffer[i] &- UInt8(ascii: "0")
            guard digit <= 9 else { throw RESPParseError("not a digit in an integer") }
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(Int64(digit))
            guard !o1, !o2 else { throw RESPParseError("integer overflow") }
            value = sum
            i += 1
        }
        return negative ? -value : value
    }
}
