// JSONTopLevel against Foundation's JSONSerialization on generated documents (fixed seeds, so a failure replays):
// every generated object is valid for both, with the same top-level keys; the scanner also recovers each member's
// exact value text and kind; and every prefix that cuts the closing brace off is invalid for both.
import Foundation
import JSON
import Testing
import TestSupportCore

/// Builds random valid JSON objects, keeping what each top-level member should scan to.
private struct Generator {
    var rng: SplitMix64

    struct Member {
        var key: String
        var valueText: String
        var kind: JSONMember.Kind
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ oneIn: Int) -> Bool { int(1...oneIn) == 1 }

    mutating func whitespace() -> String {
        ["", "", "", " ", "\n", "\t", "\r\n  ", "  "][int(0...7)]
    }

    /// Hex of `value`, four digits, in random case.
    mutating func hex4(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        let padded = String(repeating: "0", count: 4 - digits.count) + digits
        return chance(2) ? padded : padded.uppercased()
    }

    /// A JSON string literal and the text it decodes to. No combining marks, so distinct decoded texts are also
    /// distinct under Swift's canonical equivalence (which Foundation's dictionary keys use).
    mutating func string(maxLength: Int) -> (literal: String, decoded: String) {
        var literal = "\""
        var decoded = ""
        for _ in 0..<int(0...maxLength) {
            switch int(0...11) {
            case 0...4:
                let c = Character(Unicode.Scalar(UInt8(int(0x61...0x7A))))
                literal.append(c)
                decoded.append(c)
            case 5:
                let c = Character(Unicode.Scalar(UInt8(int(0x20...0x7E))))
                if c == "\"" || c == "\\" { literal += "\\" + String(c) } else { literal.append(c) }
                decoded.append(c)
            case 6:
                let (escape, value) = [("\\\"", "\""), ("\\\\", "\\"), ("\\/", "/"), ("\\b", "\u{8}"), ("\\f", "\u{C}"),
                                       ("\\n", "\n"), ("\\r", "\r"), ("\\t", "\t")][int(0...7)]
                literal += escape
                decoded += value
            case 7:
                let value = UInt32(int(1...0x1F))
                literal += "\\u" + hex4(value)
                decoded.unicodeScalars.append(Unicode.Scalar(value)!)
            case 8, 9:
                let scalar: Unicode.Scalar = ["é", "ß", "中", "Ж", "€", "\u{FFFD}", "😀", "𝄞", "\u{10FFFD}"][int(0...8)]
                if chance(2) {
                    literal.unicodeScalars.append(scalar)
                } else if scalar.value > 0xFFFF {
                    let v = scalar.value - 0x10000
                    literal += "\\u" + hex4(0xD800 + (v >> 10)) + "\\u" + hex4(0xDC00 + (v & 0x3FF))
                } else {
                    literal += "\\u" + hex4(scalar.value)
                }
                decoded.unicodeScalars.append(scalar)
            default:
                let value = UInt32(int(0x20...0x7E))
                literal += "\\u" + hex4(value)
                decoded.unicodeScalars.append(Unicode.Scalar(value)!)
            }
        }
        return (literal + "\"", decoded)
    }

    mutating func number() -> String {
        var s = chance(3) ? "-" : ""
        if chance(4) {
            s += "0"
        } else {
            s += String(int(1...9))
            for _ in 0..<int(0...12) { s += String(int(0...9)) }
        }
        if chance(3) {
            s += "."
            for _ in 0..<int(1...6) { s += String(int(0...9)) }
        }
        if chance(4) {
            s += ["e", "E"][int(0...1)] + ["", "+", "-"][int(0...2)] + String(int(0...30))
        }
        return s
    }

    mutating func value(depth: Int) -> (text: String, kind: JSONMember.Kind) {
        let pick = depth >= 8 ? int(0...4) : int(0...6)
        switch pick {
        case 0: return (string(maxLength: 12).literal, .string)
        case 1: return (number(), .number)
        case 2: return (chance(2) ? "true" : "false", .bool)
        case 3: return ("null", .null)
        case 4: return (number(), .number)
        case 5:
            var parts: [String] = []
            for _ in 0..<int(0...4) {
                parts.append(whitespace() + value(depth: depth + 1).text + whitespace())
            }
            return ("[" + (parts.isEmpty ? whitespace() : parts.joined(separator: ",")) + "]", .array)
        default:
            var parts: [String] = []
            for _ in 0..<int(0...4) {   // nested objects may repeat keys; only the top level is compared
                parts.append(whitespace() + string(maxLength: 6).literal + whitespace() + ":" + whitespace()
                             + value(depth: depth + 1).text + whitespace())
            }
            return ("{" + (parts.isEmpty ? whitespace() : parts.joined(separator: ",")) + "}", .object)
        }
    }

    mutating func document() -> (text: String, members: [Member]) {
        var members: [Member] = []
        var seen = Set<String>()
        var parts: [String] = []
        for _ in 0..<int(0...8) {
            let key = string(maxLength: 8)
            guard seen.insert(key.decoded).inserted else { continue }
            let value = value(depth: 2)
            members.append(Member(key: key.decoded, valueText: value.text, kind: value.kind))
            parts.append(whitespace() + key.literal + whitespace() + ":" + whitespace() + value.text + whitespace())
        }
        let inner = parts.isEmpty ? whitespace() : parts.joined(separator: ",")
        return (whitespace() + "{" + inner + "}" + whitespace(), members)
    }
}

private func foundationKeys(_ bytes: [UInt8]) -> Set<String>? {
    guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return nil }
    return Set(object.keys)
}

@Suite struct JSONTopLevelRandomizedTests {
    @Test(arguments: [UInt64(1), 7, 0xC0FFEE, 20_240_601])
    func generatedDocumentsAgreeWithJSONSerialization(seed: UInt64) throws {
        var generator = Generator(rng: SplitMix64(seed: seed))
        for round in 0..<300 {
            let (text, expected) = generator.document()
            let body = Array(text.utf8)
            let members: [JSONMember]
            do {
                members = try JSONTopLevel.scan(body)
            } catch {
                Issue.record("seed \(seed) round \(round): scanner rejected \(text): \(error)")
                return
            }
            let ours = members.map(\.key)
            #expect(ours == expected.map(\.key), "seed \(seed) round \(round)")
            #expect(members.map(\.kind) == expected.map(\.kind), "seed \(seed) round \(round)")
            #expect(members.map { String(decoding: body[$0.valueRange], as: UTF8.self) } == expected.map(\.valueText),
                    "seed \(seed) round \(round)")
            let theirs = foundationKeys(body)
            #expect(theirs != nil, "seed \(seed) round \(round): JSONSerialization rejected \(text)")
            #expect(theirs == Set(ours), "seed \(seed) round \(round)")
            if ours != expected.map(\.key) || theirs != Set(ours) { return }
        }
    }

    @Test(arguments: [UInt64(3), 99])
    func prefixesWithoutTheClosingBraceAreInvalidForBoth(seed: UInt64) {
        var generator = Generator(rng: SplitMix64(seed: seed))
        for round in 0..<100 {
            let body = Array(generator.document().text.utf8)
            let closing = body.lastIndex(of: UInt8(ascii: "}"))!
            let cut = Int.random(in: 0..<closing, using: &generator.rng)
            let prefix = Array(body[..<cut])
            #expect(throws: JSONScanError.self, "seed \(seed) round \(round)") { try JSONTopLevel.scan(prefix) }
            #expect(foundationKeys(prefix) == nil, "seed \(seed) round \(round)")
        }
    }
}
