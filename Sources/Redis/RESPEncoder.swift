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

    public static func encode(command arguments: [String]) -> [UInt8] {
        encode(command: arguments.map { Array($0.utf8) })
    }

    private static let crlf: [UInt8] = [13, 10]

    private static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: String(value).utf8)
        buffer.append(contentsOf: crlf)
    }
}
