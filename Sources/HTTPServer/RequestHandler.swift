import HTTP1

/// Answers one request: the handler's side of an exchange. Called on the connection's loop only.
/// `clientClosed` is terminal; after it nothing is called and writes are ignored.
public protocol RequestResponder: AnyObject {
    func requestBody(_ bytes: [UInt8])
    func requestEnd()
    func clientClosed()
    /// The client's pending output fell to the low-water mark after having reached the high-water mark.
    func clientDrained()
}

/// Decides what to do with each request head. Called on the connection's loop.
public protocol RequestHandler: Sendable {
    /// Returns the responder that will see the body and answer, or nil if the request was already answered
    /// through `writer` (an error, say).
    func handle(_ head: RequestHead, writer: any ResponseWriter) -> (any RequestResponder)?
    /// The connection itself answered an error (malformed request, timeout): for logs and metrics.
    func connectionRejected(_ error: ErrorResponse, writer: any ResponseWriter)
    /// A listener that requires a PROXY protocol header got none, or a malformed one; the connection is closed.
    func proxyHeaderRejected(_ reason: String, writer: any ResponseWriter)
    /// A listener that requires a PROXY protocol header was reached by a peer that is not a trusted balancer; the
    /// socket was closed before any byte was read. Called on the loop that accepted it.
    func untrustedProxyPeerRefused(_ peer: String)
}

extension RequestHandler {
    public func connectionRejected(_ error: ErrorResponse, writer: any ResponseWriter) {}
    public func proxyHeaderRejected(_ reason: String, writer: any ResponseWriter) {}
    public func untrustedProxyPeerRefused(_ peer: String) {}
}
