/// `GET /v1/relay/streams/<id>?offset=N` (resume) and `DELETE /v1/relay/streams/<id>` (stop), read from the
/// request line alone (README, "Resumable streams"). A value: the endpoint acts on what it says.
package enum StreamRequest: Equatable, Sendable {
    case resume(id: String, offset: Int)
    case stop(id: String)
    /// Answer this error; `result` is the metric's label.
    case invalid(RelayError, result: String)

    package static let pathPrefix = "/v1/relay/streams/"
    /// Offsets up to 15 digits: larger ones are no offset any stream can have, and cannot overflow.
    package static let maxOffsetDigits = 15

    /// Ids that are not spelled as ids are unknown (404, like an id never issued): the answer says nothing more.
    package static func parse(method: String, path: String, query: String?) -> StreamRequest {
        guard path.hasPrefix(pathPrefix) else { return .invalid(streamNotFound, result: "not_found") }
        let id = path.dropFirst(pathPrefix.count)
        guard method == "GET" || method == "DELETE" else {
            return .invalid(.methodNotAllowed(allowed: ["GET", "DELETE"]), result: "invalid")
        }
        guard StreamIDs.isWellFormed(id) else { return .invalid(streamNotFound, result: "not_found") }
        if method == "DELETE" { return .stop(id: String(id)) }
        guard let offset = query.flatMap({ offsetParameter(in: $0) }) else { return .invalid(invalidOffset, result: "invalid") }
        return .resume(id: String(id), offset: offset)
    }

    /// The `offset` parameter: decimal digits only (no sign, no spaces, no escapes), at most `maxOffsetDigits`; nil
    /// when absent, repeated or otherwise spelled.
    package static func offsetParameter(in query: String) -> Int? {
        var found: Int?
        for piece in query.split(separator: "&", omittingEmptySubsequences: false) {
            guard piece.hasPrefix("offset=") else { continue }
            guard found == nil else { return nil }
            let digits = piece.dropFirst("offset=".count).utf8
            guard !digits.isEmpty, digits.count <= maxOffsetDigits, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            found = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        return found
    }

    package static let streamNotFound = RelayError(status: 404, type: "invalid_request_error", code: "stream_not_found",
                                           message: "No such stream: it never existed, has expired, or belongs to someone else.")
    package static let streamExpired = RelayError(status: 410, type: "invalid_request_error", code: "stream_expired",
                                          message: "The bytes at this offset are no longer kept; the stream cannot be resumed there.")
    package static let offsetOutOfRange = RelayError(status: 416, type: "invalid_request_error", code: "offset_out_of_range",
                                             message: "The offset is past what the stream has written.")
    /// A resume at the end of a stream whose provider failed: the client has all there is, and no more will come.
    package static let streamBroken = RelayError(status: 502, type: "upstream_error", code: "stream_broken",
                                         message: "The provider's stream broke off at this offset; it cannot be continued.")
    package static let invalidOffset = RelayError(status: 400, type: "invalid_request_error", code: "invalid_offset",
                                          message: "Give the offset as ?offset=N, N the number of body bytes already received.")
}
