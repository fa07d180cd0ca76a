// The relay makes room in its descriptor table at start (issue 24): Linux grows the table on demand, and in a
// process with threads each growth waits for an RCU grace period, holding the event loop that opened the
// descriptor for 10 to 41 ms.
#if os(Linux)
import Glibc
import Testing
import Transport

@Suite struct DescriptorTableTests {
    /// After the reservation the table (`FDSize`) holds the soft descriptor limit, up to the ceiling, where it was
    /// smaller before.
    @Test func theTableIsGrownAtOnceToTheLimit() throws {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        try #require(getrlimit(resource, &limit) == 0)
        let before = Syscall.descriptorTableSize()
        try #require(before > 0, "FDSize is not in /proc/self/status")
        // Room to show the growth: where the table already holds the soft limit, the soft limit may rise to the
        // hard one (no privilege needed).
        if UInt64(limit.rlim_cur) <= UInt64(before), limit.rlim_max > limit.rlim_cur {
            limit.rlim_cur = min(limit.rlim_max, rlim_t(Syscall.reservedDescriptorCeiling))
            _ = setrlimit(resource, &limit)
            try #require(getrlimit(resource, &limit) == 0)
        }
        let target = Int(min(UInt64(limit.rlim_cur), UInt64(Syscall.reservedDescriptorCeiling)))
        try #require(before < target, "the table (\(before)) already holds the limit (\(target)): nothing to show")
        let after = Syscall.reserveDescriptorTable(Syscall.reservedDescriptorCeiling)
        #expect(after >= target, "table \(after) after reserving \(target)")
        #expect(Syscall.descriptorTableSize() == after)
    }
}
#endif
