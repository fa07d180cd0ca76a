import HTTP1
import Testing

/// UTF-8 bytes of a string literal; tests spell wire bytes with "\r\n" escapes.
func b(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Everything a parser produced for some input: the events (adjacent `.body` events merged, because how a body
/// is cut depends on how the bytes arrived) and the error that stopped it, if any.
struct Outcome: Equatable, CustomStringConvertible {
    var events: [RequestEvent]
    var error: HTTPParseError?

    var description: String {
        let list = events.map { event -> String in
            switch event {
            case .head(let h): return "head(\(h.method) \(h.target) \(h.framing))"
            case .body(let bytes): return "body(\(bytes.count): \(String(decoding: bytes, as: UTF8.self).debugDescription))"
            case .end: return "end"
            }
        }
        return "\(list) error: \(error.map { "\($0.status) \($0.message)" } ?? "none")"
    }

    var heads: [RequestHead] {
        events.compactMap { if case .head(let h) = $0 { return h } else { return nil } }
    }
}

/// Feeds `pieces` in order, draining events after each one, and records what came out.
func run(_ pieces: [[UInt8]], limits: RequestLimits = RequestLimits(), sourceLocation: SourceLocation = #_sourceLocation) -> Outcome {
    var parser = RequestParser(limits: limits)
    var events: [RequestEvent] = []
    for piece in pieces {
        parser.append(piece)
        do {
            while let event = try parser.next() {
                if case .body(let bytes) = event {
                    #expect(!bytes.isEmpty, "body events are never empty", sourceLocation: sourceLocation)
                    if case .body(let previous)? = events.last {
                        events[events.count - 1] = .body(previous + bytes)
                        continue
                    }
                }
                events.append(event)
            }
        } catch {
            // A failed parser stays failed with the same error, whatever is fed afterwards.
            parser.append(b("GET / HTTP/1.1\r\n\r\n"))
            #expect(throws: error, sourceLocation: sourceLocation) { _ = try parser.next() }
            return Outcome(events: events, error: error)
        }
    }
    return Outcome(events: events, error: nil)
}

/// Parses `input` all at once, drip-fed one byte at a time, and (for short inputs) split in two at every
/// position; expects the same outcome from all and returns it.
@discardableResult
func parseThreeWays(
    _ input: [UInt8], limits: RequestLimits = RequestLimits(), sourceLocation: SourceLocation = #_sourceLocation
) -> Outcome {
    let whole = run([input], limits: limits, sourceLocation: sourceLocation)
    let drip = run(input.map { [$0] }, limits: limits, sourceLocation: sourceLocation)
    #expect(drip == whole, "drip-fed differs from all-at-once", sourceLocation: sourceLocation)
    if input.count <= 1024 {
        var badSplits: [Int] = []
        for cut in 1..<max(1, input.count) {
            let split = run([Array(input[..<cut]), Array(input[cut...])], limits: limits, sourceLocation: sourceLocation)
            if split != whole { badSplits.append(cut) }
        }
        #expect(badSplits.isEmpty, "split at \(badSplits) differs from all-at-once", sourceLocation: sourceLocation)
    }
    return whole
}
