/// The signed content of an App Attest receipt (Apple, "Assessing fraud risk"): a DER SET of
/// SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING } fields. The verifier binds the receipt to the
/// attestation through three of them: 2 (the app id), 3 (the attested key's certificate, the leaf) and 4 (the
/// client data hash). Unknown fields are skipped. Read with a small strict DER reader: definite lengths only,
/// every length checked against the bytes left.
package struct AppAttestReceiptFields: Sendable, Equatable {
    package var fields: [Int: [UInt8]]

    package static let appId = 2
    package static let attestedCertificate = 3
    package static let clientDataHash = 4

    /// nil when the content is not such a SET (or a field type appears twice).
    package init?(content: [UInt8]) {
        var outer = DERReader(content[...])
        guard let set = outer.element(tag: 0x31), outer.isAtEnd else { return nil }
        var reader = DERReader(set)
        var fields: [Int: [UInt8]] = [:]
        while !reader.isAtEnd {
            guard let sequence = reader.element(tag: 0x30) else { return nil }
            var field = DERReader(sequence)
            guard let type = field.element(tag: 0x02), let _ = field.element(tag: 0x02), let value = field.element(tag: 0x04),
                  field.isAtEnd, (1...2).contains(type.count), type.first! & 0x80 == 0
            else { return nil }
            let number = type.reduce(0) { $0 << 8 | Int($1) }
            guard fields.updateValue(Array(value), forKey: number) == nil else { return nil }
        }
        self.fields = fields
    }
}

/// Tag-length-value reader over DER bytes (X.690 section 8.1): one-byte tags, short and long definite lengths
/// of at most 4 length bytes.
struct DERReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { bytes.isEmpty }

    /// The contents of the next element when its tag is `tag`; nil (and nothing consumed) otherwise.
    mutating func element(tag: UInt8) -> ArraySlice<UInt8>? {
        var rest = bytes
        guard let first = rest.popFirst(), first == tag, let lengthByte = rest.popFirst() else { return nil }
        var length = Int(lengthByte)
        if lengthByte & 0x80 != 0 {
            let count = Int(lengthByte & 0x7F)
            guard (1...4).contains(count), rest.count >= count else { return nil } // 0x80 is BER's indefinite form
            length = rest.prefix(count).reduce(0) { $0 << 8 | Int($1) }
            rest = rest.dropFirst(count)
        }
        guard length <= rest.count else { return nil }
        bytes = rest.dropFirst(length)
        return rest.prefix(length)
    }
}
