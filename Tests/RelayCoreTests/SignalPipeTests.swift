// Signals through `SignalPipe`: the command's SIGINT, SIGTERM and SIGHUP (README, `timeouts.drainSeconds` and
// `pricingFile`) are caught this way.
// Sent to the whole process, so the kernel picks the thread; every one must reach the handler, in order.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Support
import Testing
import Transport

@Suite struct SignalPipeTests {
    @Test("every signal sent to the process reaches the handler on its queue, in the order sent")
    func everySignalArrives() throws {
        // One start per process: this is the only test that catches signals in the test process.
        let arrived = DispatchSemaphore(value: 0)
        let seen = Locked<[Int32]>([])
        let queue = DispatchQueue(label: "signal-pipe-test")
        try SignalPipe.start(catching: [SIGUSR1, SIGUSR2], queue: queue) { signal in
            dispatchPrecondition(condition: .onQueue(queue))
            seen.withLock { $0.append(signal) }
            arrived.signal()
        }
        var sent: [Int32] = []
        for round in 0..<200 {
            let signal = round.isMultiple(of: 3) ? SIGUSR1 : SIGUSR2
            sent.append(signal)
            #expect(kill(getpid(), signal) == 0)
            // A bound on a failure, not a timing under test: each signal is waited for before the next is sent,
            // so none can merge with another.
            guard arrived.wait(timeout: .now() + 10) == .success else {
                Issue.record("signal \(round) (\(signal)) never reached the handler")
                return
            }
        }
        #expect(seen.withLock { $0 } == sent)
    }

    @Test("the pipe is read out whole: several numbers written at once come back in order")
    func drainReadsEverything() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        #expect(fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK) == 0)
        let bytes: [UInt8] = (0..<150).map { UInt8(1 + $0 % 31) }
        #expect(write(ends[1], bytes, bytes.count) == bytes.count)
        #expect(SignalPipe.drain(ends[0]) == bytes.map { Int32($0) })
        #expect(SignalPipe.drain(ends[0]) == [])
    }
}
