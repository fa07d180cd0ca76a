#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Support

/// Why a connection ended, as its delegate hears it (exactly once).
public enum ConnectionCloseReason: Equatable, Sendable {
    /// The peer sent FIN (recv returned 0).
    case peerClosed
    /// The peer reset the connection, or a send found it gone (ECONNRESET, EPIPE).
    case peerReset
    /// We closed it (after a response, on an error, on shutdown).
    case local
}

/// Receives a connection's events. All calls arrive on the connection's loop queue.
/// `connectionDidClose` is terminal: no call follows it.
public protocol ConnectionDelegate: AnyObject {
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer)
    /// The pending write buffer fell to the low-water mark (after having been above the high-water mark).
    func connectionDidDrain(_ connection: Connection)
    func connection(_ connection: Connection, didCloseWith reason: ConnectionCloseReason)
}

/// One client socket: its registration in the loop's poller and its pending-write buffer.
///
/// Owned by `loop.queue`; every method must be called there. The socket stays watched for reading for the
/// connection's whole life (EPOLLIN | EPOLLRDHUP): a client's FIN or RST is seen as soon as it arrives, and
/// that is how a departed client cancels its upstream within a millisecond. Writability is watched only while
/// bytes are pending.
public final class Connection: PollerHandler, @unchecked Sendable {
    // Invariant: all mutable state is touched on `loop.queue` only.
    public let fd: Int32
    public let loop: EventLoop
    public let peerAddress: String
    public var delegate: (any ConnectionDelegate)?
    public let highWaterMark: Int
    public let lowWaterMark: Int

    private var writeArmed = false
    private var pending = ByteQueue()
    private var wasAboveHighWater = false
    private enum State { case open, flushingThenClose, lingering, closed }
    private var state = State.open
    private var lingerTimer: LoopTimer?

    public init(fd: Int32, loop: EventLoop, peerAddress: String, highWaterMark: Int = 256 * 1024, lowWaterMark: Int = 64 * 1024) {
        self.fd = fd
        self.loop = loop
        self.peerAddress = peerAddress
        self.highWaterMark = highWaterMark
        self.lowWaterMark = lowWaterMark
    }

    /// Starts reading. Call once, on the loop, after setting the delegate.
    public func start() {
        loop.assertOnLoop()
        loop.poller.watch(fd, read: true, write: false, handler: self)
    }

    /// A client's request or close runs before the batch's relayed events: see `PollerHandler`.
    public var pollerHandlesFirst: Bool { true }

    public func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
        pollerEvent(fd: fd, readable: readable, writable: writable, hangup: true)
    }

    public func pollerEvent(fd: Int32, readable: Bool, writable: Bool, hangup: Bool) {
        loop.assertOnLoop()
        if readable { self.readable(toTheEnd: hangup) }
        if writable && state != .closed { self.writable() }
    }

    public var isOpen: Bool { state == .open }
    public var pendingByteCount: Int { pending.count }
    public var isAboveHighWater: Bool { pending.count >= highWaterMark }
    /// The most bytes ever pending on this connection: what a slow reader cost in memory.
    public private(set) var maxPendingByteCount = 0

    // MARK: Reading

    /// Reads until the socket would block, so a FIN or RST that arrived with the last bytes is seen in the same
    /// turn (with per-socket Dispatch sources it was once missed entirely: HostileClientTests.partialThenClose),
    /// unless the poller saw no hang-up (`toTheEnd` false) and a read came back short: then the socket is empty
    /// for now, and the read that would only say so (EAGAIN, one system call per request) is skipped; whatever
    /// comes later, a FIN included, makes the level-triggered poller report the socket again. A bound on the
    /// rounds keeps one fast sender from starving the loop; bytes left behind keep the socket readable.
    private func readable(toTheEnd: Bool) {
        for _ in 0..<16 {
            switch Syscall.recv(fd, into: loop.readBuffer) {
            case .done(let n):
                let short = n < loop.readBuffer.count && !toTheEnd
                if state == .lingering {   // discarding what arrives after our response
                    if short { return }
                    continue
                }
                delegate?.connection(self, didRead: UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<n]))
                if state == .closed || short { return }
            case .wouldBlock:
                return
            case .endOfFile:
                teardown(reason: state == .open ? .peerClosed : .local)
                return
            case .peerGone, .failed:
                teardown(reason: state == .open ? .peerReset : .local)
                return
            }
        }
    }

    // MARK: Writing

    /// Writes up to three buffers with one syscall (a chunk's size line, payload and CRLF together), or queues
    /// them behind bytes already pending. Returns false if the connection is closed or the peer is gone.
    @discardableResult
    public func write(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer? = nil, _ c: UnsafeRawBufferPointer? = nil) -> Bool {
        loop.assertOnLoop()
        guard state == .open || state == .flushingThenClose else { return false }
        let parts = [a, b ?? UnsafeRawBufferPointer(start: nil, count: 0), c ?? UnsafeRawBufferPointer(start: nil, count: 0)]
        let total = a.count + (b?.count ?? 0) + (c?.count ?? 0)
        if total == 0 { return true }
        var written = 0
        if pending.isEmpty && !held {
            var iov = (
                iovec(iov_base: UnsafeMutableRawPointer(mutating: parts[0].baseAddress), iov_len: parts[0].count),
                iovec(iov_base: UnsafeMutableRawPointer(mutating: parts[1].baseAddress), iov_len: parts[1].count),
                iovec(iov_base: UnsafeMutableRawPointer(mutating: parts[2].baseAddress), iov_len: parts[2].count)
            )
            let result = withUnsafeMutableBytes(of: &iov) { raw in
                Syscall.writev(fd, raw.bindMemory(to: iovec.self))
            }
            switch result {
            case .done(let n): written = n
            case .wouldBlock: written = 0
            case .endOfFile, .peerGone, .failed:
                teardown(reason: .peerReset)
                return false
            }
            if written == total { return true }
        }
        // Queue what the kernel did not take, in order.
        var skip = written
        for part in parts where part.count > 0 {
            if skip >= part.count { skip -= part.count; continue }
            pending.append(UnsafeRawBufferPointer(rebasing: part[skip...]))
            skip = 0
        }
        if pending.count >= highWaterMark { wasAboveHighWater = true }
        if pending.count > maxPendingByteCount { maxPendingByteCount = pending.count }
        if !held { armWrite() }
        return true
    }

    private var held = false

    /// Collects writes without sending them until `releaseHold()`, so that what one turn of the loop produces
    /// (a response head, then its first chunk or whole body) leaves in one syscall and one TCP segment.
    /// Release it within the same turn of the loop (the caller schedules it, with `EventLoop.soon`): holding
    /// never delays a byte beyond the handler already under way.
    public func hold() {
        loop.assertOnLoop()
        held = true
    }

    /// Sends what the hold collected. True when there was a hold to release.
    @discardableResult
    public func releaseHold() -> Bool {
        loop.assertOnLoop()
        guard held else { return false }
        held = false
        guard state == .open || state == .flushingThenClose, !pending.isEmpty else { return true }
        writable()
        // The kernel may not have taken it all: the rest waits for the write source, like any other write.
        if (state == .open || state == .flushingThenClose) && !pending.isEmpty { armWrite() }
        return true
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        loop.assertOnLoop()
        return bytes.withUnsafeBytes { write($0) }
    }

    private func armWrite() {
        guard !writeArmed, state != .closed else { return }
        writeArmed = true
        loop.poller.update(fd, read: true, write: true)
    }

    private func disarmWrite() {
        guard writeArmed, state != .closed else { return }
        writeArmed = false
        loop.poller.update(fd, read: true, write: false)
    }

    private func writable() {
        while !pending.isEmpty {
            let result = pending.withReadableBytes { bytes -> IOResult in
                var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
                return withUnsafeMutablePointer(to: &iov) { Syscall.writev(fd, UnsafeMutableBufferPointer(start: $0, count: 1)) }
            }
            switch result {
            case .done(let n):
                pending.consume(n)
            case .wouldBlock:
                return
            case .endOfFile, .peerGone, .failed:
                teardown(reason: .peerReset)
                return
            }
        }
        disarmWrite()
        if state == .flushingThenClose {
            beginLingeringClose()
            return
        }
        if wasAboveHighWater && pending.count <= lowWaterMark {
            wasAboveHighWater = false
            delegate?.connectionDidDrain(self)
        }
    }

    // MARK: Closing

    /// Sends what is pending, then half-closes and waits briefly for the client's FIN before closing
    /// (closing with unread input would send RST, which can destroy the response in the client's buffer).
    /// A client that stops reading cannot hold the connection open: after `flushSeconds` with bytes still
    /// pending, it is reset.
    public func closeAfterFlush(flushSeconds: Double = 60, lingerSeconds: Double = 2) {
        loop.assertOnLoop()
        guard state == .open else { return }
        state = .flushingThenClose
        if held { releaseHold() }
        if pending.isEmpty && state == .flushingThenClose {
            beginLingeringClose(lingerSeconds: lingerSeconds)
        } else if state == .flushingThenClose {
            lingerTimer = loop.schedule(afterSeconds: flushSeconds) { [weak self] in
                guard let self, self.state == .flushingThenClose else { return }
                self.close(reset: true)
            }
        }
    }

    /// Closes at once, with RST if `reset` (abandons pending bytes).
    public func close(reset: Bool = false) {
        loop.assertOnLoop()
        guard state != .closed else { return }
        if reset { Syscall.setLingerZero(fd) }
        teardown(reason: .local)
    }

    private func beginLingeringClose(lingerSeconds: Double = 2) {
        state = .lingering
        lingerTimer?.cancel()
        Syscall.shutdownWrite(fd)
        lingerTimer = loop.schedule(afterSeconds: lingerSeconds) { [weak self] in self?.teardown(reason: .local) }
    }

    private func teardown(reason: ConnectionCloseReason) {
        guard state != .closed else { return }
        state = .closed
        lingerTimer?.cancel()
        lingerTimer = nil
        // Forgotten by the poller, then closed (which takes it out of the poll set): both synchronous, so the
        // number cannot be reused while still watched.
        loop.poller.forgetBeforeClose(fd)
        Syscall.close(fd)
        let delegate = self.delegate
        self.delegate = nil
        delegate?.connection(self, didCloseWith: reason)
    }
}
