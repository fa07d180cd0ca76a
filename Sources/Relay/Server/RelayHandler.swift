import Auth
import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Support
import Transport
import Upstream

/// Decides what each request is: one of the relay's own endpoints (/healthz, /readyz, /metrics), a rejection
/// (no route, method not allowed), or an exchange with the provider, which it rewrites and starts.
struct RelayHandler: RequestHandler {
    /// Which endpoints a listener serves.
    enum Mode: Sendable {
        /// The public port when it is loopback, trusts no proxy and there is no admin port: provider routes plus
        /// every built-in endpoint (`RelayConfiguration.publicListenerServesMetrics`).
        case everything
        /// The public port otherwise: /metrics is not exposed here (an admin port serves it, or nothing does).
        case publicWithoutMetrics
        /// The admin port: built-in endpoints only.
        case adminOnly
    }

    let server: RelayServer
    let admin: Mode

    /// Built-in endpoint, rejection, or exchange: `admit` decides, then either the answer goes out here or the
    /// exchange starts.
    func handle(_ head: RequestHead, writer: any ResponseWriter) -> (any RequestResponder)? {
        // The path once, and only where it is read before `admit` (which reads it itself): it is a scan of the
        // target, and a new String when there is a query. Most requests are POSTs to a provider route.
        let ownEndpoints = admin != .adminOnly && (server.streams != nil || server.attestation != nil)
        let path: String? = head.method == "GET" || head.method == "HEAD" || ownEndpoints ? head.path : nil
        // Where /metrics is served, so is /usage (the admin port, or without one a loopback public port trusting no proxy).
        if head.method == "GET", admin != .publicWithoutMetrics, path == "/usage" {
            return UsageEndpoint(head: head, writer: writer, store: server.store, wallClockSeconds: Int64(server.wallClock()))
        }
        if head.method == "GET", admin != .publicWithoutMetrics, path == "/upstreams" {   // key pools (Failover/)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Cache-Control", value: "no-store")
            writer.respond(status: 200, headers: headers, body: server.pools.report(), keepAlive: head.keepAlive)
            return nil
        }
        if let path, let builtin = builtinResponse(head, path: path) {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: builtin.contentType)
            headers.add(name: "Cache-Control", value: "no-store")
            writer.respond(status: builtin.status, headers: headers, body: Array(builtin.body.utf8), keepAlive: head.keepAlive)
            return nil
        }
        let requestID = RequestRewriter.requestID(clientValue: head.headers.first("X-Request-Id"), generated: RequestIDs.make())
        if admin != .adminOnly, server.streams != nil, let path, StreamEndpoint.serves(path) {
            return StreamEndpoint(head: head, requestID: requestID, writer: writer, server: server)
        }
        if admin != .adminOnly, let attestation = server.attestation, let path, attestation.serves(path: path) {
            return attestation.endpoint(head, requestID: requestID, writer: writer)
        }
        var context = Rejection(head: head, requestID: requestID, writer: writer)
        switch admit(head, client: writer.client.limitKey, on: writer.scheduler, context: &context) {
        case .preflight(let headers):
            writer.respond(status: 204, headers: headers, body: [], keepAlive: head.keepAlive)
            return nil
        case .rejected(let error, let reason, let detail):
            reject(error, context, reason: reason, detail: detail)
            return nil
        case .admitted(let admitted):
            return startExchange(admitted, head: head, requestID: requestID, writer: writer)
        }
    }

    /// What a rejection's log line and answer need.
    struct Rejection {
        var head: RequestHead
        var requestID: String
        var writer: any ResponseWriter
        var route = ""
        var identity: String?
        var corsHeaders: [(String, String)] = []
    }

    func connectionRejected(_ error: ErrorResponse, writer: any ResponseWriter) {
        server.metrics.rejected(reason: error.code)
        server.rejectionLog.log(reason: error.code, [("client_ip", .string(writer.clientAddress)), ("status", .int(error.status)),
                                        ("outcome", .string("rejected")), ("reason", .string(error.code))])
    }

    func untrustedProxyPeerRefused(_ peer: String) {
        server.metrics.rejected(reason: "proxy_protocol_untrusted")
        server.logger.debug("connection from an untrusted peer on a PROXY protocol listener; closed", [("peer", .string(peer))])
    }

    func proxyHeaderRejected(_ reason: String, writer: any ResponseWriter) {
        server.metrics.rejected(reason: "proxy_protocol_invalid")
        server.logger.warning("PROXY protocol header rejected; connection closed",
                              [("peer", .string(writer.peerAddress)), ("reason", .string(reason))])
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

    private func builtinResponse(_ head: RequestHead, path: String) -> (status: Int, contentType: String, body: String)? {
        guard head.method == "GET" || head.method == "HEAD" else { return nil }
        switch path {
        case "/healthz":
            return (200, "text/plain; charset=utf-8", "ok\n")
        case "/readyz":
            return server.isDraining ? (503, "text/plain; charset=utf-8", "draining\n") : (200, "text/plain; charset=utf-8", "ready\n")
        case "/metrics" where admin != .publicWithoutMetrics:
            return (200, "text/plain; version=0.0.4; charset=utf-8", server.metrics.render() + server.pools.renderMetrics()
                    + (server.streams?.renderMetrics() ?? ""))
        default:
            return nil
        }
    }
}
