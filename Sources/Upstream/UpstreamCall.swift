import HTTP1

/// Receives one transfer's events, on its event loop's queue.
/// `didReceiveHead` comes at most once, before any body; `didComplete` is terminal and exclusive: after it, or
/// after `Transfer.cancel()`, nothing more is delivered. A cancelled transfer never calls `didComplete`.
public protocol TransferDelegate: AnyObject {
    func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders)
    /// The bytes exactly as received. Return false to refuse them for now: the transfer pauses, keeps them, and
    /// offers them again after `resumeReceiving()`.
    func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool
    func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>)
}

/// One call to a provider as its caller controls it. `Transfer` (curl) is the real one; tests drive a fake.
/// Called on the loop queue that started the call.
public protocol UpstreamCall: AnyObject {
    /// Stops the call now (its connection is closed or its stream reset); no delegate call follows. Idempotent.
    func cancel()
    /// The delegate can take body bytes again (it refused some earlier).
    func resumeReceiving()
}

/// What an exchange needs of the upstream side: a way to start calls. `CurlDriver` is the real one.
public protocol UpstreamClient: AnyObject {
    /// Starts `request`; `delegate` hears from the call on this loop, beginning on a later turn of the loop.
    func call(_ request: UpstreamRequest, delegate: any TransferDelegate) -> any UpstreamCall
}
