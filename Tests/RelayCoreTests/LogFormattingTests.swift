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

    @Test func quotingFastPathAndEscapes() {
        #expect(JSONLine.quote("plain/path-1") == #""plain/path-1""#)
        #expect(JSONLine.quote("a\"b\\c\n\u{1}") == #""a\"b\\c\n\u0001""#)
    }
}
