// Log lines held for the end of a loop's turn (issue 24, S3: one write(2) per request for the access log).
// Each test reads a pipe with non-blocking reads: what has been written is there, what is held is not.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Support
import Testing
import Transport

@Suite struct LogBatchTests {
    /// A pipe whose read end does not block, closed by `close()`.
    struct Pipe {
        let readEnd: Int32
        let writeEnd: Int32
        init() {
            var fds: [Int32] = [-1, -1]
            precondition(pipe(&fds) == 0)
            _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
            readEnd = fds[0]
            writeEnd = fds[1]
        }

        /// Each read(2) that returned bytes, until the pipe is empty.
        func reads() -> [String] {
            var out: [String] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                guard n > 0 else { return out }
                out.append(String(decoding: buffer[0..<n], as: UTF8.self))
            }
        }

        func lines() -> [String] { reads().joined().split(separator: "\n").map(String.init) }

        func closeBoth() {
            _ = close(readEnd)
            _ = close(writeEnd)
        }
    }

    static func message(_ line: String) -> String? {
        guard let start = line.range(of: #""message":""#) else { return nil }
        return String(line[start.upperBound...].prefix { $0 != "\"" })
    }

    @Test func linesWaitForTheBatchAndGoOutInOneWrite() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        LogBatch.collect {
            logger.info("one")
            logger.info("two")
            LogBatch.collect { logger.info("three") }   // a nested batch writes nothing when it closes
            #expect(pipe.reads().isEmpty)
            #expect(LogBatch.heldByteCount > 0)
        }
        let reads = pipe.reads()
        #expect(reads.count == 1)
        #expect(reads.joined().split(separator: "\n").map { Self.message(String($0)) } == ["one", "two", "three"])
        #expect(LogBatch.heldByteCount == 0)
    }

    @Test func withoutABatchEachLineIsWrittenAtOnce() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        logger.info("alone")
        #expect(pipe.lines().map(Self.message) == ["alone"])
    }

    /// A warning is not held, and what was held before it goes out first: the order is the order logged.
    @Test func aWarningWritesWhatIsHeldThenItself() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        LogBatch.collect {
            logger.info("before")
            logger.warning("urgent")
            #expect(pipe.lines().map(Self.message) == ["before", "urgent"])
            logger.info("after")
            #expect(pipe.reads().isEmpty)
        }
        #expect(pipe.lines().map(Self.message) == ["after"])
    }

    /// Lines for another descriptor: what is held for the first goes out before the second's are held.
    @Test func anotherDescriptorWritesWhatIsHeldFirst() {
        let a = Pipe(), b = Pipe()
        defer { a.closeBoth(); b.closeBoth() }
        let toA = Logger(label: "a", sink: FileDescriptorLogSink(fd: a.writeEnd))
        let toB = Logger(label: "b", sink: FileDescriptorLogSink(fd: b.writeEnd))
        LogBatch.collect {
            toA.info("a1")
            toB.info("b1")
            #expect(a.lines().map(Self.message) == ["a1"])
            #expect(b.reads().isEmpty)
        }
        #expect(b.lines().map(Self.message) == ["b1"])
    }

    @Test func aBatchHoldsAtMostItsLimit() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        let text = String(repeating: "x", count: 1000)
        var written = 0, mostHeld = 0
        LogBatch.collect {
            for _ in 0..<200 {
                logger.info(text)
                mostHeld = max(mostHeld, LogBatch.heldByteCount)
                written += pipe.lines().count   // drained as it goes
            }
        }
        written += pipe.lines().count
        #expect(mostHeld <= LogBatch.limit)
        #expect(mostHeld > LogBatch.limit - 2_000)
        #expect(written == 200)
        #expect(LogBatch.heldByteCount == 0)
    }

    /// A line longer than the limit is not held: what is held goes out, then the line, in the order logged.
    @Test func aLineOverTheLimitIsWrittenAtOnce() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        let long = String(repeating: "y", count: LogBatch.limit)
        LogBatch.collect {
            logger.info("short")
            logger.info(long)
            #expect(LogBatch.heldByteCount == 0)
            #expect(pipe.lines().map(Self.message) == ["short", long])
        }
    }

    /// Several threads' batches on one pipe (several event loops logging to stdout under a container runtime):
    /// every line arrives whole. A batch is written in pieces of at most `PIPE_BUF`, which the kernel never
    /// interleaves; held up to 64 KiB, lines from different threads were cut into each other (38 of 4 800 in a
    /// reviewer's run of this shape).
    @Test func batchesFromSeveralThreadsKeepTheirLinesWhole() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        let threads = 4, batches = 20, perBatch = 60
        let padding = String(repeating: "p", count: 1000)
        let writers = DispatchGroup()
        // The reader blocks until bytes come: no polling.
        _ = fcntl(pipe.readEnd, F_SETFL, fcntl(pipe.readEnd, F_GETFL) & ~O_NONBLOCK)
        for t in 0..<threads {
            writers.enter()
            Thread.detachNewThread {   // each its own thread: a batch is a thread's
                for b in 0..<batches {
                    LogBatch.collect {
                        for n in 0..<perBatch { logger.info("t\(t)-\(b)-\(n)-\(padding)") }
                    }
                }
                writers.leave()
            }
        }
        // Read slowly, a little at a time, so that the writers fill the pipe and wait on it.
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 700)
        let expected = threads * batches * perBatch
        var lines = 0
        while lines < expected {
            let n = buffer.withUnsafeMutableBytes { read(pipe.readEnd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            received.append(contentsOf: buffer[0..<n])
            lines += buffer[0..<n].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        }
        writers.wait()
        let messages = String(decoding: received, as: UTF8.self).split(separator: "\n").map { Self.message(String($0)) }
        #expect(messages.count == expected)
        let whole = messages.filter { m in m.map { $0.hasPrefix("t") && $0.hasSuffix(padding) && $0.split(separator: "-").count == 4 } ?? false }
        #expect(whole.count == expected)
        #expect(Set(messages.compactMap { $0 }).count == expected)
    }

    /// A batch is the thread's own: a line logged on another thread meanwhile is written at once.
    @Test func anotherThreadIsNotHeld() {
        let pipe = Pipe()
        defer { pipe.closeBoth() }
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        LogBatch.collect {
            logger.info("held")
            let done = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {   // another thread: this one waits below
                logger.info("elsewhere")
                done.signal()
            }
            done.wait()
            #expect(pipe.lines().map(Self.message) == ["elsewhere"])
        }
        #expect(pipe.lines().map(Self.message) == ["held"])
    }

    /// An event loop's turn is a batch: a handler's line is not written while the turn runs, and is once the
    /// turn is over (the poller closes its batch; without that the line would wait for ever).
    @Test func aPollerTurnIsABatch() {
        let pipe = Pipe()
        let ready = Pipe()
        defer { pipe.closeBoth(); ready.closeBoth() }
        let loop = EventLoop(index: 0)
        let logger = Logger(label: "t", sink: FileDescriptorLogSink(fd: pipe.writeEnd))
        let seenInTurn = Box<[String]?>(nil)
        let handler = LoggingHandler(poller: loop.poller) {
            logger.info("in a turn")
            seenInTurn.value = pipe.reads()
        }
        loop.queue.sync { loop.poller.watch(ready.readEnd, read: true, write: false, handler: handler) }
        var byte: UInt8 = 1
        #expect(write(ready.writeEnd, &byte, 1) == 1)
        handler.done.wait()
        loop.queue.sync {}   // the turn that ran the handler has ended
        #expect(seenInTurn.value == [])
        #expect(pipe.lines().map(Self.message) == ["in a turn"])
    }
}

/// Written by a handler on the loop, read by the test after `done` and a `queue.sync`.
private final class Box<Value>: @unchecked Sendable {
    // Invariant: written on the loop's queue before `done` is signalled; read after it.
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// Runs `body` on its first readiness, stops watching, and signals `done`.
private final class LoggingHandler: PollerHandler, @unchecked Sendable {
    // Invariant: `pollerEvent` runs on the loop's queue only.
    let poller: Poller
    let body: () -> Void
    let done = DispatchSemaphore(value: 0)
    init(poller: Poller, body: @escaping () -> Void) {
        self.poller = poller
        self.body = body
    }
    func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
        poller.remove(fd)
        body()
        done.signal()
    }
}
