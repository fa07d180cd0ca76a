#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

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
}

/// Writes each line with one write(2) call: `print` to a pipe is block-buffered and would hold lines until exit.
public struct FileDescriptorLogSink: LogSink {
    public let fd: Int32
    public init(fd: Int32) { self.fd = fd }
    public static let standardOutput = FileDescriptorLogSink(fd: 1)
    public static let standardError = FileDescriptorLogSink(fd: 2)
    public func write(line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { raw in
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
        var fields: [(String, LogValue)] = [
            ("time", .string(Logger.timestamp())),
            ("level", .string(level.name)),
            ("logger", .string(label)),
            ("message", .string(message())),
        ]
        fields.append(contentsOf: metadata())
        sink.write(line: JSONLine.encode(fields))
    }

    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, LogValue)] = []) { log(.error, m(), md()) }

    /// RFC 3339 UTC with milliseconds, built byte by byte (this runs once per access-log line).
    public static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = time_t(ts.tv_sec)
        var parts = tm()
        gmtime_r(&t, &parts)
        var bytes = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int, _ width: Int, at offset: Int) {
            var v = value
            for i in stride(from: offset + width - 1, through: offset, by: -1) {
                bytes[i] = UInt8(48 + v % 10)
                v /= 10
            }
        }
        put(Int(parts.tm_year) + 1900, 4, at: 0); bytes[4] = 0x2D
        put(Int(parts.tm_mon) + 1, 2, at: 5); bytes[7] = 0x2D
        put(Int(parts.tm_mday), 2, at: 8); bytes[10] = 0x54
        put(Int(parts.tm_hour), 2, at: 11); bytes[13] = 0x3A
        put(Int(parts.tm_min), 2, at: 14); bytes[16] = 0x3A
        put(Int(parts.tm_sec), 2, at: 17); bytes[19] = 0x2E
        put(Int(ts.tv_nsec) / 1_000_000, 3, at: 20); bytes[23] = 0x5A
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Minimal JSON writing for log lines and error bodies (no Foundation encoder on the hot path).
public enum JSONLine {
    public static func encode(_ fields: [(String, LogValue)]) -> String {
        var out = "{"
        out.reserveCapacity(64 * fields.count)
        for (i, (key, value)) in fields.enumerated() {
            if i > 0 { out += "," }
            out += quote(key)
            out += ":"
            switch value {
            case .string(let s): out += quote(s)
            case .int(let n): out += String(n)
            case .double(let d): out += d.isFinite ? fixed3(d) : "null"
            case .bool(let b): out += b ? "true" : "false"
            }
        }
        return out + "}"
    }

    /// `d` with exactly three decimals ("12.345"), without Foundation's `String(format:)`, which was a few
    /// percent of the relay's CPU when every request wrote an access-log line.
    public static func fixed3(_ d: Double) -> String {
        let negative = d < 0
        let thousandths = Int((abs(d) * 1000).rounded())
        let fraction = thousandths % 1000
        let digits = String(fraction)
        return (negative && thousandths != 0 ? "-" : "") + String(thousandths / 1000) + "."
            + String(repeating: "0", count: 3 - digits.count) + digits
    }

    public static func quote(_ s: String) -> String {
        // Most values (ids, paths, routes) need no escaping: one scan, one concatenation.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) { return "\"" + s + "\"" }
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
