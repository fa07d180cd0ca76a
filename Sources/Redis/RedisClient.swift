#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Support
import Transport

/// How a command failed. Only `.server` means Redis ran (or refused) the command; after the others the caller
/// cannot know whether it ran, except `.notConnected`, which was never sent.
public enum RedisError: Error, Sendable, Equatable {
    /// No reply within `timeoutMs`.
    case timeout
    /// The client was between connections (backing off after a failure): the command was not sent.
    case notConnected
    /// The connection dropped (or the connect failed) with the command sent or queued.
    case connectionLost
    /// Redis answered with an error reply (`-ERR …`, `-NOSCRIPT …`).
    case server(String)
    /// `close()` was called.
    case closed
}

/// A Redis connection on one event loop, speaking RESP2 over our own poller (no hiredis: see README, "Running
/// several replicas"). Commands are pipelined, many in flight on the one connection, and replies are matched to
/// them in order (Redis answers in order on a connection). Nothing here blocks the loop: the connect is
/// non-blocking, a name is resolved off the loop (an address literal needs no resolving: it is connected to at
/// once), and every command carries its own timeout.
///
/// Connection life: `connecting → handshaking (AUTH, SELECT) → ready`. Commands sent while connecting wait for
/// the connection (their timeouts running); once a connect failed, the client backs off (doubling from
/// `initialBackoffMs` to `maxBackoffMs`) and commands fail at once with `.notConnected` until it is ready again,
/// so callers decide quickly instead of each waiting out a timeout against a Redis that is down. When the
/// connection drops, every command in flight fails at once with `.connectionLost`. A command that times out while
/// nothing at all arrived since it was written means the server is stalled (stopped, or a network black hole):
/// the connection is dropped and rebuilt rather than left to pile up commands.
///
/// Owned by `loop.queue`: every method, and every completion, runs there. Completions may run before `send`
/// returns (a client that is backing off fails at once).
public final class RedisClient: ConnectionDelegate, PollerHandler, @unchecked Sendable {
    // Invariant: every mutable property is read and written on `loop.queue` only.

    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var database: Int
        public var username: String?
        public var password: Secret?
        /// Per command: how long a caller waits for its reply.
        public var timeoutMs: Int
        /// TCP connect plus handshake.
        public var connectTimeoutMs: Int
        public var initialBackoffMs: Int
        public var maxBackoffMs: Int

        public init(host: String = "127.0.0.1", port: Int = 6379, database: Int = 0, username: String? = nil, password: Secret? = nil,
                    timeoutMs: Int = 50, connectTimeoutMs: Int = 1_000, initialBackoffMs: Int = 10, maxBackoffMs: Int = 1_000) {
            self.host = host
            self.port = port
            self.database = database
            self.username = username
            self.password = password
            self.timeoutMs = max(1, timeoutMs)
            self.connectTimeoutMs = max(1, connectTimeoutMs)
            self.initialBackoffMs = max(1, initialBackoffMs)
            self.maxBackoffMs = max(self.initialBackoffMs, maxBackoffMs)
        }
    }

    public enum State: Equatable, Sendable {
        case idle, connecting, handshaking, ready, backingOff, closed
    }

    public typealias Completion = (Result<RESPValue, RedisError>) -> Void

    public let loop: EventLoop
    public let configuration: Configuration
    private let logger: Logger
    private let resolver: any HostResolver
    public private(set) var state = State.idle
    /// Runs each time a connection becomes ready, before the commands queued while connecting are written (so
    /// what it sends, e.g. SCRIPT LOAD, runs first).
    public var onReady: (() -> Void)?
    /// Connections made ready so far (the first one included): for tests and logs.
    public private(set) var connectionCount = 0

    private final class Pending {
        var completion: Completion?
        /// When the command fails with `.timeout` if it has no reply by then (`sweepTimeouts`).
        let deadline: Instant
        var bytesReadAtSend: UInt64 = 0
        init(deadline: Instant, _ completion: @escaping Completion) {
            self.deadline = deadline
            self.completion = completion
        }

        func finish(_ result: Result<RESPValue, RedisError>) {
            guard let completion else { return }
            self.completion = nil
            completion(result)
        }
    }

    private var parser = RESPParser()
    /// Sent, awaiting their replies, oldest at `inFlightHead`.
    private var inFlight: [Pending] = []
    private var inFlightHead = 0
    /// Accepted while connecting, written once the connection is ready.
    private var queued: [(bytes: [UInt8], pending: Pending)] = []
    private var connection: Connection?
    private var connectingFD: Int32 = -1
    private var attemptTimer: LoopTimer?
    private var reconnectTimer: LoopTimer?
    /// One timer for every command's timeout, at the oldest unanswered command's deadline: commands are answered
    /// in order and all have the same timeout, so that deadline is the earliest. A timer per command cost its
    /// allocation, a heap insert and a cancel on every command.
    private var timeoutTimer: LoopTimer?
    private var timeoutAt: Instant?
    private var backoffMs: Int
    private var attempt: UInt64 = 0
    private var bytesRead: UInt64 = 0
    private var releaseScheduled = false
    private var outageLogged = false
    /// `closeWhenAnswered` was called: the client closes once no command waits for its reply.
    private var closing = false

    /// `resolver` turns a host name into an address (tests hold it to stand for a slow resolver).
    public init(loop: EventLoop, configuration: Configuration, logger: Logger, resolver: any HostResolver = SystemHostResolver()) {
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        self.resolver = resolver
        self.backoffMs = configuration.initialBackoffMs
    }

    /// Starts connecting. Call once, on the loop.
    public func start() {
        loop.assertOnLoop()
        guard state == .idle else { return }
        connect()
    }

    /// Sends one command. `completion` runs once, on the loop, with the reply or why there is none.
    public func send(_ arguments: [[UInt8]], _ completion: @escaping Completion) {
        send(encoded: RESPEncoder.encode(command: arguments), completion)
    }

    /// The same from strings, encoded straight into the command's bytes.
    public func send(_ arguments: [String], _ completion: @escaping Completion) {
        send(encoded: RESPEncoder.encode(command: arguments), completion)
    }

    private func send(encoded command: [UInt8], _ completion: @escaping Completion) {
        loop.assertOnLoop()
        switch state {
        case .closed:
            completion(.failure(.closed))
        case .backingOff:
            completion(.failure(.notConnected))
        case .idle:
            // The connect can settle in this call (an address literal on loopback): ask again in its new state.
            connect()
            send(encoded: command, completion)
        case .connecting, .handshaking:
            queued.append((command, newPending(completion)))
        case .ready:
            write(command, newPending(completion))
        }
    }

    /// Commands sent and not answered yet.
    public var inFlightCount: Int { inFlight.count - inFlightHead }

    /// Closes the connection for good; every command waiting fails with `.closed`.
    public func close() {
        loop.assertOnLoop()
        guard state != .closed else { return }
        state = .closed
        reconnectTimer?.cancel()
        reconnectTimer = nil
        timeoutTimer?.cancel()
        timeoutTimer = nil
        timeoutAt = nil
        dropConnection(failing: .closed)
    }

    /// Closes for good once every command sent or queued has its reply or its timeout, so the last ones written
    /// (a shutdown's settles, still held for this turn's write) reach Redis instead of failing with `.closed`.
    /// Commands sent meanwhile are accepted and waited for too; a connection lost meanwhile closes at once.
    public func closeWhenAnswered() {
        loop.assertOnLoop()
        guard state != .closed else { return }
        closing = true
        closeIfAnswered()
    }

    private func closeIfAnswered() {
        guard closing, state != .closed, inFlight[inFlightHead...].allSatisfy({ $0.completion == nil }),
              queued.allSatisfy({ $0.pending.completion == nil }) else { return }
        close()
    }

    // MARK: Connecting

    private func connect() {
        state = .connecting
        attempt &+= 1
        let attempt = self.attempt
        attemptTimer?.cancel()
        attemptTimer = loop.schedule(afterSeconds: Double(configuration.connectTimeoutMs) / 1000) { [weak self] in
            guard let self, self.attempt == attempt, self.state == .connecting || self.state == .handshaking else { return }
            self.connectFailed("connect timed out")
        }
        let host = configuration.host, port = configuration.port
        // An address literal (127.0.0.1, a pod's IP) is read here: no resolver, and no wait for a Dispatch worker,
        // which on a busy process can come after the connect timeout.
        if let address = SocketAddress(numericHost: host, port: port) { return connect(to: address) }
        // getaddrinfo blocks (DNS for a service name): resolve off the loop, connect back on it.
        resolver.resolve(host: host, port: port) { [weak self] resolved in
            guard let self else { return }
            self.loop.execute {
                guard self.attempt == attempt, self.state == .connecting else { return }
                switch resolved {
                case .success(let address): self.connect(to: address)
                case .failure(let why): self.connectFailed(why.message)
                }
            }
        }
    }

    private func connect(to address: SocketAddress) {
        let fd: Int32
        switch Syscall.clientSocket(family: address.family) {
        case .success(let socket): fd = socket
        case .failure(let error): return connectFailed("socket: errno \(error.errno)")
        }
        Syscall.setNonBlocking(fd)
        // Commands are small and latency is the point: no waiting for Nagle's ACK.
        Syscall.setNoDelay(fd)
        switch Syscall.connect(fd, to: address.storage, length: address.length) {
        case .connected:
            connected(fd)
        case .inProgress:
            connectingFD = fd
            loop.poller.watch(fd, read: false, write: true, handler: self)
        case .failed(let err):
            Syscall.close(fd)
            connectFailed("connect: \(String(cString: strerror(err)))")
        }
    }

    /// The connecting socket became writable: the connect finished, one way or the other.
    public func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
        guard fd == connectingFD else { return }
        connectingFD = -1
        let error = Syscall.socketError(fd)
        guard error == 0 else {
            loop.poller.remove(fd)
            Syscall.close(fd)
            return connectFailed("connect: \(String(cString: strerror(error)))")
        }
        connected(fd)
    }

    private func connected(_ fd: Int32) {
        let connection = Connection(fd: fd, loop: loop, peerAddress: "\(configuration.host):\(configuration.port)")
        connection.delegate = self
        self.connection = connection
        parser = RESPParser()
        connection.start()
        state = .handshaking
        var handshake: [[String]] = []
        if let password = configuration.password {
            handshake.append(["AUTH"] + (configuration.username.map { [$0] } ?? []) + [password.revealForHeader()])
        }
        if configuration.database != 0 { handshake.append(["SELECT", String(configuration.database)]) }
        guard !handshake.isEmpty else { return becomeReady() }
        let attempt = self.attempt
        for (index, command) in handshake.enumerated() {
            let isLast = index == handshake.count - 1
            let name = command[0]
            write(RESPEncoder.encode(command: command), newPending { [weak self] result in
                guard let self, self.attempt == attempt, self.state == .handshaking else { return }
                switch result {
                case .success(.error(let message)), .failure(.server(let message)):
                    self.connectFailed("\(name) refused: \(message)")
                case .failure(let error):
                    self.connectFailed("\(name) failed: \(error)")
                case .success:
                    if isLast { self.becomeReady() }
                }
            })
        }
    }

    private func becomeReady() {
        attemptTimer?.cancel()
        attemptTimer = nil
        state = .ready
        backoffMs = configuration.initialBackoffMs
        connectionCount += 1
        if outageLogged || connectionCount > 1 {
            logger.info("redis connected", [("redis", .string("\(configuration.host):\(configuration.port)"))])
        }
        outageLogged = false
        onReady?()
        guard state == .ready else { return }
        let waiting = queued
        queued = []
        for (bytes, pending) in waiting where pending.completion != nil {
            write(bytes, pending)
        }
    }

    private func connectFailed(_ why: String) {
        guard state != .closed else { return }
        if !outageLogged {
            outageLogged = true
            logger.warning("redis unavailable", [("redis", .string("\(configuration.host):\(configuration.port)")), ("reason", .string(why))])
        }
        dropConnection(failing: .connectionLost)
        if closing { return close() }
        state = .backingOff
        let delay = backoffMs
        backoffMs = min(backoffMs * 2, configuration.maxBackoffMs)
        reconnectTimer = loop.schedule(afterSeconds: Double(delay) / 1000) { [weak self] in
            guard let self, self.state == .backingOff else { return }
            self.reconnectTimer = nil
            self.connect()
        }
    }

    /// Closes the socket (connecting or connected) and fails every command waiting on it.
    private func dropConnection(failing error: RedisError) {
        attemptTimer?.cancel()
        attemptTimer = nil
        if connectingFD >= 0 {
            loop.poller.remove(connectingFD)
            Syscall.close(connectingFD)
            connectingFD = -1
        }
        if let connection {
            self.connection = nil
            connection.delegate = nil
            connection.close()
        }
        let lost = inFlight[inFlightHead...] + queued.map(\.pending)
        inFlight = []
        inFlightHead = 0
        queued = []
        releaseScheduled = false
        for pending in lost { pending.finish(.failure(error)) }
    }

    // MARK: Commands

    /// A command's waiting record, its deadline `timeoutMs` from now; arms the timeout timer if none is.
    private func newPending(_ completion: @escaping Completion) -> Pending {
        let pending = Pending(deadline: loop.clock.now().advanced(bySeconds: Double(configuration.timeoutMs) / 1000), completion)
        armTimeouts(at: pending.deadline)
        return pending
    }

    /// Makes sure the timeout timer fires by `deadline` (one armed earlier stays).
    private func armTimeouts(at deadline: Instant) {
        if let armed = timeoutAt, armed <= deadline { return }
        timeoutTimer?.cancel()
        timeoutAt = deadline
        timeoutTimer = loop.schedule(at: deadline) { [weak self] in
            guard let self else { return }
            self.timeoutTimer = nil
            self.timeoutAt = nil
            self.sweepTimeouts()
        }
    }

    /// Fails every unanswered command whose deadline has passed with `.timeout`; when one that was written got no
    /// byte at all since it was sent, the connection is stalled and dropped (the rest fail with it). Then arms the
    /// timer for the oldest command still waiting.
    private func sweepTimeouts() {
        let now = loop.clock.now()
        let waiting = inFlight[inFlightHead...].filter { $0.completion != nil }
        let waitingQueued = queued.map(\.pending).filter { $0.completion != nil }
        var stalled = false
        for pending in waiting where pending.deadline <= now {
            if state == .ready && pending.bytesReadAtSend == bytesRead { stalled = true }
            pending.finish(.failure(.timeout))
        }
        for pending in waitingQueued where pending.deadline <= now { pending.finish(.failure(.timeout)) }
        if stalled { connectFailed("no reply within \(configuration.timeoutMs) ms") }
        closeIfAnswered()
        if let next = (waiting + waitingQueued).filter({ $0.completion != nil }).map(\.deadline).min() { armTimeouts(at: next) }
    }

    /// Writes one encoded command. Commands written in one turn of the loop are held and leave together, in one
    /// syscall: a burst of admissions is one TCP segment, not one per request.
    private func write(_ bytes: [UInt8], _ pending: Pending) {
        guard let connection else { return pending.finish(.failure(.connectionLost)) }
        pending.bytesReadAtSend = bytesRead
        inFlight.append(pending)
        if !releaseScheduled {
            releaseScheduled = true
            connection.hold()
            loop.execute { [weak self, weak connection] in
                guard let self, let connection, connection === self.connection else { return }
                self.releaseScheduled = false
                connection.releaseHold()
            }
        }
        connection.write(bytes)
    }

    public func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        bytesRead &+= UInt64(bytes.count)
        parser.feed(bytes)
        while self.connection === connection {
            let value: RESPValue?
            do {
                value = try parser.next()
            } catch {
                return connectFailed("\(error)")
            }
            guard let value else { return closeIfAnswered() }
            guard inFlightHead < inFlight.count else { return connectFailed("reply without a command") }
            let pending = inFlight[inFlightHead]
            inFlightHead += 1
            if inFlightHead == inFlight.count {
                inFlight.removeAll(keepingCapacity: true)
                inFlightHead = 0
            } else if inFlightHead >= 1024 && inFlightHead * 2 >= inFlight.count {
                inFlight.removeSubrange(0..<inFlightHead)
                inFlightHead = 0
            }
            if case .error(let message) = value {
                pending.finish(.failure(.server(message)))
            } else {
                pending.finish(.success(value))
            }
        }
    }

    public func connectionDidDrain(_ connection: Connection) {}

    public func connection(_ connection: Connection, didCloseWith reason: ConnectionCloseReason) {
        guard connection === self.connection else { return }
        self.connection = nil
        connectFailed(reason == .peerClosed ? "connection closed by redis" : "connection reset")
    }
}

