import CSystem
import Dispatch
import Support
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Receives readiness for the descriptors it registered with a `Poller`. Called on the poller's loop queue.
public protocol PollerHandler: AnyObject {
    func pollerEvent(fd: Int32, readable: Bool, writable: Bool)
    /// The same, saying whether the peer's end is known to be gone (EPOLLRDHUP, EPOLLHUP, EPOLLERR; always true on
    /// Darwin): without it, a reader that got less than it asked for may stop reading, since the level-triggered
    /// poller reports the descriptor again if more came. The default calls the three-argument form.
    func pollerEvent(fd: Int32, readable: Bool, writable: Bool, hangup: Bool)
    /// True for the handlers whose events open or close streams (the listening socket, client connections): their
    /// descriptors are served first (see `Poller`). Read when the descriptor is first watched. Default false.
    var pollerHandlesFirst: Bool { get }
}

extension PollerHandler {
    public var pollerHandlesFirst: Bool { false }
    public func pollerEvent(fd: Int32, readable: Bool, writable: Bool, hangup: Bool) {
        pollerEvent(fd: fd, readable: readable, writable: writable)
    }
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
/// Two classes of descriptors (Linux: two epoll sets, the "first" one nested in the main one). What opens or
/// closes a stream (the listening socket, client connections, an upstream socket until its response head
/// arrives: `watch(first:)`, `setHandlesFirst`) is served before the streams' events. Under load the main set's
/// ready list holds thousands of sockets and epoll hands them out 128 at a time, oldest first: a new connection
/// or a client's close then waited for the whole list to go round (issue 24: 134 ms from accept to the request,
/// 268 ms more to the upstream's head, with 5 000 streams). Each turn polls the first set whenever the main
/// set reports it ready or returns a full batch (the main set's backlog may hide it), and again after every 16
/// handlers of a long batch, at most 16 at a time (`firstSlice`): each class gets at least half of the handler
/// calls when both are busy. Under load a handler can take 100 to 250 µs (a read that found several events),
/// so 16 of them made each step of a new stream wait 2 to 4 ms (accept, request, the provider's answer: a
/// first byte of 27 ms at 5 000 streams). So the first set is also looked at once the other handlers have run
/// for `firstInterval` since the last look, and at least as long as that look's own handlers took (so an early
/// look never hands a flood of first-class work more than the count of 16 already did). When idle a wake-up
/// still costs one `epoll_wait`.
///
/// One turn handles one batch (up to 128 ready descriptors), and after each slice of 16 handlers the work they
/// handed to `soon` (a response head released with its first chunk, curl's "act now" timer). A turn starts with
/// the loop's timers when their deadline has passed (Linux: `setDeadline`, `onDeadline`). Between turns the queue
/// runs its other work (blocks from other loops, Dispatch timers on macOS), so no turn holds it longer than one
/// batch.
///
/// Owned by the loop's queue: every method but `stop` is called there.
public final class Poller: @unchecked Sendable {
    // Invariant: `entries`, `moves`, `registrationChanges`, `soonTasks`, `inTurn`, `soonFlushQueued` and the
    // epoll sets are touched on `queue` only (the waiting thread touches `events` and `entries` inside
    // `queue.sync`; it writes `pendingCount` just before its `queue.sync` and the turn reads it inside, so the
    // sync orders the two).
    private let pollFD: Int32
    private let queue: DispatchQueue
    /// Times the handlers of a long batch (`firstInterval`); a test's manual clock makes that deterministic.
    private let clock: any Clock
    private struct Entry {
        let handler: any PollerHandler
        var read: Bool
        var write: Bool
        /// The set the descriptor is registered in.
        var first: Bool
        /// It is to move to the other set when the turn ends (`setHandlesFirst` during a turn).
        var moving = false
    }
    private var entries = ByDescriptor<Entry>()
    /// Descriptors whose class changed during this turn (`setHandlesFirst`), moved between the sets when it ends.
    private var moves: [Int32] = []
    /// `epoll_ctl` calls made for registrations (tests).
    public private(set) var registrationChanges = 0
    /// Work handed to `soon`, run when the current slice of handlers has run (in order).
    private var soonTasks: [() -> Void] = []
    /// True while a turn handles a batch: `soon` work then runs inside it, with no hop through the queue.
    private var inTurn = false
    /// A queue block is on its way to run `soon` work handed over outside a turn.
    private var soonFlushQueued = false
    /// The size of the batch `waitLoop` hands to its turn (written by the waiting thread just before `queue.sync`).
    private var pendingCount = 0
    /// The waiting thread's log batches (`LogBatch`), one per turn; set in a `queue.sync` by that thread before its
    /// first turn.
    private var logBatches: LogBatch.ThreadBatches?
    /// `LatencyTrace.enabled`, read once: the probes on the event path cost one test of a stored flag.
    private let tracing = LatencyTrace.enabled
    /// Where the kernel reports ready descriptors: allocated once, not per wake-up.
    #if canImport(Glibc)
    private let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: 128)
    private let firstEvents = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: Poller.firstSlice)
    /// The set of descriptors served first; itself a member of `pollFD` (readable when one of them is ready).
    private let firstFD: Int32
    /// A pipe in the set whose readable end wakes the waiting thread: to stop (`stopping`), or to wait again for
    /// an earlier deadline.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// What the waiting thread and the queue share about the wait (`setDeadline`), three words read and written
    /// with sequentially consistent atomics (`csystem_atomic_load`, `_store`). Not `Locked`: two of them per
    /// wake-up, which at light load is per relayed event. Word 0, written on the queue and read by the waiting
    /// thread: CLOCK_MONOTONIC nanoseconds of the loop's earliest timer, 0 for none. Word 1, written by the
    /// waiting thread and read on the queue: the deadline it is blocked for (`UInt64.max`: none), 0 while it is
    /// not waiting. Word 2, written by `stop`: 1 once it ran. Freed with the poller, which its thread holds until
    /// it has stopped.
    private let shared: UnsafeMutablePointer<UInt64> = {
        let words = UnsafeMutablePointer<UInt64>.allocate(capacity: 3)
        words.initialize(repeating: 0, count: 3)
        return words
    }()
    private var sharedDeadline: UnsafeMutablePointer<UInt64> { shared }
    private var waitingFor: UnsafeMutablePointer<UInt64> { shared + 1 }
    private var stopping: UnsafeMutablePointer<UInt64> { shared + 2 }
    /// The deadline as the queue last set it (read in every turn without an atomic load). Queue only.
    private var queueDeadline: UInt64 = 0
    /// Runs the loop's due timers (`EventLoop`), on the queue, in a turn of the waiting thread once `setDeadline`'s
    /// deadline has passed. Set once, before the first deadline.
    public var onDeadline: (() -> Void)?
    #else
    private let events = UnsafeMutableBufferPointer<kevent>.allocate(capacity: 128)
    private let source: DispatchSourceRead
    #endif

    public init(queue: DispatchQueue, clock: any Clock = MonotonicClock()) {
        self.queue = queue
        self.clock = clock
        #if canImport(Glibc)
        pollFD = Syscall.epollCreate()
        firstFD = Syscall.epollCreate()
        precondition(pollFD >= 0 && firstFD >= 0, "cannot create the event loop's poller")
        guard let wake = Syscall.wakePipe() else { preconditionFailure("cannot create the event loop's wake-up pipe") }
        wakeRead = wake.read
        wakeWrite = wake.write
        _ = Syscall.epollControl(pollFD, EPOLL_CTL_ADD, wakeRead, events: EPOLLIN.rawValue)
        _ = Syscall.epollControl(pollFD, EPOLL_CTL_ADD, firstFD, events: EPOLLIN.rawValue)
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
        source.setEventHandler { [weak self] in self?.handleBatch(0) }   // a late firing after deinit does nothing
        source.activate()
        #endif
    }

    deinit {
        events.deallocate()
        #if canImport(Glibc)
        shared.deallocate()
        firstEvents.deallocate()
        #endif
    }

    /// Stops watching everything and closes the poll descriptor (once the waiting thread has woken up). Safe
    /// from any thread.
    public func stop() {
        #if canImport(Glibc)
        csystem_atomic_store(stopping, 1)
        Syscall.wake(wakeWrite)
        #else
        queue.async { [self] in entries.removeAll() }
        source.cancel()
        #endif
    }

    #if canImport(Glibc)
    private func waitLoop() {
        // One work item for every turn: `queue.sync` with a closure copies it into a new block each time (two
        // allocations per wake-up, so per relayed event at light load); a work item's block is made once and
        // may run any number of times (it is never waited on). It holds the poller only while this loop runs.
        let turn = DispatchWorkItem { [self] in
            fireDeadlineIfDue()
            handleBatch(pendingCount)
        }
        // A wait that ended on its deadline alone: the timers, no poll.
        let timersOnly = DispatchWorkItem { [self] in fireDeadlineIfDue() }
        // Turns run on this thread (`queue.sync` runs its block on the calling thread): its batches are theirs.
        // A turn that ran elsewhere would still be correct, its lines only written one by one.
        let batches = LogBatch.thisThread()
        queue.sync { logBatches = batches }
        var drain = [UInt8](repeating: 0, count: 64)
        while true {
            // Blocked "for no deadline" first, then for the one read. `setDeadline` stores its deadline and then
            // reads what the thread is blocked for; sequentially consistent, so either the thread reads the new
            // deadline, or `setDeadline` sees it blocked for no deadline or a later one and wakes it (at worst
            // once too often, when the new deadline is the later one).
            csystem_atomic_store(waitingFor, .max)
            let deadline = csystem_atomic_load(sharedDeadline)
            if deadline != 0 { csystem_atomic_store(waitingFor, deadline) }
            // Not retried on EINTR with the same timeout (a signal handler can run on this thread): back to the
            // top, where the timeout is computed again from the deadline.
            let n = Syscall.epollPollOnce(pollFD, into: events, timeoutMs: Self.timeoutMs(until: deadline))
            csystem_atomic_store(waitingFor, 0)
            if csystem_atomic_load(stopping) != 0 { break }
            for i in 0..<n where events[i].data.fd == wakeRead {
                _ = drain.withUnsafeMutableBytes { Syscall.readPipe(wakeRead, into: $0) }
            }
            if n == 0 {
                if deadline != 0 { queue.sync(execute: timersOnly) }
                continue
            }
            guard tracing else {
                pendingCount = n
                queue.sync(execute: turn)
                continue
            }
            let polledAt = LatencyTrace.now()
            queue.sync {
                LatencyTrace.since(polledAt, .queueWait)
                let start = LatencyTrace.now()
                fireDeadlineIfDue()
                handleBatch(n, polledAt: polledAt)
                LatencyTrace.since(start, .batch)
            }
        }
        queue.sync {
            entries.removeAll()
            logBatches = nil   // freed with this thread
        }
        Syscall.close(wakeRead)
        Syscall.close(wakeWrite)
        Syscall.close(firstFD)
        Syscall.close(pollFD)
    }
    #endif

    #if canImport(Glibc)
    /// `epoll_wait`'s timeout for a CLOCK_MONOTONIC deadline (0: none, wait without one): rounded up to the next
    /// millisecond, so that a wait never ends before its deadline.
    public static func timeoutMs(until deadline: UInt64, now: UInt64 = MonotonicClock().now().nanoseconds) -> Int32 {
        guard deadline != 0 else { return -1 }
        guard deadline > now else { return 0 }
        let ms = (deadline - now + 999_999) / 1_000_000
        return Int32(min(ms, UInt64(Int32.max)))
    }

    /// The loop's earliest timer is due `nanoseconds` from now: the waiting thread's next wait ends then at the
    /// latest, and a turn runs `onDeadline`. Replaces the previous deadline, earlier or later. The thread is woken
    /// only when it is blocked for a later deadline (or none): a deadline set by a handler, during a turn, costs
    /// no system call. Call on the queue.
    public func setDeadline(afterNanoseconds nanoseconds: UInt64) {
        let now = MonotonicClock().now().nanoseconds
        let at = max(1, now.addingReportingOverflow(nanoseconds).overflow ? UInt64.max - 1 : now + nanoseconds)
        queueDeadline = at
        csystem_atomic_store(sharedDeadline, at)
        if at < csystem_atomic_load(waitingFor) { Syscall.wake(wakeWrite) }
    }

    /// The deadline the waiting thread is blocked for (CLOCK_MONOTONIC nanoseconds; `UInt64.max`: none; 0: not
    /// blocked). For tests, which wait for the thread to be blocked before they arm an earlier timer.
    public var blockedUntil: UInt64 { csystem_atomic_load(waitingFor) }

    /// Runs `onDeadline` when the deadline has passed; the deadline is cleared first (the timers set the next).
    private func fireDeadlineIfDue() {
        guard queueDeadline != 0, MonotonicClock().now().nanoseconds >= queueDeadline else { return }
        queueDeadline = 0
        csystem_atomic_store(sharedDeadline, 0)
        onDeadline?()
    }
    #endif

    /// The handler registered for `fd`, if any.
    public func handler(of fd: Int32) -> (any PollerHandler)? { entries[fd]?.handler }

    /// Watches `fd` for the given directions on behalf of `handler` (replacing any previous registration of
    /// that number: a descriptor number belongs to whoever opened it last). `first` (default: the handler's
    /// `pollerHandlesFirst`) serves it before the streams' events.
    public func watch(_ fd: Int32, read: Bool, write: Bool, handler: any PollerHandler, first: Bool? = nil) {
        let previous = entries[fd]
        let first = first ?? handler.pollerHandlesFirst
        entries[fd] = Entry(handler: handler, read: read, write: write, first: first)
        #if canImport(Glibc)
        // A number registered in the other set (by a previous owner that did not say goodbye) leaves it first.
        if let previous, previous.first != first {
            registrationChanges += 1
            _ = Syscall.epollControl(set(previous.first), EPOLL_CTL_DEL, fd, events: 0)
        }
        #endif
        apply(fd, read: read, write: write, first: first, known: previous?.first == first)
    }

    /// Changes the directions of a registered descriptor.
    public func update(_ fd: Int32, read: Bool, write: Bool) {
        guard var entry = entries[fd] else { return }
        guard entry.read != read || entry.write != write else { return }
        entry.read = read
        entry.write = write
        entries[fd] = entry
        apply(fd, read: read, write: write, first: entry.first, known: true)
    }

    /// Moves a registered descriptor between the two classes (an upstream socket whose response head arrived
    /// joins the streams' events). During a turn the move waits for the turn's end, and a descriptor removed
    /// before then is never moved: a short answer read whole with its head (its transfer over in the same call
    /// into curl) cost two more `epoll_ctl` calls per request (S3) for a registration nothing waited on.
    public func setHandlesFirst(_ fd: Int32, _ first: Bool) {
        guard var entry = entries[fd] else { return }
        #if canImport(Glibc)
        if inTurn {
            let wasMoving = entry.moving
            entry.moving = entry.first != first
            entries[fd] = entry
            if entry.moving && !wasMoving { moves.append(fd) }
            return
        }
        #endif
        guard entry.first != first else { return }
        entry.first = first
        entries[fd] = entry
        #if canImport(Glibc)
        move(fd, entry)
        #endif
    }

    #if canImport(Glibc)
    /// Registers `fd` in the set `entry.first` names, out of the other.
    private func move(_ fd: Int32, _ entry: Entry) {
        registrationChanges += 1
        _ = Syscall.epollControl(set(!entry.first), EPOLL_CTL_DEL, fd, events: 0)
        apply(fd, read: entry.read, write: entry.write, first: entry.first, known: false)
    }

    /// The moves this turn asked for, of descriptors still registered by the handler that asked.
    private func applyMoves() {
        for fd in moves {
            guard var entry = entries[fd], entry.moving else { continue }
            entry.moving = false
            entry.first.toggle()
            entries[fd] = entry
            move(fd, entry)
        }
        moves.removeAll(keepingCapacity: true)
    }
    #endif

    /// Whether `fd` is served first, or will be once this turn ends (tests).
    public func handlesFirst(_ fd: Int32) -> Bool? { entries[fd].map { $0.moving ? !$0.first : $0.first } }

    /// Whether `fd` is registered in the first set now (tests).
    public func registeredFirst(_ fd: Int32) -> Bool? { entries[fd]?.first }

    /// Forgets `fd`, which its owner closes right after, without a system call: closing a descriptor takes it
    /// out of every epoll set and kqueue (the relay never duplicates one, so no other descriptor keeps it
    /// registered). One `epoll_ctl` less per client connection.
    public func forgetBeforeClose(_ fd: Int32) {
        entries.removeValue(forKey: fd)
    }

    /// Stops watching `fd` (when its owner no longer cares, the descriptor staying open).
    public func remove(_ fd: Int32) {
        guard let entry = entries.removeValue(forKey: fd) else { return }
        #if canImport(Glibc)
        registrationChanges += 1
        _ = Syscall.epollControl(set(entry.first), EPOLL_CTL_DEL, fd, events: 0)   // EBADF/ENOENT: already closed, which is fine
        #else
        apply(fd, read: false, write: false, first: entry.first, known: true)
        #endif
    }

    #if canImport(Glibc)
    private func set(_ first: Bool) -> Int32 { first ? firstFD : pollFD }
    #endif

    private func apply(_ fd: Int32, read: Bool, write: Bool, first: Bool, known: Bool) {
        #if canImport(Glibc)
        let mask = (read ? EPOLLIN.rawValue | EPOLLRDHUP.rawValue : 0) | (write ? EPOLLOUT.rawValue : 0)
        let set = set(first)
        registrationChanges += 1
        // What we believe is registered picks ADD or MOD; the belief is stale when a descriptor was closed
        // without telling us and its number came back, and then the other operation is the right one.
        switch Syscall.epollControl(set, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, events: mask) {
        case ENOENT: _ = Syscall.epollControl(set, EPOLL_CTL_ADD, fd, events: mask)
        case EEXIST: _ = Syscall.epollControl(set, EPOLL_CTL_MOD, fd, events: mask)
        default: break
        }
        #else
        Syscall.kqueueChange(pollFD, kevent(ident: UInt(fd), filter: Int16(EVFILT_READ), flags: UInt16(read ? EV_ADD | EV_ENABLE : EV_DELETE),
                                            fflags: 0, data: 0, udata: nil))
        Syscall.kqueueChange(pollFD, kevent(ident: UInt(fd), filter: Int16(EVFILT_WRITE), flags: UInt16(write ? EV_ADD | EV_ENABLE : EV_DELETE),
                                            fflags: 0, data: 0, udata: nil))
        #endif
    }

    /// Runs `task` on this loop within the same turn, once the slice of handlers running now (at most 16) has
    /// run: no hop through the queue, so what a handler leaves for "right after me" (a held response head, curl's
    /// request to act now) waits neither for the rest of a long batch nor for another thread's wake-up; and what
    /// a slice's handlers leave is done together (one `curl_multi_socket_action` for every transfer they added,
    /// responses sent back to back: run after each handler instead, S3 lost 20 % of its requests per second to
    /// the peers' extra wake-ups). Outside a turn (a timer, a block on the queue) the task runs in a block
    /// queued now. Call on the loop.
    public func soon(_ task: @escaping () -> Void) {
        soonTasks.append(task)
        if !inTurn { queueFlush() }
    }

    /// Outside a turn: a block on the queue runs the waiting tasks (what they hand over queues the next one).
    private func queueFlush() {
        guard !soonFlushQueued else { return }
        soonFlushQueued = true
        queue.async { [self] in
            soonFlushQueued = false
            runSoonTasks()
        }
    }

    /// How many `soon` tasks wait (tests).
    public var pendingSoonCount: Int { soonTasks.count }

    @inline(__always)
    private func runSoonTasksIfAny() {
        if !soonTasks.isEmpty { runSoonTasks() }
    }

    /// Runs the tasks waiting now; what they hand over waits for the next slice's end (or the turn's end), so a
    /// task that keeps handing over more (curl asking again and again to act now) cannot hold the loop.
    private func runSoonTasks() {
        let count = soonTasks.count
        for i in 0..<count { soonTasks[i]() }
        soonTasks.removeFirst(count)
    }

    /// The turn is over: one more round of `soon` work, and what that hands over runs in a queued block.
    private func endTurn() {
        runSoonTasksIfAny()
        #if canImport(Glibc)
        if !moves.isEmpty { applyMoves() }
        #endif
        inTurn = false
        if !soonTasks.isEmpty { queueFlush() }
    }

    /// Handles one batch: the `count` events already in `events` (or, with none, what a non-blocking poll
    /// returns). The first class's ready descriptors run first, then the rest; `soon` work after each slice.
    func handleBatch(_ count: Int, polledAt: UInt64 = 0) {
        #if canImport(Glibc)
        var n = count
        var polledAt = polledAt
        if n == 0 {
            n = Syscall.epollPoll(pollFD, into: events)
            if tracing { polledAt = LatencyTrace.now() }
        }
        guard n > 0 else { return }
        if tracing { LatencyTrace.record(.eventsPerBatch, UInt64(n)) }
        inTurn = true
        // The turn's log lines go out together when it ends (`LogBatch`): one write, not one per exchange.
        let batches = logBatches ?? LogBatch.thisThread()   // kqueue: a Dispatch source's thread
        batches.open()
        defer {
            endTurn()
            batches.close()
        }
        // The first set is looked at when it says it is ready, or when a full batch may have left its
        // readiness behind in the main set's backlog; and again after every `firstSlice` of a long batch's
        // other handlers (under load one relayed readiness can cost half a millisecond: 64 ms for a batch).
        var firstReady = n == events.count
        for i in 0..<n where events[i].data.fd == firstFD { firstReady = true }
        // A short batch is not timed (the next turn comes after a few handlers anyway): an idle loop's event
        // pays no clock read.
        let timed = n > Self.untimedBatch
        var lookedAt = timed ? clock.now().nanoseconds : 0
        var lookTook: UInt64 = 0
        if firstReady {
            serveFirst(polledAt: polledAt)
            if timed {
                let now = clock.now().nanoseconds
                lookTook = now &- lookedAt
                lookedAt = now
            }
        }
        var sinceFirst = 0
        for i in 0..<n where events[i].data.fd != firstFD {
            dispatch(events[i], polledAt: polledAt)
            sinceFirst += 1
            let now = timed ? clock.now().nanoseconds : 0
            let ran = now &- lookedAt
            if sinceFirst == Self.firstSlice || (timed && ran >= Self.firstInterval && ran >= lookTook) {
                sinceFirst = 0
                runSoonTasksIfAny()
                serveFirst(polledAt: polledAt)
                if timed {
                    lookedAt = clock.now().nanoseconds
                    lookTook = lookedAt &- now
                }
            }
        }
        #else
        let n = Syscall.kqueuePoll(pollFD, into: events)
        guard n > 0 else { return }
        inTurn = true
        // The turn's log lines go out together when it ends (`LogBatch`): one write, not one per exchange.
        let batches = logBatches ?? LogBatch.thisThread()   // kqueue: a Dispatch source's thread
        batches.open()
        defer {
            endTurn()
            batches.close()
        }
        var handled = 0
        for pass in 0..<2 {
            for i in 0..<n {
                let fd = Int32(events[i].ident)
                guard let entry = entries[fd], entry.first == (pass == 0) else { continue }
                let readable = entry.read && events[i].filter == Int16(EVFILT_READ)
                let writable = entry.write && events[i].filter == Int16(EVFILT_WRITE)
                if readable || writable {
                    entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable, hangup: true)
                    handled += 1
                    if handled % 16 == 0 { runSoonTasksIfAny() }
                }
            }
        }
        #endif
    }

    #if canImport(Glibc)
    /// The most first-class handlers per look at the first set, and the other handlers between two looks in a
    /// long batch: when both classes are busy each gets at least half of the handler calls, so a flood of
    /// client bytes or connections cannot starve the running streams, nor the streams a new connection.
    static let firstSlice = 16

    /// Nanoseconds of other handlers in a long batch after which the first set is looked at again, even before
    /// `firstSlice` of them have run (unless the last look's handlers took longer). One `epoll_wait` per look:
    /// about 1 µs, against the 250 µs it bounds.
    static let firstInterval: UInt64 = 250_000

    /// Batches of at most this many descriptors are not timed against `firstInterval`: two clock reads per
    /// event were 350 of an idle loop's 13 000 instructions per relayed event (callgrind).
    static let untimedBatch = 4

    /// Handles up to `firstSlice` ready descriptors of the first class, then the `soon` work they left.
    private func serveFirst(polledAt: UInt64) {
        let m = Syscall.epollPoll(firstFD, into: firstEvents)
        for i in 0..<m { dispatch(firstEvents[i], polledAt: polledAt) }
        runSoonTasksIfAny()
    }

    @inline(__always)
    private func dispatch(_ event: epoll_event, polledAt: UInt64) {
        let fd = event.data.fd
        let e = event.events
        // Looked up now: an earlier handler in this batch may have closed this descriptor.
        guard let entry = entries[fd] else { return }
        let failed = e & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
        let hangup = failed || e & EPOLLRDHUP.rawValue != 0
        let readable = entry.read && (e & EPOLLIN.rawValue != 0 || hangup)
        let writable = entry.write && (e & EPOLLOUT.rawValue != 0 || failed)
        guard readable || writable else { return }
        guard tracing else {
            entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable, hangup: hangup)
            return
        }
        LatencyTrace.since(polledAt, .position)
        let start = LatencyTrace.now()
        entry.handler.pollerEvent(fd: fd, readable: readable, writable: writable, hangup: hangup)
        LatencyTrace.since(start, .handler)
    }
    #endif
}
