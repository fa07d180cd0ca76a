import Testing
@testable import Usage

/// The filter must hand the client exactly the provider's bytes minus the one usage-only event, however the stream
/// is split, and must not hold back any byte before the last choice finished.
/// Bytes as text with line ends made visible, so a failure shows where the streams differ.
func text(_ bytes: [UInt8]) -> String {
    String(decoding: bytes, as: UTF8.self).replacingOccurrences("\r", "⏎").replacingOccurrences("\n", "↵\n")
}

extension String {
    func replacingOccurrences(_ a: String, _ b: String) -> String { split(separator: a, omittingEmptySubsequences: false).joined(separator: b) }
}

@Suite("UsageEventStripper")
struct UsageEventStripperTests {
    /// Runs `chunks` through a fresh filter; returns everything it let out, and each chunk's own output.
    static func run(_ chunks: [ArraySlice<UInt8>], maxEventBytes: Int = UsageEventStripper.defaultMaxEventBytes)
        -> (bytes: [UInt8], perChunk: [[UInt8]], removed: Bool) {
        var filter = UsageEventStripper(maxEventBytes: maxEventBytes)
        var out: [UInt8] = []
        var perChunk: [[UInt8]] = []
        for chunk in chunks {
            let piece: [UInt8]
            switch chunk.withUnsafeBytes({ filter.process($0) }) {
            case .unchanged: piece = Array(chunk)
            case .bytes(let b): piece = b
            }
            perChunk.append(piece)
            out += piece
        }
        out += filter.finish()
        return (out, perChunk, filter.removedUsageEvent)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var input: [UInt8]
        var expected: [UInt8]
        var testDescription: String { name }
    }

    static func stream(_ events: [String], _ lineEnd: String) -> [UInt8] { GoldenStreams.sse(events, lineEnd: lineEnd) }

    static let full = GoldenStreams.chatEventsWithUsage
    static let withoutUsage = full.filter { $0 != GoldenStreams.chatUsage }

    static let cases: [Case] = ["\n", "\r\n", "\r"].flatMap { end -> [Case] in
        let name = end == "\n" ? "LF" : end == "\r" ? "CR" : "CRLF"
        return [
            Case(name: "usage event removed (\(name))", input: stream(full, end), expected: stream(withoutUsage, end)),
            Case(name: "no usage event: unchanged (\(name))", input: stream(withoutUsage, end), expected: stream(withoutUsage, end)),
            Case(name: "usage before any finish_reason is left alone (\(name))",
                 input: stream([GoldenStreams.chatUsage] + withoutUsage, end),
                 expected: stream([GoldenStreams.chatUsage] + withoutUsage, end)),
            Case(name: "keep-alive comments and Azure filter results around it stay (\(name))",
                 input: stream([GoldenStreams.chatDelta("a"), GoldenStreams.chatFinish, ": keep-alive", Self.azureFilter,
                                GoldenStreams.chatUsage, ": keep-alive", GoldenStreams.done], end),
                 expected: stream([GoldenStreams.chatDelta("a"), GoldenStreams.chatFinish, ": keep-alive", Self.azureFilter,
                                   ": keep-alive", GoldenStreams.done], end)),
            Case(name: "only the first usage-only event goes (\(name))",
                 input: stream([GoldenStreams.chatFinish, GoldenStreams.chatUsage, GoldenStreams.chatUsage, GoldenStreams.done], end),
                 expected: stream([GoldenStreams.chatFinish, GoldenStreams.chatUsage, GoldenStreams.done], end)),
            Case(name: "usage split over two data lines, with an id (\(name))",
                 input: stream([GoldenStreams.chatFinish, "id: 7\n" + #"data: {"choices":[],"# + "\n" + #"data: "usage":{"prompt_tokens":1}}"#,
                                GoldenStreams.done], end),
                 expected: stream([GoldenStreams.chatFinish, GoldenStreams.done], end)),
            Case(name: "stream cut inside the usage event: its bytes still go out (\(name))",
                 input: Array(stream(full, end).dropLast(stream([GoldenStreams.done], end).count + end.count * 2)),
                 expected: Array(stream(full, end).dropLast(stream([GoldenStreams.done], end).count + end.count * 2))),
            Case(name: "extra blank lines between events stay (\(name))",
                 input: Array((GoldenStreams.chatFinish + end + end + end + GoldenStreams.chatUsage + end + end + end + GoldenStreams.done + end + end).utf8),
                 expected: Array((GoldenStreams.chatFinish + end + end + end + end + GoldenStreams.done + end + end).utf8)),
        ]
    }

    static let azureFilter = #"data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#

    @Test(arguments: cases)
    func whole(_ c: Case) {
        #expect(text(Self.run([c.input[...]]).bytes) == text(c.expected))
    }

    @Test(arguments: cases)
    func oneByteAtATime(_ c: Case) {
        #expect(text(Self.run(c.input.indices.map { c.input[$0..<($0 + 1)] }).bytes) == text(c.expected))
    }

    @Test(arguments: cases)
    func everySplit(_ c: Case) {
        for split in 0...c.input.count {
            let got = Self.run([c.input[..<split], c.input[split...]]).bytes
            #expect(text(got) == text(c.expected), "split at \(split)")
            if got != c.expected { return }
        }
    }

    /// Every pair of split positions on a small stream, with each line end.
    @Test(arguments: ["\n", "\r\n", "\r"])
    func everyTwoSplits(_ end: String) {
        let events = [#"data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}"#,
                      #"data: {"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
                      #"data: {"choices":[],"usage":{"prompt_tokens":1}}"#, "data: [DONE]"]
        let input = Self.stream(events, end)
        let expected = Self.stream(events.filter { !$0.contains("usage") }, end)
        var failures = 0
        for a in 0...input.count {
            for b in a...input.count {
                let got = Self.run([input[..<a], input[a..<b], input[b...]])
                if got.bytes != expected || !got.removed {
                    failures += 1
                    if failures <= 3 { Issue.record("splits at \(a), \(b)") }
                }
            }
        }
        #expect(failures == 0)
    }

    /// Before the chunk with a finish_reason has ended, every byte leaves in the call that brought it.
    @Test(arguments: ["\n", "\r\n", "\r"])
    func nothingIsHeldBeforeTheLastChoiceFinished(_ end: String) {
        let input = Self.stream(Self.full, end)
        let finishEnd = Self.stream(Array(Self.full.prefix(6)), end).count
        let result = Self.run(input.indices.map { input[$0..<($0 + 1)] })
        for i in 0..<finishEnd { #expect(result.perChunk[i] == [input[i]], "byte \(i)") }
        #expect(result.removed)
    }

    @Test func aStreamThatNeverFinishesIsPassedThroughUntouched() {
        let input = Self.stream([GoldenStreams.chatDelta("a"), GoldenStreams.chatDelta("b")], "\n")
        var filter = UsageEventStripper()
        #expect(input.withUnsafeBytes { filter.process($0) } == .unchanged)
        #expect(filter.finish().isEmpty)
    }

    @Test func anEventLargerThanTheBoundStopsTheFilter() {
        let big = "data: {\"choices\":[],\"usage\":{\"pad\":\"" + String(repeating: "x", count: 500) + "\"}}"
        let input = Self.stream([GoldenStreams.chatFinish, big, GoldenStreams.chatUsage, GoldenStreams.done], "\n")
        var filter = UsageEventStripper(maxEventBytes: 400)
        var out: [UInt8] = []
        for chunk in [input[..<300], input[300...]] {
            switch chunk.withUnsafeBytes({ filter.process($0) }) {
            case .unchanged: out += chunk
            case .bytes(let b): out += b
            }
        }
        out += filter.finish()
        #expect(filter.gaveUp)
        #expect(out == input)
    }

    /// While watching, an event that arrives whole in one delivery is read where it lies: past the bound it stops
    /// the filter just as a copied one did, whatever the line ends and wherever the stream is split.
    @Test(arguments: ["\n", "\r\n", "\r"])
    func aWholeEventLargerThanTheBoundStopsTheFilterWhileWatching(_ end: String) {
        let big = GoldenStreams.chatDelta(String(repeating: "x", count: 500))
        let input = Self.stream([GoldenStreams.chatFirst, big, GoldenStreams.chatFinish, GoldenStreams.chatUsage, GoldenStreams.done], end)
        let bigStart = Self.stream([GoldenStreams.chatFirst], end).count
        for split in [bigStart, bigStart + 1, input.count / 2, input.count] {
            var filter = UsageEventStripper(maxEventBytes: 400)
            var out: [UInt8] = []
            for chunk in [input[..<split], input[split...]] {
                switch chunk.withUnsafeBytes({ filter.process($0) }) {
                case .unchanged: out += chunk
                case .bytes(let b): out += b
                }
            }
            out += filter.finish()
            #expect(filter.gaveUp, "split at \(split)")
            #expect(!filter.removedUsageEvent, "split at \(split)")
            #expect(out == input, "split at \(split)")
        }
    }

    @Test func usageOnlyRecognition() {
        func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
        #expect(UsageEventStripper.isUsageOnly(bytes(GoldenStreams.chatUsage + "\n\n")))
        #expect(!UsageEventStripper.isUsageOnly(bytes(Self.azureFilter + "\n\n")))
        #expect(!UsageEventStripper.isUsageOnly(bytes(GoldenStreams.chatFinish + "\n\n")))
        #expect(!UsageEventStripper.isUsageOnly(bytes("event: usage\n" + GoldenStreams.chatUsage + "\n\n")))
        #expect(!UsageEventStripper.isUsageOnly(bytes(#"data: {"choices":[],"usage":null}"# + "\n\n")))
        #expect(!UsageEventStripper.isUsageOnly(bytes(": " + GoldenStreams.chatUsage + "\n\n")))
    }
}
