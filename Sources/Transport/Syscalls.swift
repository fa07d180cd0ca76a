import CSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a non-blocking socket call came to. Every socket and poller call goes through `Syscall`, which retries
/// EINTR, maps EAGAIN/EWOULDBLOCK to `.wouldBlock`, and maps the errors that mean "the peer is gone" (EPIPE,
/// ECONNRESET, ENOTCONN, ETIMEDOUT) to `.peerGone`, so no caller crashes on a vanished client.
public enum IOResult: Equatable, Sendable {
    case done(Int)
    case wouldBlock
    case endOfFile
    case peerGone(errno: Int32)
    case failed(errno: Int32)
}

public enum Syscall {
    #if canImport(Glibc)
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    static let sendFlags: Int32 = 0
    #endif

    @inline(__always)
    static func classify(_ err: Int32) -> IOResult {
        switch err {
        case EAGAIN, EWOULDBLOCK: return .wouldBlock
        case EPIPE, ECONNRESET, ENOTCONN, ETIMEDOUT, ECONNABORTED: return .peerGone(errno: err)
        default: return .failed(errno: err)
        }
    }

    public static func recv(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        while true {
            let n = Glibc_recv(fd, buffer.baseAddress, buffer.count, 0)
            if n > 0 { return .done(n) }
            if n == 0 { return .endOfFile }
            let err = errno
            if err == EINTR { continue }
            return classify(err)
        }
    }

    /// Gathers several buffers into one syscall, so a chunk's size line, payload and CRLF leave together
    /// (separate writes meet Nagle's algorithm on the client's delayed ACK: up to 40 ms).
    public static func writev(_ fd: Int32, _ iov: UnsafeMutableBufferPointer<iovec>) -> IOResult {
        while true {
            #if canImport(Glibc)
            var message = msghdr()
            message.msg_iov = iov.baseAddress
            message.msg_iovlen = iov.count
            let n = Glibc.sendmsg(fd, &message, sendFlags)
            #else
            let n = Darwin.writev(fd, iov.baseAddress, Int32(iov.count))
            #endif
            if n >= 0 { return .done(n) }
            let err = errno
            if err == EINTR { continue }
            return classify(err)
        }
    }

    /// A bound, listening, non-blocking TCP socket for one `getaddrinfo` result, with SO_REUSEADDR (a restart
    /// must not wait for TIME_WAIT). On failure the descriptor is closed and the step and errno are returned.
    public static func listeningSocket(_ info: addrinfo, backlog: Int32) -> Result<Int32, SocketSetupError> {
        let fd = socket(info.ai_family, info.ai_socktype, info.ai_protocol)
        guard fd >= 0 else { return .failure(SocketSetupError(step: "socket", errno: errno)) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.ai_addr, info.ai_addrlen) == 0 else {
            let err = errno
            close(fd)
            return .failure(SocketSetupError(step: "bind", errno: err))
        }
        guard listen(fd, backlog) == 0 else {
            let err = errno
            close(fd)
            return .failure(SocketSetupError(step: "listen", errno: err))
        }
        setNonBlocking(fd)
        return .success(fd)
    }

    /// What `accept` came to.
    public enum AcceptResult: Equatable, Sendable {
        case accepted(Int32)
        /// Nothing (more) to accept now.
        case wouldBlock
        /// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): back off instead of spinning.
        case exhausted(errno: Int32)
        case failed(errno: Int32)
    }

    /// Accepts one connection, its peer address in `storage`; EINTR is retried and ECONNABORTED (a client that
    /// left while queued) skipped. The new socket is non-blocking with TCP_NODELAY (and no SIGPIPE on Darwin).
    public static func accept(_ fd: Int32, peer storage: inout sockaddr_storage) -> AcceptResult {
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc_accept(fd, $0, &length) }
            }
            if client >= 0 {
                #if canImport(Darwin)
                setNonBlocking(client)   // on Linux accept4 made it so: two fcntl calls less per connection
                #endif
                setNoDelay(client)
                #if canImport(Darwin)
                var one: Int32 = 1
                _ = setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
                #endif
                return .accepted(client)
            }
            let err = errno
            switch err {
            case EINTR, ECONNABORTED: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case EMFILE, ENFILE, ENOBUFS, ENOMEM: return .exhausted(errno: err)
            default: return .failed(errno: err)
            }
        }
    }

    /// Half-closes the sending side (FIN after what is queued); errors mean the peer is gone, which is fine.
    public static func shutdownWrite(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    #if canImport(Glibc)
    /// epoll_ctl; returns 0 or the errno (the caller decides: ENOENT/EEXIST mean its bookkeeping was stale).
    static func epollControl(_ epfd: Int32, _ op: Int32, _ fd: Int32, events: UInt32) -> Int32 {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        return epoll_ctl(epfd, op, fd, &event) == 0 ? 0 : errno
    }

    /// epoll_wait without blocking (or up to `timeoutMs`, -1: until something is ready); EINTR is retried.
    /// Returns how many entries of `events` were filled (0 on an error: the set was closed).
    /// epoll_wait(2) once: an interrupted wait (EINTR) or an error returns 0, like a wait that timed out.
    static func epollPollOnce(_ epfd: Int32, into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMs: Int32) -> Int {
        max(0, Int(epoll_wait(epfd, events.baseAddress, Int32(events.count), timeoutMs)))
    }

    static func epollPoll(_ epfd: Int32, into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMs: Int32 = 0) -> Int {
        while true {
            let n = epoll_wait(epfd, events.baseAddress, Int32(events.count), timeoutMs)
            if n >= 0 { return Int(n) }
            if errno != EINTR { return 0 }
        }
    }
    #else
    /// One kevent change; errors (a filter that was not registered) are of no interest to the poller.
    static func kqueueChange(_ kq: Int32, _ change: kevent) {
        var change = change
        _ = kevent(kq, &change, 1, nil, 0, nil)
    }

    /// kevent without blocking; EINTR is retried. Returns how many entries of `events` were filled.
    static func kqueuePoll(_ kq: Int32, into events: UnsafeMutableBufferPointer<kevent>) -> Int {
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        while true {
            let n = kevent(kq, nil, 0, events.baseAddress, Int32(events.count), &zero)
            if n >= 0 { return Int(n) }
            if errno != EINTR { return 0 }
        }
    }
    #endif

    /// `getaddrinfo` hints for TCP on IPv4 or IPv6 (`flags` such as AI_PASSIVE for a listener).
    public static func streamAddressHints(flags: Int32 = 0) -> addrinfo {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_flags = flags
        return hints
    }

    /// The most descriptors `reserveDescriptorTable` makes room for: 65 536 take 512 KiB of kernel memory.
    public static let reservedDescriptorCeiling = 65_536

    /// Grows this process's descriptor table now to hold `count` descriptors (at most the soft RLIMIT_NOFILE and
    /// `reservedDescriptorCeiling`), by duplicating one to the highest number and closing it; the table never
    /// shrinks. Linux grows it on demand, doubling, and in a process with several threads each growth waits for
    /// an RCU grace period (fs/file.c, `expand_fdtable`, `synchronize_rcu`): the thread opening the descriptor (an
    /// event loop accepting a client or connecting to the provider) stood still 10 to 41 ms at 512, 1 024 and 2 048
    /// descriptors, the running streams' longest waits (S2, 1 000 streams). Call it at start, before the event
    /// loops run. Returns the table's size afterwards (`FDSize` in /proc/self/status), 0 where that is unknown
    /// (not Linux: nothing to do there).
    @discardableResult
    public static func reserveDescriptorTable(_ count: Int) -> Int {
        #if os(Linux)
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return descriptorTableSize() }
        let soft = min(UInt64(limit.rlim_cur), UInt64(Int32.max))   // RLIM_INFINITY is all ones
        let target = Int32(min(UInt64(count), soft, UInt64(reservedDescriptorCeiling)))
        if target > 1, let pair = wakePipe() {   // any descriptor will do; the pair lives for this call only
            let high = fcntl(pair.read, F_DUPFD_CLOEXEC, target - 1)
            if high >= 0 { close(high) }
            close(pair.read)
            close(pair.write)
        }
        return descriptorTableSize()
        #else
        return 0
        #endif
    }

    /// The size of this process's descriptor table (`FDSize` in /proc/self/status; 0 where that is unknown).
    public static func descriptorTableSize() -> Int {
        #if os(Linux)
        guard let file = fopen("/proc/self/status", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("FDSize:") {
                return Int(text.dropFirst(7).filter(\.isNumber)) ?? 0
            }
        }
        return 0
        #else
        return 0
        #endif
    }

    public static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    public static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// SO_LINGER {1, 0}: the next close sends RST instead of FIN, for connections we abort.
    public static func setLingerZero(_ fd: Int32) {
        var linger = Glibc_linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc_linger>.size))
    }

    public static func close(_ fd: Int32) {
        // close(2) must not be retried on EINTR on Linux: the descriptor is already released.
        _ = Glibc_close(fd)
    }

    /// A socket as `socket(2)` makes it, close-on-exec on Linux: for libcurl's open-socket callback, which passes
    /// the family, type and protocol of the address it connects to. -1 on failure (errno set).
    public static func openSocket(family: Int32, type: Int32, protocol: Int32) -> Int32 {
        #if canImport(Glibc)
        return socket(family, type | Int32(SOCK_CLOEXEC.rawValue), `protocol`)
        #else
        return socket(family, type, `protocol`)
        #endif
    }

    /// A new stream socket for an outgoing connection (close-on-exec; on Darwin, no SIGPIPE), or the errno.
    public static func clientSocket(family: Int32) -> Result<Int32, SocketSetupError> {
        #if canImport(Glibc)
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return .failure(SocketSetupError(step: "socket", errno: errno)) }
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return .success(fd)
    }

    /// What a non-blocking connect came to.
    public enum ConnectResult: Equatable, Sendable {
        case connected
        /// Going on in the background: writability reports the outcome (`socketError`).
        case inProgress
        case failed(errno: Int32)
    }

    /// A non-blocking connect. It is not retried after EINTR: the connect goes on in the background, as after
    /// EINPROGRESS, and writability reports the outcome.
    public static func connect(_ fd: Int32, to storage: sockaddr_storage, length: socklen_t) -> ConnectResult {
        var storage = storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc_connect(fd, $0, length) }
        }
        if result == 0 { return .connected }
        let err = errno
        return err == EINPROGRESS || err == EINTR ? .inProgress : .failed(errno: err)
    }

    /// The pending error of a socket (SO_ERROR): 0 once a background connect succeeded.
    public static func socketError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 ? errno : error
    }

    /// The address a socket is bound to (getsockname); zeroed if the call fails.
    public static func localAddress(_ fd: Int32) -> sockaddr_storage {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        return storage
    }

    /// The port a socket is bound to (getsockname); 0 if the call fails.
    public static func localPort(_ fd: Int32) -> Int { Listener.port(of: localAddress(fd)) }

    /// Whether bytes wait to be read on `fd`: a peek that takes nothing and never blocks (the end of the stream
    /// and errors count as none).
    public static func hasUnreadBytes(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = Glibc_recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            if n >= 0 { return n > 0 }
            if errno != EINTR { return false }
        }
    }

    /// Ends both directions of a connection whose descriptor stays open for its owner to close: its next send
    /// fails at once.
    public static func shutdownBoth(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }

    /// A pipe for waking a blocked poller: (read end, write end), or nil. Both ends non-blocking: a full pipe
    /// already means "wake up", and the poller drains it without waiting.
    static func wakePipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return (fds[0], fds[1])
    }

    /// Writes one byte to a wake-up pipe; EINTR is retried, a full pipe already means "wake up".
    static func wake(_ fd: Int32) {
        var byte: UInt8 = 1
        while Glibc_write(fd, &byte, 1) < 0 && errno == EINTR {}
    }

    /// read(2) on a non-blocking pipe, EINTR retried: `.done(n)`, `.wouldBlock` when it is empty, `.endOfFile`.
    static func readPipe(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n > 0 { return .done(n) }
            if n == 0 { return .endOfFile }
            if errno == EINTR { continue }
            return classify(errno)
        }
    }

    #if canImport(Glibc)
    /// A new epoll set (close-on-exec), or -1.
    static func epollCreate() -> Int32 { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    #else
    /// A new kqueue, or -1.
    static func kqueueCreate() -> Int32 { kqueue() }
    #endif

    public static func ignoreSIGPIPE() {
        _ = signal(SIGPIPE, SIG_IGN)
    }
}

/// Which step of setting up a listening socket failed, and why.
public struct SocketSetupError: Error, Sendable {
    public var step: String
    public var errno: Int32
    public var message: String { String(cString: strerror(errno)) }
}

#if canImport(Glibc)
@inline(__always) func Glibc_accept(_ fd: Int32, _ a: UnsafeMutablePointer<sockaddr>, _ l: UnsafeMutablePointer<socklen_t>) -> Int32 {
    csystem_accept_nonblocking(fd, a, l)
}
#else
@inline(__always) func Glibc_accept(_ fd: Int32, _ a: UnsafeMutablePointer<sockaddr>, _ l: UnsafeMutablePointer<socklen_t>) -> Int32 { Darwin.accept(fd, a, l) }
#endif

#if canImport(Glibc)
typealias Glibc_linger = Glibc.linger
@inline(__always) func Glibc_recv(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int, _ f: Int32) -> Int { Glibc.recv(fd, p, n, f) }
@inline(__always) func Glibc_close(_ fd: Int32) -> Int32 { Glibc.close(fd) }
@inline(__always) func Glibc_connect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Glibc.connect(fd, a, l) }
@inline(__always) func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Glibc.write(fd, p, n) }
#else
typealias Glibc_linger = Darwin.linger
@inline(__always) func Glibc_recv(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int, _ f: Int32) -> Int { Darwin.recv(fd, p, n, f) }
@inline(__always) func Glibc_close(_ fd: Int32) -> Int32 { Darwin.close(fd) }
@inline(__always) func Glibc_connect(_ fd: Int32, _ a: UnsafePointer<sockaddr>, _ l: socklen_t) -> Int32 { Darwin.connect(fd, a, l) }
@inline(__always) func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Darwin.write(fd, p, n) }
#endif
