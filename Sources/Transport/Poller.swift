import CSystem
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives readiness for the descriptors it registered with a `Poller`. Called on the poller's loop queue.
package protocol PollerHandler: AnyObject {
    func pollerEvent(fd: Int32, readable: Bool, writable: Bool)
}

/// One event loop's private epoll set (kqueue on Darwin): the client connections' sockets and curl's sockets all
/// live in it, and one wake-up serves every ready socket of the loop.
///
/// Why not one Dispatch source per socket: each source's registration, one-shot re-arming and cancellation
/// goes through libdispatch's manager thread (an eventfd wake-up and a futex hand-over per event); a FIN or
/// RST arriving with a connection's last bytes was seen not to fire again after a single read; and curl closes
/// some descriptors itself (its resolver's socket pair), so a source keyed by a number can end up watching a
/// dead registration. Here the kernel drops a closed descriptor from the set and a level-triggered event simply
/// repeats.
///
/// Who waits (Linux): a thread of the poller's own blocks in `epoll_wait` and handles what it returns inside
/// `queue.sync`, which runs the block on that same thread when the queue is idle (it waits its turn when the
/// queue is busy, so the queue still serialises everything). A Dispatch read source on the epoll descriptor cost
/// seven more system calls per relayed event (the manager thread's epoll_wait and epoll_ctl re-arm, an eventfd
/// write and read, two futex hand-overs to a worker thread): 11.8 system calls per event, against 4 now. On
/// Darwin a Dispatch read source still watches the kqueue.
///
/// Owned by the loop's queue: every method but `stop` is called there.
package final class Poller: @unchecked Sendable {
    // Invariant: `entries` and the epoll set are touched on `queue` only (the waiting thread touches `events`
    // and `entries` inside `queue.sync`).
    private let pollFD: Int32
    private let queue: DispatchQueue
    private struct Entry {
        let handler: any PollerHandler
        var read: Bool
        var write: Bool
    }
    private var entries: [Int32: Entry] = [:]
    /// Where the kernel reports ready descriptors: allocated once, not per wake-up.
    #if canImport(Glibc)
    private let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: 128)
    /// A pipe in the set whose readable end tells the waiting thread to stop.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    #else
    private let events = UnsafeMutableBufferPointer<kevent>.allocate(capacity: 128)
    private let source: DispatchSourceRead
    #endif

    package init(queue: DispatchQueue) {
        self.queue = queue
        #if canImport(Glibc)
        pollFD = Syscall.epollCreate()
        precondition(pollFD >= 0, "cannot create the event loop's poller")
        guard let wake = Syscall.wakePipe() else { preconditionFailure("cannot create the event loop's wake-up pipe") }
        wakeRead = wake.read
        wakeWrite = wake.write
        _ = Syscall.epollControl(pollFD, EPOLL_CTL_ADD, wakeRead, events: EPOLLIN.rawValue)
        // The thread holds the poller until it has stopped: it owns the descriptors' closing.
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let poller = Unmanaged<Poller>.fromOpaque(context!).takeRetainedValue()
            poller.waitLoop()
            return nil
        }, context)
        precondition(rc == 0, "cannot start the event loop's poller thread")
        pthread_detach(thread)
        #else
        pollFD = Syscall.kqueueCreate()
        precondition(pollFD >= 0, "cannot create the event loop's poller")
        source = DispatchSource.makeReadSource(fileDescriptor: pollFD, queue: queue)
        let fd = pollFD
        source.setCancelHandler { Syscall.close(fd) }
        source.setEventHandler { [unowned self] in self.drain(first: 0) }
        source.activate()
        #endif
    }

    deinit { events.deallocate() }

    /// Stops watching everything and closes the poll descriptor (once the waiting thread has woken up). Safe
    /// from any thread.
    package func stop() {
        #if canImport(Glibc)
        Syscall.wake(wakeWrite)
        #else
        queue.async { [self] in entries.removeAll() }
        source.cancel()
        #endif
    }

    #if canImport(Glibc)
    private func waitLoop() {
        while true {
            let n = Syscall.epollPoll(pollFD, into: events, timeoutMs: -1)
            if n == 0 { continue }
            var stopping = false
            for i in 0..<n where events[i].data.fd == wakeRead { stopping = true }
            if stopping { break }
            queue.sync { drain(first: n) }
        }
        queue.sync { entries.removeAll() }
        Syscall.close(wakeRead)
        Syscall.close(wakeWrite)
        Syscall.close(pollFD)
    }
    #endif

    /// The handler registered for `fd`, if any.
    package func handler(of fd: Int32) -> (any PollerHandler)? { entries[fd]?.handler }

    /// Watches `fd` for the given directions on behalf of `handler` (replacing any previous registration of
    /// that number: a descriptor number belongs to whoever opened it last).
    package func watch(_ fd: Int32, read: Bool, write: Bool, handler: any PollerHandler) {
        let known = entries[fd] != nil
        entries[fd] = Entry(handler: handler, read: read, write: write)
        apply(fd, read: read, write: write, known: known)
    }

    /// Changes the directions of a registered descriptor.
    package func update(_ fd: Int32, read: Bool, write: Bool) {
        guard var entry = entries[fd] else { return }
        guard entry.read != read || entry.write != write else { return }
        entry.read = read
        entry.write = write
        entries[fd] = entry
        apply(fd, read: read, write: write, known: true)
    }

    /// Stops watching `fd` (before it is closed, or when its owner no longer cares).
    package func remove(_ fd: Int32) {
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

    /// Handles the `first` events already in `events`, then polls again (without blocking) while batches come
    /// back full.
    private func drain(first: Int) {
        #if canImport(Glibc)
        var n = first
        for round in 0..<8 {
            if round > 0 || n == 0 { n = Syscall.epollPoll(pollFD, into: events) }
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
