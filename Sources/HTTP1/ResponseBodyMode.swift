/// How the response body is framed towards the client.
public enum ResponseBodyMode: Equatable, Sendable {
    /// No body (HEAD, 204, 304).
    case none
    /// The upstream's Content-Length is kept and bytes pass as they are.
    case contentLength(Int)
    /// HTTP/1.1 chunked: each upstream delivery becomes one chunk, written with one syscall.
    case chunked
    /// HTTP/1.0 client and no length: bytes pass as they are, the connection's close ends the body.
    case closeDelimited
}
