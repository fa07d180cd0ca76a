import Auth
import HTTP1
import RelayCore
import RelayState
import Support
import Transport
import Usage

/// What `RelayHandler.admit` decided about a request's head (one that is not a built-in endpoint). Not
/// `HTTPServer.Admission`, which decides whether a new connection is accepted at all.
enum HeadAdmission {
    /// Forward it: everything the exchange needs. The buckets, stream caps and budget are the admission store's,
    /// asked by the exchange once the request is whole.
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
    /// The endpoint's shape: which readers apply, and whether it is metered.
    var endpoint: Endpoint
    var identity: String?
    var corsHeaders: [(String, String)]
}

extension RelayHandler {
    /// The checks every forwarded request passes at its head, in order: the path is one the route may reach, a
    /// route, CORS, the method, the address's failed-authentication bucket, the credentials, no body on GET or HEAD.
    /// The per-address and per-identity buckets, stream caps and budgets are the admission store's, asked once the
    /// request is whole (`RelayExchange`). `context` gathers what the rejection's log line names.
    func admit(_ head: RequestHead, client address: String, on loop: any LoopScheduler, context: inout Rejection) -> HeadAdmission {
        let now = loop.clock.now()
        let configuration = server.configuration
        if admin == .adminOnly { return .rejected(.notFound(path: head.path), reason: "not_found", detail: nil) }
        // Route on exactly the path that goes upstream, and refuse any path some later hop could resolve to
        // another one (the key would follow it there).
        let path: RequestPath
        switch RequestPath.parse(head.target) {
        case .success(let checked): path = checked
        case .failure(let rejection):
            return .rejected(rejection == .pathParameter ? .pathParameter : .invalidPath, reason: "invalid_path",
                             detail: "invalid_path:" + rejection.detail)
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

        // Who is calling? Guessing tokens is paid for in time: once an address's failure bucket is empty, it gets
        // 429 whatever it sends. That bucket stays in this process (brute-force protection is per replica), and a
        // failure also costs the address a token of its shared `rateLimits.perAddress` bucket (an admission
        // settled at once).
        if let retryAfter = server.authFailureLimiter.retryAfterIfEmpty(key: address, now: now) {
            return .rejected(.rateLimited(retryAfterSeconds: retryAfter), reason: "rate_limited", detail: "auth_failures")
        }
        switch server.authenticator.authenticate(route.auth, headers: head.headers, now: server.wallClock()) {
        case .success(let identity):
            context.identity = identity?.key
        case .failure(let error):
            if case .allowed(let lease) = server.authFailureLimiter.acquire(key: address, now: now) {
                server.authFailureLimiter.release(lease)
            }
            if server.configuration.rateLimits.perAddress != nil {
                let store = server.store
                store.admit(AdmissionRequest(address: address, identity: nil, budget: nil, wallClockSeconds: Int64(server.wallClock())),
                            on: loop) { decision in
                    if case .admitted(let grant) = decision { store.settle(grant, usedTokens: 0) }
                }
            }
            return .rejected(error.relayError, reason: "unauthorized", detail: error.code)
        }

        // GET and HEAD carry no body here (see RelayError.bodyNotAllowed); `Content-Length: 0` is no body.
        if head.method == "GET" || head.method == "HEAD", head.framing != .none && head.framing != .contentLength(0) {
            return .rejected(.bodyNotAllowed, reason: "body_not_allowed", detail: nil)
        }
        // Budgets hold only where the relay can count: an endpoint it cannot meter is refused unless the route
        // says it may pass uncharged.
        let endpoint = Endpoint(method: head.method, path: path.path)
        if configuration.budgets != nil && endpoint == .unmetered && !route.unmetered {
            return .rejected(.endpointNotMetered, reason: "endpoint_not_metered", detail: nil)
        }
        // A body the relay reads must be readable: a compressed one would pass every check unread.
        let reads = route.bodyPolicy.isActive
            || (endpoint.isMetered && (configuration.budgets != nil || route.injectsUsage(at: endpoint)))
        if reads, let refusal = Self.contentEncodingRefusal(head.headers) {
            return .rejected(refusal, reason: "unsupported_content_encoding", detail: nil)
        }
        // ... and read as the provider will read it: as JSON (Google reads protobuf or a form by the content type).
        if reads, head.framing != .none && head.framing != .contentLength(0), !Self.isJSONContentType(head.headers) {
            return .rejected(.unsupportedMediaType, reason: "unsupported_media_type", detail: nil)
        }
        return .admitted(AdmittedRequest(route: route, upstream: upstream, path: path, endpoint: endpoint,
                                         identity: context.identity, corsHeaders: context.corsHeaders))
    }

    /// Every `Content-Type` field names JSON (`application/json`, or a `+json` type; parameters after `;` aside,
    /// any case: the rule `UsageTap.Format` reads answers by), or there is none. `application/json+protobuf` is not
    /// JSON: Google reads it as a protobuf message laid out in arrays, as it reads `application/x-protobuf` as
    /// binary and a form as fields.
    static func isJSONContentType(_ headers: HTTPHeaders) -> Bool {
        for field in headers where asciiCaseInsensitiveEqual(field.name, "Content-Type") {
            guard UsageTap.Format(contentType: field.value) == .json else { return false }
        }
        return true
    }

    /// Any `Content-Encoding` but `identity` (every field, every listed coding): 415.
    static func contentEncodingRefusal(_ headers: HTTPHeaders) -> RelayError? {
        for value in headers.values("Content-Encoding") {
            for coding in value.split(separator: ",") {
                let name = coding.trimmingSpaces
                if !(name.isEmpty || name.utf8.count == 8 && name.lowercased() == "identity") { return .unsupportedContentEncoding }
            }
        }
        return nil
    }
}

private extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
