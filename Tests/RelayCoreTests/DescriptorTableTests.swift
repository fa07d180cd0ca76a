// The relay makes room in its descriptor table at start (issue 24): Linux grows the table on demand, and in a
// process with threads each growth waits for an RCU grace period, holding the event loop that opened the
// descriptor for 10 to 41 ms.
#if os(Linux)
import Glibc
import Testing
import Transport

@Suite struct DescriptorTableTests {
    /// After the reservation the table holds the asked-for count (or the soft descriptor limit, if lower), and
    /// descriptors then open at once and below it.
    @Test func theTableIsGrownAtOnceToTheLimit() throws {
        var limit = rlimit()
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let before = Syscall.descriptorTableSize()
        let target = Int(min(UInt64(limit.rlim_cur), UInt64(Syscall.reservedDescriptorCeiling)))
        try #require(before > 0, "FDSize is not in /proc/self/status")
        try #require(before < target, "the table (\(before)) already holds the limit (\(target)): nothing to show")
        let after = Syscall.reserveDescriptorTable(Syscall.reservedDescriptorCeiling)
        #expect(after >= target, "table \(after) after reserving \(target)")
        #expect(Syscall.descriptorTableSize() == after)
    }
}
#endif
