import Foundation

/// A JSON value (RFC 8259) as a Sendable tree: how the claims of a verified JWT (RFC 7519 section 4) are handed
/// out. Numbers are Doubles; `true`/`false` stay booleans (never 1/0).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    /// Parses a JSON object (nothing else at top level); nil on any error. Foundation's parser limits nesting
    /// depth, so hostile input fails instead of exhausting the stack.
    static func parseObject(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let first = bytes.first(where: { !isJSONSpace($0) }), first == UInt8(ascii: "{") else { return nil }
        guard let any = try? JSONSerialization.jsonObject(with: Data(bytes)),
              case .object(let object)? = JSONValue(foundation: any) else { return nil }
        return object
    }

    private static func isJSONSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    /// Converts JSONSerialization output; nil for anything that is not JSON.
    init?(foundation value: Any) {
        switch value {
        case is NSNull:
            self = .null
        case let string as String:
            self = .string(string)
        case let number as NSNumber:
            // JSON booleans arrive as NSNumber too; their Objective-C type is "c" (CFBoolean) on Linux and macOS.
            if String(cString: number.objCType) == "c" {
                self = .bool(number.boolValue)
            } else {
                let double = number.doubleValue
                guard double.isFinite else { return nil }
                self = .number(double)
            }
        case let array as [Any]:
            var out: [JSONValue] = []
            out.reserveCapacity(array.count)
            for element in array {
                guard let converted = JSONValue(foundation: element) else { return nil }
                out.append(converted)
            }
            self = .array(out)
        case let object as [String: Any]:
            var out: [String: JSONValue] = [:]
            for (key, element) in object {
                guard let converted = JSONValue(foundation: element) else { return nil }
                out[key] = converted
            }
            self = .object(out)
        default:
            return nil
        }
    }
}
