/// What the relay and the client library must agree on for resumable streams (README, "Resumable streams"), in
/// one place. Pure Swift, no Foundation.
///
/// A streaming answer on a route with `resume` carries `X-Relay-Stream: <id>`. After a dropped connection the app
/// asks `GET /v1/relay/streams/<id>?offset=N` (N = body bytes received so far) with the credentials of the first
/// request, and the body continues at byte N. `DELETE /v1/relay/streams/<id>` stops the stream (204).
public enum StreamWire {
    /// The response header that names a resumable stream.
    public static let streamHeader = "X-Relay-Stream"
    /// The prefix of a stream's resource; the id follows.
    public static let streamsPath = "/v1/relay/streams/"
    /// The shortest and longest id accepted (128 random bits are 22 base64url characters).
    public static let idLengths = 22...64

    /// Whether `id` can be a stream id: base64url characters only, within `idLengths`. Anything else is never
    /// put into a path.
    public static func isValidID(_ id: some StringProtocol) -> Bool {
        idLengths.contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2D || byte == 0x5F
        }
    }

    /// The request target of a resume at `offset`.
    public static func resumeTarget(id: String, offset: Int) -> String { streamsPath + id + "?offset=\(offset)" }

    /// The request target of a stop.
    public static func stopTarget(id: String) -> String { streamsPath + id }
}
