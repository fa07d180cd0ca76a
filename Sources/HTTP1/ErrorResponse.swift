import Support

/// An error the server answers itself with a complete response: a status, extra header fields, and the
/// OpenAI-style JSON body `{"error":{"message":…,"type":…,"code":…}}` that every SDK already knows how to show.
/// The connection uses it for what it detects on its own (a malformed request, a request that came too slowly);
/// an application's richer error type (the relay's `RelayError`) converts to it. Messages are written by the
/// server, never copied from the request, so nothing the client sent (a credential, say) is echoed.
public struct ErrorResponse: Error, Sendable, Equatable {
    public var status: Int
    /// The body's `error.type`.
    public var type: String
    /// The body's `error.code`: what metrics and rejection logs count.
    public var code: String
    public var message: String
    /// Fields sent after `Content-Type` (`Allow`, `Retry-After`, CORS fields), in order.
    public var headers: [(String, String)]

    public init(status: Int, type: String, code: String, message: String, headers: [(String, String)] = []) {
        self.status = status
        self.type = type
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func == (a: ErrorResponse, b: ErrorResponse) -> Bool {
        a.status == b.status && a.type == b.type && a.code == b.code && a.message == b.message
            && a.headers.map { "\($0.0):\($0.1)" } == b.headers.map { "\($0.0):\($0.1)" }
    }

    public var jsonBody: [UInt8] {
        let body = "{\"error\":{\"message\":\(JSONLine.quote(message)),\"type\":\(JSONLine.quote(type)),\"code\":\(JSONLine.quote(code))}}"
        return Array(body.utf8)
    }

    /// The head fields of the answer, before framing: `Content-Type`, the extra fields, then `X-Request-Id`.
    public func headerFields(requestID: String?) -> HTTPHeaders {
        var fields = HTTPHeaders()
        fields.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { fields.add(name: name, value: value) }
        if let requestID { fields.add(name: "X-Request-Id", value: requestID) }
        return fields
    }

    /// The whole answer as bytes, for a socket that gets nothing else (a connection refused at accept).
    public func serialized(requestID: String? = nil) -> [UInt8] {
        let body = jsonBody
        var bytes: [UInt8] = []
        ResponseHead.complete(status: status, headers: headerFields(requestID: requestID), contentLength: body.count,
                              keepAlive: false).serialize(into: &bytes)
        return bytes + body
    }

    /// A request the parser refused; the status is the parser's (400, 413, 414, 431, 505).
    public static func badRequest(_ error: HTTPParseError) -> ErrorResponse {
        ErrorResponse(status: error.status, type: "invalid_request_error", code: code(for: error.kind), message: error.message)
    }

    static func code(for kind: HTTPParseError.Kind) -> String {
        switch kind {
        case .headTooLarge: "request_header_too_large"
        case .tooManyHeaders: "too_many_headers"
        case .uriTooLong: "uri_too_long"
        case .bodyTooLarge: "request_body_too_large"
        case .badRequest: "bad_request"
        case .versionNotSupported: "http_version_not_supported"
        }
    }

    /// A head or body that did not arrive within its deadline (`ConnectionDeadlines`).
    public static let requestTimeout = ErrorResponse(
        status: 408, type: "invalid_request_error", code: "request_timeout",
        message: "The request was not received in time.")
}

extension ResponseHead {
    /// The head of a complete response whose body is `contentLength` bytes: the given fields, then `Content-Length`,
    /// then `Connection: close` unless the connection is kept (RFC 9112 §9.6). The one place such heads are built,
    /// so an answer written by a connection and one written to a refused socket are the same bytes.
    public static func complete(status: Int, headers: HTTPHeaders, contentLength: Int, keepAlive: Bool) -> ResponseHead {
        var headers = headers
        headers.add(name: "Content-Length", value: String(contentLength))
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        return ResponseHead(status: status, headers: headers)
    }
}
