#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a non-blocking socket call came to. Every syscall on a socket goes through `Syscall`, which retries
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

    public static func ignoreSIGPIPE() {
        _ = signal(SIGPIPE, SIG_IGN)
    }
}

#if canImport(Glibc)
typealias Glibc_linger = Glibc.linger
@inline(__always) func Glibc_recv(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int, _ f: Int32) -> Int { Glibc.recv(fd, p, n, f) }
@inline(__always) func Glibc_close(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#else
typealias Glibc_linger = Darwin.linger
@inline(__always) func Glibc_recv(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int, _ f: Int32) -> Int { Darwin.recv(fd, p, n, f) }
@inline(__always) func Glibc_close(_ fd: Int32) -> Int32 { Darwin.close(fd) }
#endif
