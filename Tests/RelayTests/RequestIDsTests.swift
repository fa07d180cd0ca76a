// Generated request ids: 16 lowercase hex digits, none repeated within a process, from every loop at once.
import Dispatch
@testable import Relay
import Support
import Testing

@Suite struct RequestIDsTests {
    @Test func sixteenHexDigitsNeverRepeated() {
        let seen = Locked<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            var mine: [String] = []
            for _ in 0..<25_000 { mine.append(RequestIDs.make()) }
            seen.withLock { $0.formUnion(mine) }
        }
        let ids = seen.withLock { $0 }
        #expect(ids.count == 100_000)
        #expect(ids.allSatisfy { $0.utf8.count == 16 && $0.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } })
    }

    @Test func hexDigitsOfKnownValues() {
        #expect(RequestIDs.hex16(0) == "0000000000000000")
        #expect(RequestIDs.hex16(0xFF) == "00000000000000ff")
        #expect(RequestIDs.hex16(0x0123_4567_89AB_CDEF) == "0123456789abcdef")
        #expect(RequestIDs.hex16(.max) == "ffffffffffffffff")
    }
}
