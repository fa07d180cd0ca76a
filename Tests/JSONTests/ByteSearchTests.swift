import CByteSearch
import Testing

/// `cbytesearch_next`, the quote search under the usage tap's key scan, against a plain loop: every buffer length
/// from 0 to 80 (the vector blocks, the overlapping last block and the short-buffer loop), every start, the wanted
/// byte at every position or nowhere, with a second one after it and look-alike bytes around it.
@Suite("CByteSearch")
struct ByteSearchTests {
    static func byteLoop(_ bytes: [UInt8], from: Int, _ byte: UInt8) -> Int {
        var i = from
        while i < bytes.count && bytes[i] != byte { i += 1 }
        return i
    }

    @Test func findsTheFirstByteAtOrAfterTheStartLikeAPlainLoop() {
        let quote = UInt8(ascii: "\"")
        var compared = 0
        for count in 0...80 {
            // -1: no quote at all. Every other byte is 0x22 ^ 0x80 or 0x23, which a sign or off-by-one slip would take.
            for at in -1..<count {
                var bytes = (0..<count).map { UInt8($0 & 1 == 0 ? 0xA2 : 0x23) }
                if at >= 0 { bytes[at] = quote }
                if at >= 0 && at + 17 < count { bytes[at + 17] = quote }
                for from in 0...count {
                    let found = bytes.withUnsafeBufferPointer { cbytesearch_next($0.baseAddress, from, count, quote) }
                    #expect(found == Self.byteLoop(bytes, from: from, quote), "count \(count) at \(at) from \(from)")
                    compared += 1
                }
            }
        }
        #expect(compared == (0...80).reduce(0) { $0 + ($1 + 1) * ($1 + 1) })
    }

    /// The overlapping last block must not read before the buffer's start or past its end: the buffer here is an
    /// exact allocation (AddressSanitizer, `make sanitize`, reports a read outside it).
    @Test func readsOnlyInsideTheBuffer() {
        for count in 1...40 {
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: count)
            defer { buffer.deallocate() }
            buffer.initialize(repeating: 0x41, count: count)
            buffer[count - 1] = 0x22
            #expect(cbytesearch_next(buffer, 0, count, 0x22) == count - 1)
            #expect(cbytesearch_next(buffer, count - 1, count, 0x22) == count - 1)
            #expect(cbytesearch_next(buffer, count, count, 0x22) == count)
        }
    }

    #if arch(x86_64)
    /// The key scan calls the search only on x86-64 (`JSONPeek.nextQuote`), where the vector path must be the one built.
    @Test func isVectorizedOnX86() {
        #expect(cbytesearch_is_vectorized() == 1)
    }
    #endif
}
