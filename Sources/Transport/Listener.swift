#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Support

public struct ListenerError: Error, CustomStringConvertible {
    public var description: String
}

/// A listening TCP socket, watched by every event loop's poller: the loop that wins the accept serves the
/// connection, and gets the new descriptor (non-blocking, TCP_NODELAY set) in `onAccept`, on its own queue.
public final class Listener: Sendable {
    // Invariant: `fd` and `port` are immutable after init; the acceptors are behind a lock, and each one's
    // mutable state is touched on its loop's queue only.
    public let fd: Int32
    public let port: Int
    private let group: EventLoopGroup
    private let onAccept: @Sendable (Int32, String, EventLoop) -> Void
    private let logger: Logger

    /// Binds `host:port` (port 0 picks a free one; read it back from `port`).
    public init(host: String, port: Int, group: EventLoopGroup, logger: Logger, backlog: Int32 = 4096,
                onAccept: @escaping @Sendable (Int32, String, EventLoop) -> Void) throws {
        var hints = Syscall.streamAddressHints(flags: AI_PASSIVE | AI_NUMERICSERV)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let info = result else {
            throw ListenerError(description: "cannot resolve listen address \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        let fd: Int32
        switch Syscall.listeningSocket(info.pointee, backlog: backlog) {
        case .success(let socket): fd = socket
        case .failure(let error) where error.step == "bind":
            throw ListenerError(description: "cannot listen on \(host):\(port): \(error.message)")
        case .failure(let error):
            throw ListenerError(description: "\(error.step): \(error.message)")
        }
        self.fd = fd
        self.port = Listener.port(of: Syscall.localAddress(fd))
        self.group = group
        self.onAccept = onAccept
        self.logger = logger
    }

    /// Starts accepting: the listening socket is watched by every event loop's poller, so a connection is
    /// accepted by the loop that will serve it (no hand-over between threads, no Dispatch source of its own).
    /// With several loops every one is woken for a new connection and the first to accept it wins; the others
    /// see EAGAIN.
    public func start() {
        let acceptors = group.loops.map { AcceptSource(listener: self, loop: $0) }
        for acceptor in acceptors {
            acceptor.loop.queue.sync { acceptor.loop.poller.watch(fd, read: true, write: false, handler: acceptor) }
        }
        state.withLock { $0 = acceptors }
    }

    /// Stops accepting and closes the listening socket. Call it from outside the event loops: it waits for each
    /// loop to drop the socket from its poller.
    public func stop() {
        let acceptors = state.withLock { s -> [AcceptSource] in
            let all = s
            s = []
            return all
        }
        guard !acceptors.isEmpty else { return }
        for acceptor in acceptors {
            acceptor.loop.queue.sync {
                acceptor.stopped = true
                acceptor.loop.poller.remove(fd)
            }
        }
        Syscall.close(fd)
    }

    private let state = Locked<[AcceptSource]>([])

    /// One loop's watch on the listening socket. Touched on that loop's queue only.
    final class AcceptSource: PollerHandler, @unchecked Sendable {
        // Invariant: `paused` and `stopped` are touched on `loop.queue` only.
        unowned let listener: Listener
        let loop: EventLoop
        var paused = false
        var stopped = false
        init(listener: Listener, loop: EventLoop) {
            self.listener = listener
            self.loop = loop
        }
        /// New connections before the batch's relayed events: see `PollerHandler`.
        var pollerHandlesFirst: Bool { true }
        func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
            if readable && !stopped { listener.acceptAll(self) }
        }
    }

    /// The most connections one readiness of the listening socket accepts; the rest stay in the kernel's queue
    /// and are taken at the poller's next look at the first class (the socket stays ready: level-triggered).
    /// One `accept4` alone took 140 to 170 µs in S2's ramp here (strace -T), set-up of the connection aside: a
    /// burst of 64 in one call would hold the running streams for 10 ms or more. nginx takes one per event.
    public static let acceptsPerReadiness = 4

    fileprivate func acceptAll(_ accept: AcceptSource) {
        for _ in 0..<Self.acceptsPerReadiness {
            var storage = sockaddr_storage()
            switch Syscall.accept(fd, peer: &storage) {
            case .accepted(let client):
                onAccept(client, Listener.address(of: storage), accept.loop)
            case .wouldBlock, .failed:
                return
            case .exhausted(let err):
                // Out of descriptors: stop accepting for a moment instead of spinning on a readable listener.
                logger.error("accept failed: out of file descriptors; pausing accepts for 100 ms", [("errno", .int(Int(err)))])
                if !accept.paused {
                    accept.paused = true
                    accept.loop.poller.update(fd, read: false, write: false)
                    accept.loop.schedule(afterSeconds: 0.1) { [accept, fd] in
                        guard accept.paused, !accept.stopped else { return }
                        accept.paused = false
                        accept.loop.poller.update(fd, read: true, write: false)
                    }
                }
                return
            }
        }
    }

    static func port(of storage: sockaddr_storage) -> Int {
        var storage = storage
        return withUnsafePointer(to: &storage) { pointer in
            if Int32(pointer.pointee.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// The peer's IP address as text ("127.0.0.1", "::1").
    public static func address(of storage: sockaddr_storage) -> String {
        var storage = storage
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return withUnsafePointer(to: &storage) { pointer -> String in
            if Int32(pointer.pointee.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var addr = sin6.pointee.sin6_addr
                    inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count))
                    return cString(buffer)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var addr = sin.pointee.sin_addr
                inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count))
                return cString(buffer)
            }
        }
    }
}

func cString(_ buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
