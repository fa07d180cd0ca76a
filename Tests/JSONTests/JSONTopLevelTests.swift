// JSONTopLevel: valid bodies give exact member lists and value ranges; every malformed or hostile body fails with
// the documented kind; duplicates are reported code point for code point; the string and integer helpers.
import JSON
import Testing

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Members as "key=kind:valuetext" for readable comparisons.
private func describe(_ body: [UInt8]) throws -> [String] {
    try JSONTopLevel.scan(body).map { "\($0.key)=\($0.kind):\(String(decoding: body[$0.valueRange], as: UTF8.self))" }
}

private func scanError(_ body: [UInt8]) -> JSONScanError? {
    do {
        _ = try JSONTopLevel.scan(body)
        return nil
    } catch {
        return error
    }
}

@Suite struct JSONTopLevelTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        var body: String
        var members: [String]
        var testDescription: String { body }
    }

    static let valid: [Valid] = [
        Valid(body: "{}", members: []),
        Valid(body: " \t\r\n{ \n}\r\n ", members: []),
        Valid(body: #"{"a":1}"#, members: ["a=number:1"]),
        Valid(body: #"{ "a" :  [1, 2] , "b":"x" }"#, members: ["a=array:[1, 2]", #"b=string:"x""#]),
        Valid(body: #"{"s":"","n":-0.5e+10,"t":true,"f":false,"z":null,"o":{},"l":[]}"#, members: [
            #"s=string:"""#, "n=number:-0.5e+10", "t=bool:true", "f=bool:false", "z=null:null", "o=object:{}",
            "l=array:[]",
        ]),
        Valid(body: #"{"n":[0,-0,12,1.5,1E3,1e-2,-9.25E+07,123456789012345678901234567890]}"#,
              members: ["n=array:[0,-0,12,1.5,1E3,1e-2,-9.25E+07,123456789012345678901234567890]"]),
        Valid(body: #"{"deep":{"a":[{"b":[[],{}]},"}",{"c":"]"}]},"next":0}"#,
              members: [#"deep=object:{"a":[{"b":[[],{}]},"}",{"c":"]"}]}"#, "next=number:0"]),
        // Keys are decoded: escapes, \u, a surrogate pair, raw UTF-8.
        Valid(body: #"{"a\"b\\c\/d\n":1,"\u00e9\u4E2D":2,"\ud83d\ude00":3,"é中😀":4}"#,
              members: ["a\"b\\c/d\n=number:1", "é中=number:2", "😀=number:3", "é中😀=number:4"]),
        // Strings may hold escapes and raw UTF-8 anywhere in values.
        Valid(body: #"{"v":"\"\\\/\b\f\n\r\t\u0000\uFFFF\uDBFF\uDFFF €"}"#,
              members: [#"v=string:"\"\\\/\b\f\n\r\t\u0000\uFFFF\uDBFF\uDFFF €""#]),
        Valid(body: #"{"a":1,"a":2}"#, members: ["a=number:1", "a=number:2"]),
    ]

    @Test(arguments: valid)
    func validBodiesListTheirTopLevelMembers(_ c: Valid) throws {
        #expect(try describe(bytes(c.body)) == c.members)
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        var name: String
        var body: [UInt8]
        var kind: JSONScanError.Kind
        var offset: Int?
        init(_ name: String, _ body: String, _ kind: JSONScanError.Kind, at offset: Int? = nil) {
            self.init(name, Array(body.utf8), kind, at: offset)
        }
        init(_ name: String, _ body: [UInt8], _ kind: JSONScanError.Kind, at offset: Int? = nil) {
            self.name = name
            self.body = body
            self.kind = kind
            self.offset = offset
        }
        var testDescription: String { name }
    }

    static let invalid: [Invalid] = [
        Invalid("empty", "", .empty, at: 0),
        Invalid("only whitespace", " \r\n\t", .empty, at: 4),
        Invalid("byte order mark", [0xEF, 0xBB, 0xBF] + Array("{}".utf8), .byteOrderMark, at: 0),
        Invalid("array", "[]", .notAnObject, at: 0),
        Invalid("string", #" "x""#, .notAnObject, at: 1),
        Invalid("number", "1", .notAnObject, at: 0),
        Invalid("null", "null", .notAnObject),
        Invalid("garbage", "hello", .unexpectedByte, at: 0),
        Invalid("open brace", "{", .unexpectedEnd, at: 1),
        Invalid("key only", #"{"a""#, .unexpectedEnd),
        Invalid("key and colon", #"{"a":"#, .unexpectedEnd),
        Invalid("no closing brace", #"{"a":1"#, .unexpectedEnd),
        Invalid("no closing brace after comma", #"{"a":1,"#, .unexpectedEnd),
        Invalid("unterminated key", #"{"a:1}"#, .unexpectedEnd, at: 6),
        Invalid("unterminated value", #"{"a":"xyz}"#, .unexpectedEnd),
        Invalid("unterminated nested array", #"{"a":[1,2}"#, .unexpectedByte, at: 9),
        Invalid("backslash at the end", #"{"a":"\"#, .unexpectedEnd),
        Invalid("bad escape", #"{"a":"\x"}"#, .invalidEscape, at: 6),
        Invalid("escaped single quote", #"{"a":"\'"}"#, .invalidEscape),
        Invalid("bad hex", #"{"a":"\u12G4"}"#, .invalidEscape, at: 6),
        Invalid("short \\u", #"{"a":"\u12"}"#, .invalidEscape),
        Invalid("\\u at the end", #"{"a":"\u12"#, .unexpectedEnd),
        Invalid("lone high surrogate", #"{"a":"\uD800"}"#, .loneSurrogate, at: 6),
        Invalid("high surrogate then letter", #"{"a":"\uD83Dx"}"#, .loneSurrogate),
        Invalid("high surrogate then BMP escape", #"{"a":"\uD800\u0041"}"#, .loneSurrogate),
        Invalid("two high surrogates", #"{"a":"\uD800\uD800"}"#, .loneSurrogate),
        Invalid("lone low surrogate", #"{"a":"\uDC00"}"#, .loneSurrogate),
        Invalid("lone surrogate in a key", #"{"\uDFFF":1}"#, .loneSurrogate),
        Invalid("overlong NUL", Array(#"{"a":""#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8), .invalidUTF8, at: 6),
        Invalid("overlong 3-byte", Array(#"{"a":""#.utf8) + [0xE0, 0x80, 0xAF] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("UTF-8 surrogate", Array(#"{"a":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("above U+10FFFF", Array(#"{"a":""#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("truncated sequence", Array(#"{"a":""#.utf8) + [0xE2, 0x82] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("lone continuation", Array(#"{"a":""#.utf8) + [0x80] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("0xFF", Array(#"{"a":""#.utf8) + [0xFF] + Array(#""}"#.utf8), .invalidUTF8),
        Invalid("sequence cut by the end", Array(#"{"a":""#.utf8) + [0xF0, 0x9F], .invalidUTF8),
        Invalid("raw newline in a string", "{\"a\":\"x\ny\"}", .controlCharacter, at: 7),
        Invalid("raw tab in a key", "{\"a\tb\":1}", .controlCharacter),
        Invalid("raw NUL in a string", "{\"a\":\"\u{0}\"}", .controlCharacter),
        Invalid("leading zero", #"{"a":01}"#, .invalidNumber, at: 6),
        Invalid("minus alone", #"{"a":-}"#, .invalidNumber),
        Invalid("dot without digits", #"{"a":1.}"#, .invalidNumber),
        Invalid("leading dot", #"{"a":.5}"#, .unexpectedByte),
        Invalid("empty exponent", #"{"a":1e}"#, .invalidNumber),
        Invalid("signed empty exponent", #"{"a":1e+}"#, .invalidNumber),
        Invalid("plus sign", #"{"a":+1}"#, .unexpectedByte),
        Invalid("hex", #"{"a":0x10}"#, .unexpectedByte),
        Invalid("NaN", #"{"a":NaN}"#, .unexpectedByte),
        Invalid("-Infinity", #"{"a":-Infinity}"#, .invalidNumber),
        Invalid("number cut by the end", #"{"a":1."#, .unexpectedEnd),
        Invalid("partial true", #"{"a":tru}"#, .unexpectedByte),
        Invalid("True", #"{"a":True}"#, .unexpectedByte),
        Invalid("null cut by the end", #"{"a":nul"#, .unexpectedEnd),
        Invalid("trailing comma in object", #"{"a":1,}"#, .unexpectedByte),
        Invalid("trailing comma in array", #"{"a":[1,]}"#, .unexpectedByte),
        Invalid("lone comma", "{,}", .unexpectedByte),
        Invalid("missing colon", #"{"a" 1}"#, .unexpectedByte),
        Invalid("missing comma", #"{"a":1 "b":2}"#, .unexpectedByte),
        Invalid("single quotes", "{'a':1}", .unexpectedByte),
        Invalid("unquoted key", "{a:1}", .unexpectedByte),
        Invalid("non-string key in nested object", #"{"a":{1:2}}"#, .unexpectedByte),
        Invalid("comment", "{/* hi */}", .unexpectedByte),
        Invalid("vertical tab is not whitespace", "{\u{0B}}", .unexpectedByte),
        Invalid("no-break space is not whitespace", "\u{A0}{}", .unexpectedByte),
        Invalid("trailing garbage", "{}x", .trailingData, at: 2),
        Invalid("two objects", "{} {}", .trailingData, at: 3),
        Invalid("two objects, no space", #"{"a":1}{"a":2}"#, .trailingData, at: 7),
        Invalid("trailing comma after object", "{},", .trailingData),
        Invalid("trailing NUL", "{}\u{0}", .trailingData),
    ]

    @Test(arguments: invalid)
    func invalidBodiesAreRejected(_ c: Invalid) {
        let error = scanError(c.body)
        #expect(error?.kind == c.kind)
        if let offset = c.offset { #expect(error?.offset == offset) }
    }

    // MARK: depth

    private static func nested(_ depth: Int) -> [UInt8] {
        // The top-level object is depth 1; each array adds one.
        bytes(#"{"a":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}")
    }

    @Test func nestingUpToTheLimitIsAccepted() throws {
        #expect(JSONTopLevel.maxDepth == 64)
        let members = try JSONTopLevel.scan(Self.nested(64))
        #expect(members.count == 1)
        #expect(members[0].kind == .array)
    }

    @Test func nestingPastTheLimitIsRejectedWhereItStarts() {
        #expect(scanError(Self.nested(65)) == JSONScanError(.tooDeep, at: 5 + 63))
        let objects = bytes(String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65))
        #expect(scanError(objects)?.kind == .tooDeep)
    }

    @Test func hostileNestingFailsFastWithoutExhaustingTheStack() {
        let open = bytes(#"{"a":"#) + [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        #expect(scanError(open)?.kind == .tooDeep)
        let bare = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        #expect(scanError(bare)?.kind == .tooDeep)
    }

    // MARK: duplicates

    @Test func duplicateKeysAreAllReturnedAndReported() throws {
        let body = bytes(#"{"model":"a","x":1,"mod\u0065l":"b","x":2,"x":3,"y":0}"#)
        let members = try JSONTopLevel.scan(body)
        #expect(members.map(\.key) == ["model", "x", "model", "x", "x", "y"])
        #expect(JSONTopLevel.duplicateKeys(in: members) == ["model", "x"])
        #expect(JSONTopLevel.duplicateKeys(in: try JSONTopLevel.scan(bytes(#"{"a":1,"b":{"a":2}}"#))) == [])
    }

    @Test func keysCompareByCodePointNotCanonicalEquivalence() throws {
        // U+212A KELVIN SIGN is canonically equivalent to "K": Swift's == says equal, JSON parsers do not.
        let members = try JSONTopLevel.scan(bytes(#"{"K":1,"\u212A":2,"e\u0301":3,"\u00e9":4}"#))
        #expect(members[1].key == "K", "Swift String equality would merge these")
        #expect(JSONTopLevel.duplicateKeys(in: members) == [])
        #expect(members[0].hasKey("K"))
        #expect(!members[1].hasKey("K"))
        #expect(!members[3].hasKey("e\u{301}"))
    }

    // MARK: helpers

    @Test func stringDecodesEveryEscape() throws {
        let body = bytes(#"{"v":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2D\ud83d\ude00 raw é😀","w":1}"#)
        let members = try JSONTopLevel.scan(body)
        #expect(JSONTopLevel.string(in: body, at: members[0].valueRange)
            == "a\"b\\c/d\u{8}\u{C}\n\r\té中😀 raw é😀")
        #expect(JSONTopLevel.string(in: body, at: members[1].valueRange) == nil, "a number is not a string")
        let r = members[0].valueRange
        #expect(JSONTopLevel.string(in: body, at: r.lowerBound..<r.upperBound - 1) == nil, "range must be exact")
        #expect(JSONTopLevel.string(in: body, at: r.lowerBound + 1..<r.upperBound) == nil)
        #expect(JSONTopLevel.string(in: body, at: r.lowerBound..<body.count + 5) == nil)
        #expect(JSONTopLevel.string(in: bytes(#""\uD800""#), at: 0..<8) == nil, "lone surrogate")
    }

    struct IntCase: Sendable, CustomTestStringConvertible {
        var text: String
        var expected: JSONInteger
        var testDescription: String { text }
    }

    static let integers: [IntCase] = [
        IntCase(text: "0", expected: .value(0)),
        IntCase(text: "-0", expected: .value(0)),
        IntCase(text: "7", expected: .value(7)),
        IntCase(text: "4096", expected: .value(4096)),
        IntCase(text: "-12", expected: .value(-12)),
        IntCase(text: "9223372036854775807", expected: .value(Int.max)),
        IntCase(text: "9223372036854775808", expected: .outOfRange(negative: false)),
        IntCase(text: "99999999999999999999999999", expected: .outOfRange(negative: false)),
        IntCase(text: "-9223372036854775808", expected: .value(Int.min)),
        IntCase(text: "-9223372036854775809", expected: .outOfRange(negative: true)),
        IntCase(text: "1.0", expected: .notAnInteger),
        IntCase(text: "1e2", expected: .notAnInteger),
        IntCase(text: "1E2", expected: .notAnInteger),
        IntCase(text: "100e-2", expected: .notAnInteger),
        IntCase(text: "01", expected: .notAnInteger),
        IntCase(text: "-", expected: .notAnInteger),
        IntCase(text: "", expected: .notAnInteger),
        IntCase(text: "+1", expected: .notAnInteger),
        IntCase(text: #""1""#, expected: .notAnInteger),
        IntCase(text: "true", expected: .notAnInteger),
    ]

    @Test(arguments: integers)
    func integerReadsOnlyPlainIntegers(_ c: IntCase) {
        let body = bytes(c.text)
        #expect(JSONTopLevel.integer(in: body, at: 0..<body.count) == c.expected)
    }

    @Test func integerReadsExactlyItsRange() throws {
        let body = bytes(#"{"a": 1234 ,"b":-5}"#)
        let members = try JSONTopLevel.scan(body)
        #expect(members.map(\.valueRange) == [6..<10, 16..<18])
        #expect(JSONTopLevel.integer(in: body, at: members[0].valueRange) == .value(1234))
        #expect(JSONTopLevel.integer(in: body, at: members[1].valueRange) == .value(-5))
        #expect(JSONTopLevel.integer(in: body, at: 5..<10) == .notAnInteger, "a space is not a digit")
        #expect(JSONTopLevel.integer(in: body, at: 6..<100) == .notAnInteger, "out of bounds")
    }
}
