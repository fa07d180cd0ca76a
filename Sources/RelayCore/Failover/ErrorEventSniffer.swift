import JSON

/// Reads the first event of a 2xx event stream to tell whether it is an error object (`data: {"error": …}`, as
/// OpenAI-compatible providers send when a stream fails before any content). Such a stream is passed through as
/// it is (retrying there is not asked for) and logged as `upstream_error_event`. Looks at the first
/// `sniffLimit` bytes at most; never holds a byte back from the client.
package struct ErrorEventSniffer: Sendable, Equatable {
    package enum Verdict: Sendable, Equatable { case undecided, errorEvent, content }

    package static let sniffLimit = 4096
    package private(set) var verdict = Verdict.undecided
    private var seen: [UInt8] = []

    package init() {}

    package mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard verdict == .undecided else { return }
        seen.append(contentsOf: bytes.prefix(Self.sniffLimit - seen.count))
        guard let end = Self.eventEnd(seen) else {
            if seen.count >= Self.sniffLimit { verdict = .content }
            return
        }
        verdict = Self.isErrorEvent(seen[..<end]) ? .errorEvent : .content
        seen = []
    }

    /// The end of the first event (a blank line), or nil while it is incomplete.
    static func eventEnd(_ bytes: [UInt8]) -> Int? {
        var previousWasNewline = false
        var i = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x0A {
                if previousWasNewline { return i }
                previousWasNewline = true
            } else if c != 0x0D {
                previousWasNewline = false
            }
            i += 1
        }
        return nil
    }

    /// Whether the event's data (its `data:` lines joined) is a JSON object with an `error` member.
    static func isErrorEvent(_ event: ArraySlice<UInt8>) -> Bool {
        var data: [UInt8] = []
        for line in event.split(separator: 0x0A) {
            var line = Array(line)
            if line.last == 0x0D { line.removeLast() }
            guard line.starts(with: Array("data:".utf8)) else { continue }
            var value = line.dropFirst(5)
            if value.first == 0x20 { value = value.dropFirst() }
            if !data.isEmpty { data.append(0x0A) }
            data.append(contentsOf: value)
        }
        // The provider's own output: a key given twice is its business, not a reason to miss the error.
        guard data.first == UInt8(ascii: "{"), let document = try? JSONDocument(parsing: data, duplicates: .allowed),
              document.kind(of: JSONDocument.root) == .object else { return false }
        return document.member("error", of: JSONDocument.root) != nil
    }
}
