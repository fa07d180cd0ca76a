#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Adds `"stream_options":{"include_usage":true}` to a streaming OpenAI chat request so the provider ends the
/// stream with its token counts (OpenAI sends usage in a stream only when asked). Pure: bytes in, bytes out.
///
/// The edit is minimal, like the max-tokens clamp: the body is checked with the strict `JSONTopLevel` scanner and
/// only the bytes of one insertion or one replaced value change; key order, spacing and every other byte stay.
///
/// | request | result |
/// |---|---|
/// | not exactly one `"stream": true` (absent, false, duplicated, not a bool) | untouched |
/// | no `stream_options` | `,"stream_options":{"include_usage":true}` inserted after the last member |
/// | `"stream_options": null` | the `null` replaced by `{"include_usage":true}` |
/// | `stream_options` an object without `include_usage` (or with `null`) | `"include_usage":true` added inside |
/// | `"include_usage": true` | untouched: the client asked, the client gets the usage event |
/// | `"include_usage": false` | rewritten to `true` (see below) |
/// | anything else (duplicate keys, a non-object `stream_options`, a non-bool `include_usage`, invalid JSON) | untouched: the provider answers the error it would have |
///
/// An explicit `false` is overridden, and the usage event is removed from the client's stream like an injected
/// one: the client still sees the stream it asked for, and a client cannot blind the relay's accounting (and the
/// budgets built on it) by asking for no usage.
///
/// `injected` tells the exchange to remove the one usage-only event from the client's stream
/// (`UsageEventStripper`); the caller frames the new length itself.
public enum IncludeUsageInjection {
    public struct Result: Equatable, Sendable {
        public var body: [UInt8]
        /// The relay asked for usage the client did not ask for: strip the usage-only event from its stream.
        public var injected: Bool
    }

    /// Whether a request path takes `stream_options` (chat completions and legacy completions, OpenAI's and
    /// Azure's `/openai/deployments/NAME/…` alike). The Responses API always reports usage and has no such option.
    public static func applies(toPath path: String) -> Bool {
        // "/completions" also ends "/chat/completions"; compared on bytes, once per request.
        var path = path
        return path.withUTF8 { bytes in
            let suffix: StaticString = "/completions"
            var end = 0
            while end < bytes.count && bytes[end] != UInt8(ascii: "?") { end += 1 }
            guard end >= suffix.utf8CodeUnitCount else { return false }
            return memcmp(bytes.baseAddress! + end - suffix.utf8CodeUnitCount, suffix.utf8Start, suffix.utf8CodeUnitCount) == 0
        }
    }

    /// `stream` or `stream_options` given twice at the top level: providers read the last one, the injection would
    /// read neither, so a client could stream without reporting usage. Such a body is refused on injecting routes.
    public static func duplicatedKey(in body: [UInt8]) -> String? {
        guard let members = try? JSONTopLevel.scan(body) else { return nil }
        for key in ["stream", "stream_options"] where members.filter({ $0.hasKey(key) }).count > 1 { return key }
        return nil
    }

    public static func apply(to body: [UInt8]) -> Result {
        apply(to: body, members: try? JSONTopLevel.scan(body))
    }

    /// The same, with the body's members already scanned (nil: not a JSON object).
    static func apply(to body: [UInt8], members: [JSONMember]?) -> Result {
        let untouched = Result(body: body, injected: false)
        guard let members else { return untouched }
        let stream = members.filter { $0.hasKey("stream") }
        guard stream.count == 1, stream[0].kind == .bool, body[stream[0].valueRange.lowerBound] == UInt8(ascii: "t")
        else { return untouched }

        let options = members.filter { $0.hasKey("stream_options") }
        switch options.count {
        case 0:
            // Members exist (at least "stream"): insert after the last value, before any whitespace and the `}`.
            let end = members.last!.valueRange.upperBound
            return Result(body: splice(body, at: end..<end, Array(#","stream_options":{"include_usage":true}"#.utf8)),
                          injected: true)
        case 1:
            let member = options[0]
            switch member.kind {
            case .null:
                return Result(body: splice(body, at: member.valueRange, Array(#"{"include_usage":true}"#.utf8)), injected: true)
            case .object:
                return injectInto(optionsAt: member.valueRange, of: body) ?? untouched
            default:
                return untouched
            }
        default:
            return untouched
        }
    }

    /// `stream_options` is the object at `range`.
    private static func injectInto(optionsAt range: Range<Int>, of body: [UInt8]) -> Result? {
        let object = Array(body[range])
        guard let inner = try? JSONTopLevel.scan(object) else { return nil }
        let include = inner.filter { $0.hasKey("include_usage") }
        switch include.count {
        case 0:
            // Right after the `{`: the object is `{` + optional whitespace + members.
            let open = range.lowerBound + 1
            let text = inner.isEmpty ? #""include_usage":true"# : #""include_usage":true,"#
            return Result(body: splice(body, at: open..<open, Array(text.utf8)), injected: true)
        case 1:
            let value = include[0].valueRange
            let absolute = (range.lowerBound + value.lowerBound)..<(range.lowerBound + value.upperBound)
            switch include[0].kind {
            case .bool where object[value.lowerBound] == UInt8(ascii: "t"):
                return Result(body: body, injected: false)
            case .bool, .null:
                return Result(body: splice(body, at: absolute, Array("true".utf8)), injected: true)
            default:
                return nil
            }
        default:
            return nil
        }
    }

    private static func splice(_ body: [UInt8], at range: Range<Int>, _ bytes: [UInt8]) -> [UInt8] {
        var out = body
        out.replaceSubrange(range, with: bytes)
        return out
    }
}
