import Dispatch
import Transport

/// Where `RedisClient` turns a host name into an address. Asked only for a name, never for an address literal
/// (the client reads that one on its loop: `SocketAddress(numericHost:port:)`), and by one client at most once at
/// a time: a connect attempt waits for its answer.
public protocol HostResolver: Sendable {
    /// Starts resolving `host:port`; `done` runs once, on any thread.
    func resolve(host: String, port: Int, _ done: @escaping @Sendable (Result<SocketAddress, ResolveError>) -> Void)
}

/// The system resolver (`getaddrinfo`, which blocks as long as DNS takes) on a Dispatch worker, off the loop. The
/// worker can be late: on Linux the global queues get a thread per core, and a busy process gets no other for up
/// to a second (libdispatch's pool monitor looks once a second).
public struct SystemHostResolver: HostResolver {
    public init() {}

    public func resolve(host: String, port: Int,
                        _ done: @escaping @Sendable (Result<SocketAddress, ResolveError>) -> Void) {
        DispatchQueue.global().async { done(SocketAddress.resolve(host: host, port: port)) }
    }
}
