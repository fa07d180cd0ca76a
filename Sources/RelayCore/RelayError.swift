import HTTP1
import Support

/// An error answered to the client: an HTTP status plus the OpenAI-style JSON body every SDK already knows how
/// to show, `{"error":{"message":…,"type":…,"code":…}}`. Messages are written here, never copied from the
/// request, so no credential can be echoed.
package struct RelayError: Error, Equatable, Sendable {
    package var status: Int
    package var type: String
    package var code: String
    package var message: String
    package var extraHeaders: [(String, String)] = []

    package init(status: Int, type: String, code: String, message: String, extraHeaders: [(String, String)] = []) {
        self.status = status
        self.type = type
        self.code = code
        self.message = message
        self.extraHeaders = extraHeaders
    }

    package static func == (a: RelayError, b: RelayError) -> Bool {
        a.status == b.status && a.type == b.type && a.code == b.code && a.message == b.message
            && a.extraHeaders.map { "\($0.0):\($0.1)" } == b.extraHeaders.map { "\($0.0):\($0.1)" }
    }

    /// The same error as the server writes it (status, fields, JSON body).
    package var response: ErrorResponse {
        ErrorResponse(status: status, type: type, code: code, message: message, headers: extraHeaders)
    }

    package init(_ response: ErrorResponse) {
        self.init(status: response.status, type: response.type, code: response.code, message: response.message,
                  extraHeaders: response.headers)
    }

    package var jsonBody: [UInt8] { response.jsonBody }

    package static func notFound(path: String) -> RelayError {
        RelayError(status: 404, type: "invalid_request_error", code: "route_not_found",
                   message: "No route for this path on the relay.")
    }

    /// 400 for a request target that could reach a path other than the one it appears to (dot segments, `//`,
    /// backslashes, encoded separators) or that is not a plain path.
    package static let invalidPath = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_path",
        message: "The request path is not allowed: it must not contain '.' or '..' segments, '//', backslashes, or encoded '.', '/' or '\\'.")

    /// 400 for a `;` in the path: a hop that drops path parameters would read another path than the relay routed.
    package static let pathParameter = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_path",
        message: "The request path is not allowed: it must not contain ';' (path parameters); put parameters in the query.")

    package static func badRequest(_ error: HTTPParseError) -> RelayError {
        RelayError(ErrorResponse.badRequest(error))
    }

    package static let upstreamTimeout = RelayError(
        status: 504, type: "upstream_error", code: "upstream_timeout",
        message: "The provider did not start answering in time.")

    /// The provider closed or reset the connection after the request may have reached it, before any byte of
    /// an answer. Such a request is not sent again unless it is replayable (GET, HEAD, OPTIONS, TRACE): for a chat completion a second send is a second bill and a second generation.
    package static let upstreamConnectionReset = RelayError(
        status: 502, type: "upstream_error", code: "upstream_connection_reset",
        message: "the provider closed the connection before answering; the request may have been processed")

    /// A GET or HEAD with a body (RFC 9110 §9.3.1: a body there has no defined meaning, and some servers
    /// ignore it while others read it: a request-smuggling gap). Rejected rather than forwarded.
    package static let bodyNotAllowed = RelayError(
        status: 400, type: "invalid_request_error", code: "invalid_request",
        message: "GET and HEAD requests must not carry a body.")

    package static let requestTimeout = RelayError(ErrorResponse.requestTimeout)

    package static let tooManyConnections = RelayError(
        status: 503, type: "server_error", code: "too_many_connections",
        message: "The relay is at its connection limit; retry later.")

    package static let tooManyConnectionsFromAddress = RelayError(
        status: 429, type: "rate_limit_error", code: "too_many_connections",
        message: "Too many open connections from this address; close some and retry.")

    package static func methodNotAllowed(allowed: [String]) -> RelayError {
        RelayError(status: 405, type: "invalid_request_error", code: "method_not_allowed",
                   message: "This method is not allowed on this path.", extraHeaders: [("Allow", allowed.joined(separator: ", "))])
    }

    package static let shuttingDown = RelayError(
        status: 503, type: "server_error", code: "shutting_down",
        message: "The relay is shutting down; retry.")
}
