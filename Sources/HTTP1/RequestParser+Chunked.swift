// The chunked transfer coding of a request body (RFC 9112 §7.1): size lines, the CRLF after each chunk's data,
// trailers. Only CRLF ends a line here: bare-LF readings differ between hops, and that is how bodies get smuggled.

extension RequestParser {
    /// One chunk-size line: true once it is consumed (the next state is set), false when more bytes are needed.
    mutating func parseChunkSizeLine() throws(HTTPParseError) -> Bool {
        let base = start
        let available = buffer.count - start
        // Up to 16 hex digits plus whatever is left of the extension budget; checked on partial lines too.
        let maxLine = 16 + (limits.maxHeadBytes - extensionBytes)
        let from = line.scanFrom
        let found = buffer.withUnsafeBufferPointer { p in findByte(LF, in: p, from: base + from, to: base + available) }
        guard let lfAbsolute = found else {
            if available > maxLine + 1 { throw .bad("chunk size line too long") }
            line.scanFrom = available
            return false
        }
        let lf = lfAbsolute - base
        guard lf > 0 && buffer[base + lf - 1] == CR else { throw .bad("bare LF in chunk size line") }
        let lineTo = lf - 1
        if lineTo > maxLine { throw .bad("chunk size line too long") }
        let (size, extensionLength) = try buffer.withUnsafeBufferPointer { (p) throws(HTTPParseError) in
            try Self.scanChunkSizeLine(p, base, base + lineTo)
        }
        extensionBytes += extensionLength
        if extensionBytes > limits.maxHeadBytes { throw .bad("chunk extensions too long") }
        start += lf + 1
        line = LineCursor()
        if size == 0 {
            state = .trailers
        } else {
            if size > limits.maxBodyBytes - decodedBodyBytes {
                throw HTTPParseError(kind: .bodyTooLarge, message: "request body too large")
            }
            decodedBodyBytes += size
            state = .chunkData(remaining: size)
        }
        return true
    }

    /// chunk-size [ chunk-ext ]: 1*HEXDIG, then optionally BWS ";" and extensions, which are skipped.
    private static func scanChunkSizeLine(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) throws(HTTPParseError) -> (Int, Int) {
        var i = from
        var size = 0
        while i < to, let digit = hexValue(p[i]) {
            if i - from >= 16 || size > Int.max >> 4 { throw .bad("chunk size too large") }
            size = size << 4 | digit
            i += 1
        }
        if i == from { throw .bad("invalid chunk size") }
        let digitsEnd = i
        if i < to {
            while i < to && isOWS(p[i]) { i += 1 }
            guard i < to && p[i] == 0x3B else { throw .bad("invalid chunk size") }
            while i < to {
                let b = p[i]
                if (b < SP && b != HTAB) || b == 0x7F {
                    throw .bad(b == CR ? "bare CR in chunk size line" : "control character in chunk extension")
                }
                i += 1
            }
        }
        return (size, to - digitsEnd)
    }

    /// The CRLF that must follow chunk data; anything else (a bare LF too) means the sender's framing is not what
    /// it claimed, or that another reader of these bytes could find a different end.
    mutating func consumeChunkDataEnd() throws(HTTPParseError) -> Bool {
        let available = buffer.count - start
        guard available > 0 else { return false }
        guard buffer[start] == CR else { throw .bad("missing CRLF after chunk data") }
        guard available > 1 else { return false }
        guard buffer[start + 1] == LF else { throw .bad("missing CRLF after chunk data") }
        start += 2
        return true
    }

    /// The trailer section after the last chunk, read to its empty line and dropped (RFC 9112 §7.1.2: whoever
    /// removes the chunked coding may discard trailer fields; the relay forwards none). True once it is consumed.
    mutating func parseTrailers() throws(HTTPParseError) -> Bool {
        guard try parseFieldLines(.trailers) else { return false }
        start += line.lineStart
        return true
    }
}
