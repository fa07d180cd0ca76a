import Support
import Testing

/// The hand-written number and time formatting of log lines (Foundation's String(format:) was too slow for a
/// line per request).
@Suite struct LogFormattingTests {
    @Test(arguments: [
        (0.0, "0.000"), (1.0, "1.000"), (12.3456, "12.346"), (0.0004, "0.000"), (0.0005, "0.001"),
        (999.9999, "1000.000"), (-2.5, "-2.500"), (-0.0001, "0.000"), (123456.789, "123456.789"),
    ])
    func fixedThreeDecimals(_ value: Double, _ expected: String) {
        #expect(JSONLine.fixed3(value) == expected)
    }

    @Test func timestampIsRFC3339WithMilliseconds() {
        let t = Logger.timestamp()
        #expect(t.count == 24)
        let pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
        #expect(t.wholeMatch(of: pattern) != nil, "\(t)")
    }

    @Test func doublesInLinesUseTheFixedFormat() {
        #expect(JSONLine.encode([("ms", .double(1.5)), ("n", .int(3))]) == #"{"ms":1.500,"n":3}"#)
    }

    /// A whole line, byte for byte: every value shape, the extremes of the numbers, UTF-8 kept as it is.
    @Test func aLineIsExactlyTheseBytes() throws {
        let sink = MemoryLogSink()
        Logger(label: "relay", sink: sink).warning("exchange", [
            ("s", .string("é€/x y")), ("min", .int(Int.min)), ("max", .int(.max)), ("zero", .int(0)), ("nine", .int(9)),
            ("ten", .int(10)), ("d", .double(-2.5)), ("tiny", .double(-0.0001)), ("inf", .double(.infinity)),
            ("nan", .double(.nan)), ("t", .bool(true)), ("f", .bool(false)), ("", .string("")),
        ])
        let line = try #require(sink.lines.first)
        let time = String(line.dropFirst(9).prefix(24))
        #expect(time.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(line)")
        #expect(line == #"{"time":""# + time + #"","level":"warning","logger":"relay","message":"exchange","s":"é€/x y","#
            + #""min":-9223372036854775808,"max":9223372036854775807,"zero":0,"nine":9,"ten":10,"d":-2.500,"tiny":0.000,"#
            + #""inf":null,"nan":null,"t":true,"f":false,"":""}"#)
    }

    /// The line is first sized for few escapes; one with many more (here 40 control bytes, 40 quotes: 240 bytes
    /// more than its text) is written again with room for all of them, whole.
    @Test func aLineWithManyEscapesIsWrittenWhole() throws {
        let sink = MemoryLogSink()
        let text = String(repeating: "\u{1}\"", count: 40)
        Logger(label: "relay", sink: sink).info("m\n", [("k\t", .string(text)), ("after", .int(1))])
        let line = try #require(sink.lines.first)
        #expect(line.hasSuffix(#""level":"info","logger":"relay","message":"m\n","k\t":""#
            + String(repeating: #"\u0001\""#, count: 40) + #"","after":1}"#), "\(line)")
    }

    @Test func quotingFastPathAndEscapes() {
        #expect(JSONLine.quote("plain/path-1") == #""plain/path-1""#)
        #expect(JSONLine.quote("a\"b\\c\n\u{1}") == #""a\"b\\c\n\u0001""#)
    }

    /// The word-at-a-time search for bytes to escape: each byte that needs it (every control byte, `"`, `\`) and
    /// near misses (0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, multi-byte UTF-8) at every position of strings around the
    /// eight-byte word size, against a byte-by-byte escaper.
    @Test func everyByteToEscapeAtEveryPosition() {
        func reference(_ s: String) -> String {
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = Array("0123456789abcdef")
                    out += "\\u00" + String(hex[Int(scalar.value >> 4)]) + String(hex[Int(scalar.value & 0xF)])
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        let specials = (0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) } + ["\"", "\\", " ", "!", "#", "[", "]", "\u{7F}", "é", "€"]
        for length in [1, 7, 8, 9, 15, 16, 17, 24] {
            for position in 0..<length {
                for special in specials {
                    var s = String(repeating: "a", count: length)
                    let at = s.index(s.startIndex, offsetBy: position)
                    s.replaceSubrange(at...at, with: String(special))
                    #expect(JSONLine.quote(s) == reference(s), "\(length) \(position) \(special.debugDescription)")
                }
            }
        }
    }
}
