/// Writes commands the way every Redis client does: an array of bulk strings (RESP2 "request" form), which is
/// binary-safe whatever the arguments hold (spaces, CRLF, NUL). Pure.
public enum RESPEncoder {
    /// Appends one command to `buffer`, so a batch of pipelined commands can share one buffer and one write.
    public static func append(command arguments: [[UInt8]], to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "*"))
        appendDecimal(arguments.count, to: &buffer)
        for argument in arguments {
            buffer.append(UInt8(ascii: "$"))
            appendDecimal(argument.count, to: &buffer)
            buffer.append(contentsOf: argument)
            buffer.append(contentsOf: crlf)
        }
    }

    public static func encode(command arguments: [[UInt8]]) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(arguments.reduce(16) { $0 + $1.count + 16 })
        append(command: arguments, to: &buffer)
        return buffer
    }

    /// The same from strings, written straight into one buffer (no array per argument: an admission has ~30).
    public static func encode(command arguments: [String]) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(arguments.reduce(16) { $0 + $1.utf8.count + 16 })
        buffer.append(UInt8(ascii: "*"))
        appendDecimal(arguments.count, to: &buffer)
        for argument in arguments {
            buffer.append(UInt8(ascii: "$"))
            appendDecimal(argument.utf8.count, to: &buffer)
            buffer.append(contentsOf: argument.utf8)
            buffer.append(13)
            buffer.append(10)
        }
        return buffer
    }

    private static let crlf: [UInt8] = [13, 10]

    /// A non-negative count in decimal, then CRLF, written without making a String (most are under 100: argument
    /// counts and lengths).
    private static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        if value >= 0 && value < 10 {
            buffer.append(UInt8(ascii: "0") &+ UInt8(value))
        } else if value >= 10 && value < 100 {
            buffer.append(UInt8(ascii: "0") &+ UInt8(value / 10))
            buffer.append(UInt8(ascii: "0") &+ UInt8(value % 10))
        } else {
            var divisor = 100
            while divisor <= value / 10 { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                buffer.append(UInt8(ascii: "0") &+ UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        buffer.append(13)
        buffer.append(10)
    }
}
