/// The protocol version of a message. Only HTTP/1.0 and HTTP/1.1 are spoken (RFC 9112 §2.3); anything else is
/// refused by the parser before a value of this type exists.
public enum HTTPVersion: Sendable, Equatable {
    case http1_0, http1_1
}

/// How a request's body is delimited on the wire, decided once from its head (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    /// No body: a request without Content-Length or Transfer-Encoding has none (RFC 9112 §6.3 rule 7).
    case none
    case contentLength(Int)
    case chunked
}

/// A parsed, validated request head: what the relay routes and rewrites on.
/// Derived fields (`framing`, `keepAlive`, `expectsContinue`) follow RFC 9112 §6.3, §9.3 and RFC 9110 §10.1.1.
public struct RequestHead: Sendable, Equatable {
    public var method: String
    /// The request-target in origin-form (RFC 9112 §3.2.1), e.g. "/v1/chat/completions?a=b": as sent, or for an
    /// absolute-form target ("http://host/v1/x?a=b", §3.2.2) its path and query, the authority dropped, so routing,
    /// rewriting and logs all see the path that is served. "*" for OPTIONS.
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var framing: BodyFraming
    /// 1.1: true unless `Connection: close`; 1.0: only with `Connection: keep-alive` (RFC 9112 §9.3).
    public var keepAlive: Bool
    /// `Expect: 100-continue` on a 1.1 request; RFC 9110 §10.1.1 says to ignore it on 1.0.
    public var expectsContinue: Bool

    public init(
        method: String,
        target: String,
        version: HTTPVersion = .http1_1,
        headers: HTTPHeaders = HTTPHeaders(),
        framing: BodyFraming = .none,
        keepAlive: Bool = true,
        expectsContinue: Bool = false
    ) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
    }

    /// The target up to the first '?'.
    public var path: String {
        guard let q = queryMark else { return target }
        return String(target[..<q])
    }

    /// The text after the first '?', or nil when there is no '?' (an empty query "" is kept distinct from none).
    public var query: String? {
        guard let q = queryMark else { return nil }
        return String(target[target.utf8.index(after: q)...])
    }

    /// The first '?' of the target, found on its bytes (the generic search through `utf8` cost about 650
    /// instructions a request for a chat path).
    private var queryMark: String.Index? {
        var bytes = target
        let offset = bytes.withUTF8 { utf8 -> Int? in
            var i = 0
            while i < utf8.count {
                if utf8[i] == 0x3F { return i }
                i += 1
            }
            return nil
        }
        return offset.map { target.utf8.index(target.utf8.startIndex, offsetBy: $0) }
    }
}

/// Upper bounds that keep a hostile or broken client from making the parser buffer without end.
/// RFC 9112 §2.3 and §3 allow servers to impose such limits; the statuses come from RFC 9110 §15 and RFC 6585 §5.
public struct RequestLimits: Sendable, Equatable {
    /// Request line + header lines, terminators included. Chunked trailers get a budget of the same size.
    public var maxHeadBytes: Int
    /// Header field lines; chunked trailers get a budget of the same size.
    public var maxHeaderCount: Int
    /// Request-target bytes.
    public var maxURIBytes: Int
    /// Decoded body bytes (Content-Length or the sum of chunk sizes).
    public var maxBodyBytes: Int

    public init(
        maxHeadBytes: Int = 32 * 1024,
        maxHeaderCount: Int = 100,
        maxURIBytes: Int = 8 * 1024,
        maxBodyBytes: Int = 1 << 20
    ) {
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxURIBytes = maxURIBytes
        self.maxBodyBytes = maxBodyBytes
    }
}

/// Why a request was refused, mapped to the status the server should answer with before closing.
/// Statuses per RFC 9110 §15.5 (400, 413, 414), §15.6.6 (505) and RFC 6585 §5 (431).
public struct HTTPParseError: Error, Sendable, Equatable {
    /// Which limit or rule was broken; `status` derives the response code from it (RFC 9110 §15, RFC 6585 §5).
    public enum Kind: Sendable, Equatable {
        case headTooLarge, tooManyHeaders   // 431
        case uriTooLong                     // 414
        case bodyTooLarge                   // 413
        case badRequest                     // 400
        case versionNotSupported            // 505
    }

    public var kind: Kind
    /// Short and fixed text, safe to show a client: it never echoes header values or body bytes.
    public var message: String

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var status: Int {
        switch kind {
        case .headTooLarge, .tooManyHeaders: return 431
        case .uriTooLong: return 414
        case .bodyTooLarge: return 413
        case .badRequest: return 400
        case .versionNotSupported: return 505
        }
    }

    static func bad(_ message: String) -> HTTPParseError {
        HTTPParseError(kind: .badRequest, message: message)
    }
}

/// What the parser has recognised so far, in wire order. A message is `.head`, zero or more `.body`, then `.end`.
/// Body framing follows RFC 9112 §6 and §7.1; chunked bodies arrive decoded.
public enum RequestEvent: Sendable, Equatable {
    case head(RequestHead)
    /// Body bytes as they become available (decoded payload for chunked); never empty.
    case body([UInt8])
    /// Message complete; the next call starts parsing the next pipelined request.
    case end
}
