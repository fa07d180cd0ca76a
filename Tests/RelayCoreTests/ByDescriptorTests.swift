@testable import Transport
import Testing
import TestSupportCore

/// The poller's entries by descriptor number: what a dictionary did, checked against one on a random sequence of
/// sets, removals and reads, including numbers far past the table's end and the table's growth.
@Suite("Values by descriptor number")
struct ByDescriptorTests {
    @Test("behaves as a dictionary keyed by descriptor number")
    func matchesADictionary() {
        var table = ByDescriptor<Int>()
        var reference: [Int32: Int] = [:]
        var rng = SplitMix64(seed: 0xFD)
        var grown = false
        for step in 0..<20_000 {
            let fd = Int32.random(in: 0...(step < 10_000 ? 200 : 5_000), using: &rng)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0, 1:
                table[fd] = step
                reference[fd] = step
            case 2:
                #expect(table.removeValue(forKey: fd) == reference.removeValue(forKey: fd))
            default:
                table[fd] = nil
                reference[fd] = nil
            }
            #expect(table[fd] == reference[fd])
            #expect(table.count == reference.count)
            if fd > 1_000 && table[fd] != nil { grown = true }
        }
        for fd in Int32(0)...6_000 where table[fd] != reference[fd] {
            Issue.record("descriptor \(fd): \(String(describing: table[fd])) against \(String(describing: reference[fd]))")
        }
        #expect(grown, "the sequence reached numbers past the first growth")
        #expect(table[-1] == nil)
        #expect(table[Int32.max] == nil)
        table.removeAll()
        #expect(table.count == 0)
        #expect(table[3] == nil)
    }

    @Test("clearing a number past the end does not grow the table")
    func clearingPastTheEnd() {
        var table = ByDescriptor<String>()
        table[100_000] = nil
        #expect(table.removeValue(forKey: 100_000) == nil)
        #expect(table.count == 0)
        table[5] = "five"
        #expect(table[5] == "five")
        #expect(table.count == 1)
    }
}
