// The pieces of TestSupportCore every test target leans on: the generator's sequence and `eventually`'s bounds.
import TestHarness
import Testing
import TestSupportCore

@Suite struct TestSupportCoreTests {
    /// The published SplitMix64 outputs for seed 0, so a wrong constant cannot pass as "random enough".
    @Test func splitMix64MatchesTheReferenceSequence() {
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(generator.next() == 0x06C4_5D18_8009_454F)
    }

    @Test func eventuallyReturnsOnceTheConditionHolds() throws {
        let checks = HarnessMonitor(0)
        // The timeout is only a safety bound: other suites may hold every thread for a while.
        try eventually(timeout: 30) { checks.withLock { $0 += 1; return $0 } == 3 }
        #expect(checks.withLock { $0 } == 3)
    }

    @Test func eventuallyThrowsWithTheStateSeenAtTheTimeout() throws {
        let checks = HarnessMonitor(0)
        do {
            try eventually("done after \(checks.withLock { $0 }) checks", timeout: 0.05) {
                checks.withLock { $0 += 1 }
                return false
            }
            Issue.record("no timeout")
        } catch let timeout as EventuallyTimeout {
            #expect(timeout.seconds == 0.05)
            #expect(timeout.what == "done after \(checks.withLock { $0 }) checks")
            #expect(checks.withLock { $0 } > 1)
        }
    }

    @Test func eventuallyInAnAsyncTestSuspendsBetweenChecks() async throws {
        let checks = HarnessMonitor(0)
        // The timeout is only a safety bound: in a full run, blocking suites may hold the shared pool's threads
        // for minutes before a suspended check resumes (120 s ran out twice in a sanitizer run of all 897 tests on
        // a busy 2-core machine, where the first synchronous tests took 180 s to get through the pool).
        try await eventually(timeout: 600) { checks.withLock { $0 += 1; return $0 } == 3 }
        #expect(checks.withLock { $0 } == 3)
    }
}
