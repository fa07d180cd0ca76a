import SSE
import Testing
import TestSupportCore

/// The parser against the WHATWG rules: golden streams fed whole, byte by byte and split at every position;
/// one row per edge case; and random streams compared with `ReferenceEventStream`, a line-by-line transcription
/// of the standard's algorithm.
@Suite("SSEParser")
struct SSEParserTests {
    // MARK: Golden streams

    struct Golden: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var events: [SSEEvent]
        var testDescription: String { name }
    }

    static let openAIChunk1 = #"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}"#
    static let openAIChunk2 = #"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" wörld ✓"},"finish_reason":null}]}"#
    static let openAIChunk3 = #"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#

    static let goldens: [Golden] = [
        Golden(
            name: "OpenAI chat chunks then [DONE]",
            bytes: Array("data: \(openAIChunk1)\n\ndata: \(openAIChunk2)\n\ndata: \(openAIChunk3)\n\ndata: [DONE]\n\n".utf8),
            events: [SSEEvent(data: openAIChunk1), SSEEvent(data: openAIChunk2), SSEEvent(data: openAIChunk3),
                     SSEEvent(data: "[DONE]")]),
        Golden(
            name: "Anthropic messages events with event: lines",
            bytes: Array("""
            event: message_start
            data: {"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}

            event: content_block_start
            data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

            event: ping
            data: {"type": "ping"}

            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi ✓"}}

            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}

            event: message_stop
            data: {"type":"message_stop"}


            """.utf8),
            events: [
                SSEEvent(event: "message_start", data: #"{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}"#),
                SSEEvent(event: "content_block_start", data: #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
                SSEEvent(event: "ping", data: #"{"type": "ping"}"#),
                SSEEvent(event: "content_block_delta", data: #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi ✓"}}"#),
                SSEEvent(event: "message_delta", data: #"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#),
                SSEEvent(event: "message_stop", data: #"{"type":"message_stop"}"#),
            ]),
        Golden(
            name: "CRLF line ends",
            bytes: Array("data: one\r\n\r\nevent: update\r\ndata: two\r\ndata: three\r\n\r\n".utf8),
            events: [SSEEvent(data: "one"), SSEEvent(event: "update", data: "two\nthree")]),
        Golden(
            name: "CR-only line ends",
            bytes: Array("data: one\r\rdata: two\rdata:three\r\r".utf8),
            events: [SSEEvent(data: "one"), SSEEvent(data: "two\nthree")]),
        Golden(
            name: "comments, retry and id",
            bytes: Array(": keep-alive\n\nretry: 2500\nid: 7\ndata: a\n\n: another comment\ndata: b\n\nid\ndata: c\n\n".utf8),
            events: [SSEEvent(data: "a", id: "7", retry: 2500), SSEEvent(data: "b", id: "7"), SSEEvent(data: "c", id: "")]),
        Golden(
            name: "field names of the right length that differ in one byte or in case are ignored",
            bytes: Array("Data: x\ndatA: x\nevenT: y\nEvent: y\nretrY: 5\nratry: 5\nId: 3\niD: 3\ndata: z\n\n".utf8),
            events: [SSEEvent(data: "z")]),
        Golden(
            name: "BOM at start, multi-byte text",
            bytes: [0xEF, 0xBB, 0xBF] + Array("data: 日本語 🎉\n\ndata: é\n\n".utf8),
            events: [SSEEvent(data: "日本語 🎉"), SSEEvent(data: "é")]),
        Golden(
            name: "error event mid-stream",
            bytes: Array("data: {\"x\":1}\n\ndata: {\"error\":{\"message\":\"Budget used up.\",\"type\":\"insufficient_quota\",\"code\":\"budget_exhausted\"}}\n\n".utf8),
            events: [SSEEvent(data: #"{"x":1}"#), SSEEvent(data: #"{"error":{"message":"Budget used up.","type":"insufficient_quota","code":"budget_exhausted"}}"#)]),
    ]

    @Test("golden stream fed whole", arguments: goldens)
    func whole(golden: Golden) throws {
        var parser = SSEParser()
        #expect(try parser.parse(golden.bytes) == golden.events)
        #expect(parser.finish() == false)
    }

    @Test("raw events carry the same events: the data's bytes, the type (nil when none or empty), id and retry", arguments: goldens)
    func rawEventsMatch(golden: Golden) throws {
        var parser = SSEParser()
        var events: [SSEEvent] = []
        var emptyTypes = 0
        try golden.bytes.withUnsafeBytes { bytes in
            try parser.parse(bytes, onRawEvent: { raw in
                if raw.type?.isEmpty == true { emptyTypes += 1 }
                events.append(SSEEvent(event: raw.type ?? "message", data: String(decoding: raw.data, as: UTF8.self), id: raw.id,
                                       retry: raw.retry))
            })
        }
        #expect(events == golden.events)
        #expect(emptyTypes == 0)
    }

    @Test("golden stream fed one byte at a time", arguments: goldens)
    func byteAtATime(golden: Golden) throws {
        var parser = SSEParser()
        var events: [SSEEvent] = []
        for byte in golden.bytes { events += try parser.parse([byte]) }
        #expect(events == golden.events)
    }

    @Test("golden stream split at every position (two and three pieces)", arguments: goldens)
    func everySplit(golden: Golden) throws {
        let bytes = golden.bytes
        for i in 0...bytes.count {
            var parser = SSEParser()
            let events = try parser.parse(Array(bytes[..<i])) + parser.parse(Array(bytes[i...]))
            #expect(events == golden.events, "split at \(i)")
        }
        let step = max(1, bytes.count / 40)
        for i in stride(from: 0, through: bytes.count, by: step) {
            for j in i...bytes.count {
                var parser = SSEParser()
                let events = try parser.parse(Array(bytes[..<i])) + parser.parse(Array(bytes[i..<j])) + parser.parse(Array(bytes[j...]))
                #expect(events == golden.events, "split at \(i), \(j)")
            }
        }
    }

    // MARK: WHATWG edge cases

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var input: [UInt8]
        var events: [SSEEvent]
        var testDescription: String { name }

        init(_ name: String, _ input: String, _ events: [SSEEvent]) {
            self.name = name
            self.input = Array(input.utf8)
            self.events = events
        }

        init(_ name: String, bytes: [UInt8], _ events: [SSEEvent]) {
            self.name = name
            self.input = bytes
            self.events = events
        }
    }

    static let cases: [Case] = [
        Case("only one leading space is stripped", "data:  two spaces\n\n", [SSEEvent(data: " two spaces")]),
        Case("no space after the colon", "data:x\n\n", [SSEEvent(data: "x")]),
        Case("a tab is not stripped", "data:\tx\n\n", [SSEEvent(data: "\tx")]),
        Case("empty data line dispatches an empty event", "data\n\n", [SSEEvent(data: "")]),
        Case("data: with nothing after", "data:\n\n", [SSEEvent(data: "")]),
        Case("two empty data lines give one newline", "data\ndata\n\n", [SSEEvent(data: "\n")]),
        Case("trailing empty data line keeps its newline", "data: a\ndata:\n\n", [SSEEvent(data: "a\n")]),
        Case("a block without data dispatches nothing", "event: x\n\ndata: y\n\n", [SSEEvent(data: "y")]),
        Case("event type resets after each dispatch", "event: a\ndata: 1\n\ndata: 2\n\n", [SSEEvent(event: "a", data: "1"), SSEEvent(data: "2")]),
        Case("empty event name is message", "event:\ndata: 1\n\n", [SSEEvent(data: "1")]),
        Case("last event field wins", "event: a\nevent: b\ndata: 1\n\n", [SSEEvent(event: "b", data: "1")]),
        Case("field names are case-sensitive", "Data: 1\nDATA: 2\ndata: 3\n\n", [SSEEvent(data: "3")]),
        Case("unknown fields are ignored", "foo: bar\ndata: 1\n\n", [SSEEvent(data: "1")]),
        Case("comment lines are ignored, even between data lines", "data: 1\n: hi\ndata: 2\n\n", [SSEEvent(data: "1\n2")]),
        Case("a lone colon is a comment", ":\ndata: 1\n\n", [SSEEvent(data: "1")]),
        Case("colon in the value is kept", "data: a:b: c\n\n", [SSEEvent(data: "a:b: c")]),
        Case("incomplete event at EOF is discarded", "data: 1\n\ndata: 2\n", [SSEEvent(data: "1")]),
        Case("unterminated last line is discarded", "data: 1\n\ndata: 2", [SSEEvent(data: "1")]),
        Case("id persists across events", "id: 1\ndata: a\n\ndata: b\n\n", [SSEEvent(data: "a", id: "1"), SSEEvent(data: "b", id: "1")]),
        Case("id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\u{0}x\ndata: b\n\n", [SSEEvent(data: "a", id: "1"), SSEEvent(data: "b", id: "1")]),
        Case("id in a block without data still applies", "id: 9\n\ndata: a\n\n", [SSEEvent(data: "a", id: "9")]),
        Case("empty id resets", "id: 1\ndata: a\n\nid:\ndata: b\n\n", [SSEEvent(data: "a", id: "1"), SSEEvent(data: "b")]),
        Case("retry with digits is kept", "retry: 1000\ndata: a\n\n", [SSEEvent(data: "a", retry: 1000)]),
        Case("retry with a sign, space or letters is ignored", "retry: -1\nretry: 10 \nretry: 1e3\nretry:\ndata: a\n\n", [SSEEvent(data: "a")]),
        Case("retry that overflows is ignored", "retry: 99999999999999999999999\ndata: a\n\n", [SSEEvent(data: "a")]),
        Case("retry in a block without data carries to the next event", "retry: 5\n\ndata: a\n\n", [SSEEvent(data: "a", retry: 5)]),
        Case("mixed line ends", "data: a\rdata: b\r\ndata: c\n\r\n", [SSEEvent(data: "a\nb\nc")]),
        Case("CR CR is two line ends", "data: a\r\r", [SSEEvent(data: "a")]),
        Case("LF CR is two line ends", "data: a\n\r", [SSEEvent(data: "a")]),
        Case("BOM is stripped only once", bytes: [0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + Array("data: a\n\n".utf8), []),
        Case("BOM later in the stream is text", bytes: Array("data: a".utf8) + [0xEF, 0xBB, 0xBF] + Array("\n\n".utf8), [SSEEvent(data: "a\u{FEFF}")]),
        Case("partial BOM at start is text", bytes: [0xEF, 0xBB] + Array("\ndata: a\n\n".utf8), [SSEEvent(data: "a")]),
        Case("invalid UTF-8 becomes U+FFFD", bytes: Array("data: a".utf8) + [0xFF, 0xC3] + Array("\n\n".utf8), [SSEEvent(data: "a\u{FFFD}\u{FFFD}")]),
        Case("line without colon is a field with empty value", "data\nevent\n\n", [SSEEvent(data: "")]),
    ]

    @Test("WHATWG edge case, whole and byte by byte", arguments: cases)
    func edgeCase(row: Case) throws {
        var whole = SSEParser()
        #expect(try whole.parse(row.input) == row.events)
        var dripped = SSEParser()
        var events: [SSEEvent] = []
        for byte in row.input { events += try dripped.parse([byte]) }
        #expect(events == row.events)
        #expect(events == ReferenceEventStream.events(row.input).events, "the reference disagrees")
    }

    @Test("CR at the end of one chunk and LF at the start of the next are one line end")
    func crlfAcrossChunks() throws {
        var parser = SSEParser()
        #expect(try parser.parse(Array("data: a\r".utf8)) == [])
        // If the LF were a second line end, this would dispatch "a" now, and "b" would be its own event.
        #expect(try parser.parse(Array("\ndata: b\r".utf8)) == [])
        #expect(try parser.parse(Array("\n\r\n".utf8)) == [SSEEvent(data: "a\nb")])
        // A CR chunk followed by an empty chunk keeps waiting for the LF.
        #expect(try parser.parse(Array("data: c\r".utf8)) == [])
        #expect(try parser.parse([]) == [])
        #expect(try parser.parse(Array("\n\n".utf8)) == [SSEEvent(data: "c")])
    }

    @Test("a character split across chunks survives")
    func utf8AcrossChunks() throws {
        let bytes = Array("data: 🎉é\n\n".utf8)
        var parser = SSEParser()
        var events: [SSEEvent] = []
        // Cut inside the 4-byte emoji and inside the 2-byte é.
        for piece in [bytes[0..<7], bytes[7..<9], bytes[9..<11], bytes[11..<12], bytes[12...]] {
            events += try parser.parse(Array(piece))
        }
        #expect(events == [SSEEvent(data: "🎉é")])
    }

    @Test("BOM split across chunks is stripped; finish() reports a discarded event and resets for a reconnect")
    func bomSplitAndFinish() throws {
        var parser = SSEParser()
        #expect(try parser.parse([0xEF]) == [])
        #expect(try parser.parse([0xBB]) == [])
        #expect(try parser.parse([0xBF] + Array("id: 4\nretry: 9\ndata: a\n\ndata: half".utf8)) == [SSEEvent(data: "a", id: "4", retry: 9)])
        #expect(parser.finish() == true)
        #expect(parser.lastEventID == "4")
        #expect(parser.reconnectionTime == 9)
        // A new stream: the BOM is allowed again, the half event is gone.
        #expect(try parser.parse([0xEF, 0xBB, 0xBF] + Array("data: b\n\n".utf8)) == [SSEEvent(data: "b", id: "4")])
        #expect(parser.finish() == false)
    }

    /// The usage tap reads every event of every stream. An event whose only data line came whole in the delivery
    /// being parsed is handed over where it lies, not copied; one with two data lines, or one that goes on past its
    /// delivery, is joined in the parser's own buffer as before.
    @Test("a lone data line is handed over where it lies; other events are joined as before")
    func loneDataLineInPlace() throws {
        var parser = SSEParser()
        var seen: [(data: String, inPlace: Bool, type: String?, id: String)] = []
        func feed(_ text: String) throws {
            let delivery = Array(text.utf8)
            try delivery.withUnsafeBytes { bytes in
                let range = UInt(bitPattern: bytes.baseAddress!)..<UInt(bitPattern: bytes.baseAddress! + bytes.count)
                try parser.parse(bytes, onRawEvent: { raw in
                    let inPlace = raw.data.baseAddress.map { range.contains(UInt(bitPattern: $0)) } ?? false
                    seen.append((String(decoding: raw.data, as: UTF8.self), inPlace, raw.type, raw.id))
                })
            }
        }
        try feed("event: e\ndata: {\"a\":1}\nid: 3\n\ndata: x\ndata: y\n\ndata: held\n")
        try feed("\ndata: sp")
        try feed("lit\n\n: comment\ndata:\n\ndata: z\nevent: late\n\n")
        #expect(seen.map(\.data) == [#"{"a":1}"#, "x\ny", "held", "split", "", "z"])
        #expect(seen.map(\.inPlace) == [true, false, false, false, false, true])
        #expect(seen.map(\.type) == ["e", nil, nil, nil, nil, "late"])
        #expect(seen.map(\.id) == ["3", "3", "3", "3", "3", "3"])
        #expect(parser.finish() == false)
    }

    /// A callback that throws stops the parse there; the event's data is not carried into the next one.
    @Test("an error thrown by the callback leaves no held data behind")
    func throwingCallback() throws {
        struct Stop: Error {}
        var parser = SSEParser()
        let delivery = Array("data: one\n\ndata: two\n\n".utf8)
        #expect(throws: Stop.self) {
            try delivery.withUnsafeBytes { bytes in try parser.parse(bytes, onRawEvent: { _ in throw Stop() }) }
        }
        #expect(try parser.parse(Array("data: three\n\n".utf8)).map(\.data) == ["three"])
    }

    @Test("an event larger than the bound throws instead of growing without limit")
    func boundedMemory() throws {
        var parser = SSEParser(maxEventBytes: 100)
        #expect(try parser.parse(Array(("data: " + String(repeating: "x", count: 90) + "\n\n").utf8)).count == 1)
        #expect(throws: SSEParser.EventTooLarge.self) { try parser.parse(Array(String(repeating: "y", count: 101).utf8)) }
        var lines = SSEParser(maxEventBytes: 100)
        #expect(throws: SSEParser.EventTooLarge.self) {
            for _ in 0..<30 { _ = try lines.parse(Array("data: 12345\n".utf8)) }
        }
    }

    /// A reader of a copy (the relay's usage tap) drops an event past the bound and reads on from the empty line
    /// that ends it, however the bytes are split and whatever the line ends: the event's `event` field does not
    /// leak into the next one, and `id` after it counts.
    @Test("with skipsOversizedEvents an event past the bound is dropped and the next read", arguments: ["\n", "\r", "\r\n"])
    func oversizedEventsAreSkipped(newline: String) throws {
        let long = "event: big" + newline + "data: " + String(repeating: "x", count: 90) + newline + "data: y" + newline + newline
        let manyLines = String(repeating: "data: 12345" + newline, count: 20) + newline
        let stream = Array(("data: a" + newline + newline + long + "id: 7" + newline + "data: b" + newline + newline
                            + manyLines + "data: c" + newline + newline).utf8)
        for split in 0...stream.count {
            var parser = SSEParser(maxEventBytes: 64, skipsOversizedEvents: true)
            let events = try parser.parse(Array(stream[..<split])) + parser.parse(Array(stream[split...]))
            #expect(events.map(\.data) == ["a", "b", "c"], "split at \(split)")
            #expect(events.map(\.event) == ["message", "message", "message"], "split at \(split)")
            #expect(parser.skippedEvents == 2)
            #expect(parser.lastEventID == "7")
        }
        var dripped = SSEParser(maxEventBytes: 64, skipsOversizedEvents: true)
        var events: [SSEEvent] = []
        for byte in stream { events += try dripped.parse([byte]) }
        #expect(events.map(\.data) == ["a", "b", "c"])
        #expect(dripped.skippedEvents == 2)
    }

    /// A first data line read in place, then a second that takes the event past the bound, in one delivery: the
    /// event is dropped (nothing of the first line is left over for the next event), and the next one is read.
    @Test("an event read in place that then outgrows the bound is dropped whole")
    func inPlaceThenOversized() throws {
        let stream = Array(("data: first\ndata: " + String(repeating: "y", count: 80) + "\n\ndata: next\n\n").utf8)
        for split in [0, 6, 12, stream.count - 5, stream.count] {
            var parser = SSEParser(maxEventBytes: 64, skipsOversizedEvents: true)
            let events = try parser.parse(Array(stream[..<split])) + parser.parse(Array(stream[split...]))
            #expect(events.map(\.data) == ["next"], "split at \(split)")
            #expect(parser.skippedEvents == 1, "split at \(split)")
        }
    }

    @Test("a dropped event cut by the stream's end leaves nothing behind")
    func skippingEndsWithTheStream() throws {
        var parser = SSEParser(maxEventBytes: 16, skipsOversizedEvents: true)
        #expect(try parser.parse(Array(("data: " + String(repeating: "x", count: 40)).utf8)).isEmpty)
        #expect(parser.skippedEvents == 1)
        parser.finish()
        #expect(try parser.parse(Array("data: after\n\n".utf8)).map(\.data) == ["after"])
    }

    // MARK: Randomized comparison with the reference

    @Test("random streams split at random places match the reference algorithm")
    func randomized() throws {
        var rng = SplitMix64(seed: 0x5EED_5EED)
        let pieces: [[UInt8]] = [
            Array("data".utf8), Array("event".utf8), Array("id".utf8), Array("retry".utf8), Array("Data".utf8),
            Array(":".utf8), Array(": ".utf8), Array(" ".utf8), [0x0D], [0x0A], [0x0D, 0x0A], [0x0A, 0x0A],
            Array("x".utf8), Array("12".utf8), Array("é".utf8), Array("🎉".utf8), [0xF0, 0x9F], [0xFF], [0x00],
            [0xEF, 0xBB, 0xBF], [0xEF, 0xBB], Array("[DONE]".utf8), Array("data: ".utf8), Array("\n\n".utf8),
        ]
        var compared = 0
        for _ in 0..<3000 {
            var stream: [UInt8] = []
            for _ in 0..<Int(rng.next() % 60) { stream += pieces[Int(rng.next() % UInt64(pieces.count))] }
            let expected = ReferenceEventStream.events(stream)
            var parser = SSEParser()
            var events: [SSEEvent] = []
            var i = 0
            while i < stream.count {
                let n = min(stream.count - i, Int(rng.next() % 7))
                events += try parser.parse(Array(stream[i..<(i + n)]))
                i += n
            }
            #expect(events == expected.events, "stream \(stream)")
            #expect(parser.lastEventID == expected.lastEventID, "stream \(stream)")
            #expect(parser.reconnectionTime == expected.reconnectionTime, "stream \(stream)")
            compared += events.count
        }
        #expect(compared > 500, "the generator should produce many events (\(compared))")
    }
}

/// The standard's algorithm written the obvious way, on a whole stream: decode everything as UTF-8 (dropping a
/// leading BOM), split into lines at CRLF, LF or CR, then interpret each line. Slow and simple, so it can judge
/// the incremental parser.
enum ReferenceEventStream {
    static func events(_ bytes: [UInt8]) -> (events: [SSEEvent], lastEventID: String, reconnectionTime: Int?) {
        var scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var lines: [String] = []
        var current = String.UnicodeScalarView()
        var i = 0
        var terminated = false
        while i < scalars.count {
            let s = scalars[i]
            if s == "\r" || s == "\n" {
                lines.append(String(current))
                current = String.UnicodeScalarView()
                if s == "\r", i + 1 < scalars.count, scalars[i + 1] == "\n" { i += 1 }
                terminated = true
            } else {
                current.append(s)
                terminated = false
            }
            i += 1
        }
        _ = terminated  // an unterminated last line is dropped: it cannot complete an event
        var events: [SSEEvent] = []
        var data = ""
        var type = ""
        var lastEventID = ""
        var reconnection: Int?
        var retrySinceDispatch: Int?
        for line in lines {
            if line.isEmpty {
                if data.isEmpty {
                    type = ""
                    continue
                }
                if data.hasSuffix("\n") { data.removeLast() }
                events.append(SSEEvent(event: type.isEmpty ? "message" : type, data: data, id: lastEventID, retry: retrySinceDispatch))
                retrySinceDispatch = nil
                data = ""
                type = ""
                continue
            }
            if line.hasPrefix(":") { continue }
            var field = line
            var value = ""
            if let colon = line.firstIndex(of: ":") {
                field = String(line[..<colon])
                value = String(line[line.index(after: colon)...])
                if value.hasPrefix(" ") { value.removeFirst() }
            }
            switch field {
            case "event": type = value
            case "data": data += value + "\n"
            case "id": if !value.unicodeScalars.contains("\u{0}") { lastEventID = value }
            case "retry":
                if !value.isEmpty, value.unicodeScalars.allSatisfy({ $0 >= "0" && $0 <= "9" }), let n = Int(value) {
                    reconnection = n
                    retrySinceDispatch = n
                }
            default: break
            }
        }
        return (events, lastEventID, reconnection)
    }
}
