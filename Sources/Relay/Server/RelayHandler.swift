import HTTP1
import Support
import Transport
import Upstream

/// Decides what each request is: one of the relay's own endpoints (/healthz, /readyz, /metrics), a rejection
/// (no route, method not allowed), or an exchange with the provider, which it rewrites and starts.
struct RelayHandler: RequestHandler {
    /// Which endpoints a listener serves.
    enum Mode: Sendable {
        /// The public port when there is no admin port: provider routes plus every built-in endpoint.
        case everything
        /// The public port when an admin port exists: /metrics is not exposed here.
        case publicWithoutMetrics
        /// The admin port: built-in endpoints only.
        case adminOnly
    }

    let server: RelayServer
    let admin: Mode

    func handle(_ head: RequestHead, writer: ServerConnection) -> (any RequestResponder)? {
        let configuration = server.configuration
        let loop = writer.loop
        let state = server.loopStates[loop.index]
        let requestID = RequestRewriter.requestID(clientValue: head.headers.first("X-Request-Id"), generated: RequestIDs.make())
        let now = loop.clock.now()

        if let builtin = builtinResponse(head) {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: builtin.contentType)
            headers.add(name: "Cache-Control", value: "no-store")
            writer.respond(status: builtin.status, headers: headers, body: Array(builtin.body.utf8), keepAlive: head.keepAlive)
            return nil
        }
        if admin == .adminOnly {
            reject(.notFound(path: head.path), head: head, requestID: requestID, route: "", writer: writer, reason: "not_found")
            return nil
        }
        guard let route = configuration.route(for: head.path), let upstream = configuration.upstreams[route.upstream] else {
            reject(.notFound(path: head.path), head: head, requestID: requestID, route: "", writer: writer, reason: "not_found")
            return nil
        }
        guard route.methods.contains(head.method) else {
            reject(.methodNotAllowed(allowed: route.methods), head: head, requestID: requestID, route: route.prefix,
                   writer: writer, reason: "method_not_allowed")
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
        let machine = ExchangeStateMachine(
            settings: .init(requestMethod: head.method, clientVersion: head.version,
                            keepAlive: head.keepAlive && !server.isDraining,
                            requestID: requestID,
                            firstByteTimeoutSeconds: configuration.timeouts.upstreamFirstByteSeconds,
                            idleTimeoutSeconds: configuration.timeouts.upstreamIdleSeconds),
            now: now)
        let record = ExchangeRecord(requestID: requestID, method: head.method, path: head.path, route: route.prefix,
                                    upstream: upstream.name, clientAddress: writer.clientAddress, startedAt: now)
        let logger = server.logger
        let metrics = server.metrics
        metrics.activeStreams.wrappingAdd(1, ordering: .relaxed)
        let exchange = RelayExchange(machine: machine, writer: writer, highWater: configuration.buffers.highWaterBytes,
                                     clock: loop.clock, record: record, metrics: metrics) { ended in
            state.exchanges[ObjectIdentifier(ended)] = nil
            metrics.activeStreams.wrappingSubtract(1, ordering: .relaxed)
            let r = ended.record
            metrics.exchangeEnded(route: r.route, status: r.status ?? 0, outcome: r.outcome,
                                  firstByteSeconds: r.firstBodyAt.map { $0.seconds(since: r.startedAt) },
                                  durationSeconds: (r.endedAt ?? r.startedAt).seconds(since: r.startedAt))
            logger.info("exchange", r.logFields)
        }
        state.exchanges[ObjectIdentifier(exchange)] = exchange
        exchange.start(request, driver: state.driver)
        return exchange
    }

    func connectionRejected(_ error: RelayError, writer: ServerConnection) {
        server.metrics.rejected(reason: error.code)
        server.logger.info("exchange", [("client_ip", .string(writer.clientAddress)), ("status", .int(error.status)),
                                        ("outcome", .string("rejected")), ("reason", .string(error.code))])
    }

    private func reject(_ error: RelayError, head: RequestHead, requestID: String, route: String, writer: ServerConnection, reason: String) {
        server.metrics.rejected(reason: reason)
        server.metrics.exchangeEnded(route: route, status: error.status, outcome: "rejected", firstByteSeconds: nil, durationSeconds: 0)
        server.logger.info("exchange", [("request_id", .string(requestID)), ("client_ip", .string(writer.clientAddress)),
                                        ("method", .string(head.method)), ("path", .string(head.path)),
                                        ("route", .string(route)), ("status", .int(error.status)),
                                        ("outcome", .string("rejected")), ("reason", .string(reason))])
        writer.respond(error: error, requestID: requestID, keepAlive: head.keepAlive)
    }

    private func builtinResponse(_ head: RequestHead) -> (status: Int, contentType: String, body: String)? {
        guard head.method == "GET" || head.method == "HEAD" else { return nil }
        switch head.path {
        case "/healthz":
            return (200, "text/plain; charset=utf-8", "ok\n")
        case "/readyz":
            return server.isDraining ? (503, "text/plain; charset=utf-8", "draining\n") : (200, "text/plain; charset=utf-8", "ready\n")
        case "/metrics" where admin != .publicWithoutMetrics:
            return (200, "text/plain; version=0.0.4; charset=utf-8", server.metrics.render())
        default:
            return nil
        }
    }
}
