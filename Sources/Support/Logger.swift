#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Severity of a log line; lines below a logger's level cost one comparison and nothing else.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case debug = 0, info, warning, error
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }
}

/// A value in a log line's metadata. Only these shapes exist, so a credential can only reach a log line if
/// someone passes it here as a string on purpose; `Secret` deliberately cannot be converted.
public enum LogValue: Sendable, Equatable {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
}

/// Receives finished JSON lines. One implementation writes to a file descriptor; tests capture lines in memory.
public protocol LogSink: Sendable {
    func write(line: String)
    /// The same line as UTF-8 bytes, as the logger builds it; `line` has spare capacity for the newline.
    func write(utf8 line: inout [UInt8])
    /// The line with its level: a sink may hold a line below `warning` for a moment (`LogBatch`).
    func write(utf8 line: inout [UInt8], level: LogLevel)
}

extension LogSink {
    public func write(utf8 line: inout [UInt8]) {
        write(line: String(decoding: line, as: UTF8.self))
    }

    public func write(utf8 line: inout [UInt8], level: LogLevel) {
        write(utf8: &line)
    }
}

/// Writes each line with one write(2) call: `print` to a pipe is block-buffered and would hold lines until exit.
/// Lines below `warning` logged on a thread with a `LogBatch` open wait for the batch's end and go out with the
/// others in one call.
public struct FileDescriptorLogSink: LogSink {
    public let fd: Int32
    public init(fd: Int32) { self.fd = fd }
    public static let standardOutput = FileDescriptorLogSink(fd: 1)
    public static let standardError = FileDescriptorLogSink(fd: 2)
    public func write(line: String) {
        var bytes = Array(line.utf8)
        write(utf8: &bytes)
    }

    public func write(utf8 line: inout [UInt8]) {
        write(utf8: &line, level: .error)
    }

    public func write(utf8 line: inout [UInt8], level: LogLevel) {
        line.append(0x0A)
        line.withUnsafeBytes { raw in
            if level < .warning, LogBatch.hold(raw, fd: fd) { return }
            // What this thread holds (for any descriptor) goes out first: lines keep their order.
            LogBatch.flush()
            writeFully(fd, raw)
        }
    }
}

/// Writes all of `bytes` to `fd`, again after a partial write or EINTR; gives up on any other error (a log line
/// is not worth blocking or failing for).
private func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress else { return }
    var offset = 0
    while offset < bytes.count {
        let n = Glibc_write(fd, base + offset, bytes.count - offset)
        if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
    }
}

/// Log lines written to a `FileDescriptorLogSink` on one thread while a batch is open there go out together when
/// it closes: an event loop's turn opens one (`Poller`), so the access log lines of every exchange that ended in
/// the turn cost one write(2), not one each (S3: about 9 µs of kernel time per request on this machine, a write
/// per request). A line waits at most for the rest of its turn. A `warning` or `error` line is written at once,
/// after what the thread holds, as is everything logged on threads with no batch open. `limit` bytes held are
/// written without waiting for the end. Not for async code: a batch belongs to a thread, and a task may resume on
/// another.
public enum LogBatch {
    /// One thread's held lines: plain memory, no reference counting on the turn's path. Touched by its own thread
    /// only (found through a thread-specific key, freed when the thread exits).
    fileprivate struct Held {
        var depth = 0
        var fd: Int32 = -1
        var bytes: UnsafeMutableRawPointer?
        var count = 0
        var capacity = 0
    }

    /// The most bytes one thread holds; a longer line is written at once. `PIPE_BUF` (4 096 bytes on Linux): a
    /// write of at most that much to a pipe is never interleaved with another's, so lines from several loops'
    /// threads on one pipe (stdout under a container runtime) stay whole, as when each line was a write of its own.
    /// It holds about eight access-log lines.
    public static let limit = 4096

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Glibc)
        let status = pthread_key_create(&key) { pointer in
            if let pointer { LogBatch.free(pointer.assumingMemoryBound(to: Held.self)) }
        }
        #else
        let status = pthread_key_create(&key) { pointer in LogBatch.free(pointer.assumingMemoryBound(to: Held.self)) }
        #endif
        precondition(status == 0, "pthread_key_create failed")
        return key
    }()

    private static func free(_ held: UnsafeMutablePointer<Held>) {
        held.pointee.bytes?.deallocate()
        held.deinitialize(count: 1)
        held.deallocate()
    }

    @inline(__always)
    private static var current: UnsafeMutablePointer<Held>? {
        pthread_getspecific(key)?.assumingMemoryBound(to: Held.self)
    }

    /// This thread's batches, opened and closed with no thread-specific lookup: an event loop's thread takes it
    /// once and opens one for every turn (about 130 instructions a turn through `open` and `close`, 10 this way).
    /// Use it on the thread that took it only.
    public struct ThreadBatches {
        fileprivate let held: UnsafeMutablePointer<Held>

        public func open() { held.pointee.depth += 1 }

        public func close() {
            guard held.pointee.depth > 0 else { return }
            held.pointee.depth -= 1
            if held.pointee.depth == 0 && held.pointee.count > 0 { LogBatch.write(held) }
        }
    }

    /// This thread's batches (made on first use).
    @available(*, noasync)
    public static func thisThread() -> ThreadBatches {
        if let held = current { return ThreadBatches(held: held) }
        let held = UnsafeMutablePointer<Held>.allocate(capacity: 1)
        held.initialize(to: Held())
        pthread_setspecific(key, held)
        return ThreadBatches(held: held)
    }

    /// Opens a batch on this thread; batches nest, and only the outermost `close` writes.
    @available(*, noasync)
    public static func open() { thisThread().open() }

    /// Closes the batch `open` opened; the outermost writes what the thread holds.
    @available(*, noasync)
    public static func close() {
        if let held = current { ThreadBatches(held: held).close() }
    }

    /// Runs `body` inside a batch.
    public static func collect<R>(_ body: () throws -> R) rethrows -> R {
        open()
        defer { close() }
        return try body()
    }

    /// Writes what this thread holds now.
    public static func flush() {
        if let held = current, held.pointee.count > 0 { write(held) }
    }

    /// Keeps `line` (with its newline) for the end of this thread's batch; false when none is open (or the line
    /// is longer than `limit`).
    static func hold(_ line: UnsafeRawBufferPointer, fd: Int32) -> Bool {
        guard let held = current, held.pointee.depth > 0, line.count <= limit, let source = line.baseAddress else { return false }
        if held.pointee.count > 0 && (held.pointee.fd != fd || held.pointee.count + line.count > limit) { write(held) }
        if held.pointee.count + line.count > held.pointee.capacity {
            let capacity = min(limit, max(4096, 2 * (held.pointee.count + line.count)))
            let grown = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
            if let old = held.pointee.bytes {
                grown.copyMemory(from: old, byteCount: held.pointee.count)
                old.deallocate()
            }
            held.pointee.bytes = grown
            held.pointee.capacity = capacity
        }
        held.pointee.fd = fd
        (held.pointee.bytes! + held.pointee.count).copyMemory(from: source, byteCount: line.count)
        held.pointee.count += line.count
        return true
    }

    /// Bytes this thread holds (tests).
    public static var heldByteCount: Int { current?.pointee.count ?? 0 }

    fileprivate static func write(_ held: UnsafeMutablePointer<Held>) {
        writeFully(held.pointee.fd, UnsafeRawBufferPointer(start: held.pointee.bytes, count: held.pointee.count))
        held.pointee.count = 0
    }
}

@inline(__always)
private func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(fd, p, n)
    #else
    Darwin.write(fd, p, n)
    #endif
}

/// Keeps every line in memory, for tests that assert on logs or scan them for secrets.
public final class MemoryLogSink: LogSink {
    private let storage = Locked<[String]>([])
    public init() {}
    public func write(line: String) { storage.withLock { $0.append(line) } }
    public var lines: [String] { storage.withLock { $0 } }
}

/// A structured logger: a label, a level and a sink; each line is one JSON object.
/// Messages are autoclosures, so a filtered-out line never builds its string.
public struct Logger: Sendable {
    public var label: String
    public var level: LogLevel
    public var sink: any LogSink

    public init(label: String, level: LogLevel = .info, sink: any LogSink = FileDescriptorLogSink.standardOutput) {
        self.label = label
        self.level = level
        self.sink = sink
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, LogValue)] = []) {
        guard level >= self.level else { return }
        // Built as bytes in one buffer sized first, written through a pointer (`JSONWriter`): this runs once per
        // exchange (the access log), where building it from strings was a fifth of the relay's instructions per
        // request, and appending byte by byte to an array most of what was left.
        let message = message()
        let metadata = metadata()
        // Sized for no escapes (and a little room for some): the line then fits an allocation malloc serves from
        // its per-thread cache, where room for the worst case (every byte escaped: six times the text) did not.
        // A line that needs more is built again with that room.
        var line = build(level, message, metadata, worstCase: false) ?? build(level, message, metadata, worstCase: true)!
        sink.write(utf8: &line, level: level)
    }

    /// A line whose fields `fields` writes itself (`LogFields`): no array of fields is built, and the names,
    /// literals, are copied without an escape scan. The access log, once per exchange.
    public func log(_ level: LogLevel, _ message: String, fields: some LogFields) {
        guard level >= self.level else { return }
        var line = build(level, message, fields, worstCase: false) ?? build(level, message, fields, worstCase: true)!
        sink.write(utf8: &line, level: level)
    }

    /// The line as bytes, with spare room for the sink's newline; nil when `worstCase` is false and its text
    /// needed more escapes than the room kept for them.
    private func build(_ level: LogLevel, _ message: String, _ metadata: [(String, LogValue)], worstCase: Bool) -> [UInt8]? {
        build(level, message, FieldList(fields: metadata), worstCase: worstCase)
    }

    private func build(_ level: LogLevel, _ message: String, _ fields: some LogFields, worstCase: Bool) -> [UInt8]? {
        var sizing = LogFieldBound(worstCase: worstCase)
        fields.writeLogFields(to: &sizing)
        let bound = 48 + 24 + level.name.utf8.count + JSONWriter.bound(key: "logger", .string(label), worstCase: worstCase)
            + JSONWriter.bound(key: "message", .string(message), worstCase: worstCase) + 1   // "}", the newline
            + sizing.bound + (worstCase ? 0 : 64)
        let escapeRoom = worstCase ? Int.max : 64
        var fitted = true
        let line = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
            var out = JSONWriter(buffer.baseAddress!, escapeRoom: escapeRoom)
            out.ascii(#"{"time":""#)
            out.timestamp()
            out.ascii(#"","level":""#)
            out.utf8(level.name)
            out.byte(0x22)
            out.field(key: "logger", .string(label), comma: true)
            out.field(key: "message", .string(message), comma: true)
            fields.writeLogFields(to: &out)
            out.byte(0x7D)
            initialized = out.count
            fitted = !out.outOfEscapeRoom
        }
        return fitted ? line : nil
    }

    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.error, m(), md()) }

    /// RFC 3339 UTC with milliseconds.
    public static func timestamp() -> String {
        var bytes: [UInt8] = []
        appendTimestamp(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// RFC 3339 UTC with milliseconds (24 bytes).
    public static func appendTimestamp(to bytes: inout [UInt8]) {
        JSONWriter.append(to: &bytes, bound: 24) { $0.timestamp() }
    }
}

/// Where a log line's fields go: each is a name and a value (`LogFields` writes to it).
public protocol LogFieldWriting {
    /// A field whose name is a literal in plain ASCII (no `"`, `\\` or control bytes): written as it is.
    mutating func field(_ name: StaticString, _ value: LogValue)
    /// A field whose name comes from elsewhere: escaped like a value.
    mutating func field(name: String, _ value: LogValue)
}

/// Something that writes its own fields into a log line, in order (the access log's record), so that no array of
/// fields is built for each line. `collectedLogFields` gives the same fields as a list.
public protocol LogFields {
    func writeLogFields<W: LogFieldWriting>(to out: inout W)
}

extension LogFields {
    /// The fields `writeLogFields` writes, as a list, in order.
    public var collectedLogFields: [(String, LogValue)] {
        var list = FieldList(fields: [])
        writeLogFields(to: &list)
        return list.fields
    }
}

/// Fields given as a list (`Logger.log(_:_:_:)`), and the list `collectedLogFields` fills.
struct FieldList: LogFields, LogFieldWriting {
    var fields: [(String, LogValue)]
    func writeLogFields<W: LogFieldWriting>(to out: inout W) {
        for (name, value) in fields { out.field(name: name, value) }
    }
    mutating func field(_ name: StaticString, _ value: LogValue) { fields.append((name.description, value)) }
    mutating func field(name: String, _ value: LogValue) { fields.append((name, value)) }
}

/// Adds up the room fields take (`JSONWriter.bound`).
struct LogFieldBound: LogFieldWriting {
    let worstCase: Bool
    var bound = 0
    init(worstCase: Bool) { self.worstCase = worstCase }
    mutating func field(_ name: StaticString, _ value: LogValue) {
        bound += JSONWriter.bound(literalKey: name, value, worstCase: worstCase)
    }
    mutating func field(name: String, _ value: LogValue) { bound += JSONWriter.bound(key: name, value, worstCase: worstCase) }
}

extension JSONWriter: LogFieldWriting {
    /// A field after others (a comma first).
    mutating func field(_ name: StaticString, _ value: LogValue) {
        byte(0x2C)
        byte(0x22)
        ascii(name)
        byte(0x22)
        byte(0x3A)
        self.value(value)
    }

    mutating func field(name: String, _ value: LogValue) { field(key: name, value, comma: true) }
}

/// Minimal JSON writing for log lines and error bodies (no Foundation encoder on the hot path), on bytes.
public enum JSONLine {
    public static func encode(_ fields: [(String, LogValue)]) -> String {
        var bound = 2
        for (key, value) in fields { bound += JSONWriter.bound(key: key, value) }
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
            var out = JSONWriter(buffer.baseAddress!)
            out.byte(0x7B)
            for (i, (key, value)) in fields.enumerated() { out.field(key: key, value, comma: i > 0) }
            out.byte(0x7D)
            initialized = out.count
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `"key":value` to an object being written: a comma first unless the object was just opened.
    public static func append(key: String, _ value: LogValue, to out: inout [UInt8]) {
        let comma = out.last != 0x7B
        JSONWriter.append(to: &out, bound: JSONWriter.bound(key: key, value)) { $0.field(key: key, value, comma: comma) }
    }

    /// `d` with exactly three decimals ("12.345"), without Foundation's `String(format:)`.
    public static func fixed3(_ d: Double) -> String {
        var out: [UInt8] = []
        appendFixed3(d, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func appendFixed3(_ d: Double, to out: inout [UInt8]) {
        JSONWriter.append(to: &out, bound: JSONWriter.numberBound) { $0.fixed3(d) }
    }

    public static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        JSONWriter.append(to: &out, bound: JSONWriter.numberBound) { $0.decimal(n) }
    }

    public static func quote(_ s: String) -> String {
        var out: [UInt8] = []
        appendQuoted(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `s` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`, every
    /// other byte (UTF-8 included) as it is.
    public static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        JSONWriter.append(to: &out, bound: JSONWriter.quotedBound(s)) { $0.quoted(s) }
    }
}

/// Writes JSON through a pointer into room the caller reserved beforehand, sized with the `bound` functions, so
/// no write checks capacity or uniqueness as `Array.append` does for every call. The room is either the most each
/// write can take (`worstCase`), or what they take without escapes plus `escapeRoom` bytes for the escapes'
/// extra bytes: an escape that would not fit is left out and sets `outOfEscapeRoom`, and the caller writes again
/// with the worst case's room. Lives only for the duration of one build of a line, on the caller's stack.
struct JSONWriter {
    private let base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var escapeRoom: Int
    /// An escape did not fit in `escapeRoom`: what was written is incomplete.
    private(set) var outOfEscapeRoom = false

    init(_ base: UnsafeMutablePointer<UInt8>, escapeRoom: Int = .max) {
        self.base = base
        self.escapeRoom = escapeRoom
    }

    /// What `field(key:value:comma:)` writes at most, or at most without escapes.
    static func bound(key: String, _ value: LogValue, worstCase: Bool = true) -> Int {
        let valueBound: Int
        switch value {
        case .string(let s): valueBound = quotedBound(s, worstCase: worstCase)
        case .int, .double: valueBound = numberBound
        case .bool: valueBound = 5
        }
        return 2 + quotedBound(key, worstCase: worstCase) + valueBound
    }

    /// What `field(_:_:)` writes at most (a literal name, copied as it is), or at most without escapes.
    static func bound(literalKey key: StaticString, _ value: LogValue, worstCase: Bool) -> Int {
        bound(key: "", value, worstCase: worstCase) + key.utf8CodeUnitCount
    }

    /// A quoted string: every byte may become six (`\u00XX`); without escapes, each stays one.
    static func quotedBound(_ s: String, worstCase: Bool = true) -> Int { 2 + (worstCase ? 6 : 1) * s.utf8.count }

    /// An `Int` in decimal (20 digits and a sign), or a double with three decimals (Int's digits, a sign, a dot,
    /// three decimals), or `null`.
    static let numberBound = 26

    /// Runs `write` on room for `bound` bytes, then appends what it wrote to `out`.
    static func append(to out: inout [UInt8], bound: Int, _ write: (inout JSONWriter) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bound) { room in
            var writer = JSONWriter(room.baseAddress!)
            write(&writer)
            out.append(contentsOf: UnsafeBufferPointer(start: room.baseAddress, count: writer.count))
        }
    }

    mutating func byte(_ b: UInt8) {
        base[count] = b
        count += 1
    }

    mutating func ascii(_ s: StaticString) {
        s.withUTF8Buffer { bytes($0) }
    }

    mutating func bytes(_ b: UnsafeBufferPointer<UInt8>) {
        guard let start = b.baseAddress, !b.isEmpty else { return }
        (base + count).update(from: start, count: b.count)
        count += b.count
    }

    /// `s` as it is.
    mutating func utf8(_ s: String) {
        if s.utf8.withContiguousStorageIfAvailable({ bytes($0) }) == nil {
            for b in s.utf8 { byte(b) }
        }
    }

    /// `"key":value`, after a comma when `comma`.
    mutating func field(key: String, _ value: LogValue, comma: Bool) {
        if comma { byte(0x2C) }
        quoted(key)
        byte(0x3A)
        self.value(value)
    }

    /// A value: a string quoted, numbers and literals as JSON.
    mutating func value(_ value: LogValue) {
        switch value {
        case .string(let s): quoted(s)
        case .int(let n): decimal(n)
        case .double(let d):
            if d.isFinite { fixed3(d) } else { ascii("null") }
        case .bool(let b): if b { ascii("true") } else { ascii("false") }
        }
    }

    /// `d` with exactly three decimals ("12.345").
    mutating func fixed3(_ d: Double) {
        let thousandths = Int((abs(d) * 1000).rounded())
        if d < 0 && thousandths != 0 { byte(0x2D) }
        decimal(thousandths / 1000)
        let fraction = thousandths % 1000
        byte(0x2E)
        byte(UInt8(48 + fraction / 100))
        byte(UInt8(48 + fraction / 10 % 10))
        byte(UInt8(48 + fraction % 10))
    }

    mutating func decimal(_ n: Int) {
        if n < 0 { byte(0x2D) }
        var v = n.magnitude
        var digits = 1
        var scale: UInt = 10
        while digits < 20 && v >= scale { digits += 1; scale = scale &* 10 }
        for i in stride(from: digits - 1, through: 0, by: -1) {
            base[count + i] = UInt8(48 + v % 10)
            v /= 10
        }
        count += digits
    }

    /// RFC 3339 UTC with milliseconds, now (24 bytes).
    mutating func timestamp() {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = time_t(ts.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        digits(Int(parts.tm_year) + 1900, 4, then: 0x2D)
        digits(Int(parts.tm_mon) + 1, 2, then: 0x2D)
        digits(Int(parts.tm_mday), 2, then: 0x54)
        digits(Int(parts.tm_hour), 2, then: 0x3A)
        digits(Int(parts.tm_min), 2, then: 0x3A)
        digits(Int(parts.tm_sec), 2, then: 0x2E)
        digits(Int(ts.tv_nsec) / 1_000_000, 3, then: 0x5A)
    }

    /// The last `width` decimal digits of `value`, then `separator`.
    private mutating func digits(_ value: Int, _ width: Int, then separator: UInt8) {
        var v = value
        for i in stride(from: width - 1, through: 0, by: -1) {
            base[count + i] = UInt8(48 + v % 10)
            v /= 10
        }
        count += width
        byte(separator)
    }

    /// `s` quoted and escaped (`JSONLine.appendQuoted`).
    mutating func quoted(_ s: String) {
        byte(0x22)
        escaped(s)
        byte(0x22)
    }

    private mutating func escaped(_ s: String) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { bytes in
            var clean = 0   // bytes[clean..<i] need no escaping and are copied in one go
            var i = 0
            while i < bytes.count {
                i = Self.firstToEscape(bytes, from: i)
                guard i < bytes.count else { break }
                let b = bytes[i]
                let extra = b == 0x22 || b == 0x5C || b == 0x0A || b == 0x0D || b == 0x09 ? 1 : 5
                guard extra <= escapeRoom else {
                    outOfEscapeRoom = true
                    return
                }
                escapeRoom -= extra
                self.bytes(UnsafeBufferPointer(rebasing: bytes[clean..<i]))
                clean = i + 1
                i += 1
                byte(0x5C)
                switch b {
                case 0x22, 0x5C: byte(b)
                case 0x0A: byte(0x6E)
                case 0x0D: byte(0x72)
                case 0x09: byte(0x74)
                default:
                    let hex: StaticString = "0123456789abcdef"
                    ascii("u00")
                    byte(hex.utf8Start[Int(b >> 4)])
                    byte(hex.utf8Start[Int(b & 0xF)])
                }
            }
            self.bytes(UnsafeBufferPointer(rebasing: bytes[clean..<bytes.count]))
        }
        if done == nil {
            // A bridged or otherwise non-contiguous string: made contiguous once, then the same path.
            var copy = s
            copy.makeContiguousUTF8()
            escaped(copy)
        }
    }

    /// The index of the first byte at or after `from` that JSON needs escaped (a control byte, `"` or `\`), or
    /// the count. Eight bytes at a time: a word has such a byte when `x - 0x20…` borrows into a byte's high bit
    /// that `x` had clear (a byte below 0x20), or `x ^ 0x22…` or `x ^ 0x5C…` has a zero byte. Every access-log
    /// line passes here for its path, user agent and the rest, on every request.
    private static func firstToEscape(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        var i = from
        let n = bytes.count
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while i + 8 <= n {
                let x = UnsafeRawPointer(base).loadUnaligned(fromByteOffset: i, as: UInt64.self)
                let quote = x ^ (ones &* 0x22), backslash = x ^ (ones &* 0x5C)
                let control = (x &- ones &* 0x20) & ~x
                if (control | (quote &- ones) & ~quote | (backslash &- ones) & ~backslash) & highs != 0 { break }
                i += 8
            }
        }
        while i < n, bytes[i] >= 0x20, bytes[i] != 0x22, bytes[i] != 0x5C { i += 1 }
        return i
    }
}
