/// Incremental HTTP/1.1 request parser: bytes in, `RequestEvent`s out, any segmentation gives the same events.
/// Framing and syntax follow RFC 9112 (§2 message format, §3 request line, §5 field lines, §6 body length,
/// §7.1 chunked coding) and field rules follow RFC 9110 §5; anything ambiguous is refused rather than guessed,
/// because a relay that reads a message differently from the next hop is a request-smuggling vector.
///
/// A value type; whoever owns it feeds bytes with `append` and pulls events with `next()` until it returns nil.
/// Unconsumed bytes live in one array with a head index, so consuming never shifts memory; the array is
/// compacted on `append` once the consumed prefix is at least half of it.
public struct RequestParser: Sendable {
    private let limits: RequestLimits
    private var buffer: [UInt8] = []
    /// First unconsumed byte in `buffer`. Every offset kept below is relative to it, so compaction moves nothing.
    private var start = 0
    private var state: State = .head
    private var requestLine = RequestLineScan()
    private var line = LineCursor()
    private var head = HeadAccumulator()
    /// Chunk-extension bytes seen in this message; extensions are skipped, so without a budget they are free memory.
    private var extensionBytes = 0
    /// Sum of announced chunk sizes in this message, to refuse an oversized chunked body before reading it.
    private var decodedBodyBytes = 0

    public init(limits: RequestLimits = RequestLimits()) {
        self.limits = limits
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if case .failed = state { return }
        guard !bytes.isEmpty else { return }
        compact()
        bytes.withMemoryRebound(to: UInt8.self) { buffer.append(contentsOf: $0) }
    }

    public mutating func append(_ bytes: [UInt8]) {
        if case .failed = state { return }
        guard !bytes.isEmpty else { return }
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next event, or nil if more bytes are needed. After a throw the parser stays failed (throws again).
    public mutating func next() throws(HTTPParseError) -> RequestEvent? {
        if case .failed(let error) = state { throw error }
        do {
            return try step()
        } catch {
            // The connection is going to be closed after the error response; keep nothing a client sent.
            state = .failed(error)
            buffer = []
            start = 0
            throw error
        }
    }

    /// Bytes appended but not yet consumed by events.
    public var bufferedByteCount: Int { buffer.count - start }

    /// No message in progress and no partial bytes buffered.
    public var isBetweenMessages: Bool {
        if case .head = state { return buffer.count == start }
        return false
    }

    // MARK: - State machine

    private enum State: Sendable {
        case head
        case contentBody(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case endPending
        case failed(HTTPParseError)
    }

    private mutating func step() throws(HTTPParseError) -> RequestEvent? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .head:
                guard let parsed = try parseHead() else { return nil }
                return .head(parsed)
            case .contentBody(let remaining):
                guard let bytes = takeBody(upTo: remaining) else { return nil }
                state = bytes.count == remaining ? .endPending : .contentBody(remaining: remaining - bytes.count)
                return .body(bytes)
            case .chunkData(let remaining):
                guard let bytes = takeBody(upTo: remaining) else { return nil }
                state = bytes.count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - bytes.count)
                return .body(bytes)
            case .chunkSizeLine:
                guard try parseChunkSizeLine() else { return nil }
            case .chunkDataEnd:
                guard try consumeChunkDataEnd() else { return nil }
                state = .chunkSizeLine
            case .trailers:
                let limits = self.limits
                guard try parseFieldLines(
                    storing: false,
                    crlfOnly: true,
                    byteLimit: limits.maxHeadBytes,
                    countLimit: limits.maxHeaderCount,
                    tooLarge: HTTPParseError(kind: .headTooLarge, message: "trailer section too large"),
                    tooMany: HTTPParseError(kind: .tooManyHeaders, message: "too many trailer fields")
                ) else { return nil }
                start += line.lineStart
                finishMessage()
                return .end
            case .endPending:
                finishMessage()
                return .end
            }
        }
    }

    private mutating func finishMessage() {
        state = .head
        requestLine = RequestLineScan()
        line = LineCursor()
        head = HeadAccumulator()
        extensionBytes = 0
        decodedBodyBytes = 0
    }

    /// Whatever is buffered, up to `limit`: bodies stream instead of waiting to be complete.
    private mutating func takeBody(upTo limit: Int) -> [UInt8]? {
        let available = buffer.count - start
        guard available > 0 else { return nil }
        let n = min(available, limit)
        let bytes = Array(buffer[start..<(start + n)])
        start += n
        return bytes
    }

    private mutating func compact() {
        if start == 0 { return }
        if start == buffer.count {
            // A large body leaves a large capacity behind; idle keep-alive connections should not hold it.
            if buffer.capacity > 64 * 1024 {
                buffer = []
            } else {
                buffer.removeAll(keepingCapacity: true)
            }
            start = 0
        } else if start >= 4096 && start >= buffer.count / 2 {
            // Amortised O(1) per byte: we only move the live tail once the dead prefix is at least as large.
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }

    // MARK: - Head

    private mutating func parseHead() throws(HTTPParseError) -> RequestHead? {
        if requestLine.phase != .done {
            var scan = requestLine
            let base = start
            let count = buffer.count - start
            let limits = self.limits
            try buffer.withUnsafeBufferPointer { (p) throws(HTTPParseError) in
                try Self.scanRequestLine(p, base: base, count: count, &scan, limits)
            }
            requestLine = scan
            guard scan.phase == .done else { return nil }
            try finishRequestLine()
        }
        let limits = self.limits
        guard try parseFieldLines(
            storing: true,
            crlfOnly: false,
            byteLimit: limits.maxHeadBytes,
            countLimit: limits.maxHeaderCount,
            tooLarge: HTTPParseError(kind: .headTooLarge, message: "request head too large"),
            tooMany: HTTPParseError(kind: .tooManyHeaders, message: "too many header fields")
        ) else { return nil }
        return try finishHead()
    }

    private struct RequestLineScan: Sendable {
        enum Phase: Sendable { case start, leadingCR, method, target, version, versionCR, done }
        var phase = Phase.start
        /// Next byte to examine. The request line is walked byte by byte (it is short) so that the URI and head
        /// limits fire at the same byte whatever the segmentation.
        var pos = 0
        var methodStart = 0
        var methodEnd = 0
        var targetStart = 0
        var targetEnd = 0
        var versionStart = 0
        var versionEnd = 0
    }

    private static func scanRequestLine(
        _ p: UnsafeBufferPointer<UInt8>, base: Int, count: Int, _ s: inout RequestLineScan, _ limits: RequestLimits
    ) throws(HTTPParseError) {
        let maxHead = limits.maxHeadBytes
        let maxURI = limits.maxURIBytes
        var i = s.pos
        defer { s.pos = i }
        while i < count {
            if i >= maxHead { throw HTTPParseError(kind: .headTooLarge, message: "request head too large") }
            let b = p[base + i]
            switch s.phase {
            case .start:
                // RFC 9112 §2.2: one empty line before the request line is tolerated (clients that add CRLF
                // after a POST body). Only one, so a stream of CRLFs cannot keep the connection busy for free.
                if b == LF {
                    s.methodStart = i + 1
                    s.phase = .method
                } else if b == CR {
                    s.phase = .leadingCR
                } else {
                    s.methodStart = i
                    s.phase = .method
                    continue
                }
            case .leadingCR:
                guard b == LF else { throw .bad("bare CR in request line") }
                s.methodStart = i + 1
                s.phase = .method
            case .method:
                if b == SP {
                    if i == s.methodStart { throw .bad("request line must start with a method") }
                    s.methodEnd = i
                    s.targetStart = i + 1
                    s.phase = .target
                } else if !isTchar(b) {
                    throw .bad(b == CR || b == LF ? "empty or incomplete request line" : "invalid character in method")
                }
            case .target:
                if b > SP && b < 0x7F {
                    if i - s.targetStart >= maxURI {
                        throw HTTPParseError(kind: .uriTooLong, message: "request-target too long")
                    }
                } else if b == SP {
                    if i == s.targetStart { throw .bad("extra space in request line") }
                    s.targetEnd = i
                    s.versionStart = i + 1
                    s.phase = .version
                } else if b == CR || b == LF {
                    throw .bad("request line has no HTTP version")
                } else {
                    throw .bad("invalid character in request-target")
                }
            case .version:
                if b == CR {
                    s.versionEnd = i
                    s.phase = .versionCR
                } else if b == LF {
                    s.versionEnd = i
                    s.phase = .done
                    i += 1
                    return
                } else if b == SP {
                    throw .bad("extra space in request line")
                } else if i - s.versionStart >= 8 {
                    throw .bad("malformed HTTP version")
                }
            case .versionCR:
                guard b == LF else { throw .bad("bare CR in request line") }
                s.phase = .done
                i += 1
                return
            case .done:
                return
            }
            i += 1
        }
    }

    private mutating func finishRequestLine() throws(HTTPParseError) {
        let s = requestLine
        let base = start
        let parsed = buffer.withUnsafeBufferPointer { p in
            let method = String(decoding: UnsafeBufferPointer(rebasing: p[(base + s.methodStart)..<(base + s.methodEnd)]), as: UTF8.self)
            let target = String(decoding: UnsafeBufferPointer(rebasing: p[(base + s.targetStart)..<(base + s.targetEnd)]), as: UTF8.self)
            let version = Self.classifyVersion(p, base + s.versionStart, base + s.versionEnd)
            let firstTargetByte = p[base + s.targetStart]
            return (method, target, version, firstTargetByte)
        }
        switch parsed.2 {
        case .supported(let version): head.version = version
        case .unsupported: throw HTTPParseError(kind: .versionNotSupported, message: "HTTP version not supported")
        case .malformed: throw .bad("malformed HTTP version")
        }
        // RFC 9112 §3.2: origin-form for everything we serve, asterisk-form only for OPTIONS, and absolute-form
        // because every server must accept it (§3.2.2). Authority-form belongs to CONNECT, the only form
        // CONNECT may use (RFC 9110 §9.3.6); a relay is not a tunnel, so CONNECT is refused whatever its target.
        if parsed.0 == "CONNECT" { throw .bad("CONNECT is not supported") }
        var target = parsed.1
        if parsed.3 != 0x2F {
            if target == "*" {
                if parsed.0 != "OPTIONS" { throw .bad("asterisk-form request-target is only for OPTIONS") }
            } else if let originForm = try Self.originForm(ofAbsoluteForm: target) {
                target = originForm
            } else {
                throw .bad("request-target must start with '/'")
            }
        }
        head.method = parsed.0
        head.target = target
        line.lineStart = s.pos
        line.scanFrom = s.pos
    }

    /// The origin-form (path and query) of an absolute-form target, nil when `target` has no URI scheme at all.
    ///
    /// RFC 9112 §3.2.2: a server accepts absolute-form; its authority replaces Host for an origin server. The
    /// relay routes on the path and never lets a client pick where the request goes (the upstream comes from
    /// the route), so the authority is checked for syntax and dropped; what is left is exactly what an
    /// origin-form request for the same URI would carry (§3.2.1: an empty path is sent as "/").
    /// Only http and https (RFC 9110 §4.2, scheme case-insensitive); userinfo and an empty host are errors
    /// (§4.2.4, §4.2.1).
    private static func originForm(ofAbsoluteForm target: String) throws(HTTPParseError) -> String? {
        let u = Array(target.utf8)
        // RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then ":".
        guard let first = u.first, (asciiLower(first) &- 0x61) < 26 else { return nil }
        var i = 1
        while i < u.count, u[i] != COLON {
            let b = u[i]
            guard (asciiLower(b) &- 0x61) < 26 || (b &- 0x30) < 10 || b == 0x2B || b == 0x2D || b == 0x2E else { return nil }
            i += 1
        }
        guard i < u.count else { return nil }
        let scheme = String(decoding: u[..<i].map(asciiLower), as: UTF8.self)
        guard scheme == "http" || scheme == "https" else { throw .bad("request-target is neither a path nor an http(s) URI") }
        i += 1
        guard u.count - i >= 2, u[i] == 0x2F, u[i + 1] == 0x2F else { throw .bad("absolute-form request-target has no authority") }
        i += 2
        let authorityStart = i
        while i < u.count, u[i] != 0x2F, u[i] != 0x3F {
            if u[i] == 0x40 { throw .bad("userinfo in request-target") }
            guard isAuthorityByte(u[i]) else { throw .bad("invalid authority in request-target") }
            i += 1
        }
        guard i > authorityStart, u[authorityStart] != COLON else { throw .bad("absolute-form request-target has no host") }
        if i == u.count { return "/" }
        let rest = String(decoding: u[i...], as: UTF8.self)
        return u[i] == 0x3F ? "/" + rest : rest
    }

    private enum VersionClass { case supported(HTTPVersion), unsupported, malformed }

    /// RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive. Well-formed but other → 505.
    private static func classifyVersion(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> VersionClass {
        guard to - from == 8,
              p[from] == 0x48, p[from + 1] == 0x54, p[from + 2] == 0x54, p[from + 3] == 0x50, p[from + 4] == 0x2F,
              p[from + 6] == 0x2E
        else { return .malformed }
        let major = p[from + 5]
        let minor = p[from + 7]
        guard (0x30...0x39).contains(major), (0x30...0x39).contains(minor) else { return .malformed }
        if major == 0x31 && minor == 0x31 { return .supported(.http1_1) }
        if major == 0x31 && minor == 0x30 { return .supported(.http1_0) }
        return .unsupported
    }

    private struct LineCursor: Sendable {
        /// Start of the next unparsed line, relative to `start`.
        var lineStart = 0
        /// Where the search for that line's LF resumes, so drip-fed input is scanned once, not once per byte.
        var scanFrom = 0
        var fieldCount = 0
    }

    /// What the head's fields mean for framing and connection handling, gathered as the lines go by so the
    /// list is not searched again.
    private struct HeadAccumulator: Sendable {
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

    /// Reads field lines until the empty line (true) or until more bytes are needed (false).
    private mutating func parseFieldLines(
        storing: Bool, crlfOnly: Bool, byteLimit: Int, countLimit: Int, tooLarge: HTTPParseError, tooMany: HTTPParseError
    ) throws(HTTPParseError) -> Bool {
        while true {
            guard let (from, to) = try nextLine(crlfOnly: crlfOnly, byteLimit: byteLimit, tooLarge: tooLarge) else { return false }
            if from == to { return true }
            line.fieldCount += 1
            if line.fieldCount > countLimit { throw tooMany }
            let base = start
            let field = try buffer.withUnsafeBufferPointer { (p) throws(HTTPParseError) in
                try Self.scanFieldLine(p, base + from, base + to)
            }
            if storing { record(field) }
        }
    }

    /// The next complete line at `line.lineStart` (terminator excluded), or nil when its LF has not arrived.
    /// In the head a bare LF ends a line too (RFC 9112 §2.2 allows it for the start-line and fields; nginx does
    /// the same, and the relay re-serialises every field it forwards, so no bytes of the client's head reach the
    /// next hop). `crlfOnly` refuses it: chunked framing, trailers included, is where bare-LF readings differ
    /// between hops and bodies get smuggled, so there only CRLF ends a line (RFC 9112 §7.1).
    private mutating func nextLine(crlfOnly: Bool, byteLimit: Int, tooLarge: HTTPParseError) throws(HTTPParseError) -> (Int, Int)? {
        let base = start
        let available = buffer.count - start
        let from = line.scanFrom
        let found = buffer.withUnsafeBufferPointer { p in findByte(LF, in: p, from: base + from, to: base + available) }
        guard let lfAbsolute = found else {
            // Checked on partial input so a client trickling an endless head is cut off at the limit.
            if available > byteLimit { throw tooLarge }
            line.scanFrom = available
            return nil
        }
        let lf = lfAbsolute - base
        if lf >= byteLimit { throw tooLarge }
        let lineFrom = line.lineStart
        var lineTo = lf
        if lineTo > lineFrom && buffer[base + lineTo - 1] == CR {
            lineTo -= 1
        } else if crlfOnly {
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
        case 14:
            guard equalsLowercase(p, n0, n1, "content-length") else { return .other }
            // RFC 9110 §8.6: 1*DIGIT. Lists ("5, 5"), signs and spaces are refused, not reconciled; 18 digits
            // cannot overflow Int, and nothing legitimate comes near that size.
            guard v1 > v0, v1 - v0 <= 18 else { return .contentLength(nil) }
            var value = 0
            for i in v0..<v1 {
                let d = p[i] &- 0x30
                guard d < 10 else { return .contentLength(nil) }
                value = value * 10 + Int(d)
            }
            return .contentLength(value)
        case 17:
            guard equalsLowercase(p, n0, n1, "transfer-encoding") else { return .other }
            return .transferEncoding(chunked: equalsLowercase(p, v0, v1, "chunked"))
        default:
            return .other
        }
    }

    /// RFC 9112 §6.1 and §6.3: exactly one way to find the body's end, or the request is refused.
    private mutating func finishHead() throws(HTTPParseError) -> RequestHead {
        let h = head
        // RFC 9112 §3.2: an HTTP/1.1 request without Host, with more than one, or with an invalid one is a 400.
        // 1.0 predates Host, so it may come without one.
        if h.hostCount > 1 { throw .bad("multiple Host fields") }
        if h.hostCount == 0 && h.version == .http1_1 { throw .bad("missing Host field") }
        if !h.hostIsValid { throw .bad("invalid Host field") }
        let framing: BodyFraming
        if h.transferEncodingCount > 0 {
            if h.version == .http1_0 { throw .bad("Transfer-Encoding in an HTTP/1.0 request") }
            if h.contentLengthCount > 0 { throw .bad("both Content-Length and Transfer-Encoding") }
            if h.transferEncodingCount > 1 || !h.transferEncodingIsChunked {
                throw .bad("unsupported Transfer-Encoding")
            }
            framing = .chunked
        } else if h.contentLengthCount > 0 {
            if h.contentLengthCount > 1 { throw .bad("multiple Content-Length fields") }
            guard let length = h.contentLength else { throw .bad("invalid Content-Length") }
            if length > limits.maxBodyBytes { throw HTTPParseError(kind: .bodyTooLarge, message: "request body too large") }
            framing = .contentLength(length)
        } else {
            framing = .none
        }
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

    // MARK: - Chunked body (RFC 9112 §7.1)

    private mutating func parseChunkSizeLine() throws(HTTPParseError) -> Bool {
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
    private mutating func consumeChunkDataEnd() throws(HTTPParseError) -> Bool {
        let available = buffer.count - start
        guard available > 0 else { return false }
        guard buffer[start] == CR else { throw .bad("missing CRLF after chunk data") }
        guard available > 1 else { return false }
        guard buffer[start + 1] == LF else { throw .bad("missing CRLF after chunk data") }
        start += 2
        return true
    }
}
