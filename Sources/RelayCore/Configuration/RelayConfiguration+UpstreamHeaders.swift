import HTTP1

/// `upstreams.NAME.headers`: fields the operator sets on every request to one provider, e.g.
/// `{"OpenAI-Organization": "org-…", "OpenAI-Project": "proj_…"}` for a key shared by several organizations, or a
/// gateway's or Azure's own extras. The client can neither override nor add to them: the rewriter removes any
/// field of the same name the client sent (`RequestRewriter.upstreamHeaders`).
///
/// Refused at start-up, each problem named by its key path: a value that is not a string; a name that is not an
/// HTTP token or holds `_` (the rewriter drops such names from clients, see there); a value with control
/// characters (CR, LF or NUL would split the request) or with spaces around it; a credential field
/// (`Authorization`, `x-api-key`, … and the upstream's own `keyHeader`: the provider key has its own, secret-kept
/// setting, `upstreams.NAME.key`, and a key written here would sit in the configuration in clear); and the
/// fields the relay or curl own (framing, hop-by-hop, `Host`, `X-Forwarded-For`, `X-Forwarded-Proto`,
/// `X-Request-Id`, `Accept-Encoding`).
extension ConfigReader {
    /// Fields the relay or curl set themselves: an operator's value would be dropped or would break the framing.
    static let relayOwnedFields: [String] = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te", "trailer",
        "upgrade", "expect", "accept-encoding", "x-forwarded-for", "x-forwarded-proto", "x-request-id",
    ]

    mutating func fixedHeaders(_ value: Any, _ path: String, keyHeader: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        guard let object = value as? [String: Any] else {
            problem(path, "must be an object of header names to string values")
            return headers
        }
        for name in object.keys.sorted() {
            let fieldPath = "\(path).\(name)"
            guard let text = object[name] as? String else {
                problem(fieldPath, "must be a string")
                continue
            }
            if !isToken(name) || name.utf8.contains(UInt8(ascii: "_")) {
                problem(fieldPath, "must be a header name (letters, digits and -, no _)")
                continue
            }
            let lowered = name.lowercased()
            if RequestRewriter.clientCredentialFields.contains(lowered) || asciiCaseInsensitiveEqual(name, keyHeader) {
                problem(fieldPath, "is a credential field: the provider key goes in the upstream's \"key\" (with \"keyHeader\")")
                continue
            }
            if Self.relayOwnedFields.contains(lowered) {
                problem(fieldPath, "is set by the relay itself")
                continue
            }
            if headers.contains(name) {
                problem(fieldPath, "is given twice (header names are case-insensitive)")
                continue
            }
            if !Self.isFieldValue(text) {
                problem(fieldPath, "must be printable text without control characters or surrounding spaces")
                continue
            }
            headers.add(name: name, value: text)
        }
        return headers
    }

    /// RFC 9110 §5.5 field-value, kept to visible ASCII and inner spaces/tabs: nothing a later hop could read as
    /// the end of the field.
    static func isFieldValue(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        guard let first = bytes.first, let last = bytes.last else { return true }
        if first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 { return false }
        return bytes.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) }
    }
}
