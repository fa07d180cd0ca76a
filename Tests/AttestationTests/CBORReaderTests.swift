import Attestation
import AttestationTestSupport
import Testing

/// The bounded CBOR reader: RFC 8949 appendix A examples, round trips through the test writer, and every way a
/// hostile input can be malformed, truncated, huge, deep or ambiguous.
@Suite struct CBORReaderTests {
    @Test func decodesRFC8949Examples() throws {
        let examples: [([UInt8], CBORValue)] = [
            ([0x00], .unsigned(0)),
            ([0x17], .unsigned(23)),
            ([0x18, 0x18], .unsigned(24)),
            ([0x19, 0x03, 0xE8], .unsigned(1000)),
            ([0x1B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .unsigned(UInt64.max)),
            ([0x20], .negative(0)),
            ([0x38, 0x63], .negative(99)),
            ([0x3B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .negative(UInt64.max)),
            ([0x40], .bytes([])),
            ([0x44, 0x01, 0x02, 0x03, 0x04], .bytes([1, 2, 3, 4])),
            ([0x60], .text("")),
            ([0x64, 0x49, 0x45, 0x54, 0x46], .text("IETF")),
            ([0x62, 0xC3, 0xBC], .text("ü")),
            ([0x83, 0x01, 0x02, 0x03], .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            ([0xA2, 0x01, 0x02, 0x03, 0x04], .map([CBORMapEntry(key: .unsigned(1), value: .unsigned(2)),
                                                  CBORMapEntry(key: .unsigned(3), value: .unsigned(4))])),
            ([0xF4], .simple(20)),
            ([0xF5], .simple(21)),
            ([0xF6], .simple(22)),
            ([0xF8, 0xFF], .simple(255)),
        ]
        for (bytes, value) in examples {
            #expect(try CBORReader.decode(bytes) == value, "\(bytes)")
        }
        #expect(try CBORReader.decode([0x20]).integer == -1)
        #expect(try CBORReader.decode([0x38, 0x63]).integer == -100)
    }

    @Test func nonMinimalLengthsAreAccepted() throws {
        #expect(try CBORReader.decode([0x18, 0x01]) == .unsigned(1))
        #expect(try CBORReader.decode([0x59, 0x00, 0x01, 0x41]) == .bytes([0x41]))
    }

    @Test func roundTripsThroughTheWriter() throws {
        let value = CBORValue.textMap([
            ("fmt", .text("apple-appattest")),
            ("attStmt", .textMap([("x5c", .array([.bytes([UInt8](repeating: 7, count: 300)), .bytes([])])), ("receipt", .bytes([1]))])),
            ("authData", .bytes([UInt8](repeating: 9, count: 70_000 / 1000))),
            ("n", .int(-70_000)), ("big", .unsigned(1 << 40)), ("t", .simple(21)),
        ])
        #expect(try CBORReader.decode(CBORWriter.encode(value)) == value)
    }

    @Test func everyTruncationFails() throws {
        for vector in [RealVectors.ios14.object, RealVectors.apple2026.object, RealVectors.ios14Assertion] {
            for length in 0..<vector.count {
                #expect(throws: CBORError.truncated) { try CBORReader.decode(Array(vector.prefix(length))) }
            }
        }
    }

    @Test func rejectsWhatItDoesNotAccept() {
        let cases: [([UInt8], CBORError)] = [
            ([], .truncated),
            ([0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .truncated), // a 2^64-1 byte string in 9 bytes
            ([0x7A, 0x7F, 0xFF, 0xFF, 0xFF, 0x41], .truncated),
            ([0x9B, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .truncated), // a huge count: nothing reserved
            ([0xBA, 0xFF, 0xFF, 0xFF, 0xFF], .truncated),
            ([0xA1, 0x01], .truncated),
            ([0x19, 0x01], .truncated),
            ([0x5F, 0x41, 0x00, 0xFF], .indefiniteLength),
            ([0x9F, 0xFF], .indefiniteLength),
            ([0xBF, 0xFF], .indefiniteLength),
            ([0x1C], .malformed), ([0x3D], .malformed), ([0x5E], .malformed),
            ([0xF8, 0x10], .malformed), // a simple value below 32 in two bytes
            ([0xFF], .malformed), // a break outside an indefinite item
            ([0xC0, 0x60], .unsupported), ([0xD8, 0x18, 0x40], .unsupported), // tags
            ([0xF9, 0x3C, 0x00], .unsupported), ([0xFB, 0, 0, 0, 0, 0, 0, 0, 0], .unsupported), // floats
            ([0x62, 0xC3, 0x28], .invalidUTF8), ([0x61, 0xFF], .invalidUTF8), ([0x63, 0xED, 0xA0, 0x80], .invalidUTF8), // a surrogate
            ([0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02], .duplicateKey),
            ([0xA2, 0x01, 0x00, 0x18, 0x01, 0x00], .duplicateKey), // 1 and 1 written longer are one key
            ([0x00, 0x00], .trailingBytes),
        ]
        for (bytes, error) in cases {
            #expect(throws: error, "\(bytes)") { try CBORReader.decode(bytes) }
        }
    }

    @Test func limitsBoundDepthItemsAndSize() {
        // 16 nested arrays put the innermost item at depth 17, one past the default limit.
        let deep = [UInt8](repeating: 0x81, count: 16) + [0x00]
        #expect(throws: CBORError.tooDeep) { try CBORReader.decode(deep) }
        #expect((try? CBORReader.decode(Array(deep.dropFirst()))) != nil)
        #expect(throws: CBORError.tooDeep) { try CBORReader.decode([UInt8](repeating: 0x81, count: 10_000) + [0x00]) }

        let many = CBORWriter.encode(.array([CBORValue](repeating: .unsigned(0), count: 10)))
        #expect((try? CBORReader.decode(many, limits: CBORReader.Limits(maxItems: 11))) != nil)
        #expect(throws: CBORError.tooManyItems) { try CBORReader.decode(many, limits: CBORReader.Limits(maxItems: 10)) }

        let large = CBORWriter.encode(.bytes([UInt8](repeating: 0, count: 100)))
        #expect((try? CBORReader.decode(large, limits: CBORReader.Limits(maxBytes: 102))) != nil)
        #expect(throws: CBORError.tooLarge) { try CBORReader.decode(large, limits: CBORReader.Limits(maxBytes: 101)) }
    }

    @Test func decodePrefixLeavesTheRest() throws {
        let (value, consumed) = try CBORReader.decodePrefix([0x01, 0xFF, 0xFF][...])
        #expect(value == .unsigned(1))
        #expect(consumed == 1)
        // A slice that does not start at index 0.
        let bytes: [UInt8] = [0xEE, 0x42, 0x0A, 0x0B, 0xEE]
        let (inner, count) = try CBORReader.decodePrefix(bytes[1...])
        #expect(inner == .bytes([0x0A, 0x0B]))
        #expect(count == 3)
    }
}
