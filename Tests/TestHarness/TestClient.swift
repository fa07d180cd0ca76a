// Test harness: a raw-socket HTTP/1.1 client (blocking POSIX socket, poll() timeouts), plus the socket layer
// shared with ScriptedUpstream. Must not import the relay's modules: it is an outside observer.
import Dispatch
import Foundation
import TestSupportCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Errors

/// Every error the harness throws (client side and upstream side).
package enum HarnessError: Error, Equatable, CustomStringConvertible {
    /// A wait passed its safety timeout.
    case timeout
    /// The peer closed (FIN) in the middle of a message: before the 0-size chunk, before Content-Length bytes,
    /// or inside a head.
    case truncated
    /// The peer closed (FIN) before the first byte of an expected head.
    case connectionClosed
    /// recv()/send() reported ECONNRESET (the peer sent RST).
    case connectionReset
    /// send() reported EPIPE (the peer is gone).
    case brokenPipe
    /// This side has already closed/reset the socket (or the upstream was shut down).
    case closed
    /// The bytes received are not valid HTTP/1.1 framing (strict: CRLF only, hex chunk sizes, ...).
    case malformed(String)
    /// readChunkedBody(until:) reached the 0-size chunk without seeing the marker.
    case bodyEnded
    /// A system call failed.
    case socket(String)

    package var description: String {
        switch self {
        case .timeout: "timeout (safety timeout passed)"
        case .truncated: "truncated (peer closed mid-message)"
        case .connectionClosed: "connection closed by peer before a new message"
        case .connectionReset: "connection reset by peer (RST)"
        case .brokenPipe: "broken pipe (peer gone)"
        case .closed: "socket already closed on this side"
        case .malformed(let why): "malformed HTTP: \(why)"
        case .bodyEnded: "body ended before the marker appeared"
        case .socket(let why): "socket error: \(why)"
        }
    }
}

// MARK: - POSIX helpers

enum HarnessPOSIX {
    /// Evaluated once per process (global lazy initialisation is atomic).
    static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    static var streamType: Int32 {
        #if canImport(Glibc)
        Int32(SOCK_STREAM.rawValue)
        #else
        SOCK_STREAM
        #endif
    }

    static var sendFlags: Int32 {
        #if canImport(Glibc)
        Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)
        #else
        Int32(MSG_DONTWAIT)
        #endif
    }

    static func errorString(_ operation: String, _ code: Int32 = errno) -> String {
        "\(operation): \(String(cString: strerror(code))) (errno \(code))"
    }

    static func closeFD(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
    }

    static func shutdownFD(_ fd: Int32, _ how: Int32) {
        #if canImport(Glibc)
        _ = Glibc.shutdown(fd, how)
        #else
        _ = Darwin.shutdown(fd, how)
        #endif
    }

    static let shutRead = Int32(SHUT_RD)
    static let shutWrite = Int32(SHUT_WR)
    static let shutBoth = Int32(SHUT_RDWR)

    static func setIntOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// TCP_NODELAY and (Darwin) SO_NOSIGPIPE on a connected socket.
    static func configureConnected(_ fd: Int32) {
        setIntOption(fd, Int32(IPPROTO_TCP), Int32(TCP_NODELAY), 1)
        #if canImport(Darwin)
        setIntOption(fd, SOL_SOCKET, SO_NOSIGPIPE, 1)
        #endif
    }

    /// SO_LINGER {on, 0}: the following close() sends RST.
    static func setLingerZero(_ fd: Int32) {
        var value = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        return address
    }

    /// A socket listening on 127.0.0.1 at a port the kernel chose (SO_REUSEADDR, so parallel tests never wait
    /// for TIME_WAIT), and its address with that port.
    static func listenOnLoopback(backlog: Int32) throws -> (fd: Int32, address: sockaddr_in) {
        _ = ignoreSIGPIPE
        let fd = socket(AF_INET, streamType, 0)
        if fd < 0 { throw HarnessError.socket(errorString("socket")) }
        setIntOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            let message = errorString("bind/listen")
            closeFD(fd)
            throw HarnessError.socket(message)
        }
        return (fd, address)
    }

    static func setBlocking(_ fd: Int32, _ blocking: Bool) {
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK)
    }

    /// poll() one fd for `events` until the deadline. Returns revents (0 = deadline passed). Retries EINTR.
    static func pollOne(_ fd: Int32, events: Int16, deadline: HarnessDeadline) throws -> Int16 {
        while true {
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let result = poll(&descriptor, 1, deadline.pollMilliseconds)
            if result > 0 { return descriptor.revents }
            if result == 0 {
                if deadline.isExpired { return 0 }
                continue
            }
            let code = errno
            if code == EINTR { continue }
            throw HarnessError.socket(errorString("poll", code))
        }
    }
}

// MARK: - Socket

/// One connected TCP socket shared by the threads that use it.
///
/// Closing is safe while another thread is blocked in poll()/recv() on it: the fd is closed only when no operation
/// is in progress (`inUse == 0`); otherwise close()/reset() first shutdown()s the socket to wake the blocked
/// operation (FIN: SHUT_RDWR; RST: SHUT_RD, which sends nothing), and the last operation to finish closes the fd.
/// So an fd number is never used after close (no fd-reuse races between parallel tests).
final class HarnessSocket: Sendable {
    enum Received: Sendable {
        case bytes([UInt8])
        case closed(PeerCloseKind)
    }

    private struct State {
        var fd: Int32
        var inUse = 0
        var closeRequested = false
        var fdClosed = false
    }

    private let state: HarnessMonitor<State>
    private let log = HarnessMonitor<[UInt8]>([])

    init(fd: Int32) {
        _ = HarnessPOSIX.ignoreSIGPIPE
        state = HarnessMonitor(State(fd: fd))
    }

    deinit {
        state.withLock { state in
            if !state.fdClosed {
                state.fdClosed = true
                HarnessPOSIX.closeFD(state.fd)
            }
        }
    }

    /// Every byte received on this socket, in order.
    var receivedBytes: [UInt8] { log.withLock { $0 } }

    var isClosed: Bool { state.withLock { $0.closeRequested } }

    private func acquire() throws -> Int32 {
        try state.withLock { state in
            if state.closeRequested { throw HarnessError.closed }
            state.inUse += 1
            return state.fd
        }
    }

    private func release() {
        let fdToClose: Int32? = state.withLock { state in
            state.inUse -= 1
            if state.inUse == 0, state.closeRequested, !state.fdClosed {
                state.fdClosed = true
                return state.fd
            }
            return nil
        }
        if let fdToClose { HarnessPOSIX.closeFD(fdToClose) }
    }

    func withFD<R>(_ body: (Int32) throws -> R) throws -> R {
        let fd = try acquire()
        defer { release() }
        return try body(fd)
    }

    /// Waits for bytes (or the peer's close) until the deadline; returns what one recv() gave.
    func receive(deadline: HarnessDeadline, maximum: Int = 65_536) throws -> Received {
        let fd = try acquire()
        defer { release() }
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            let revents = try HarnessPOSIX.pollOne(fd, events: Int16(POLLIN), deadline: deadline)
            if isClosed { throw HarnessError.closed }
            if revents == 0 { throw HarnessError.timeout }
            if revents & Int16(POLLNVAL) != 0 { throw HarnessError.closed }
            let count = buffer.withUnsafeMutableBytes { raw in
                recv(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT))
            }
            let code = errno
            if isClosed { throw HarnessError.closed }
            if count > 0 {
                buffer.removeSubrange(count...)
                log.withLock { $0.append(contentsOf: buffer) }
                return .bytes(buffer)
            }
            if count == 0 { return .closed(.fin) }
            switch code {
            case EAGAIN, EWOULDBLOCK, EINTR: continue
            case ECONNRESET: return .closed(.reset)
            default: throw HarnessError.socket(HarnessPOSIX.errorString("recv", code))
            }
        }
    }

    /// One send() loop for all of `bytes` (partial sends continue after poll(POLLOUT)).
    func sendAll(_ bytes: [UInt8], deadline: HarnessDeadline) throws {
        let fd = try acquire()
        defer { release() }
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, raw.count - offset, HarnessPOSIX.sendFlags)
            }
            let code = errno
            if count > 0 {
                offset += count
                continue
            }
            if isClosed { throw HarnessError.closed }
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                let revents = try HarnessPOSIX.pollOne(fd, events: Int16(POLLOUT), deadline: deadline)
                if revents == 0 { throw HarnessError.timeout }
            case EPIPE: throw HarnessError.brokenPipe
            case ECONNRESET: throw HarnessError.connectionReset
            default: throw HarnessError.socket(HarnessPOSIX.errorString("send", code))
            }
        }
    }

    /// Bytes sent on this socket that the peer has not acknowledged yet (Linux SIOCOUTQ, Darwin SO_NWRITE). At 0
    /// every byte sent is in the peer's receive queue (or already read): a send() that returned has only queued
    /// them here.
    func unacknowledgedBytes() throws -> Int {
        try withFD { fd in
            var count: Int32 = 0
            #if canImport(Glibc)
            let result = ioctl(fd, UInt(TIOCOUTQ), &count)
            #else
            var length = socklen_t(MemoryLayout<Int32>.size)
            let result = getsockopt(fd, SOL_SOCKET, SO_NWRITE, &count, &length)
            #endif
            if result != 0 { throw HarnessError.socket(HarnessPOSIX.errorString("unacknowledged bytes")) }
            return Int(count)
        }
    }

    /// Half-close: sends FIN, keeps the read side open.
    func shutdownWrite() {
        _ = try? withFD { HarnessPOSIX.shutdownFD($0, HarnessPOSIX.shutWrite) }
    }

    /// FIN (`reset: false`) or RST (`reset: true`, via SO_LINGER {1, 0}). Idempotent.
    func close(reset: Bool) {
        let fdToClose: Int32? = state.withLock { state in
            if state.closeRequested { return nil }
            state.closeRequested = true
            if reset { HarnessPOSIX.setLingerZero(state.fd) }
            if state.inUse == 0 {
                state.fdClosed = true
                return state.fd
            }
            // Wake the thread blocked on this socket; it closes the fd when it leaves (see release()).
            HarnessPOSIX.shutdownFD(state.fd, reset ? HarnessPOSIX.shutRead : HarnessPOSIX.shutBoth)
            return nil
        }
        if let fdToClose { HarnessPOSIX.closeFD(fdToClose) }
    }

    /// Connects to 127.0.0.1:port (non-blocking connect bounded by the deadline), then returns a blocking socket.
    static func connect(port: Int, deadline: HarnessDeadline) throws -> HarnessSocket {
        _ = HarnessPOSIX.ignoreSIGPIPE
        let fd = socket(AF_INET, HarnessPOSIX.streamType, 0)
        if fd < 0 { throw HarnessError.socket(HarnessPOSIX.errorString("socket")) }
        HarnessPOSIX.setBlocking(fd, false)
        var address = HarnessPOSIX.loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connectSocket(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 {
            let code = errno
            guard code == EINPROGRESS || code == EINTR else {
                HarnessPOSIX.closeFD(fd)
                throw HarnessError.socket(HarnessPOSIX.errorString("connect to port \(port)", code))
            }
            let revents: Int16
            do {
                revents = try HarnessPOSIX.pollOne(fd, events: Int16(POLLOUT), deadline: deadline)
            } catch {
                HarnessPOSIX.closeFD(fd)
                throw error
            }
            if revents == 0 {
                HarnessPOSIX.closeFD(fd)
                throw HarnessError.timeout
            }
            var soError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
            if soError != 0 {
                HarnessPOSIX.closeFD(fd)
                throw HarnessError.socket(HarnessPOSIX.errorString("connect to port \(port)", soError))
            }
        }
        HarnessPOSIX.setBlocking(fd, true)
        HarnessPOSIX.configureConnected(fd)
        return HarnessSocket(fd: fd)
    }
}

private func connectSocket(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    #if canImport(Glibc)
    Glibc.connect(fd, address, length)
    #else
    Darwin.connect(fd, address, length)
    #endif
}

// MARK: - Response head

/// A message head as the harness received it: fields in their order and spelling, looked up case-insensitively.
package protocol ReceivedHeaders {
    var headers: [(name: String, value: String)] { get }
}

extension ReceivedHeaders {
    /// First value of the header, case-insensitive.
    package func header(_ name: String) -> String? { headerValues(name).first }

    package func headerValues(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }
}

package struct ResponseHeadResult: Sendable, ReceivedHeaders {
    package var version: String
    package var status: Int
    package var reason: String
    /// As received: order and case kept.
    package var headers: [(name: String, value: String)]
    /// Exact bytes of the head, status line through the empty line's CRLF.
    package var rawHead: [UInt8]
}

// MARK: - TestClient

/// A raw HTTP/1.1 client on one connection to 127.0.0.1. Every call waits at most `timeout` seconds in total
/// (or the call's own `timeout:`) and throws `HarnessError.timeout` instead of hanging.
///
/// Thread-safe (state in a HarnessMonitor), but reads are serialised: a read call holds the reader for its whole duration.
/// close()/reset() may be called from any thread and wake a read blocked on this client.
package final class TestClient: Sendable {
    package let port: Int
    package let timeout: Double

    private struct ReadState: Sendable {
        var reader: HarnessByteReader
        /// The 0-size chunk of the current response was read.
        var chunkedBodyDone = false
        /// Decoded body of the current response read so far (by readChunk/readBody/readChunkedBody).
        var body: [UInt8] = []
        /// readChunkedBody(until:) searches from here (just after the previous match).
        var matchCursor = 0
        var trailers: [(name: String, value: String)] = []
    }

    private let socket: HarnessSocket
    private let state: HarnessMonitor<ReadState>

    package init(port: Int, timeout: Double = 5) throws {
        self.port = port
        self.timeout = timeout
        socket = try HarnessSocket.connect(port: port, deadline: HarnessDeadline(seconds: timeout))
        state = HarnessMonitor(ReadState(reader: HarnessByteReader(socket: socket)))
    }

    deinit {
        socket.close(reset: false)
    }

    private func deadline(_ override: Double?) -> HarnessDeadline {
        HarnessDeadline(seconds: override ?? timeout)
    }

    /// One GET on a new connection: the status, the whole body as text, and the head.
    package static func get(port: Int, path: String, headers: [(String, String)] = []) throws
        -> (status: Int, body: String, head: ResponseHeadResult)
    {
        let client = try TestClient(port: port)
        defer { client.close() }
        try client.sendRequest(method: "GET", path: path, headers: headers)
        let head = try client.readHead()
        return (head.status, String(decoding: try client.readBody(head: head), as: UTF8.self), head)
    }

    // MARK: Sending

    package func send(_ bytes: [UInt8]) throws {
        try socket.sendAll(bytes, deadline: deadline(nil))
    }

    package func send(_ string: String) throws {
        try send(Array(string.utf8))
    }

    /// Writes a full request in one send. Adds `Host: 127.0.0.1:<port>` unless `headers` has a Host header.
    /// Body framing: `chunked: true` adds `Transfer-Encoding: chunked` (unless given) and sends the body as one
    /// chunk plus the last chunk; otherwise `Content-Length` is added (unless given, so a test can lie) when the
    /// body is non-empty or the method is POST/PUT/PATCH.
    package func sendRequest(
        method: String = "POST", path: String, headers: [(String, String)] = [], body: [UInt8] = [],
        chunked: Bool = false
    ) throws {
        func has(_ name: String) -> Bool { headers.contains { $0.0.lowercased() == name } }
        var head = "\(method) \(path) HTTP/1.1\r\n"
        if !has("host") { head += "Host: 127.0.0.1:\(port)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var payload: [UInt8]
        if chunked {
            if !has("transfer-encoding") { head += "Transfer-Encoding: chunked\r\n" }
            payload = body.isEmpty ? [] : ChunkedReader.encodeChunk(body)
            payload += Array("0\r\n\r\n".utf8)
        } else {
            let needsLength = !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method.uppercased())
            if needsLength && !has("content-length") { head += "Content-Length: \(body.count)\r\n" }
            payload = body
        }
        head += "\r\n"
        try send(Array(head.utf8) + payload)
    }

    // MARK: Reading

    /// The next response head (a 100 Continue is returned as its own head). Resets the body state.
    package func readHead(timeout: Double? = nil) throws -> ResponseHeadResult {
        let deadline = deadline(timeout)
        return try state.withLock { state in
            let (raw, lines) = try state.reader.readHead(deadline: deadline)
            let (version, status, reason) = try HarnessHTTP.parseStatusLine(lines[0])
            let headers = try lines.dropFirst().map(HarnessHTTP.parseHeaderLine)
            state.chunkedBodyDone = false
            state.body = []
            state.matchCursor = 0
            state.trailers = []
            return ResponseHeadResult(version: version, status: status, reason: reason, headers: headers, rawHead: raw)
        }
    }

    /// The next decoded chunk of a chunked body; nil once the 0-size chunk and its trailer section were read
    /// (and on every later call until the next readHead). Throws `.truncated` if the peer closed (FIN) before the
    /// last chunk, `.connectionReset` on RST, `.malformed` on bad framing, `.timeout`.
    package func readChunk(timeout: Double? = nil) throws -> [UInt8]? {
        let deadline = deadline(timeout)
        return try state.withLock { state in try Self.nextChunk(&state, deadline) }
    }

    private static func nextChunk(_ state: inout ReadState, _ deadline: HarnessDeadline) throws -> [UInt8]? {
        if state.chunkedBodyDone { return nil }
        switch try state.reader.readChunk(deadline: deadline) {
        case .data(let bytes):
            state.body += bytes
            return bytes
        case .end(let trailers):
            state.chunkedBodyDone = true
            state.trailers = trailers
            return nil
        }
    }

    /// Trailer fields of the last chunked body read to its end.
    package var trailers: [(name: String, value: String)] { state.withLock { $0.trailers } }

    /// The whole (remaining) body per the head's framing: none for 1xx/204/304, chunked, Content-Length, or
    /// until close (a RST then throws `.connectionReset`). Transfer-Encoding other than exactly `chunked`,
    /// both TE and CL, or conflicting/invalid Content-Length throw `.malformed`.
    package func readBody(head: ResponseHeadResult, timeout: Double? = nil) throws -> [UInt8] {
        let deadline = deadline(timeout)
        let framing = try HarnessHTTP.framing(
            headers: head.headers, noBody: head.status / 100 == 1 || head.status == 204 || head.status == 304,
            untilCloseAllowed: true)
        return try state.withLock { state in
            switch framing {
            case .none:
                return []
            case .chunked:
                while try Self.nextChunk(&state, deadline) != nil {}
                return state.body
            case .length(let count):
                let bytes = try state.reader.readExact(count, deadline: deadline)
                state.body += bytes
                return bytes
            case .untilClose:
                let (bytes, kind) = try state.reader.readUntilClose(deadline: deadline)
                if kind == .reset { throw HarnessError.connectionReset }
                state.body += bytes
                return bytes
            }
        }
    }

    /// Reads chunks until `marker` appears in the decoded body after the end of the previous call's match;
    /// returns the whole body decoded so far for the current response (for lock-step tests). Throws
    /// `.bodyEnded` if the last chunk comes first, `.truncated` on FIN before the last chunk.
    package func readChunkedBody(until marker: [UInt8], timeout: Double? = nil) throws -> [UInt8] {
        let deadline = deadline(timeout)
        return try state.withLock { state in
            while true {
                if let end = HarnessHTTP.endOfFirstMatch(of: marker, in: state.body, from: state.matchCursor) {
                    state.matchCursor = end
                    return state.body
                }
                if try Self.nextChunk(&state, deadline) == nil { throw HarnessError.bodyEnded }
            }
        }
    }

    package func readChunkedBody(until marker: String, timeout: Double? = nil) throws -> [UInt8] {
        try readChunkedBody(until: Array(marker.utf8), timeout: timeout)
    }

    /// Reads until the peer closes; returns the raw bytes not consumed before (buffered ones included) and
    /// whether the close was a RST (`reset: true`) rather than a FIN.
    package func readUntilClose(timeout: Double? = nil) throws -> (bytes: [UInt8], reset: Bool) {
        let deadline = deadline(timeout)
        return try state.withLock { state in
            let (bytes, kind) = try state.reader.readUntilClose(deadline: deadline)
            return (bytes, kind == .reset)
        }
    }

    /// Every raw byte received on this connection (for secret scanning). Never blocks on a read in progress.
    package var receivedBytes: [UInt8] { socket.receivedBytes }

    /// Half-close: FIN, keep reading.
    package func shutdownWrite() { socket.shutdownWrite() }

    /// FIN.
    package func close() { socket.close(reset: false) }

    /// SO_LINGER {1, 0} + close: RST.
    package func reset() { socket.close(reset: true) }
}
