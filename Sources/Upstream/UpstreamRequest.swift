import HTTP1

/// What to send upstream: already rewritten (client credentials dropped, key injected, hop-by-hop stripped).
public struct UpstreamRequest: Sendable {
    public var url: String
    public var method: String
    public var headers: HTTPHeaders
    /// The request body's length when known; nil when the body's size is unknown (sent chunked).
    public var bodyLength: Int?
    public var hasBody: Bool
    public var connectTimeoutSeconds: Double
    /// The HTTP version offered to an https:// provider (ALPN); http:// always speaks HTTP/1.1.
    public var httpVersion: UpstreamHTTPVersion = .http1_1
    /// A PEM bundle of certificate authorities to trust instead of the system's (nil: the system's).
    public var caFile: String?

    public init(url: String, method: String, headers: HTTPHeaders, hasBody: Bool, bodyLength: Int?, connectTimeoutSeconds: Double = 10) {
        self.url = url
        self.method = method
        self.headers = headers
        self.hasBody = hasBody
        self.bodyLength = bodyLength
        self.connectTimeoutSeconds = connectTimeoutSeconds
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
    /// The upstream sent something that is not HTTP, or closed or reset the connection mid-response.
    case brokenResponse(String)
    /// Any other transfer error.
    case other(String)

    /// A stable label for metrics.
    public var kind: String {
        switch self {
        case .connectFailed: "connect_failed"
        case .connectTimeout: "connect_timeout"
        case .brokenResponse: "broken_response"
        case .other: "other"
        }
    }

    public var summary: String {
        switch self {
        case .connectFailed(let m): "upstream connection failed: \(m)"
        case .connectTimeout: "upstream connect timed out"
        case .brokenResponse(let m): "upstream response broken: \(m)"
        case .other(let m): "upstream transfer failed: \(m)"
        }
    }
}

/// What the request-body source had to give.
public enum BodyRead: Equatable, Sendable {
    /// This many bytes were copied into the buffer (more than zero).
    case bytes(Int)
    /// Nothing buffered yet; the transfer pauses its upload until `resumeSending()`.
    case wait
    /// The body is complete.
    case end
}

/// Receives one transfer's events, on its event loop's queue.
/// `didReceiveHead` comes at most once, before any body; `didComplete` is terminal and exclusive: after it, or
/// after `Transfer.cancel()`, nothing more is delivered. A cancelled transfer never calls `didComplete`.
public protocol TransferDelegate: AnyObject {
    func transfer(_ transfer: Transfer, didReceiveHead status: Int, headers: HTTPHeaders)
    /// The bytes exactly as received. Return false to refuse them for now: the transfer pauses, keeps them, and
    /// offers them again after `resumeReceiving()`.
    func transfer(_ transfer: Transfer, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool
    func transfer(_ transfer: Transfer, readBodyInto buffer: UnsafeMutableRawBufferPointer) -> BodyRead
    /// curl wants to send the body again from its start (it retries a request whose reused connection turned
    /// out to be closed by the provider). Return false if the start is no longer available.
    func transferRewindBody(_ transfer: Transfer) -> Bool
    func transfer(_ transfer: Transfer, didCompleteWith result: Result<Void, UpstreamFailure>)
}
