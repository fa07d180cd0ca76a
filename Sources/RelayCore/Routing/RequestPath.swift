/// A request target's path and query, checked so that the path the relay routes on is, byte for byte, the path
/// the provider receives. Pure.
///
/// Why so strict: the provider key goes wherever the upstream path points. If a path that *looks* inside a route
/// (`/v1/models/../organization/admin_api_keys`) is resolved later (by curl, a load balancer or the provider) to a
/// path outside it, the key reaches an endpoint no route allows. So anything that some hop might resolve or decode
/// into another path is refused instead of normalised (Envoy's `path_with_escaped_slashes_action: REJECT_REQUEST`
/// and `merge_slashes`, done as rejections): dot segments (RFC 3986 §5.2.4), empty segments (`//`), backslashes
/// (some servers read `\` as `/`), and percent-encoded `.`, `/` and `\` (`%2e`, `%2f`, `%5c`, any case). curl is told
/// to send the path as it is (`CURLOPT_PATH_AS_IS`), so nothing between here and the socket changes it.
///
/// A `;` in the path (or `%3B`) is refused too: servlet containers and the frameworks on them (Tomcat, Jetty, Spring)
/// drop a segment's `;parameters` before routing, so `/v1/chat/completions;x` or `/v1/chat;x/completions` may be
/// `/v1/chat/completions` to some hop while the relay would route it elsewhere (a broad `/v1/` route beside an exact
/// one with a model allowlist). No provider path uses `;`, so refusing it costs nothing; the query may hold it.
///
/// Path bytes allowed: RFC 3986 `pchar` but `;` (unreserved, sub-delims, `:`, `@`, valid `%XX`) and `/`. The query is
/// passed through as the client sent it, except that `#` (a fragment, never part of a request target, RFC 9112
/// §3.2) is refused because a URL parser would cut the query there.
///
/// Percent-encoded unreserved characters (ALPHA, DIGIT, `-`, `_`, `~`; RFC 3986 §2.3) are decoded: §6.2.2.2 makes
/// `%69` the same as `i`, and providers' front ends decode them before routing, so `/v1/chat/complet%69ons` is
/// `/v1/chat/completions` to them. Routing, endpoint detection and the upstream URL all use the decoded path, so the
/// provider receives exactly the path the relay judged. `%2E` stays refused (it is a dot, see above); every other
/// `%XX` (reserved or non-ASCII bytes, whose encoding carries meaning) stays as sent, hex case included.
///
/// A trailing slash names the same endpoint as the bare path (`endpoint`): routes match, and every endpoint decision
/// (usage injection, output ceilings, prompt estimate, model label) reads, the path without it. What goes upstream
/// keeps the slash the client sent: the provider then answers for the path the client chose (most answer 404 or
/// redirect), and the relay has already judged it as the bare endpoint.
package struct RequestPath: Equatable, Sendable {
    /// Starts with `/`; no dot or empty segment, no backslash, no encoded separator; unreserved characters decoded.
    package let path: String
    /// What follows the first `?`, without it; nil when there is no `?`.
    package let query: String?

    /// Why a target was refused; `code` is the log's reason detail.
    package enum Rejection: Error, Equatable, Sendable {
        case notOriginForm
        case invalidCharacter
        case badPercentEncoding
        case dotSegment
        case emptySegment
        case backslash
        case encodedSeparator
        case fragment
        case pathParameter

        package var detail: String {
            switch self {
            case .notOriginForm: "not_origin_form"
            case .invalidCharacter: "invalid_character"
            case .badPercentEncoding: "bad_percent_encoding"
            case .dotSegment: "dot_segment"
            case .emptySegment: "empty_segment"
            case .backslash: "backslash"
            case .encodedSeparator: "encoded_separator"
            case .fragment: "fragment"
            case .pathParameter: "path_parameter"
            }
        }
    }

    package static func parse(_ target: String) -> Result<RequestPath, Rejection> {
        let bytes = Array(target.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return .failure(.notOriginForm) }
        let pathEnd = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count
        if bytes[pathEnd...].contains(UInt8(ascii: "#")) { return .failure(.fragment) }

        var i = 0
        var segmentStart = 1
        // The decoded path, made only once a `%XX` to decode is met (most paths have none).
        var decodedPath: [UInt8]?
        while i < pathEnd {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < pathEnd, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else {
                    return .failure(.badPercentEncoding)
                }
                let decoded = hi << 4 | lo
                if decoded == UInt8(ascii: ".") || decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\") {
                    return .failure(.encodedSeparator)
                }
                if decoded == UInt8(ascii: ";") { return .failure(.pathParameter) }
                if isDecodedUnreserved(decoded) {
                    if decodedPath == nil { decodedPath = Array(bytes[..<i]) }
                    decodedPath!.append(decoded)
                } else {
                    decodedPath?.append(contentsOf: bytes[i..<(i + 3)])
                }
                i += 3
                continue
            }
            decodedPath?.append(b)
            if b == UInt8(ascii: "\\") { return .failure(.backslash) }
            if b == UInt8(ascii: "#") { return .failure(.fragment) }
            if b == UInt8(ascii: ";") { return .failure(.pathParameter) }
            if b == UInt8(ascii: "/") {
                if i > 0 {
                    if let rejection = checkSegment(bytes[segmentStart..<i], isLast: false) { return .failure(rejection) }
                    segmentStart = i + 1
                }
            } else if !isPathByte(b) {
                return .failure(.invalidCharacter)
            }
            i += 1
        }
        if let rejection = checkSegment(bytes[segmentStart..<pathEnd], isLast: true) { return .failure(rejection) }

        let path = decodedPath.map { String(decoding: $0, as: UTF8.self) } ?? String(decoding: bytes[..<pathEnd], as: UTF8.self)
        let query = pathEnd < bytes.count ? String(decoding: bytes[(pathEnd + 1)...], as: UTF8.self) : nil
        return .success(RequestPath(path: path, query: query))
    }

    /// The path after a route's prefix was removed (`stripPrefix`), always starting with `/`. The route matched
    /// at a segment boundary (a prefix's own trailing slash aside: `/anthropic/` also matches `/anthropic`), so what
    /// is left is `""` or starts with `/`.
    package func removingPrefix(_ prefix: String) -> String {
        let prefix = Self.endpoint(of: prefix)
        guard path.hasPrefix(prefix) else { return path }
        let rest = String(path.utf8.dropFirst(prefix.utf8.count))!
        return rest.hasPrefix("/") ? rest : "/" + rest
    }

    /// The endpoint the path names: the path without one trailing slash (`/` stays `/`). What routes match and what
    /// every endpoint decision reads (`ExchangeRecord.path`), so `/v1/chat/completions/` is detected, limited and
    /// metered exactly as `/v1/chat/completions`. A parsed path never ends in `//` (an empty segment), so one
    /// slash is all there is to remove.
    package var endpoint: String { Self.endpoint(of: path) }

    /// The same for any path (a route's prefix, a path already checked).
    package static func endpoint(of path: String) -> String {
        guard path.utf8.count > 1, path.utf8.last == UInt8(ascii: "/") else { return path }
        return String(path.utf8.dropLast())!
    }

    private static func checkSegment(_ segment: ArraySlice<UInt8>, isLast: Bool) -> Rejection? {
        // A trailing slash ("/v1/") leaves an empty last segment, which is an ordinary path; "//" is not.
        if segment.isEmpty { return isLast ? nil : .emptySegment }
        if segment.count <= 2 && segment.allSatisfy({ $0 == UInt8(ascii: ".") }) { return .dotSegment }
        return nil
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// RFC 3986 unreserved characters that decoding may produce: ALPHA, DIGIT, `-`, `_`, `~` (a `.` is refused
    /// before this is asked).
    private static func isDecodedUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: "~")
        }
    }

    /// RFC 3986 pchar without `%` and `;` (both handled apart): unreserved / sub-delims / ":" / "@".
    private static func isPathByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~!$&'()*+,;=:@".utf8.contains(b)
        }
    }
}
