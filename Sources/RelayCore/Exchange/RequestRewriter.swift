import HTTP1
import Support
import Usage

/// Turns a client's request head into the upstream request's URL and headers. Pure: same input, same output.
///
/// Rules, in order: hop-by-hop fields go (RFC 9110 §7.6.1, including those named in `Connection`); every client
/// credential goes (the app must never be able to choose which key is spent); framing and `Host` are left to
/// curl, which derives them from the URL and body; `Expect` is ours to answer; the provider is asked for an
/// uncompressed response (compressed SSE has broken many proxies' streams); fields that let a client steer the
/// provider or forge where it came from go (`steeringFields`, and any name with `_`); `X-Forwarded-For` is the one
/// `ClientAddressResolver` built (the client's own claim is replaced, never appended to); `X-Forwarded-Proto` is
/// kept if a trusted proxy set it, else `http`; the request id is set; the operator's fixed fields
/// (`upstreams.NAME.headers`) replace any the client sent under the same names; the provider preset's fixed fields
/// are added when neither sent one (`anthropic-version`); the provider key is injected last, so nothing the client
/// sent can override it.
package enum RequestRewriter {
    /// Fields that carry a caller's credentials to some provider or site.
    package static let clientCredentialFields: [String] = [
        "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
    ]

    /// Fields a client could use to make a provider (or a gateway in front of it) see another host, path, method,
    /// protocol or origin address than the relay checked: frameworks and gateways honour them, the relay never
    /// sets them. `X-Forwarded-For` and `X-Forwarded-Proto` are rebuilt instead (see `upstreamHeaders`).
    package static let steeringFields: [String] = [
        "forwarded", "x-forwarded-host", "x-real-ip", "x-original-url", "x-rewrite-url", "x-http-method-override",
        "x-method-override", "http2-settings",
        // The same, as other stacks spell them: ASP.NET and OData's method header; the original method, path and
        // host as nginx, Envoy, Traefik and Apache modules pass them on; the scheme as Rack and nginx read it.
        "x-http-method", "x-original-method", "x-original-uri", "x-envoy-original-path", "x-forwarded-uri",
        "x-forwarded-path", "x-forwarded-scheme", "x-forwarded-ssl", "x-host", "x-original-host",
        // Origin claims other stacks trust (CDNs, Rails, Spring): the relay's own X-Forwarded-For is the only one.
        "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server", "x-original-forwarded-for", "true-client-ip",
        "x-client-ip", "cf-connecting-ip",
        // Who is billed: with a key that belongs to several organizations or projects, OpenAI bills the one these
        // name, and Google the quota project; the operator chooses it (`upstreams.NAME.headers`), never the client.
        "openai-organization", "openai-project", "x-goog-user-project",
        // What the answer holds: Google's field mask could have the provider leave its usage out (see
        // `geminiRemovedParameters`).
        "x-goog-fieldmask",
    ]

    /// Google's system parameters (cloud.google.com/apis/docs/system-parameters) a client must not choose, as query
    /// parameters: each is also read with a `$` before it (`$key`, or `%24key`). Removed from the query on Gemini
    /// routes, every other byte of it kept. The key and an OAuth token (the app must never choose which credential
    /// is spent: their header forms, `x-goog-api-key` and `Authorization`, are removed too); the project billed
    /// (`x-goog-user-project`, likewise); the field mask, which would let a client have the provider leave
    /// `usageMetadata` out of its answer, so that the stream ends without the counts its budget is settled on (its
    /// header form, `X-Goog-FieldMask`, is a steering field); and `$ct`, which overrides the `Content-Type` the
    /// relay checked (a protobuf or form reading of the bytes the relay read as JSON).
    package static let geminiRemovedParameters: [String] = ["key", "access_token", "userproject", "fields"]
        .flatMap { [$0, "$" + $0] } + ["$ct"]

    /// The field mask (`fields`, `$fields`) and `$ct`, removed from the query on every other route: Google's
    /// OpenAI-compatible endpoint may run behind a route with the `openai` preset, and no other provider reads them.
    package static let fieldMaskParameters: [String] = ["fields", "$fields", "$ct"]

    /// The two lists as bytes, made once.
    private static let geminiRemovedNames = QueryParameters.Names(geminiRemovedParameters)
    private static let fieldMaskNames = QueryParameters.Names(fieldMaskParameters)

    /// The provider URL for a checked path: the base URL, the path (without the route's prefix when
    /// `stripPrefix`), and the query as the client sent it, less the parameters above (`geminiRemovedParameters` on
    /// Gemini routes, `fieldMaskParameters` elsewhere; a query left empty by that loses its `?`). Sent as is
    /// (`CURLOPT_PATH_AS_IS`).
    package static func upstreamURL(baseURL: String, route: RelayConfiguration.Route, path: RequestPath) -> String {
        let upstreamPath = route.stripPrefix ? path.removingPrefix(route.prefix) : path.path
        guard let query = path.query else { return joined(baseURL, upstreamPath, nil) }
        let kept = QueryParameters.removing(route.provider == .gemini ? geminiRemovedNames : fieldMaskNames, from: query)
        return joined(baseURL, upstreamPath, kept.isEmpty ? nil : kept)
    }

    /// `base + path`, then `"?" + query` when there is one, in one string sized first (adding them up made a new
    /// string at each `+`).
    private static func joined(_ base: String, _ path: String, _ query: String?) -> String {
        var url = ""
        url.reserveCapacity(base.utf8.count + path.utf8.count + (query.map { $0.utf8.count + 1 } ?? 0))
        url += base
        url += path
        if let query {
            url += "?"
            url += query
        }
        return url
    }

    /// Every field that never passes as the client sent it (built once, not per request; a list, so a name is
    /// compared without being lowercased into a new string).
    private static let alwaysRemoved: [String] = clientCredentialFields + steeringFields + [
        "host", "content-length", "transfer-encoding", "expect", "accept-encoding", "x-request-id", "x-forwarded-for",
        // Proofs of the genuine app are the relay's to check (an App Check token is a bearer credential).
        "x-app-attest-key-id", "x-app-attest-assertion", "x-firebase-appcheck",
    ]

    /// `alwaysRemoved` by name length: a field name is compared only with the few names as long as it.
    private static let alwaysRemovedByLength: [[String]] = {
        var table = [[String]](repeating: [], count: (alwaysRemoved.map(\.utf8.count).max() ?? 0) + 1)
        for name in alwaysRemoved { table[name.utf8.count].append(name) }
        return table
    }()

    private static func isAlwaysRemoved(_ name: String) -> Bool {
        let length = name.utf8.count
        return length < alwaysRemovedByLength.count && alwaysRemovedByLength[length].contains { asciiCaseInsensitiveEqual(name, $0) }
    }

    package static func upstreamHeaders(
        from client: HTTPHeaders, upstream: RelayConfiguration.Upstream, client address: ClientAddress, requestID: String
    ) -> HTTPHeaders {
        var headers = client
        let fixed = upstream.headers
        let defaults = upstream.provider.defaultHeaders
        // The client's list copied once, with room for what is added below.
        headers.reserveCapacity(client.count + 5 + fixed.count + defaults.count)
        HopByHop.strip(&headers)
        let keyHeader = upstream.keyHeader
        let trusted = address.viaTrustedProxy
        // nginx's `underscores_in_headers off`: `X_Forwarded_For` or `X-Api_Key` becomes the same variable as its
        // dashed twin in CGI-style gateways (and in some providers' stacks), slipping past every check above.
        headers.removeAll { field in
            let name = field.name
            // On the name's own bytes: the generic search through `utf8` cost about 340 instructions a field.
            if name.utf8.withContiguousStorageIfAvailable({ $0.contains(0x5F) }) ?? name.utf8.contains(0x5F) { return true }
            return isAlwaysRemoved(name) || asciiCaseInsensitiveEqual(name, keyHeader)
                || (!trusted && asciiCaseInsensitiveEqual(name, "x-forwarded-proto"))
                || (fixed.count > 0 && fixed.contains(name))
        }

        headers.add(name: "Accept-Encoding", value: "identity")
        headers.add(name: "X-Forwarded-For", value: address.forwardedFor)
        if !headers.contains("X-Forwarded-Proto") {
            headers.add(name: "X-Forwarded-Proto", value: "http")
        }
        headers.add(name: "X-Request-Id", value: requestID)
        for field in fixed { headers.add(name: field.name, value: field.value) }
        for field in defaults where !headers.contains(field.name) {
            headers.add(name: field.name, value: field.value)
        }
        if let key = upstream.key {
            headers.add(name: upstream.keyHeader, value: upstream.keyPrefix + key.revealForHeader())
        }
        return headers
    }

    /// Keeps a client's `X-Request-Id` when it is a short plain token (so a mobile app can correlate its logs),
    /// otherwise uses `generated`, made only then.
    package static func requestID(clientValue: String?, generated: @autoclosure () -> String) -> String {
        guard let value = clientValue, (1...64).contains(value.utf8.count),
              value.utf8.allSatisfy({ c in
                  (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F || c == 0x2E
              })
        else { return generated() }
        return value
    }
}

/// Turns the provider's response head into the client's. Pure.
///
/// End-to-end fields pass unchanged (a 429 keeps `Retry-After`); hop-by-hop fields go; for `text/event-stream`
/// caching and proxy buffering are switched off (`Cache-Control: no-cache`, `X-Accel-Buffering: no`) and no
/// `Content-Length` is sent, whatever the provider said.
package enum ResponseRewriter {
    package static func clientHead(
        status: Int, upstreamHeaders: HTTPHeaders, requestMethod: String, clientVersion: HTTPVersion,
        keepAlive: Bool, requestID: String, extraHeaders: HTTPHeaders = HTTPHeaders()
    ) -> (head: ResponseHead, mode: ResponseBodyMode, keepAlive: Bool) {
        // Three looks at the provider's list instead of one per rule (about ten): whether `Connection` names more
        // fields to drop, whether a transfer coding frames the body, then the fields that pass, in order. The content type and the length are read from what
        // passes: `Connection` can name either (a length it drops cannot frame the client's body, which would then
        // carry no length at all).
        let named = ConnectionNamed(upstreamHeaders)
        // A body curl reads by its transfer coding is not framed by a length sent beside it (RFC 9112, 6.3): such a
        // length is dropped, whatever it says.
        let codedBody = upstreamHeaders.contains("Transfer-Encoding")
        var headers = HTTPHeaders()
        headers.reserveCapacity(upstreamHeaders.count + 5 + extraHeaders.count)
        var contentType: String?
        var length: String?
        var lengths = 0
        for field in upstreamHeaders {
            let name = field.name
            if HopByHop.isStandard(name) || asciiCaseInsensitiveEqual(name, "X-Request-Id")
                || (!named.isEmpty && named.contains(name)) { continue }
            if contentType == nil, asciiCaseInsensitiveEqual(name, "Content-Type") {
                contentType = field.value
            } else if asciiCaseInsensitiveEqual(name, "Content-Length") {
                length = field.value
                lengths += 1
            }
            headers.add(name: name, value: field.value)
        }
        let isEventStream = contentType.map { asciiCaseInsensitiveHasPrefix($0, lowercasePrefix: "text/event-stream") } ?? false

        var mode: ResponseBodyMode
        var keepAlive = keepAlive
        let validLength = lengths == 1 && !codedBody ? length.flatMap(Self.contentLength) : nil
        // A length that is not one plain number, or that stands beside a transfer coding, never reaches the client,
        // whatever the framing (a HEAD's too).
        var dropsLength = isEventStream || (lengths > 0 && validLength == nil)
        if requestMethod == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status) {
            mode = .none
            // A 1xx or 204 carries no length at all (RFC 9110, 8.6: a server MUST NOT send one); a HEAD's or 304's
            // stays, as the length of what a GET would have had.
            if status == 204 || status < 200 { dropsLength = dropsLength || lengths > 0 }
        } else if !isEventStream, let n = validLength {
            mode = .contentLength(n)
        } else {
            dropsLength = true
            if clientVersion == .http1_1 {
                mode = .chunked
            } else {
                mode = .closeDelimited
                keepAlive = false
            }
        }
        if dropsLength || isEventStream {
            headers.removeAll { field in
                asciiCaseInsensitiveEqual(field.name, "Content-Length")
                    || (isEventStream && (asciiCaseInsensitiveEqual(field.name, "Cache-Control")
                                          || asciiCaseInsensitiveEqual(field.name, "X-Accel-Buffering")))
            }
        }
        if mode == .chunked { headers.add(name: "Transfer-Encoding", value: "chunked") }
        if isEventStream {
            headers.add(name: "Cache-Control", value: "no-cache")
            headers.add(name: "X-Accel-Buffering", value: "no")
        }
        headers.add(name: "X-Request-Id", value: requestID)
        for field in extraHeaders {
            headers.remove(field.name)
            headers.add(name: field.name, value: field.value)
        }
        if !keepAlive {
            headers.add(name: "Connection", value: "close")
        } else if clientVersion == .http1_0 {
            headers.add(name: "Connection", value: "keep-alive")
        }
        return (ResponseHead(status: status, version: .http1_1, headers: headers), mode, keepAlive)
    }

    /// The provider's content type as `clientHead` reads it: the first `Content-Type` that `Connection` does not
    /// name. What reads the body (the usage meter) must take the body for what the client's head says it is.
    package static func contentType(_ upstreamHeaders: HTTPHeaders) -> String? {
        let named = ConnectionNamed(upstreamHeaders)
        return upstreamHeaders.first { field in
            asciiCaseInsensitiveEqual(field.name, "Content-Type") && !named.contains(field.name)
        }?.value
    }

    /// A length the client's head can carry as it is: 1*DIGIT (RFC 9110, 8.6). `Int` alone would take `+5`, which
    /// the provider's reader (curl) reads as 5 but a strict client refuses; such a body is sent chunked instead.
    static func contentLength(_ value: String) -> Int? {
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(value)
    }
}
