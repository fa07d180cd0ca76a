// The request line (RFC 9112 §3): method, request-target in one of the forms a relay accepts, HTTP version.

extension RequestParser {
    /// Scans the request line as far as the buffered bytes go: true once it is complete and checked, false when
    /// more bytes are needed. Resumes where the previous call stopped.
    mutating func parseRequestLine() throws(HTTPParseError) -> Bool {
        if requestLine.phase == .done { return true }
        var scan = requestLine
        let base = start
        let count = buffer.count - start
        let limits = self.limits
        try buffer.withUnsafeBufferPointer { (p) throws(HTTPParseError) in
            try Self.scanRequestLine(p, base: base, count: count, &scan, limits)
        }
        requestLine = scan
        guard scan.phase == .done else { return false }
        try finishRequestLine()
        return true
    }

    /// How far the request line has been scanned; offsets are relative to `start`.
    struct RequestLineScan: Sendable {
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

    /// RFC 9112 §3: request-line = method SP request-target SP HTTP-version, scanned from `s.pos` to the end of
    /// the buffered bytes. One loop over the phases, so the head and URI limits are checked at every byte.
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
}
