/// What to send upstream: already rewritten (client credentials dropped, key injected, hop-by-hop stripped).
public struct UpstreamRequest: Sendable {
    public var url: String
    public var method: String
    public var headers: HTTPHeaders
    /// The whole request body, read from the client before the call starts (so its length is always known and
    /// a slow client never holds a provider connection); nil for a request without one.
    public var body: [UInt8]?
    public var connectTimeoutSeconds: Double
    /// The HTTP version offered to an https:// provider (ALPN); http:// always speaks HTTP/1.1.
    public var httpVersion: UpstreamHTTPVersion = .http1_1
    /// A PEM bundle of certificate authorities to trust instead of the system's (nil: the system's).
    public var caFile: String?
    /// A pooled connection idle longer than this is not reused (`CURLOPT_MAXAGE_CONN`): it must be closed by us
    /// before the provider's keep-alive limit closes it under a request.
    public var idleConnectionSeconds: Int

    public init(url: String, method: String, headers: HTTPHeaders, body: [UInt8]? = nil,
                connectTimeoutSeconds: Double = 10, idleConnectionSeconds: Int = 30) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.idleConnectionSeconds = idleConnectionSeconds
    }

    /// Whether the request may be sent a second time after a connection died under it: the safe methods (RFC 9110
    /// §9.2.1) only. Go's `http.Transport` also takes a request with an `Idempotency-Key` for replayable, trusting
    /// the server to run it once; LLM providers do not deduplicate inference calls on it, and the header is the
    /// app's to send, so here it would let a client make its own POSTs be sent, and billed, twice while the
    /// relay counts one. A chat completion is never replayable: a second send is a second bill.
    public var isReplayable: Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE": return true
        default: return false
        }
    }
}

/// Which HTTP version the relay speaks to a provider. Both keep the cancel promise: on HTTP/1.1 a cancelled
/// transfer's connection is closed (as nginx does); on HTTP/2 the stream is reset, and its RST_STREAM is pushed
/// onto the wire at once (see `CurlDriver.remove`).
public enum UpstreamHTTPVersion: String, Sendable, CaseIterable {
    case http1_1 = "1.1"
    case http2 = "2"
}

/// Why an upstream transfer failed, in the terms the relay maps to a status (before the head) or an abort (after).
public enum UpstreamFailure: Error, Equatable, Sendable {
    /// DNS failure, connection refused, TLS handshake failure.
    case connectFailed(String)
    /// TCP + TLS did not complete within the connect timeout.
    case connectTimeout
    /// The provider closed or reset the connection before any byte of an answer, after the request may have
    /// reached it. Never retried unless the request is replayable: the provider may be processing it.
    case connectionReset(String)
    /// The upstream sent something that is not HTTP, or closed or reset the connection mid-response.
    case brokenResponse(String)
    /// Any other transfer error.
    case other(String)

    /// A stable label for metrics.
    public var kind: String {
        switch self {
        case .connectFailed: "connect_failed"
        case .connectTimeout: "connect_timeout"
        case .connectionReset: "connection_reset"
        case .brokenResponse: "broken_response"
        case .other: "other"
        }
    }

    public var summary: String {
        switch self {
        case .connectFailed(let m): "upstream connection failed: \(m)"
        case .connectTimeout: "upstream connect timed out"
        case .connectionReset(let m): "upstream closed the connection before answering: \(m)"
        case .brokenResponse(let m): "upstream response broken: \(m)"
        case .other(let m): "upstream transfer failed: \(m)"
        }
    }
}
