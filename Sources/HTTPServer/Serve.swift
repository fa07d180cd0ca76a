import HTTP1
import Support
import Transport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a listener's connections are run.
public struct ServerSettings: Sendable {
    public var limits: RequestLimits
    public var timeouts: ConnectionDeadlines.Settings
    /// A connection's pending output above which the client counts as not reading (its write-stall clock starts,
    /// and `pendingByteCount` tells producers to pause); `clientDrained` follows at `lowWaterBytes`.
    public var highWaterBytes: Int
    public var lowWaterBytes: Int
    /// Whose `X-Forwarded-For` to believe, and (with `proxyProtocol`) who may connect at all.
    public var clientAddresses: ClientAddressResolver
    /// Every connection starts with a PROXY protocol header (v1 or v2) naming the client; only peers that
    /// `clientAddresses` trusts may connect.
    public var proxyProtocol: Bool

    public init(limits: RequestLimits = RequestLimits(), timeouts: ConnectionDeadlines.Settings,
                highWaterBytes: Int = 256 * 1024, lowWaterBytes: Int = 64 * 1024,
                clientAddresses: ClientAddressResolver = ClientAddressResolver(), proxyProtocol: Bool = false) {
        self.limits = limits
        self.timeouts = timeouts
        self.highWaterBytes = highWaterBytes
        self.lowWaterBytes = lowWaterBytes
        self.clientAddresses = clientAddresses
        self.proxyProtocol = proxyProtocol
    }
}

/// What to do with a freshly accepted socket, before any byte is read.
public enum Admission: Sendable {
    case accept
    /// Answer with this error (one non-blocking send, best effort), then close. Existing connections are not touched.
    case refuse(ErrorResponse)
}

/// Binds `host:port` and serves HTTP/1.1 on it: each accepted socket becomes a `ServerConnection` on the loop that
/// accepted it, answering through `handler`. Call `start()` on the returned listener to begin accepting.
///
/// On a `proxyProtocol` listener a peer that is not a trusted balancer is closed at once (only a trusted balancer
/// may say who the client is; anyone else could name any address). Otherwise `admit` decides (a connection limit,
/// say). `onOpen` sees each connection before it reads its first byte, `onClose` once when it has closed; both on
/// the connection's loop, so a per-loop registry of live connections needs no lock.
public func serve(
    host: String, port: Int, group: EventLoopGroup, settings: ServerSettings, handler: any RequestHandler, logger: Logger,
    admit: @escaping @Sendable (_ peer: String, _ loop: EventLoop) -> Admission = { _, _ in .accept },
    onOpen: @escaping @Sendable (ServerConnection) -> Void = { _ in },
    onClose: @escaping @Sendable (ServerConnection) -> Void = { _ in }
) throws -> Listener {
    try Listener(host: host, port: port, group: group, logger: logger) { fd, address, loop in
        if settings.proxyProtocol && !settings.clientAddresses.isTrusted(address) {
            handler.untrustedProxyPeerRefused(address)
            Syscall.close(fd)
            return
        }
        if case .refuse(let error) = admit(address, loop) {
            refuse(fd: fd, with: error)
            return
        }
        let connection = Connection(fd: fd, loop: loop, peerAddress: address,
                                    highWaterMark: settings.highWaterBytes, lowWaterMark: settings.lowWaterBytes)
        let server = ServerConnection(connection: connection, handler: handler, limits: settings.limits,
                                      timeouts: settings.timeouts, logger: logger, clientAddresses: settings.clientAddresses,
                                      proxyProtocol: settings.proxyProtocol, onClose: onClose)
        onOpen(server)
        connection.delegate = server
        connection.start()
        server.start()
    }
}

/// Writes `error`'s complete answer with one non-blocking send (best effort: a full socket buffer drops it) and
/// closes the socket.
func refuse(fd: Int32, with error: ErrorResponse) {
    let bytes = error.serialized()
    _ = bytes.withUnsafeBytes { raw in
        var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)
        return withUnsafeMutablePointer(to: &iov) { Syscall.writev(fd, UnsafeMutableBufferPointer(start: $0, count: 1)) }
    }
    Syscall.close(fd)
}
