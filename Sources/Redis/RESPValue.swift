/// One RESP2 value (https://redis.io/docs/latest/develop/reference/protocol-spec/): what a Redis server answers.
/// A plain value; the null bulk string (`$-1`) and the null array (`*-1`) are both `.null`, which is all a client
/// needs to tell them apart from an empty string or an empty array.
public enum RESPValue: Sendable, Equatable {
    /// `+OK`
    case simpleString(String)
    /// `-ERR …`: a command failed (the connection is fine).
    case error(String)
    /// `:42`
    case integer(Int64)
    /// `$3\r\nabc`: binary-safe.
    case bulkString([UInt8])
    /// `$-1` or `*-1`.
    case null
    /// `*2\r\n…`
    case array([RESPValue])

    /// The value as text: simple and bulk strings (bulk decoded as UTF-8, invalid bytes replaced), integers.
    public var string: String? {
        switch self {
        case .simpleString(let s): s
        case .bulkString(let b): String(decoding: b, as: UTF8.self)
        case .integer(let i): String(i)
        default: nil
        }
    }

    /// The value as an integer: integers, and strings holding decimal digits (Lua numbers come back as either).
    public var integer: Int64? {
        switch self {
        case .integer(let i): i
        case .simpleString, .bulkString: string.flatMap { Int64($0) }
        default: nil
        }
    }

    public var array: [RESPValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}
