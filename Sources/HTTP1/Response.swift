/// A response's status line and header section, serialised for the wire (RFC 9112 §4 status line, §5 fields).
/// The relay builds one per response and writes it before streaming the body.
public struct ResponseHead: Sendable, Equatable {
    public var status: Int
    /// nil → the standard phrase for the status (RFC 9112 §4 lets the phrase be anything, clients ignore it).
    public var reason: String?
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    public init(status: Int, reason: String? = nil, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers
    }

    /// Appends "HTTP/1.1 200 OK\r\nName: value\r\n...\r\n" (blank line included) to `buffer`.
    /// CR, LF and NUL inside the reason, names or values are written as SP: values can come from upstream or
    /// configuration, and a stray line break would let them inject fields or a second response.
    public func serialize(into buffer: inout [UInt8]) {
        buffer.reserveCapacity(buffer.count + 32 + headers.count * 48)
        buffer.append(contentsOf: version == .http1_1 ? Self.http11 : Self.http10)
        appendDecimal(status, to: &buffer)
        buffer.append(SP)
        appendSanitised(reason ?? HTTPStatus.reasonPhrase(status), to: &buffer)
        buffer.append(CR)
        buffer.append(LF)
        for field in headers {
            appendSanitised(field.name, to: &buffer)
            buffer.append(COLON)
            buffer.append(SP)
            appendSanitised(field.value, to: &buffer)
            buffer.append(CR)
            buffer.append(LF)
        }
        buffer.append(CR)
        buffer.append(LF)
    }

    private static let http11: [UInt8] = Array("HTTP/1.1 ".utf8)
    private static let http10: [UInt8] = Array("HTTP/1.0 ".utf8)
}

private func appendSanitised(_ text: String, to buffer: inout [UInt8]) {
    let from = buffer.count
    buffer.append(contentsOf: text.utf8)
    for i in from..<buffer.count {
        let b = buffer[i]
        if b == CR || b == LF || b == 0 { buffer[i] = SP }
    }
}

private func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
    if value < 0 {
        buffer.append(0x2D)
        appendDecimal(0 - value, to: &buffer)
        return
    }
    if value >= 10 { appendDecimal(value / 10, to: &buffer) }
    buffer.append(0x30 + UInt8(value % 10))
}

/// Standard reason phrases, from the status code registry of RFC 9110 §15 (plus 429/431 of RFC 6585 and 451 of
/// RFC 7725). Used when a response has no explicit reason.
public enum HTTPStatus {
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 103: return "Early Hints"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 203: return "Non-Authoritative Information"
        case 204: return "No Content"
        case 205: return "Reset Content"
        case 206: return "Partial Content"
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 305: return "Use Proxy"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 402: return "Payment Required"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 416: return "Range Not Satisfiable"
        case 417: return "Expectation Failed"
        case 421: return "Misdirected Request"
        case 422: return "Unprocessable Content"
        case 426: return "Upgrade Required"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 451: return "Unavailable For Legal Reasons"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        case 511: return "Network Authentication Required"
        default: return "Unknown"
        }
    }
}

/// Writes the chunked transfer coding of RFC 9112 §7.1 for responses whose length is not known in advance
/// (every streamed SSE response).
public enum ChunkedEncoding {
    /// The longest chunk-size line: 16 hex digits and CRLF.
    public static let maxSizeLineBytes = 18

    /// Writes the chunk-size line for `count` (as `appendSizeLine`) at the start of `line`, which has room for
    /// `maxSizeLineBytes`; returns its length. For a line built on the stack, once per relayed event.
    @inline(__always)
    public static func writeSizeLine(_ count: Int, into line: UnsafeMutableRawBufferPointer) -> Int {
        precondition(count >= 0 && line.count >= maxSizeLineBytes, "chunk size must not be negative")
        let digits = count == 0 ? 1 : (Int.bitWidth - count.leadingZeroBitCount + 3) / 4
        var value = count
        var i = digits
        while i > 0 {
            i -= 1
            let nibble = UInt8(truncatingIfNeeded: value & 0xF)
            line[i] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble   // "0"…"9", "a"…"f"
            value >>= 4
        }
        line[digits] = CR
        line[digits + 1] = LF
        return digits + 2
    }

    /// Writes the chunk-size line ("1a\r\n" for 26, lowercase hex) into `buffer`.
    public static func appendSizeLine(_ count: Int, to buffer: inout [UInt8]) {
        precondition(count >= 0, "chunk size must not be negative")
        let digits = count == 0 ? 1 : (Int.bitWidth - count.leadingZeroBitCount + 3) / 4
        var shift = (digits - 1) * 4
        while shift >= 0 {
            buffer.append(hexDigits[(count >> shift) & 0xF])
            shift -= 4
        }
        buffer.append(CR)
        buffer.append(LF)
    }

    /// "\r\n", ends each chunk's data.
    public static let crlf: [UInt8] = [CR, LF]

    /// "0\r\n\r\n": the last chunk with no trailers, ending the body.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Convenience: size line + payload + CRLF in one array.
    /// An empty payload gives an empty array, not "0\r\n\r\n": a zero-size chunk would end the whole body, and
    /// an empty read must never do that by accident. Use `lastChunk` to end it on purpose.
    public static func frame(_ payload: UnsafeRawBufferPointer) -> [UInt8] {
        guard !payload.isEmpty else { return [] }
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 20)
        appendSizeLine(payload.count, to: &out)
        out.append(contentsOf: payload)
        out.append(CR)
        out.append(LF)
        return out
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

/// Fields that describe one connection rather than the message, which a relay must not forward
/// (RFC 9110 §7.6.1), including any field the sender named in `Connection`.
public enum HopByHop {
    /// connection, keep-alive, proxy-connection, transfer-encoding, te, trailer, upgrade, proxy-authenticate,
    /// proxy-authorization  (lowercase)
    public static let standard: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// The same names by length: a field name is compared, without lowercasing (allocating) it, only with the
    /// standard names as long as it.
    static let standardByLength: [[String]] = {
        var table = [[String]](repeating: [], count: (standard.map(\.utf8.count).max() ?? 0) + 1)
        for name in standard { table[name.utf8.count].append(name) }
        return table
    }()

    public static func isStandard(_ name: String) -> Bool {
        let length = name.utf8.count
        return length < standardByLength.count && standardByLength[length].contains { asciiCaseInsensitiveEqual(name, $0) }
    }

    /// Removes the standard hop-by-hop fields and every field named in `Connection` tokens.
    public static func strip(_ headers: inout HTTPHeaders) {
        let named = ConnectionNamed(headers)
        headers.removeAll { field in isStandard(field.name) || named.contains(field.name) }
    }
}

/// The field names a head's `Connection` lists (RFC 9110 §7.6.1), to be dropped with it. A head usually names one
/// or two, compared in place; a provider's head may name tens of thousands (curl takes 300 KiB of head, one line of
/// up to 100 KiB), and compared with each of as many fields that was a billion comparisons on the loop serving
/// every other stream, so a long list is looked up in a set instead.
public struct ConnectionNamed: Sendable {
    private let few: [String]
    private let many: Set<String>

    /// The longest list compared in place.
    static let compared = 8

    public init(_ headers: HTTPHeaders) {
        let tokens = headers.contains("Connection") ? headers.tokens("connection") : []
        if tokens.count > Self.compared {
            few = []
            many = Set(tokens)
        } else {
            few = tokens
            many = []
        }
    }

    public var isEmpty: Bool { few.isEmpty && many.isEmpty }

    public func contains(_ name: String) -> Bool {
        if !few.isEmpty { return few.contains { asciiCaseInsensitiveEqual(name, $0) } }
        return !many.isEmpty && many.contains(String(decoding: name.utf8.lazy.map(asciiLower), as: UTF8.self))
    }
}
