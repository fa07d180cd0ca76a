import CCurl
import Dispatch
import Transport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Watches curl's sockets with a private epoll instance (kqueue on Darwin), which one Dispatch read source
/// watches in turn on the loop's queue.
///
/// Why not one Dispatch source per curl socket: curl closes some descriptors itself (its threaded resolver's
/// socket pair) while they are still watched, and the next socket it opens usually gets the same number. A
/// Dispatch source keyed by that number then watches a dead registration and the transfer hangs. The kernel
/// drops a closed descriptor from an epoll set on its own, and `update` falls back from MOD to ADD, so a
/// reused number is simply registered again. Owned by the loop queue.
final class SocketPoller {
    private let pollFD: Int32
    private let source: DispatchSourceRead
    private let onEvent: (Int32, Int32) -> Void
    /// The interest last registered per descriptor (Linux).
    private var registered: [Int32: UInt32] = [:]

    init(queue: DispatchQueue, onEvent: @escaping (_ fd: Int32, _ curlEvents: Int32) -> Void) {
        #if canImport(Glibc)
        pollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        #else
        pollFD = kqueue()
        #endif
        precondition(pollFD >= 0, "cannot create the upstream socket poller")
        self.onEvent = onEvent
        source = DispatchSource.makeReadSource(fileDescriptor: pollFD, queue: queue)
        let fd = pollFD
        source.setCancelHandler { Syscall.close(fd) }
    }

    func start() {
        source.setEventHandler { [unowned self] in self.drain() }
        source.activate()
    }

    /// Closes the poll descriptor (after its source is cancelled). Call once, on the loop.
    func stop() {
        source.cancel()
    }

    /// Watches `fd` for the given directions; neither means stop watching.
    func update(fd: Int32, read: Bool, write: Bool) {
        #if canImport(Glibc)
        if !read && !write {
            registered.removeValue(forKey: fd)
            _ = epoll_ctl(pollFD, EPOLL_CTL_DEL, fd, nil)   // ENOENT / EBADF: already gone, which is fine
            return
        }
        let events = (read ? EPOLLIN.rawValue : 0) | (write ? EPOLLOUT.rawValue : 0)
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        // What we believe is registered picks ADD or MOD (one syscall). The belief can be stale when curl closed
        // a descriptor itself and the number came back: then the other operation is the right one.
        let op = registered[fd] == nil ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        if epoll_ctl(pollFD, op, fd, &event) != 0 {
            let err = errno
            if err == ENOENT { _ = epoll_ctl(pollFD, EPOLL_CTL_ADD, fd, &event) }
            if err == EEXIST { _ = epoll_ctl(pollFD, EPOLL_CTL_MOD, fd, &event) }
        }
        registered[fd] = events
        #else
        var changes = [
            kevent(ident: UInt(fd), filter: Int16(EVFILT_READ), flags: UInt16(read ? EV_ADD | EV_ENABLE : EV_DELETE), fflags: 0, data: 0, udata: nil),
            kevent(ident: UInt(fd), filter: Int16(EVFILT_WRITE), flags: UInt16(write ? EV_ADD | EV_ENABLE : EV_DELETE), fflags: 0, data: 0, udata: nil),
        ]
        for i in changes.indices {
            _ = kevent(pollFD, &changes[i], 1, nil, 0, nil)   // deleting an absent filter fails harmlessly
        }
        #endif
    }

    private func drain() {
        #if canImport(Glibc)
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while true {
            let n = epoll_wait(pollFD, &events, Int32(events.count), 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            for i in 0..<Int(n) {
                let e = events[i].events
                var curlEvents: Int32 = 0
                if e & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { curlEvents |= CURL_CSELECT_IN }
                if e & EPOLLOUT.rawValue != 0 { curlEvents |= CURL_CSELECT_OUT }
                if e & EPOLLERR.rawValue != 0 { curlEvents |= CURL_CSELECT_ERR }
                onEvent(events[i].data.fd, curlEvents)
            }
            if Int(n) < events.count { return }
        }
        #else
        var events = [kevent](repeating: kevent(), count: 64)
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        while true {
            let n = kevent(pollFD, nil, 0, &events, Int32(events.count), &zero)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            for i in 0..<Int(n) {
                var curlEvents: Int32 = 0
                if events[i].filter == Int16(EVFILT_READ) { curlEvents |= CURL_CSELECT_IN }
                if events[i].filter == Int16(EVFILT_WRITE) { curlEvents |= CURL_CSELECT_OUT }
                if events[i].flags & UInt16(EV_ERROR) != 0 { curlEvents |= CURL_CSELECT_ERR }
                onEvent(Int32(events[i].ident), curlEvents)
            }
            if Int(n) < events.count { return }
        }
        #endif
    }
}
