import Auth
import HTTP1
import Support

/// What `RelayHandler.admit` decided about a request that is not a built-in endpoint.
enum Admission {
    /// Forward it: everything the exchange needs, with the concurrency leases it now holds.
    case admitted(AdmittedRequest)
    /// A CORS preflight, answered by the relay itself with these headers (204).
    case preflight(HTTPHeaders)
    /// Refused: the error answered, the metric reason, and the log's detail when it says more.
    case rejected(RelayError, reason: String, detail: String?)
}

/// A request the relay will forward, and what it was checked against.
struct AdmittedRequest {
    var route: RelayConfiguration.Route
    var upstream: RelayConfiguration.Upstream
    var path: RequestPath
    var identity: String?
    var corsHeaders: [(String, String)]
    /// Concurrency leases, given back when the exchange ends.
    var leases: [(RateLimiter, RateLimiterState.Lease)]
}

extension RelayHandler {
    /// The checks every forwarded request passes, in order: the path is one the route may reach, a route, CORS,
    /// the method, the address's buckets, the credentials, the identity's buckets, no body on GET or HEAD.
    /// Leases taken are given back on every refusal. `context` gathers what the rejection's log line names.
    func admit(_ head: RequestHead, client address: String, now: Instant, context: inout Rejection) -> Admission {
        let configuration = server.configuration
        if admin == .adminOnly { return .rejected(.notFound(path: head.path), reason: "not_found", detail: nil) }
        // Route on exactly the path that goes upstream, and refuse any path some later hop could resolve to
        // another one (the key would follow it there).
        let path: RequestPath
        switch RequestPath.parse(head.target) {
        case .success(let checked): path = checked
        case .failure(let rejection):
            return .rejected(.invalidPath, reason: "invalid_path", detail: "invalid_path:" + rejection.detail)
        }
        guard let route = configuration.route(for: path.path), let upstream = configuration.upstreams[route.upstream] else {
            return .rejected(.notFound(path: head.path), reason: "not_found", detail: nil)
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
                return .preflight(h)
            case .deny(let error):
                return .rejected(error, reason: "cors_denied", detail: nil)
            }
        }
        guard route.methods.contains(head.method) else {
            return .rejected(.methodNotAllowed(allowed: route.methods), reason: "method_not_allowed", detail: nil)
        }

        // Who is calling, and may they spend more? The address's buckets are consulted before the credentials,
        // so a failed authentication costs the caller a token like any request, and guessing tokens is paid for
        // in time: once an address's failure bucket is empty, it gets 429 whatever it sends.
        if let retryAfter = server.authFailureLimiter.retryAfterIfEmpty(key: address, now: now) {
            return .rejected(.rateLimited(retryAfterSeconds: retryAfter), reason: "rate_limited", detail: "auth_failures")
        }
        var leases: [(RateLimiter, RateLimiterState.Lease)] = []
        func release() { for (limiter, lease) in leases { limiter.release(lease) } }
        func limit(_ limiter: RateLimiter?, _ key: String?) -> Admission? {
            guard let limiter, let key else { return nil }
            switch limiter.acquire(key: key, now: now) {
            case .allowed(let lease):
                leases.append((limiter, lease))
                return nil
            case .limited(let retryAfter, .rate):
                release()
                return .rejected(.rateLimited(retryAfterSeconds: retryAfter), reason: "rate_limited", detail: nil)
            case .limited(let retryAfter, .concurrency):
                release()
                return .rejected(.concurrencyLimited(retryAfterSeconds: retryAfter), reason: "concurrency_limited", detail: nil)
            }
        }
        if let refused = limit(server.perAddressLimiter, address) { return refused }
        switch server.authenticator.authenticate(route.auth, headers: head.headers, now: server.wallClock()) {
        case .success(let identity):
            context.identity = identity?.key
        case .failure(let error):
            release()   // the stream slot only: the token stays spent
            if case .allowed(let lease) = server.authFailureLimiter.acquire(key: address, now: now) {
                server.authFailureLimiter.release(lease)
            }
            return .rejected(error.relayError, reason: "unauthorized", detail: error.code)
        }
        if let refused = limit(server.perIdentityLimiter, context.identity) { return refused }

        // GET and HEAD carry no body here (see RelayError.bodyNotAllowed); `Content-Length: 0` is no body.
        if head.method == "GET" || head.method == "HEAD", head.framing != .none && head.framing != .contentLength(0) {
            release()
            return .rejected(.bodyNotAllowed, reason: "body_not_allowed", detail: nil)
        }
        return .admitted(AdmittedRequest(route: route, upstream: upstream, path: path, identity: context.identity,
                                         corsHeaders: context.corsHeaders, leases: leases))
    }
}
