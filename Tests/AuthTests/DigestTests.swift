// SHA-256 through `Digest`: FIPS 180-2 vectors, whichever way the bytes are held.
import Auth
import Testing

@Suite struct DigestTests {
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    static let vectors = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ]

    /// An array, a slice, a string's UTF-8 and a lazy view give the same digest.
    @Test(arguments: vectors)
    func knownDigests(_ text: String, _ expected: String) {
        let bytes = Array(text.utf8)
        #expect(Self.hex(Digest.sha256(bytes)) == expected)
        #expect(Self.hex(Digest.sha256(([0x78] + bytes)[1...])) == expected)
        #expect(Self.hex(Digest.sha256(text.utf8)) == expected)
        #expect(bytes.lazy.map { $0 }.withContiguousStorageIfAvailable { _ in true } == nil)
        #expect(Self.hex(Digest.sha256(bytes.lazy.map { $0 })) == expected)
    }
}
