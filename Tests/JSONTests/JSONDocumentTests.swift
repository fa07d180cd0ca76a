// JSONDocument, the one strict reader of request bodies: lookups by decoded key, duplicates refused at any depth
// however they are escaped, the ambiguity classes, character counts, and edits applied in one pass.
import JSON
import Testing

private func document(_ s: String, duplicates: JSONDocument.Duplicates = .refused) throws -> JSONDocument {
    try JSONDocument(parsing: Array(s.utf8), duplicates: duplicates)
}

private func error(_ bytes: [UInt8]) -> JSONScanError? {
    do {
        _ = try JSONDocument(parsing: bytes)
        return nil
    } catch {
        return error
    }
}

@Suite struct JSONDocumentTests {
    @Test func membersAreFoundByTheirDecodedKeys() throws {
        let d = try document(#"{"m\u0065ssages":[{"c\u006Fntent":"hi","role":"user"}],"stream":true,"n":null}"#)
        let messages = try #require(d.member("messages", of: JSONDocument.root))
        #expect(d.kind(of: messages) == .array)
        let first = try #require(d.children(of: messages).first { _ in true })
        let content = try #require(d.member("content", of: first))
        #expect(d.string(content) == "hi")
        #expect(d.key(of: content) == "content")
        #expect(d.hasKey(content, "content"))
        #expect(!d.hasKey(content, "c\\u006Fntent"))
        #expect(d.member(path: ["stream"]).map(d.isTrue) == true)
        #expect(d.member("n", of: JSONDocument.root).map { d.kind(of: $0) } == .null)
        #expect(d.member("missing", of: JSONDocument.root) == nil)
        #expect(d.member("content", of: messages) == nil, "arrays have no members")
        #expect(Array(d.children(of: messages)).count == 1)
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, #"{"x":{"a":1,"b":2,"a":3}}"#, #"{"l":[{"k":1},{"k":1,"k":2}]}"#,
        #"{"s":{"include_usage":true,"include_\u0075sage":false}}"#, #"{"\ud83d\ude00":1,"😀":2}"#,
        // Many members: the sorted-hash path.
        "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + ",\"k7\":0}",
    ])
    func duplicatesAreRefusedAtAnyDepthAfterDecoding(_ body: String) throws {
        #expect(error(Array(body.utf8))?.kind == .duplicateKey)
        #expect(error(Array(body.utf8))?.isAmbiguous == true)
        _ = try document(body, duplicates: .allowed)
    }

    @Test(arguments: [
        #"{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}"#, #"{"K":1,"\u212A":2}"#, #"{"e\u0301":1,"é":2}"#,
        "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}",
    ])
    func distinctKeysAreNotDuplicates(_ body: String) throws {
        _ = try document(body)
    }

    @Test func theAmbiguityClassesAreTold() {
        #expect(error([0xEF, 0xBB, 0xBF] + Array("{}".utf8))?.kind == .byteOrderMark)
        #expect(error(Array(#"{"a":"\ud800"}"#.utf8))?.kind == .loneSurrogate)
        #expect(error(Array(#"{"a":"\udc00\ud800"}"#.utf8))?.kind == .loneSurrogate)
        #expect(error(Array(#"{"a":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8))?.kind == .invalidUTF8)
        #expect(error(Array(#"{"a":1} {"#.utf8))?.kind == .trailingData)
        #expect(error(Array(#"{"a":1}x"#.utf8))?.isAmbiguous == true)
        #expect(error(Array(#"{"a":1,}"#.utf8))?.isAmbiguous == false)
        #expect(error(Array("[1]".utf8))?.kind == .notAnObject)
        #expect(error(Array("".utf8))?.kind == .empty)
    }

    /// Quarter tokens: an ASCII character 1, any other character 4 per UTF-8 byte, escapes decoded first.
    @Test(arguments: [(#""abc""#, 3), (#""""#, 0), (#""a\nb""#, 3), (#""\u0041""#, 1), (#""\u00e9t\u00E9""#, 8 + 1 + 8),
                      (#""é✓""#, 8 + 12), (#""\u2713""#, 12), (#""\ud83d\ude00!""#, 16 + 1), (#""😀""#, 16), ("12", 0)]
          as [(String, Int)])
    func textWeights(_ c: (String, Int)) throws {
        let d = try document(#"{"s":\#(c.0)}"#)
        #expect(d.textWeight(of: try #require(d.member("s", of: JSONDocument.root))) == c.1)
    }

    @Test func keyTextWeightsDecode() throws {
        let d = try document(#"{"\u0061b\u00e9":1}"#)
        #expect(d.keyTextWeight(of: 1) == 1 + 1 + 8)
        #expect(d.keyTextWeight(of: JSONDocument.root) == 0)
    }

    @Test func editsApplyInOnePassAndKeepEveryOtherByte() {
        let body = Array(#"{"a":1, "b":null }"#.utf8)
        var edits = JSONEdits()
        edits.replace(12..<16, with: Array("7".utf8))
        edits.insert(Array(#","c":2"#.utf8), at: 16)
        edits.insert(Array(#","d":3"#.utf8), at: 16)
        #expect(String(decoding: edits.applied(to: body), as: UTF8.self) == #"{"a":1, "b":7,"c":2,"d":3 }"#)
        #expect(JSONEdits().applied(to: body) == body)
    }

    /// One edit takes its own path (no sort): at every position of the body, an insertion, a replacement and a
    /// removal each give the bytes before, the new bytes, the bytes after.
    @Test func oneEditAnywhereKeepsEveryOtherByte() {
        let body = Array(#"{"a":1,"b":[true,null]}"#.utf8)
        for lower in 0...body.count {
            for upper in lower...min(body.count, lower + 3) {
                for bytes in [[], Array("x".utf8), Array(#","c":2"#.utf8)] {
                    var edits = JSONEdits()
                    edits.replace(lower..<upper, with: bytes)
                    let same = edits.applied(to: body) == Array(body[..<lower]) + bytes + Array(body[upper...])
                    #expect(same, "edit \(lower)..<\(upper) with \(bytes.count) bytes")
                }
            }
        }
        var one = JSONEdits()
        one.insert(Array("7".utf8), at: 0)
        #expect(one.applied(to: []) == Array("7".utf8))
    }

    @Test func valuesAreCounted() throws {
        let d = try document(#"{"a":[1,2,{"b":"c"}],"d":true}"#)
        #expect(d.count == 7)
    }
}
