// One turn of an event loop's poller (issue 24): work handed to `soon` runs before anything else on the loop,
// and what opens or closes a stream is not starved by a long backlog of other ready descriptors. Measured by
// order and by counting handler calls, never by time.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Support
import Testing
import Transport

/// A value the tests share with blocks on one loop's queue.
private final class OnLoop<Value>: @unchecked Sendable {
    // Invariant: read and written on the loop's queue only (and by the test after a `queue.sync`).
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// Serialized: its backlogs hold 500 to 1 000 descriptors each (see `makeBacklog`).
@Suite(.serialized) struct PollerTurnTests {
    /// Counts its calls and, when `drain`, reads what is there; otherwise leaves the byte in place, so its
    /// descriptor stays ready (level-triggered) and comes back in every round of the ready list.
    final class Spinner: PollerHandler, @unchecked Sendable {
        // Invariant: touched on the loop's queue only.
        var calls = 0
        /// Runs on every call (a test's manual clock moved by what a handler costs).
        var each: () -> Void = {}
        func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
            calls += 1
            each()
        }
    }

    /// Runs `body` once on its first readiness and stops watching.
    final class Once: PollerHandler, @unchecked Sendable {
        // Invariant: touched on the loop's queue only.
        let first: Bool
        let poller: Poller
        let body: () -> Void
        init(first: Bool, poller: Poller, body: @escaping () -> Void) {
            self.first = first
            self.poller = poller
            self.body = body
        }
        var pollerHandlesFirst: Bool { first }
        func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
            poller.remove(fd)
            body()
        }
    }

    /// A backlog handler (its descriptor stays ready) that runs `onFire` on its first call after being armed.
    final class Trigger: PollerHandler, @unchecked Sendable {
        // Invariant: touched on the loop's queue only.
        var calls = 0
        var armed = false
        var onFire: () -> Void = {}
        /// Runs on every call (a test's manual clock moved by what a handler costs).
        var each: () -> Void = {}
        func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
            calls += 1
            each()
            if armed {
                armed = false
                onFire()
            }
        }
    }

    /// Makes every pipe readable and watches its read end for `handler`. Call on the loop.
    static func fill(_ loop: EventLoop, _ pipes: [(read: Int32, write: Int32)], _ handler: any PollerHandler) {
        for p in pipes {
            makeReady(p)
            loop.poller.watch(p.read, read: true, write: false, handler: handler)
        }
    }

    /// `count` descriptors for a backlog that stays ready: on Linux UDP sockets connected to themselves, one
    /// descriptor each (read and write are the same number; a byte written is a datagram to itself, readable until
    /// read) where a pipe takes two. The test process then stays well under the ~1 350 open descriptors past which
    /// corelibs Foundation's `Process.run` reads past the end of its /proc/self/fd listing (a 256-byte name copied
    /// from the last entry of a full buffer): under AddressSanitizer that failed `make sanitize` once, in another
    /// suite that started a relay while these backlogs were open.
    static func makeBacklog(_ count: Int) -> [(read: Int32, write: Int32)] {
        #if canImport(Glibc)
        return (0..<count).map { _ in
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            precondition(fd >= 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                    precondition(bind(fd, raw, length) == 0)
                    precondition(getsockname(fd, raw, &length) == 0)
                    precondition(connect(fd, raw, length) == 0)
                }
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            return (fd, fd)
        }
        #else
        return (0..<count).map { _ in makePipe() }
        #endif
    }

    /// Makes `p` readable: a byte into a pipe, a datagram to a backlog socket itself.
    static func makeReady(_ p: (read: Int32, write: Int32)) { put(p.write) }

    /// Closes a pipe's two ends, or a backlog socket once.
    static func closeAll(_ descriptors: [(read: Int32, write: Int32)]) {
        for p in descriptors {
            close(p.read)
            if p.write != p.read { close(p.write) }
        }
    }

    static func makePipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        return (fds[0], fds[1])
    }

    /// Runs `action` on the loop once the backlog's handlers have run 2 000 times (it has gone round a few times).
    static func whenBusy(_ loop: EventLoop, _ spinner: Spinner, _ action: @escaping @Sendable () -> Void) {
        when(loop, { spinner.calls >= 2_000 }, action)
    }

    /// Runs `action` on the loop, between two turns, once `condition` holds there.
    static func when(_ loop: EventLoop, _ condition: @escaping @Sendable () -> Bool, _ action: @escaping @Sendable () -> Void) {
        loop.queue.async {
            if condition() { action() } else { when(loop, condition, action) }
        }
    }

    static func put(_ fd: Int32) {
        var byte: UInt8 = 1
        precondition(write(fd, &byte, 1) == 1)
    }

    /// What a handler hands to `soon` runs when it returns, before a block it queued on the loop earlier:
    /// no hop through the queue (it once waited behind the whole batch and another thread's wake-up).
    @Test func soonRunsBeforeWorkQueuedEarlier() {
        let loop = EventLoop(index: 0)
        let p = Self.makePipe()
        defer { close(p.read); close(p.write) }
        let order = OnLoop<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let handler = Once(first: false, poller: loop.poller) {
            loop.queue.async {
                order.value.append("queued")
                done.signal()
            }
            loop.soon { order.value.append("soon") }
            order.value.append("handler")
        }
        loop.queue.sync { loop.poller.watch(p.read, read: true, write: false, handler: handler) }
        Self.put(p.write)
        done.wait()
        loop.queue.sync { #expect(order.value == ["handler", "soon", "queued"]) }
    }

    /// A descriptor forgotten and closed (no `epoll_ctl`: the close takes it out of the set) gets no more
    /// events, and its number, taken by a new descriptor in either class, brings that one's events to its new
    /// handler only.
    @Test(arguments: [true, false])
    func forgottenBeforeCloseAndNumberReused(first: Bool) {
        let loop = EventLoop(index: 0)
        let old = Spinner(), new = Spinner()
        let a = Self.makePipe()
        let b = OnLoop((read: Int32(-1), write: Int32(-1)))
        let done = DispatchSemaphore(value: 0)
        let oldCallsAtClose = OnLoop(0)
        let forgotten = OnLoop(false)
        loop.queue.sync {
            Self.put(a.write)
            loop.poller.watch(a.read, read: true, write: false, handler: old, first: first)
        }
        Self.when(loop, { old.calls >= 3 }) {
            loop.poller.forgetBeforeClose(a.read)
            forgotten.value = loop.poller.handler(of: a.read) == nil
            // Closed and its number taken by a new pipe's read end in one step (other suites open descriptors
            // meanwhile, so "the lowest free number" is not this one): dup2 closes the old end, whose only
            // reference this was, and the new end's first number is closed again.
            let fresh = Self.makePipe()
            precondition(dup2(fresh.read, a.read) == a.read)
            close(fresh.read)
            b.value = (a.read, fresh.write)
            oldCallsAtClose.value = old.calls
            Self.put(b.value.write)
            loop.poller.watch(b.value.read, read: true, write: false, handler: new, first: !first)
            Self.when(loop, { new.calls >= 100 }) { done.signal() }
        }
        done.wait()
        loop.queue.sync {
            #expect(forgotten.value)
            #expect(old.calls == oldCallsAtClose.value)
            #expect(loop.poller.handler(of: b.value.read) === new)
            loop.poller.remove(b.value.read)
        }
        close(a.write)
        close(b.value.read)
        close(b.value.write)
    }

    /// Outside a turn (a block on the queue, a timer), `soon` work still runs, in a block of its own.
    @Test func soonOutsideATurnRuns() {
        let loop = EventLoop(index: 0)
        let done = DispatchSemaphore(value: 0)
        let ran = OnLoop(0)
        loop.queue.sync {
            loop.soon { ran.value += 1 }
            loop.soon { ran.value += 1; done.signal() }
            #expect(ran.value == 0)
        }
        done.wait()
        loop.queue.sync { #expect(ran.value == 2) }
    }

    /// With 500 descriptors always ready (a loaded loop's backlog), a descriptor of the first class (a new
    /// connection, a client's close) that becomes ready is handled after at most 16 of the others, not after the
    /// whole backlog has gone round once (500 with a single epoll set; up to 128 when only each batch's start
    /// looked at the first class).
    @Test(arguments: [true, false])
    func firstClassIsNotStarvedByABacklog(first: Bool) {
        let loop = EventLoop(index: 0)
        let spinner = Spinner()
        let backlog = Self.makeBacklog(500)
        let urgent = Self.makePipe()
        defer {
            Self.closeAll(backlog + [urgent])
        }
        let mark = OnLoop(0)
        let waited = OnLoop(-1)
        let done = DispatchSemaphore(value: 0)
        let handler = Once(first: first, poller: loop.poller) {
            waited.value = spinner.calls - mark.value
            done.signal()
        }
        loop.queue.sync {
            Self.fill(loop, backlog, spinner)
            loop.poller.watch(urgent.read, read: true, write: false, handler: handler)
        }
        // Once the backlog has gone round a few times, the urgent descriptor becomes ready (from the loop, so
        // the count at that moment is exact).
        Self.whenBusy(loop, spinner) {
            mark.value = spinner.calls
            Self.put(urgent.write)
        }
        done.wait()
        loop.queue.sync {
            for p in backlog { loop.poller.remove(p.read) }
            if first {
                #expect(waited.value >= 0 && waited.value <= 16, "backlog handlers run before the urgent one: \(waited.value)")
            } else {
                // The control: the same descriptor in the streams' class waits for the backlog to go round.
                #expect(waited.value >= 500 - 128, "backlog handlers run before a plain one: \(waited.value)")
            }
        }
    }

    /// A first-class descriptor that becomes ready in the middle of a long batch (here: made ready by the batch's
    /// first handler) is handled after at most 16 more of the batch's handlers, not at the batch's end (127).
    /// When each handler takes 100 µs (a manual clock moved by each call: a loaded loop's reads), it waits for
    /// `Poller.firstInterval` (250 µs) of them, at most 3, not for 16 (1.6 ms).
    @Test(arguments: [(0, 16), (100_000, 3)] as [(UInt64, Int)])
    func firstClassReadyMidBatchWaitsOneSlice(handlerNanoseconds: UInt64, atMost: Int) {
        let clock = ManualClock()
        let loop = EventLoop(index: 0, clock: clock)
        let backlog = Trigger()
        backlog.each = { clock.advance(bySeconds: Double(handlerNanoseconds) / 1e9) }
        let pipes = Self.makeBacklog(500)
        let urgent = Self.makePipe()
        defer { Self.closeAll(pipes + [urgent]) }
        let mark = OnLoop(0)
        let waited = OnLoop(-1)
        let done = DispatchSemaphore(value: 0)
        let handler = Once(first: true, poller: loop.poller) {
            waited.value = backlog.calls - mark.value
            done.signal()
        }
        backlog.onFire = { [unowned backlog] in   // the trigger holds this closure: no cycle through it
            mark.value = backlog.calls
            Self.put(urgent.write)
        }
        loop.queue.sync {
            Self.fill(loop, pipes, backlog)
            loop.poller.watch(urgent.read, read: true, write: false, handler: handler)
        }
        // Armed between two turns: the next turn's first backlog handler fires it.
        Self.when(loop, { backlog.calls >= 2_000 }) { backlog.armed = true }
        done.wait()
        loop.queue.sync {
            for p in pipes { loop.poller.remove(p.read) }
            #expect(waited.value >= 0 && waited.value <= atMost, "backlog handlers run after the urgent one was ready: \(waited.value)")
        }
    }

    /// Work a handler hands to `soon` runs once the slice of 16 handlers it belongs to has run, not after the
    /// rest of a long batch (127 more handlers) nor after the queue's other work.
    @Test func soonRunsAfterTheSliceNotTheBatch() {
        let loop = EventLoop(index: 0)
        let backlog = Trigger()
        let pipes = Self.makeBacklog(500)
        defer { Self.closeAll(pipes) }
        let waited = OnLoop(-1)
        let done = DispatchSemaphore(value: 0)
        backlog.onFire = { [unowned backlog] in   // the trigger holds this closure: no cycle through it
            let mark = backlog.calls
            loop.soon {
                waited.value = backlog.calls - mark
                done.signal()
            }
        }
        loop.queue.sync { Self.fill(loop, pipes, backlog) }
        // Armed between two turns: the next turn's first backlog handler hands the work over.
        Self.when(loop, { backlog.calls >= 2_000 }) { backlog.armed = true }
        done.wait()
        loop.queue.sync {
            for p in pipes { loop.poller.remove(p.read) }
            #expect(waited.value >= 0 && waited.value <= 15, "handlers run between the hand-over and the work: \(waited.value)")
        }
    }

    /// A client connection's close is handled within one slice of a 500-descriptor backlog: its delegate hears
    /// it after at most 16 other handlers.
    @Test func clientCloseIsNotStarvedByABacklog() {
        final class Delegate: ConnectionDelegate, @unchecked Sendable {
            // Invariant: touched on the loop's queue only.
            var onClose: () -> Void = {}
            func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {}
            func connectionDidDrain(_ connection: Connection) {}
            func connection(_ connection: Connection, didCloseWith reason: ConnectionCloseReason) { onClose() }
        }
        let loop = EventLoop(index: 0)
        let spinner = Spinner()
        let backlog = Self.makeBacklog(500)
        defer { Self.closeAll(backlog) }
        var pair: [Int32] = [-1, -1]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        _ = fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK)
        let peer = pair[1]
        let delegate = Delegate()
        let connection = Connection(fd: pair[0], loop: loop, peerAddress: "test")
        let mark = OnLoop(0)
        let waited = OnLoop(-1)
        let done = DispatchSemaphore(value: 0)
        delegate.onClose = {
            waited.value = spinner.calls - mark.value
            done.signal()
        }
        loop.queue.sync {
            connection.delegate = delegate
            connection.start()
            Self.fill(loop, backlog, spinner)
        }
        Self.whenBusy(loop, spinner) {
            mark.value = spinner.calls
            close(peer)
        }
        done.wait()
        loop.queue.sync {
            for p in backlog { loop.poller.remove(p.read) }
            #expect(waited.value >= 0 && waited.value <= 16, "backlog handlers run before the close: \(waited.value)")
        }
    }

    /// A burst of connections waiting in the kernel's queue is accepted a few at a time: at most
    /// `Listener.acceptsPerReadiness` in one handler call (it was 64: 10 ms and more of accepts), the rest at the
    /// poller's next looks, every one of them in the end. The accepts of one call are told apart by work they hand
    /// to `soon`, which runs once that call's slice of handlers is over.
    @Test func aBurstOfConnectionsIsAcceptedAFewAtATime() throws {
        let group = EventLoopGroup(count: 1)
        let loop = group.loops[0]
        let total = 20
        let slice = OnLoop(0)
        let perSlice = OnLoop([Int: Int]())
        let accepted = OnLoop(0)
        let done = DispatchSemaphore(value: 0)
        let listener = try Listener(host: "127.0.0.1", port: 0, group: group,
                                    logger: Logger(label: "test", level: .error, sink: MemoryLogSink())) { fd, _, loop in
            close(fd)
            perSlice.value[slice.value, default: 0] += 1
            loop.soon { slice.value += 1 }
            accepted.value += 1
            if accepted.value == total { done.signal() }
        }
        listener.start()
        // The loop is held while the clients connect: the kernel completes each handshake and queues it.
        let hold = DispatchSemaphore(value: 0)
        loop.queue.async { hold.wait() }
        let clients = (0..<total).map { _ in Self.connectBlocking(port: listener.port) }
        hold.signal()
        done.wait()
        loop.queue.sync {
            #expect(perSlice.value.values.reduce(0, +) == total)
            let most = perSlice.value.values.max() ?? 0
            #expect(most >= 1 && most <= Listener.acceptsPerReadiness, "accepted in one call: \(most)")
        }
        listener.stop()
        for fd in clients { close(fd) }
    }

    /// A connected TCP socket to 127.0.0.1:`port` (blocking connect).
    static func connectBlocking(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        precondition(rc == 0, "connect: \(errno)")
        return fd
    }

    /// A flood in the first class (clients sending without pause, connections without end) cannot starve the
    /// running streams: with 500 always-ready descriptors in each class, at least 40 % of the handler calls go to
    /// the streams' class (one look at the first class after every 16 others, 16 at most per look: half). Also
    /// when the flood's handlers are slow (1 ms each, the streams' 100 µs, on a manual clock): the looks that
    /// `Poller.firstInterval` adds wait until the streams have run as long as the last look's handlers did.
    @Test(arguments: [(0, 0), (100_000, 1_000_000)] as [(UInt64, UInt64)])
    func firstClassFloodLeavesTheStreamsHalf(streamNanoseconds: UInt64, floodNanoseconds: UInt64) {
        final class Counter: PollerHandler, @unchecked Sendable {
            // Invariant: touched on the loop's queue only.
            let first: Bool
            var calls = 0
            var each: () -> Void = {}
            init(first: Bool) { self.first = first }
            var pollerHandlesFirst: Bool { first }
            func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
                calls += 1
                each()
            }
        }
        let clock = ManualClock()
        let loop = EventLoop(index: 0, clock: clock)
        let streams = Spinner()
        let flood = Counter(first: true)
        streams.each = { clock.advance(bySeconds: Double(streamNanoseconds) / 1e9) }
        flood.each = { clock.advance(bySeconds: Double(floodNanoseconds) / 1e9) }
        let pipes = Self.makeBacklog(1_000)
        defer { Self.closeAll(pipes) }
        let done = DispatchSemaphore(value: 0)
        let counts = OnLoop((streams: 0, flood: 0))
        loop.queue.sync {
            for (i, p) in pipes.enumerated() {
                Self.makeReady(p)
                loop.poller.watch(p.read, read: true, write: false, handler: i % 2 == 0 ? flood : streams)
            }
        }
        // Measured from the moment both classes are well under way, over 20 000 handler calls.
        Self.whenBusy(loop, streams) {
            let start = (streams: streams.calls, flood: flood.calls)
            Self.when(loop, { streams.calls + flood.calls - start.streams - start.flood >= 20_000 }) {
                counts.value = (streams.calls - start.streams, flood.calls - start.flood)
                for p in pipes { loop.poller.remove(p.read) }
                done.signal()
            }
        }
        done.wait()
        loop.queue.sync {
            let (s, f) = counts.value
            #expect(s * 10 >= (s + f) * 4, "streams' share of handler calls: \(s) of \(s + f)")
        }
    }

    /// A handler that, on its first call, moves its descriptor to the streams' class and, when `removes`, stops
    /// watching it: what an upstream socket does when a short answer arrives whole with its head.
    final class Mover: PollerHandler, @unchecked Sendable {
        // Invariant: touched on the loop's queue only.
        let poller: Poller
        let removes: Bool
        var calls = 0
        var registeredFirstInTurn: Bool?
        var changesBefore = 0
        let moved = DispatchSemaphore(value: 0)
        init(poller: Poller, removes: Bool) {
            self.poller = poller
            self.removes = removes
        }
        var pollerHandlesFirst: Bool { true }
        func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
            calls += 1
            guard calls == 1 else { return }
            changesBefore = poller.registrationChanges
            poller.setHandlesFirst(fd, false)
            registeredFirstInTurn = poller.registeredFirst(fd)
            if removes { poller.remove(fd) }
            moved.signal()
        }
    }

    /// A descriptor moved out of the first class and removed in the same turn is never moved: one `epoll_ctl`
    /// (the removal), where moving at once cost three (S3: two more system calls per request).
    @Test func aMoveThenARemovalInOneTurnIsOneChange() {
        let loop = EventLoop(index: 0)
        let p = Self.makePipe()
        defer { close(p.read); close(p.write) }
        let mover = Mover(poller: loop.poller, removes: true)
        loop.queue.sync { loop.poller.watch(p.read, read: true, write: false, handler: mover) }
        Self.put(p.write)
        mover.moved.wait()
        loop.queue.sync {
            #expect(mover.registeredFirstInTurn == true)
            #expect(loop.poller.registrationChanges - mover.changesBefore == 1)
            #expect(loop.poller.handler(of: p.read) == nil)
        }
    }

    /// A move asked for during a turn is made when the turn ends: the descriptor is then in the streams' set, and
    /// its readiness (the byte stays: level-triggered) keeps coming from there.
    @Test func aMoveIsMadeWhenTheTurnEnds() {
        let loop = EventLoop(index: 0)
        let p = Self.makePipe()
        defer { close(p.read); close(p.write) }
        let mover = Mover(poller: loop.poller, removes: false)
        loop.queue.sync { loop.poller.watch(p.read, read: true, write: false, handler: mover) }
        Self.put(p.write)
        mover.moved.wait()
        let done = DispatchSemaphore(value: 0)
        Self.when(loop, { mover.calls >= 5 }) { done.signal() }
        done.wait()
        loop.queue.sync {
            #expect(mover.registeredFirstInTurn == true)
            #expect(loop.poller.registeredFirst(p.read) == false)
            #expect(loop.poller.handlesFirst(p.read) == false)
            // The move: out of one set, into the other.
            #expect(loop.poller.registrationChanges - mover.changesBefore == 2)
            loop.poller.remove(p.read)
        }
    }
}
