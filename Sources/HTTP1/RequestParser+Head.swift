// The field lines of the head (RFC 9112 §5, RFC 9110 §5) and what they mean for framing and the connection
// (RFC 9112 §3.2 Host, §6 body length, §9.3 persistence). Trailers reuse the field-line reader.

extension RequestParser {
    /// The request head once it is complete (request line, field lines, the empty line), or nil when more bytes
    /// are needed.
    mutating func parseHead() throws(HTTPParseError) -> RequestHead? {
        guard try parseRequestLine() else { return nil }
        guard try parseFieldLines(.head) else { return nil }
        return try finishHead()
    }

    /// What the head's fields mean for framing and connection handling, gathered as the lines go by so the
    /// list is not searched again.
    struct HeadAccumulator: Sendable {
        var method = ""
        var target = ""
        var version = HTTPVersion.http1_1
        var fields: [HTTPField] = []
        var contentLengthCount = 0
        var contentLength: Int?
        var transferEncodingCount = 0
        var transferEncodingIsChunked = false
        var hostCount = 0
        var hostIsValid = true
        var connectionClose = false
        var connectionKeepAlive = false
        var expectContinue = false
    }

    private enum KnownField {
        case other
        case contentLength(Int?)
        case transferEncoding(chunked: Bool)
        case host(valid: Bool)
        case connection(close: Bool, keepAlive: Bool)
        case expect(continue: Bool)
    }

    /// The two field sections of a request (RFC 9112 §5 and §7.1.2). Both share the head's size and count limits.
    enum FieldSection {
        /// The head's fields: kept, and a bare LF ends a line.
        case head
        /// The trailers after a chunked body: dropped, and only CRLF ends a line.
        case trailers

        var tooLarge: HTTPParseError {
            switch self {
            case .head: HTTPParseError(kind: .headTooLarge, message: "request head too large")
            case .trailers: HTTPParseError(kind: .headTooLarge, message: "trailer section too large")
            }
        }

        var tooMany: HTTPParseError {
            switch self {
            case .head: HTTPParseError(kind: .tooManyHeaders, message: "too many header fields")
            case .trailers: HTTPParseError(kind: .tooManyHeaders, message: "too many trailer fields")
            }
        }
    }

    /// Reads field lines until the empty line (true) or until more bytes are needed (false).
    mutating func parseFieldLines(_ section: FieldSection) throws(HTTPParseError) -> Bool {
        while true {
            guard let (from, to) = try nextLine(section) else { return false }
            if from == to { return true }
            line.fieldCount += 1
            if line.fieldCount > limits.maxHeaderCount { throw section.tooMany }
            let base = start
            let field = try buffer.withUnsafeBufferPointer { (p) throws(HTTPParseError) in
                try Self.scanFieldLine(p, base + from, base + to)
            }
            if section == .head { record(field) }
        }
    }

    /// The next complete line at `line.lineStart` (terminator excluded), or nil when its LF has not arrived.
    /// In the head a bare LF ends a line too (RFC 9112 §2.2 allows it for the start-line and fields; nginx does
    /// the same, and the relay re-serialises every field it forwards, so no bytes of the client's head reach the
    /// next hop). Trailers refuse it: chunked framing, trailers included, is where bare-LF readings differ
    /// between hops and bodies get smuggled, so there only CRLF ends a line (RFC 9112 §7.1).
    private mutating func nextLine(_ section: FieldSection) throws(HTTPParseError) -> (Int, Int)? {
        let byteLimit = limits.maxHeadBytes
        let base = start
        let available = buffer.count - start
        let from = line.scanFrom
        let found = buffer.withUnsafeBufferPointer { p in findByte(LF, in: p, from: base + from, to: base + available) }
        guard let lfAbsolute = found else {
            // Checked on partial input so a client trickling an endless head is cut off at the limit.
            if available > byteLimit { throw section.tooLarge }
            line.scanFrom = available
            return nil
        }
        let lf = lfAbsolute - base
        if lf >= byteLimit { throw section.tooLarge }
        let lineFrom = line.lineStart
        var lineTo = lf
        if lineTo > lineFrom && buffer[base + lineTo - 1] == CR {
            lineTo -= 1
        } else if section == .trailers {
            throw .bad("bare LF in trailer section")
        }
        line.lineStart = lf + 1
        line.scanFrom = lf + 1
        return (lineFrom, lineTo)
    }

    private struct FieldLine {
        var nameFrom: Int
        var nameEnd: Int
        var valueFrom: Int
        var valueTo: Int
        var highBytes: Bool
    }

    /// RFC 9112 §5: field-line = field-name ":" OWS field-value OWS, with no whitespace before the colon
    /// (§5.1, a smuggling vector) and no obs-fold (§5.2).
    private static func scanFieldLine(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) throws(HTTPParseError) -> FieldLine {
        if isOWS(p[from]) { throw .bad("obsolete line folding not allowed") }
        var i = from
        while true {
            guard i < to else { throw .bad("field line without a colon") }
            let b = p[i]
            if b == COLON { break }
            if !isTchar(b) {
                if isOWS(b) { throw .bad("whitespace in field name") }
                if b == CR { throw .bad("bare CR in field line") }
                throw .bad("invalid character in field name")
            }
            i += 1
        }
        if i == from { throw .bad("empty field name") }
        let nameEnd = i
        i += 1
        while i < to && isOWS(p[i]) { i += 1 }
        let valueFrom = i
        var valueTo = i
        var high = false
        while i < to {
            let b = p[i]
            if b > SP && b != 0x7F {
                if b >= 0x80 { high = true }
                valueTo = i + 1
            } else if b != SP && b != HTAB {
                throw .bad(b == CR ? "bare CR in field line" : "control character in field value")
            }
            i += 1
        }
        return FieldLine(nameFrom: from, nameEnd: nameEnd, valueFrom: valueFrom, valueTo: valueTo, highBytes: high)
    }

    private mutating func record(_ f: FieldLine) {
        let (field, known) = buffer.withUnsafeBufferPointer { p in
            let name = String(decoding: UnsafeBufferPointer(rebasing: p[f.nameFrom..<f.nameEnd]), as: UTF8.self)
            let value = decodeFieldValue(UnsafeBufferPointer(rebasing: p[f.valueFrom..<f.valueTo]), hasHighBytes: f.highBytes)
            return (HTTPField(name: name, value: value), Self.classify(p, f))
        }
        if head.fields.capacity == 0 { head.fields.reserveCapacity(HTTPHeaders.initialCapacity) }
        head.fields.append(field)
        switch known {
        case .other:
            break
        case .contentLength(let value):
            head.contentLengthCount += 1
            head.contentLength = value
        case .transferEncoding(let chunked):
            head.transferEncodingCount += 1
            head.transferEncodingIsChunked = chunked
        case .host(let valid):
            head.hostCount += 1
            head.hostIsValid = head.hostIsValid && valid
        case .connection(let close, let keepAlive):
            head.connectionClose = head.connectionClose || close
            head.connectionKeepAlive = head.connectionKeepAlive || keepAlive
        case .expect(let isContinue):
            head.expectContinue = head.expectContinue || isContinue
        }
    }

    /// Which field that matters for framing or the connection this line is; the name's length picks the one
    /// candidate, so a line costs at most one name comparison.
    private static func classify(_ p: UnsafeBufferPointer<UInt8>, _ f: FieldLine) -> KnownField {
        let n0 = f.nameFrom
        let n1 = f.nameEnd
        let v0 = f.valueFrom
        let v1 = f.valueTo
        switch n1 - n0 {
        case 4:
            guard equalsLowercase(p, n0, n1, "host") else { return .other }
            // RFC 9112 §3.2: Host = uri-host [ ":" port ]; empty is allowed (a URI without authority).
            var valid = true
            for i in v0..<v1 where !isAuthorityByte(p[i]) { valid = false }
            return .host(valid: valid)
        case 6:
            return equalsLowercase(p, n0, n1, "expect") ? .expect(continue: equalsLowercase(p, v0, v1, "100-continue")) : .other
        case 10:
            guard equalsLowercase(p, n0, n1, "connection") else { return .other }
            return connectionOptions(p, v0, v1)
        case 14:
            guard equalsLowercase(p, n0, n1, "content-length") else { return .other }
            return .contentLength(contentLength(p, v0, v1))
        case 17:
            guard equalsLowercase(p, n0, n1, "transfer-encoding") else { return .other }
            return .transferEncoding(chunked: equalsLowercase(p, v0, v1, "chunked"))
        default:
            return .other
        }
    }

    /// The `close` and `keep-alive` options of a Connection field value (RFC 9110 §7.6.1: a comma-separated list of
    /// case-insensitive options).
    private static func connectionOptions(_ p: UnsafeBufferPointer<UInt8>, _ v0: Int, _ v1: Int) -> KnownField {
        var close = false
        var keepAlive = false
        var i = v0
        while i < v1 {
            var end = i
            while end < v1 && p[end] != 0x2C { end += 1 }
            var a = i
            var b = end
            while a < b && isOWS(p[a]) { a += 1 }
            while b > a && isOWS(p[b - 1]) { b -= 1 }
            if equalsLowercase(p, a, b, "close") { close = true }
            if equalsLowercase(p, a, b, "keep-alive") { keepAlive = true }
            i = end + 1
        }
        return .connection(close: close, keepAlive: keepAlive)
    }

    /// RFC 9110 §8.6: 1*DIGIT. Lists ("5, 5"), signs and spaces are refused (nil), not reconciled; 18 digits
    /// cannot overflow Int, and nothing legitimate comes near that size.
    private static func contentLength(_ p: UnsafeBufferPointer<UInt8>, _ v0: Int, _ v1: Int) -> Int? {
        guard v1 > v0, v1 - v0 <= 18 else { return nil }
        var value = 0
        for i in v0..<v1 {
            let d = p[i] &- 0x30
            guard d < 10 else { return nil }
            value = value * 10 + Int(d)
        }
        return value
    }

    /// The head as an event, once Host and framing are checked; the state moves on to the body, if any.
    private mutating func finishHead() throws(HTTPParseError) -> RequestHead {
        let h = head
        // RFC 9112 §3.2: an HTTP/1.1 request without Host, with more than one, or with an invalid one is a 400.
        // 1.0 predates Host, so it may come without one.
        if h.hostCount > 1 { throw .bad("multiple Host fields") }
        if h.hostCount == 0 && h.version == .http1_1 { throw .bad("missing Host field") }
        if !h.hostIsValid { throw .bad("invalid Host field") }
        let framing = try Self.framing(of: h, maxBodyBytes: limits.maxBodyBytes)
        // RFC 9112 §9.3: 1.1 connections persist unless "close"; 1.0 ones only with "keep-alive" (§C.2.2).
        let keepAlive = h.version == .http1_1 ? !h.connectionClose : (h.connectionKeepAlive && !h.connectionClose)
        let result = RequestHead(
            method: h.method,
            target: h.target,
            version: h.version,
            headers: HTTPHeaders(fields: h.fields),
            framing: framing,
            keepAlive: keepAlive,
            expectsContinue: h.version == .http1_1 && h.expectContinue
        )
        start += line.lineStart
        line = LineCursor()
        head = HeadAccumulator()
        switch framing {
        case .none, .contentLength(0): state = .endPending
        case .contentLength(let n): state = .contentBody(remaining: n)
        case .chunked: state = .chunkSizeLine
        }
        return result
    }

    /// RFC 9112 §6.1 and §6.3: exactly one way to find the body's end, or the request is refused.
    private static func framing(of h: HeadAccumulator, maxBodyBytes: Int) throws(HTTPParseError) -> BodyFraming {
        if h.transferEncodingCount > 0 {
            if h.version == .http1_0 { throw .bad("Transfer-Encoding in an HTTP/1.0 request") }
            if h.contentLengthCount > 0 { throw .bad("both Content-Length and Transfer-Encoding") }
            if h.transferEncodingCount > 1 || !h.transferEncodingIsChunked {
                throw .bad("unsupported Transfer-Encoding")
            }
            return .chunked
        }
        if h.contentLengthCount > 0 {
            if h.contentLengthCount > 1 { throw .bad("multiple Content-Length fields") }
            guard let length = h.contentLength else { throw .bad("invalid Content-Length") }
            if length > maxBodyBytes { throw HTTPParseError(kind: .bodyTooLarge, message: "request body too large") }
            return .contentLength(length)
        }
        return .none
    }
}
