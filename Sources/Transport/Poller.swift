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
        _ = epoll_ctl(pollFD, EPOLL_CTL_DEL, fd, nil)   // EBADF/ENOENT: already closed, which is fine
        #else
        apply(fd, read: false, write: false, known: true)
        #endif
    }

    private func apply(_ fd: Int32, read: Bool, write: Bool, known: Bool) {
        #if canImport(Glibc)
        var event = epoll_event()
        event.events = (read ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0) | (write ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        // What we believe is registered picks ADD or MOD; the belief is stale when a descriptor was closed
        // without telling us and its number came back, and then the other operation is the right one.
        if epoll_ctl(pollFD, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) != 0 {
            let err = errno
            if err == ENOENT { _ = epoll_ctl(pollFD, EPOLL_CTL_ADD, fd, &event) }
            if err == EEXIST { _ = epoll_ctl(pollFD, EPOLL_CTL_MOD, fd, &event) }
        }
        #else
        var changes = [
            kevent(ident: UInt(fd), filter: Int16(EVFILT_READ), flags: UInt16(read ? EV_ADD | EV_ENABLE : EV_DELETE), fflags: 0, data: 0, udata: nil),
            kevent(ident: UInt(fd), filter: Int16(EVFILT_WRITE), flags: UInt16(write ? EV_ADD | EV_ENABLE : EV_DELETE), fflags: 0, data: 0, udata: nil),
        ]
        for i in changes.indices { _ = kevent(pollFD, &changes[i], 1, nil, 0, nil) }
        #endif
    }

    private func drain() {
        #if canImport(Glibc)
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        for _ in 0..<8 {
            let n = epoll_wait(pollFD, &events, Int32(events.count), 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            for i in 0..<Int(n) {
                let fd = events[i].data.fd
                let e = events[i].events
                // Looked up now: an earlier handler in this batch may have closed this descriptor.
                guard let entry = entries[fd] else { continue }
                let failed = e & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
                let readable = entry.read && (e & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 || failed)
                let writable = entry.write && (e & EPOLLOUT.rawValue != 0 || failed)
                if readable || writable { entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable) }
            }
            if Int(n) < events.count { return }
        }
        #else
        var events = [kevent](repeating: kevent(), count: 128)
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        for _ in 0..<8 {
            let n = kevent(pollFD, nil, 0, &events, Int32(events.count), &zero)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            for i in 0..<Int(n) {
                let fd = Int32(events[i].ident)
                guard let entry = entries[fd] else { continue }
                let readable = entry.read && events[i].filter == Int16(EVFILT_READ)
                let writable = entry.write && events[i].filter == Int16(EVFILT_WRITE)
                if readable || writable { entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable) }
            }
            if Int(n) < events.count { return }
        }
        #endif
    }
}
