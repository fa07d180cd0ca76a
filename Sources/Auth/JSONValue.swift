import JSON

/// A JSON value (RFC 8259) as a Sendable tree: how the claims of a verified JWT (RFC 7519 section 4) are handed
/// out. Numbers are Doubles; `true`/`false` stay booleans (never 1/0).
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    /// Parses a JSON object (nothing else at top level); nil on any error. Read by the relay's one strict reader
    /// (`JSONDocument`): nesting is capped, so hostile input fails instead of exhausting the stack, and a member
    /// name given twice is refused (RFC 7515 section 5.2 lets a JWS parser reject duplicate names; any other
    /// choice lets two readers of one token see different claims).
    static func parseObject(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let document = try? JSONDocument(parsing: bytes, duplicates: .refused),
              case .object(let object)? = JSONValue(document, JSONDocument.root) else { return nil }
        return object
    }

    /// The value at `node`; nil for a number that is not finite as a Double.
    init?(_ d: JSONDocument, _ node: Int) {
        switch d.kind(of: node) {
        case .null:
            self = .null
        case .bool:
            self = .bool(d.isTrue(node))
        case .string:
            guard let string = d.string(node) else { return nil }
            self = .string(string)
        case .number:
            guard let double = Double(String(decoding: d.bytes[d.range(of: node)], as: UTF8.self)), double.isFinite
            else { return nil }
            self = .number(double)
        case .array:
            var out: [JSONValue] = []
            for child in d.children(of: node) {
                guard let converted = JSONValue(d, child) else { return nil }
                out.append(converted)
            }
            self = .array(out)
        case .object:
            var out: [String: JSONValue] = [:]
            for child in d.children(of: node) {
                guard let key = d.key(of: child), let converted = JSONValue(d, child) else { return nil }
                out[key] = converted
            }
            self = .object(out)
        }
    }
}
