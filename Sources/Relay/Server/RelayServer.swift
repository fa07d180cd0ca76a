import Dispatch
import HTTP1
import Support
import Transport
import Upstream
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The composition root: what `main.swift` and the integration tests both build. Owns the event loops, one curl
/// driver per loop, the listener, and the bookkeeping of live connections and exchanges.
public final class RelayServer: @unchecked Sendable {
    // Invariant: `listener` is set once in `start()` before any connection exists; per-loop state lives in
    // `LoopState`, touched on its loop's queue only.
    public let configuration: RelayConfiguration
    public let logger: Logger
    let group: EventLoopGroup
    let loopStates: [LoopState]
    private var listener: Listener?

    public init(configuration: RelayConfiguration, logger: Logger, clock: any Clock = MonotonicClock()) {
        Syscall.ignoreSIGPIPE()
        self.configuration = configuration
        self.logger = logger
        let workers = configuration.workers > 0 ? configuration.workers : max(1, System.coreCount)
        group = EventLoopGroup(count: workers, clock: clock)
        loopStates = group.loops.map { LoopState(loop: $0, driver: CurlDriver(loop: $0, logger: logger)) }
    }

    /// Binds and starts accepting. Throws if the address cannot be bound.
    public func start() throws {
        let handler = RelayHandler(server: self)
        let limits = configuration.limits
        let buffers = configuration.buffers
        let logger = self.logger
        let states = loopStates
        let listener = try Listener(host: configuration.listen.host, port: configuration.listen.port, group: group, logger: logger) { fd, address, loop in
            let state = states[loop.index]
            let connection = Connection(fd: fd, loop: loop, peerAddress: address,
                                        highWaterMark: buffers.highWaterBytes, lowWaterMark: buffers.lowWaterBytes)
            let server = ServerConnection(connection: connection, handler: handler, limits: limits, logger: logger) { closed in
                state.connections[ObjectIdentifier(closed)] = nil
            }
            state.connections[ObjectIdentifier(server)] = server
            connection.delegate = server
            connection.start()
        }
        self.listener = listener
        listener.start()
        logger.info("relay listening", [("host", .string(configuration.listen.host)), ("port", .int(listener.port)),
                                        ("workers", .int(group.loops.count))])
    }

    /// The bound port (useful with port 0).
    public var port: Int { listener?.port ?? 0 }

    /// Stops accepting, closes every connection (cancelling their upstream transfers) and releases curl.
    public func shutdown() {
        listener?.stop()
        for state in loopStates {
            state.loop.queue.sync {
                for server in Array(state.connections.values) { server.connection.close() }
                state.driver.shutdown()
            }
        }
    }

    /// The largest pending-write buffer among open connections (what slow readers cost right now, at most).
    public func maxPendingBytesObserved() -> Int {
        var result = 0
        for state in loopStates {
            state.loop.queue.sync {
                for server in state.connections.values { result = max(result, server.connection.maxPendingByteCount) }
            }
        }
        return result
    }

    /// Counts taken on each loop: open client connections, live exchanges, running curl transfers.
    public func liveCounts() -> (connections: Int, exchanges: Int, transfers: Int) {
        var totals = (0, 0, 0)
        for state in loopStates {
            state.loop.queue.sync {
                totals.0 += state.connections.count
                totals.1 += state.exchanges.count
                totals.2 += state.driver.activeTransferCount
            }
        }
        return totals
    }
}

/// What one loop owns on the server's behalf. Touched on `loop.queue` only.
final class LoopState: @unchecked Sendable {
    // Invariant: touched on `loop.queue` only.
    let loop: EventLoop
    let driver: CurlDriver
    var connections: [ObjectIdentifier: ServerConnection] = [:]
    var exchanges: [ObjectIdentifier: RelayExchange] = [:]
    init(loop: EventLoop, driver: CurlDriver) {
        self.loop = loop
        self.driver = driver
    }
}

/// Routes each request, rewrites it and starts its exchange.
struct RelayHandler: RequestHandler {
    let server: RelayServer

    func handle(_ head: RequestHead, writer: ServerConnection) -> (any RequestResponder)? {
        let configuration = server.configuration
        let loop = writer.loop
        let state = server.loopStates[loop.index]
        let requestID = RequestRewriter.requestID(clientValue: head.headers.first("X-Request-Id"), generated: RequestIDs.make())
        guard let route = configuration.route(for: head.path), let upstream = configuration.upstreams[route.upstream] else {
            server.logger.info("no route", [("request_id", .string(requestID)), ("method", .string(head.method)),
                                            ("path", .string(head.path)), ("status", .int(404)), ("outcome", .string("rejected"))])
            writer.respond(error: .notFound(path: head.path), requestID: requestID, keepAlive: head.keepAlive)
            return nil
        }
        let hasBody: Bool
        let bodyLength: Int?
        switch head.framing {
        case .none: (hasBody, bodyLength) = (false, nil)
        case .contentLength(let n): (hasBody, bodyLength) = (true, n)
        case .chunked: (hasBody, bodyLength) = (true, nil)
        }
        let request = UpstreamRequest(
            url: RequestRewriter.upstreamURL(baseURL: upstream.baseURL, route: route, target: head.target),
            method: head.method,
            headers: RequestRewriter.upstreamHeaders(from: head.headers, upstream: upstream,
                                                     clientAddress: writer.clientAddress, requestID: requestID),
            hasBody: hasBody, bodyLength: bodyLength,
            connectTimeoutSeconds: configuration.timeouts.upstreamConnectSeconds)
        let now = loop.clock.now()
        let machine = ExchangeStateMachine(
            settings: .init(requestMethod: head.method, clientVersion: head.version, keepAlive: head.keepAlive,
                            requestID: requestID,
                            firstByteTimeoutSeconds: configuration.timeouts.upstreamFirstByteSeconds,
                            idleTimeoutSeconds: configuration.timeouts.upstreamIdleSeconds),
            now: now)
        let record = ExchangeRecord(requestID: requestID, method: head.method, path: head.path, route: route.prefix,
                                    upstream: upstream.name, clientAddress: writer.clientAddress, startedAt: now)
        let logger = server.logger
        let exchange = RelayExchange(machine: machine, writer: writer, highWater: configuration.buffers.highWaterBytes,
                                     clock: loop.clock, record: record) { ended in
            state.exchanges[ObjectIdentifier(ended)] = nil
            logger.info("exchange", ended.record.logFields)
        }
        state.exchanges[ObjectIdentifier(exchange)] = exchange
        exchange.start(request, driver: state.driver)
        return exchange
    }
}

/// Request ids: 16 random hex digits.
enum RequestIDs {
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let n = generator.next() as UInt64
        let hex = String(n, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

enum System {
    static var coreCount: Int {
        Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}
