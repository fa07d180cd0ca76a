import CSystem
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives readiness for the descriptors it registered with a `Poller`. Called on the poller's loop queue.
public protocol PollerHandler: AnyObject {
    func pollerEvent(fd: Int32, readable: Bool, writable: Bool)
}

/// One event loop's private epoll set (kqueue on Darwin), watched by a single Dispatch read source on the
/// loop's queue: the client connections' sockets and curl's sockets all live in it.
///
/// Why not one Dispatch source per socket: each source's registration, one-shot re-arming and cancellation
/// goes through libdispatch's manager thread (an eventfd wake-up and a futex hand-over per event); a FIN or
/// RST arriving with a connection's last bytes was seen not to fire again after a single read; and curl closes
/// some descriptors itself (its resolver's socket pair), so a source keyed by a number can end up watching a
/// dead registration. Here the kernel drops a closed descriptor from the set, a level-triggered event simply
/// repeats, and one wake-up serves every ready socket of the loop.
///
/// Owned by the loop's queue: every method is called there.
public final class Poller: @unchecked Sendable {
    // Invariant: `entries` and the epoll set are touched on `queue` only.
    private let pollFD: Int32
    private let source: DispatchSourceRead
    private struct Entry {
        let handler: any PollerHandler
        var read: Bool
        var write: Bool
    }
    private var entries: [Int32: Entry] = [:]
    /// Where the kernel reports ready descriptors: allocated once, not per wake-up.
    #if canImport(Glibc)
    private let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: 128)
    #else
    private let events = UnsafeMutableBufferPointer<kevent>.allocate(capacity: 128)
    #endif

    public init(queue: DispatchQueue) {
        #if canImport(Glibc)
        pollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        #else
        pollFD = kqueue()
        #endif
        precondition(pollFD >= 0, "cannot create the event loop's poller")
        source = DispatchSource.makeReadSource(fileDescriptor: pollFD, queue: queue)
        let fd = pollFD
        source.setCancelHandler { Syscall.close(fd) }
        source.setEventHandler { [unowned self] in self.drain() }
        source.activate()
    }

    deinit { events.deallocate() }

    /// Stops watching everything and closes the poll descriptor.
    public func stop() {
        entries.removeAll()
        source.cancel()
    }

    /// The handler registered for `fd`, if any.
    public func handler(of fd: Int32) -> (any PollerHandler)? { entries[fd]?.handler }

    /// Watches `fd` for the given directions on behalf of `handler` (replacing any previous registration of
    /// that number: a descriptor number belongs to whoever opened it last).
    public func watch(_ fd: Int32, read: Bool, write: Bool, handler: any PollerHandler) {
        let known = entries[fd] != nil
        entries[fd] = Entry(handler: handler, read: read, write: write)
        apply(fd, read: read, write: write, known: known)
    }

    /// Changes the directions of a registered descriptor.
    public func update(_ fd: Int32, read: Bool, write: Bool) {
        guard var entry = entries[fd] else { return }
        guard entry.read != read || entry.write != write else { return }
        entry.read = read
        entry.write = write
        entries[fd] = entry
        apply(fd, read: read, write: write, known: true)
    }

    /// Stops watching `fd` (before it is closed, or when its owner no longer cares).
    public func remove(_ fd: Int32) {
        guard entries.removeValue(forKey: fd) != nil else { return }
        #if canImport(Glibc)
        _ = Syscall.epollControl(pollFD, EPOLL_CTL_DEL, fd, events: 0)   // EBADF/ENOENT: already closed, which is fine
        #else
        apply(fd, read: false, write: false, known: true)
        #endif
    }

    private func apply(_ fd: Int32, read: Bool, write: Bool, known: Bool) {
        #if canImport(Glibc)
        let mask = (read ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0) | (write ? EPOLLOUT.rawValue : 0)
        // What we believe is registered picks ADD or MOD; the belief is stale when a descriptor was closed
        // without telling us and its number came back, and then the other operation is the right one.
        switch Syscall.epollControl(pollFD, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, events: mask) {
        case ENOENT: _ = Syscall.epollControl(pollFD, EPOLL_CTL_ADD, fd, events: mask)
        case EEXIST: _ = Syscall.epollControl(pollFD, EPOLL_CTL_MOD, fd, events: mask)
        default: break
        }
        #else
        Syscall.kqueueChange(pollFD, kevent(ident: UInt(fd), filter: Int16(EVFILT_READ), flags: UInt16(read ? EV_ADD | EV_ENABLE : EV_DELETE),
                                            fflags: 0, data: 0, udata: nil))
        Syscall.kqueueChange(pollFD, kevent(ident: UInt(fd), filter: Int16(EVFILT_WRITE), flags: UInt16(write ? EV_ADD | EV_ENABLE : EV_DELETE),
                                            fflags: 0, data: 0, udata: nil))
        #endif
    }

    private func drain() {
        #if canImport(Glibc)
        for _ in 0..<8 {
            let n = Syscall.epollPoll(pollFD, into: events)
            guard n > 0 else { return }
            for i in 0..<n {
                let fd = events[i].data.fd
                let e = events[i].events
                // Looked up now: an earlier handler in this batch may have closed this descriptor.
                guard let entry = entries[fd] else { continue }
                let failed = e & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
                let readable = entry.read && (e & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 || failed)
                let writable = entry.write && (e & EPOLLOUT.rawValue != 0 || failed)
                if readable || writable { entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable) }
            }
            if n < events.count { return }
        }
        #else
        for _ in 0..<8 {
            let n = Syscall.kqueuePoll(pollFD, into: events)
            guard n > 0 else { return }
            for i in 0..<n {
                let fd = Int32(events[i].ident)
                guard let entry = entries[fd] else { continue }
                let readable = entry.read && events[i].filter == Int16(EVFILT_READ)
                let writable = entry.write && events[i].filter == Int16(EVFILT_WRITE)
                if readable || writable { entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable) }
            }
            if n < events.count { return }
        }
        #endif
    }
}
