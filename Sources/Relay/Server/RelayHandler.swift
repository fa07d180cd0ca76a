import Auth
import HTTP1
import HTTPServer
import Support
import Transport
import Upstream

/// Decides what each request is: one of the relay's own endpoints (/healthz, /readyz, /metrics), a rejection
/// (no route, method not allowed), or an exchange with the provider, which it rewrites and starts.
struct RelayHandler: RequestHandler {
    /// Which endpoints a listener serves.
    enum Mode: Sendable {
        /// The public port when it is loopback and there is no admin port: provider routes plus every built-in
        /// endpoint (`RelayConfiguration.publicListenerServesMetrics`).
        case everything
        /// The public port otherwise: /metrics is not exposed here (an admin port serves it, or nothing does).
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
        var context = Rejection(head: head, requestID: requestID, writer: writer)
        if admin == .adminOnly {
            reject(.notFound(path: head.path), context, reason: "not_found")
            return nil
        }
        // Route on exactly the path that goes upstream, and refuse any path some later hop could resolve to
        // another one (the key would follow it there).
        let requestPath: RequestPath
        switch RequestPath.parse(head.target) {
        case .success(let checked): requestPath = checked
        case .failure(let rejection):
            reject(.invalidPath, context, reason: "invalid_path", detail: "invalid_path:" + rejection.detail)
            return nil
        }
        guard let route = configuration.route(for: requestPath.path), let upstream = configuration.upstreams[route.upstream] else {
            reject(.notFound(path: head.path), context, reason: "not_found")
            return nil
        }
        context.route = route.prefix

        // Browsers: a preflight is answered here (it carries no credentials), and allowed origins get their
        // CORS headers on every answer, the relay's own errors included.
        let origin = head.headers.first("Origin")
        if let cors = configuration.cors {
            switch cors.preflight(httpMethod: head.method, origin: origin, requestMethod: head.headers.first("Access-Control-Request-Method"),
                                  requestHeaders: head.headers.first("Access-Control-Request-Headers"), routeMethods: route.methods) {
            case .notPreflight:
                context.corsHeaders = cors.responseHeaders(origin: origin)
            case .allow(let headers):
                var h = HTTPHeaders()
                for (name, value) in headers { h.add(name: name, value: value) }
                writer.respond(status: 204, headers: h, body: [], keepAlive: head.keepAlive)
                return nil
            case .deny(let error):
                reject(error, context, reason: "cors_denied")
                return nil
            }
        }
        guard route.methods.contains(head.method) else {
            reject(.methodNotAllowed(allowed: route.methods), context, reason: "method_not_allowed")
            return nil
        }

        // Who is calling, and may they spend more? The address's buckets are consulted before the credentials,
        // so a failed authentication costs the caller a token like any request, and guessing tokens is paid for
        // in time: once an address's failure bucket is empty, it gets 429 whatever it sends.
        let address = writer.clientAddress
        if let retryAfter = server.authFailureLimiter.retryAfterIfEmpty(key: address, now: now) {
            reject(.rateLimited(retryAfterSeconds: retryAfter), context, reason: "rate_limited", detail: "auth_failures")
            return nil
        }
        var leases: [(RateLimiter, RateLimiterState.Lease)] = []
        func release() { for (limiter, lease) in leases { limiter.release(lease) } }
        func admitted(_ limiter: RateLimiter?, _ key: String?) -> Bool {
            guard let limiter, let key else { return true }
            switch limiter.acquire(key: key, now: now) {
            case .allowed(let lease):
                leases.append((limiter, lease))
                return true
            case .limited(let retryAfter, let reason):
                release()
                let error = reason == .rate ? RelayError.rateLimited(retryAfterSeconds: retryAfter)
                                            : RelayError.concurrencyLimited(retryAfterSeconds: retryAfter)
                reject(error, context, reason: reason == .rate ? "rate_limited" : "concurrency_limited")
                return false
            }
        }
        guard admitted(server.perAddressLimiter, address) else { return nil }
        let identity: Identity?
        switch server.authenticator.authenticate(route.auth, headers: head.headers, now: server.wallClock()) {
        case .success(let id): identity = id
        case .failure(let error):
            release()   // the stream slot only: the token stays spent
            if case .allowed(let lease) = server.authFailureLimiter.acquire(key: address, now: now) {
                server.authFailureLimiter.release(lease)
            }
            reject(error.relayError, context, reason: "unauthorized", detail: error.code)
            return nil
        }
        context.identity = identity?.key
        guard admitted(server.perIdentityLimiter, context.identity) else { return nil }

        // GET and HEAD carry no body here (see RelayError.bodyNotAllowed); `Content-Length: 0` is no body.
        let bodyless = head.method == "GET" || head.method == "HEAD"
        if bodyless && head.framing != .none && head.framing != .contentLength(0) {
            release()
            reject(.bodyNotAllowed, context, reason: "body_not_allowed")
            return nil
        }
        var request = UpstreamRequest(
            url: RequestRewriter.upstreamURL(baseURL: upstream.baseURL, route: route, path: requestPath),
            method: head.method,
            headers: RequestRewriter.upstreamHeaders(from: head.headers, upstream: upstream,
                                                     client: writer.client, requestID: requestID),
            body: head.framing == .none || bodyless ? nil : [],   // filled when the request is whole
            connectTimeoutSeconds: configuration.timeouts.upstreamConnectSeconds,
            idleConnectionSeconds: upstream.idleConnectionSeconds)
        request.httpVersion = upstream.httpVersion
        request.caFile = upstream.caFile
        var extra = HTTPHeaders()
        for (name, value) in context.corsHeaders { extra.add(name: name, value: value) }
        let settings = ExchangeStateMachine.Settings(
            requestMethod: head.method, clientVersion: head.version, keepAlive: head.keepAlive && !server.isDraining,
            requestID: requestID, firstByteTimeoutSeconds: configuration.timeouts.upstreamFirstByteSeconds,
            idleTimeoutSeconds: configuration.timeouts.upstreamIdleSeconds, extraResponseHeaders: extra)
        let machine = ExchangeStateMachine(settings: settings, now: now)
        let record = ExchangeRecord(requestID: requestID, method: head.method, path: head.path, route: route.prefix,
                                    upstream: upstream.name, clientAddress: writer.clientAddress, startedAt: now)
        record.identity = context.identity
        let logger = server.logger
        let metrics = server.metrics
        metrics.activeStreams.wrappingAdd(1, ordering: .relaxed)
        let exchange = RelayExchange(machine: machine, writer: writer,
                                     clock: loop.clock, record: record, metrics: metrics) { ended in
            state.exchanges[ObjectIdentifier(ended)] = nil
            metrics.activeStreams.wrappingSubtract(1, ordering: .relaxed)
            let r = ended.record
            metrics.exchangeEnded(route: r.route, status: r.status ?? 0, outcome: r.outcome,
                                  firstByteSeconds: r.firstBodyAt.map { $0.seconds(since: r.startedAt) },
                                  durationSeconds: (r.endedAt ?? r.startedAt).seconds(since: r.startedAt))
            logger.info("exchange", r.logFields)
        }
        exchange.leases = leases
        exchange.providerKey = upstream.key
        state.exchanges[ObjectIdentifier(exchange)] = exchange
        exchange.start(request, upstream: state.driver, policy: route.bodyPolicy)
        return exchange
    }

    /// What a rejection's log line and answer need.
    struct Rejection {
        var head: RequestHead
        var requestID: String
        var writer: ServerConnection
        var route = ""
        var identity: String?
        var corsHeaders: [(String, String)] = []
    }

    func connectionRejected(_ error: ErrorResponse, writer: ServerConnection) {
        server.metrics.rejected(reason: error.code)
        server.rejectionLog.log(reason: error.code, [("client_ip", .string(writer.clientAddress)), ("status", .int(error.status)),
                                        ("outcome", .string("rejected")), ("reason", .string(error.code))])
    }

    func untrustedProxyPeerRefused(_ peer: String) {
        server.metrics.rejected(reason: "proxy_protocol_untrusted")
        server.logger.debug("connection from an untrusted peer on a PROXY protocol listener; closed", [("peer", .string(peer))])
    }

    func proxyHeaderRejected(_ reason: String, writer: ServerConnection) {
        server.metrics.rejected(reason: "proxy_protocol_invalid")
        server.logger.warning("PROXY protocol header rejected; connection closed",
                              [("peer", .string(writer.connection.peerAddress)), ("reason", .string(reason))])
    }

    private func reject(_ error: RelayError, _ c: Rejection, reason: String, detail: String? = nil) {
        server.metrics.rejected(reason: reason)
        server.metrics.exchangeEnded(route: c.route, status: error.status, outcome: "rejected", firstByteSeconds: nil, durationSeconds: 0)
        var fields: [(String, LogValue)] = [
            ("request_id", .string(c.requestID)), ("client_ip", .string(c.writer.clientAddress)),
            ("method", .string(c.head.method)), ("path", .string(c.head.path)), ("route", .string(c.route)),
            ("status", .int(error.status)), ("outcome", .string("rejected")), ("reason", .string(detail ?? reason)),
        ]
        if let identity = c.identity { fields.append(("identity", .string(identity))) }
        server.rejectionLog.log(reason: reason, fields)
        var error = error
        error.extraHeaders += c.corsHeaders
        c.writer.respond(error: error, requestID: c.requestID, keepAlive: c.head.keepAlive)
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
