import HTTP1
import Testing
import TestSupportCore

/// `validatedUTF8String` stands in for `String(validating:as:)` (macOS 15 only): the same answer on every row of
/// the UTF-8 rules (Unicode 15, Table 3-7), and on random bytes against the standard library where it exists.
@Suite struct UTF8ValidationTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var valid: Bool
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "empty", bytes: [], valid: true),
        Row(name: "ASCII", bytes: Array("Bearer abc".utf8), valid: true),
        Row(name: "two bytes (é)", bytes: [0xC3, 0xA9], valid: true),
        Row(name: "three bytes (€)", bytes: [0xE2, 0x82, 0xAC], valid: true),
        Row(name: "four bytes (U+1F600)", bytes: [0xF0, 0x9F, 0x98, 0x80], valid: true),
        Row(name: "largest scalar U+10FFFF", bytes: [0xF4, 0x8F, 0xBF, 0xBF], valid: true),
        Row(name: "Latin-1 byte alone", bytes: [0x61, 0xE9, 0x62], valid: false),
        Row(name: "lone continuation byte", bytes: [0x80], valid: false),
        Row(name: "overlong NUL (C0 80)", bytes: [0xC0, 0x80], valid: false),
        Row(name: "overlong slash (E0 80 AF)", bytes: [0xE0, 0x80, 0xAF], valid: false),
        Row(name: "overlong four bytes (F0 80 80 80)", bytes: [0xF0, 0x80, 0x80, 0x80], valid: false),
        Row(name: "surrogate U+D800 (ED A0 80)", bytes: [0xED, 0xA0, 0x80], valid: false),
        Row(name: "past U+10FFFF (F4 90 80 80)", bytes: [0xF4, 0x90, 0x80, 0x80], valid: false),
        Row(name: "F5 lead byte", bytes: [0xF5, 0x80, 0x80, 0x80], valid: false),
        Row(name: "truncated at the end", bytes: [0x61, 0xE2, 0x82], valid: false),
        Row(name: "truncated before ASCII", bytes: [0xE2, 0x82, 0x61], valid: false),
    ]

    @Test(arguments: rows)
    func row(_ row: Row) {
        let decoded = validatedUTF8String(row.bytes)
        #expect((decoded != nil) == row.valid)
        if row.valid { #expect(decoded.map { Array($0.utf8) } == row.bytes) }
    }

    /// Random byte strings biased towards multi-byte sequences, checked against the standard library.
    @Test func agreesWithTheStandardLibraryOnRandomBytes() throws {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) else { return }
        var rng = SplitMix64(seed: 0x5EED_07F8)
        let alphabet: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        var valid = 0
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...6, using: &rng)
            let bytes = (0..<length).map { _ in
                Bool.random(using: &rng) ? alphabet.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
            let expected = String(validating: bytes, as: UTF8.self)
            #expect(validatedUTF8String(bytes) == expected, "\(bytes)")
            if expected != nil { valid += 1 }
        }
        // Both answers occur often enough for the comparison to mean something.
        #expect(valid > 1_000 && valid < 19_000, "\(valid) valid of 20000")
    }
}
