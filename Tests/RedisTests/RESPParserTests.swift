import Redis
import Testing
import TestSupportCore

/// The RESP2 parser as a value: every type, every split of the input, malformed input.
@Suite struct RESPParserTests {
    /// One stream holding every type: nested arrays, nulls of both kinds, a bulk string holding CRLF, empties.
    static let stream = Array((
        "+OK\r\n-NOSCRIPT No matching script\r\n:42\r\n:-7\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n" +
        "$4\r\na\r\nb\r\n*3\r\n:1\r\n*2\r\n$1\r\nx\r\n+y\r\n$-1\r\n+\r\n"
    ).utf8)
    static let values: [RESPValue] = [
        .simpleString("OK"), .error("NOSCRIPT No matching script"), .integer(42), .integer(-7),
        .bulkString(Array("hello".utf8)), .bulkString([]), .null, .null, .array([]),
        .bulkString(Array("a\r\nb".utf8)),
        .array([.integer(1), .array([.bulkString([UInt8(ascii: "x")]), .simpleString("y")]), .null]),
        .simpleString(""),
    ]

    private func drain(_ parser: inout RESPParser) throws -> [RESPValue] {
        var out: [RESPValue] = []
        while let value = try parser.next() { out.append(value) }
        return out
    }

    @Test func wholeStreamGivesEveryValueInOrder() throws {
        var parser = RESPParser()
        parser.feed(Self.stream)
        #expect(try drain(&parser) == Self.values)
        #expect(parser.bufferedByteCount == 0)
    }

    /// Bytes split at every position (two reads), values taken after each read: the same values, none early.
    @Test func everySplitPositionGivesTheSameValues() throws {
        for split in 0...Self.stream.count {
            var parser = RESPParser()
            parser.feed(Array(Self.stream[..<split]))
            var got = try drain(&parser)
            parser.feed(Array(Self.stream[split...]))
            got += try drain(&parser)
            #expect(got == Self.values, "split at \(split)")
        }
    }

    @Test func oneByteAtATime() throws {
        var parser = RESPParser()
        var got: [RESPValue] = []
        for byte in Self.stream {
            parser.feed([byte])
            got += try drain(&parser)
        }
        #expect(got == Self.values)
    }

    @Test func encoderWritesArraysOfBulkStrings() {
        #expect(RESPEncoder.encode(command: ["SET", "k", "a b\r\n", ""]) == Array("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na b\r\n\r\n$0\r\n\r\n".utf8))
        var buffer: [UInt8] = []
        RESPEncoder.append(command: [Array("PING".utf8)], to: &buffer)
        RESPEncoder.append(command: [Array("PING".utf8)], to: &buffer)
        #expect(buffer == Array("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n".utf8))
    }

    /// Lengths and counts of every size are written in decimal (those under 100 have a shortcut of their own).
    @Test(arguments: [0, 9, 10, 99, 100, 101, 999, 1000, 1009, 65_536, 1_000_000])
    func encoderWritesEveryLengthInDecimal(_ length: Int) {
        let argument = [UInt8](repeating: 0x78, count: length)
        #expect(RESPEncoder.encode(command: [argument]) == Array("*1\r\n$\(length)\r\n".utf8) + argument + [13, 10])
        let many = [[UInt8]](repeating: [0x61], count: length % 1000 + 1)
        #expect(RESPEncoder.encode(command: many).starts(with: Array("*\(many.count)\r\n".utf8)))
    }

    @Test(arguments: [
        "?what\r\n", ":12a\r\n", ":\r\n", ":-\r\n", "$-2\r\n", "*-3\r\n", "$3\r\nabcd\r\n", "+OK\rX", "+OK\n",
        ":99999999999999999999\r\n", "$99999999999\r\n", "*99999999999\r\n", "$x\r\n",
    ])
    func malformedInputIsAnError(_ input: String) {
        var parser = RESPParser()
        parser.feed(Array(input.utf8))
        #expect(throws: RESPParseError.self) { _ = try parser.next() }
    }

    @Test func limitsRefuseDeepNestingAndEndlessLines() {
        var deep = RESPParser(limits: .init(maxDepth: 4))
        deep.feed(Array((String(repeating: "*1\r\n", count: 5) + ":1\r\n").utf8))
        #expect(throws: RESPParseError.self) { _ = try deep.next() }
        var endless = RESPParser(limits: .init(maxLineLength: 16))
        endless.feed(Array(("+" + String(repeating: "a", count: 20)).utf8))
        #expect(throws: RESPParseError.self) { _ = try endless.next() }
        var short = RESPParser(limits: .init(maxLineLength: 16))
        short.feed(Array("+aaaa".utf8))
        #expect((try? short.next()) == .some(nil), "an unfinished line within the limit waits for more bytes")
    }

    /// Random bytes, and valid streams with random bytes flipped: an error or values, never a crash or a hang.
    @Test func garbageNeverCrashes() {
        var random = SplitMix64(seed: 0x5EED_12)
        for round in 0..<2_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 1...64, using: &random)).map { _ in
                    // Mostly RESP's own alphabet, so the parser gets deep before failing.
                    let alphabet = Array("+-:$*\r\n0123456789-x".utf8)
                    return alphabet[Int.random(in: 0..<alphabet.count, using: &random)]
                }
            } else {
                bytes = Self.stream
                for _ in 0..<3 { bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random) }
            }
            var parser = RESPParser(limits: .init(maxBulkLength: 1 << 16, maxArrayCount: 1 << 10))
            parser.feed(bytes)
            var count = 0
            while (try? parser.next()).flatMap({ $0 }) != nil { count += 1 }
            #expect(count <= bytes.count)
        }
    }
}
