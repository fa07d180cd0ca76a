import HTTP1
import Transport

/// What an exchange needs of the client side of its connection: send a head, body deliveries and an end (or an
/// abort), or one complete error answer. `ServerConnection` is the real one; a test can stand in a fake, so the
/// exchange logic is tested without sockets.
///
/// Called on `loop.queue` only. Calls after the response ended (`finish`, `abort`, `respond`), or after the client
/// left, are ignored; `sendHead` and `respond` are exclusive (one response per request).
public protocol ResponseWriter: AnyObject {
    /// The loop that owns the connection, as its scheduler: the exchange's timers, store answers and
    /// confinement checks go through it (a test gives a `ManualScheduler`).
    var scheduler: any LoopScheduler { get }
    /// The client's address as logs show it (limits count on `client.limitKey`).
    var clientAddress: String { get }
    /// The client as resolved behind trusted proxies (what the upstream's forwarding headers say).
    var client: ClientAddress { get }
    /// The socket's peer (a load balancer's address when one is in front).
    var peerAddress: String { get }
    /// Response bytes accepted but not yet taken by the kernel (the backpressure signal).
    var pendingByteCount: Int { get }
    /// Whether the pending bytes reached the connection's high-water mark: the upstream must pause until
    /// `RequestResponder.clientDrained()`. The connection's marks are the only ones.
    var isAboveHighWater: Bool { get }
    func sendHead(_ head: ResponseHead, mode: ResponseBodyMode)
    /// One body delivery, framed as `mode` says; false when the client is gone.
    @discardableResult
    func sendBody(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The response is complete; `keepAlive` asks to keep the connection for another request.
    func finish(keepAlive: Bool)
    /// Ends the response without a clean end (no terminal chunk): the client sees a truncated body.
    func abort()
    /// A complete JSON error answer.
    func respond(error: ErrorResponse, requestID: String?, keepAlive: Bool)
    /// A complete answer with a body (the built-in endpoints' JSON).
    func respond(status: Int, headers: HTTPHeaders, body: [UInt8], keepAlive: Bool)
}
