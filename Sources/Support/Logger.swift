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
}

extension LogSink {
    public func write(utf8 line: inout [UInt8]) {
        write(line: String(decoding: line, as: UTF8.self))
    }
}

/// Writes each line with one write(2) call: `print` to a pipe is block-buffered and would hold lines until exit.
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
        line.append(0x0A)
        line.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = raw.baseAddress.map { Glibc_write(fd, $0 + offset, raw.count - offset) } ?? -1
                if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
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
        // Built as bytes in one buffer: this runs once per exchange (the access log), where building it from
        // strings was a fifth of the relay's instructions per request.
        var line: [UInt8] = []
        line.reserveCapacity(640)
        line.append(contentsOf: #"{"time":""#.utf8)
        Logger.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":""#.utf8)
        line.append(contentsOf: level.name.utf8)
        line.append(0x22)
        JSONLine.append(key: "logger", .string(label), to: &line)
        JSONLine.append(key: "message", .string(message()), to: &line)
        for (key, value) in metadata() { JSONLine.append(key: key, value, to: &line) }
        line.append(0x7D)
        sink.write(utf8: &line)
    }

    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.error, m(), md()) }

    /// RFC 3339 UTC with milliseconds.
    public static func timestamp() -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendTimestamp(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// RFC 3339 UTC with milliseconds, written byte by byte (this runs once per access-log line).
    public static func appendTimestamp(to bytes: inout [UInt8]) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = time_t(ts.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        func put(_ value: Int, _ width: Int, then separator: UInt8?) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                bytes.append(UInt8(48 + (v / divisor) % 10))
                v %= divisor
                divisor /= 10
            }
            if let separator { bytes.append(separator) }
        }
        put(Int(parts.tm_year) + 1900, 4, then: 0x2D)
        put(Int(parts.tm_mon) + 1, 2, then: 0x2D)
        put(Int(parts.tm_mday), 2, then: 0x54)
        put(Int(parts.tm_hour), 2, then: 0x3A)
        put(Int(parts.tm_min), 2, then: 0x3A)
        put(Int(parts.tm_sec), 2, then: 0x2E)
        put(Int(ts.tv_nsec) / 1_000_000, 3, then: 0x5A)
    }
}

/// Minimal JSON writing for log lines and error bodies (no Foundation encoder on the hot path), on bytes.
public enum JSONLine {
    public static func encode(_ fields: [(String, LogValue)]) -> String {
        var out: [UInt8] = [0x7B]
        out.reserveCapacity(48 * fields.count + 2)
        for (key, value) in fields { append(key: key, value, to: &out) }
        out.append(0x7D)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `"key":value` to an object being written: a comma first unless the object was just opened.
    public static func append(key: String, _ value: LogValue, to out: inout [UInt8]) {
        if out.last != 0x7B { out.append(0x2C) }
        appendQuoted(key, to: &out)
        out.append(0x3A)
        switch value {
        case .string(let s): appendQuoted(s, to: &out)
        case .int(let n): appendDecimal(n, to: &out)
        case .double(let d):
            if d.isFinite { appendFixed3(d, to: &out) } else { out.append(contentsOf: "null".utf8) }
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        }
    }

    /// `d` with exactly three decimals ("12.345"), without Foundation's `String(format:)`.
    public static func fixed3(_ d: Double) -> String {
        var out: [UInt8] = []
        appendFixed3(d, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func appendFixed3(_ d: Double, to out: inout [UInt8]) {
        let thousandths = Int((abs(d) * 1000).rounded())
        if d < 0 && thousandths != 0 { out.append(0x2D) }
        appendDecimal(thousandths / 1000, to: &out)
        let fraction = thousandths % 1000
        out.append(0x2E)
        out.append(UInt8(48 + fraction / 100))
        out.append(UInt8(48 + fraction / 10 % 10))
        out.append(UInt8(48 + fraction % 10))
    }

    public static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        if n < 0 { out.append(0x2D) }
        var v = n.magnitude
        if v < 10 { out.append(UInt8(48 + v)); return }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes: room for UInt.max's 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 { d[count] = UInt8(48 + v % 10); v /= 10; count += 1 }
            for i in stride(from: count - 1, through: 0, by: -1) { out.append(d[i]) }
        }
    }

    public static func quote(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 2)
        appendQuoted(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `s` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`, every
    /// other byte (UTF-8 included) as it is.
    public static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        appendEscaped(s, to: &out)
        out.append(0x22)
    }

    private static func appendEscaped(_ s: String, to out: inout [UInt8]) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { bytes in
            var clean = 0   // bytes[clean..<i] need no escaping and are copied in one go
            var i = 0
            while i < bytes.count {
                i = firstToEscape(bytes, from: i)
                guard i < bytes.count else { break }
                let b = bytes[i]
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[clean..<i]))
                clean = i + 1
                i += 1
                out.append(0x5C)
                switch b {
                case 0x22, 0x5C: out.append(b)
                case 0x0A: out.append(0x6E)
                case 0x0D: out.append(0x72)
                case 0x09: out.append(0x74)
                default:
                    let hex: StaticString = "0123456789abcdef"
                    out.append(contentsOf: "u00".utf8)
                    hex.withUTF8Buffer { h in
                        out.append(h[Int(b >> 4)])
                        out.append(h[Int(b & 0xF)])
                    }
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[clean..<bytes.count]))
        }
        if done == nil {
            // A bridged or otherwise non-contiguous string: made contiguous once, then the same path.
            var copy = s
            copy.makeContiguousUTF8()
            appendEscaped(copy, to: &out)
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
