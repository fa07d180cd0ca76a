import CSystem
import Dispatch
import Support
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Signals as events on a serial queue, none lost to the thread the kernel picks.
///
/// A handler installed with sigaction (C, `csystem_catch_signal`) writes each signal's number to a pipe, whichever
/// thread receives it; a Dispatch read source on the pipe's read end hands the numbers to `handler` on `queue`, in
/// order. Dispatch's own signal sources are not used: on Linux they read a signalfd, which sees a signal only when
/// every thread blocks it, and their re-raise to one "manager" thread can leave a signal pending on a thread that
/// never reads it (a SIGHUP in three was lost this way under load). A signal that arrives again before its handler
/// ran is one delivery, as POSIX has it; a second SIGTERM after the first was handled is always seen.
package enum SignalPipe {
    /// The read source, kept for the process's life. Written once, by the one `start` call that `lock` lets past
    /// its precondition; never read.
    nonisolated(unsafe) private static var source: (any DispatchSourceRead)?
    private static let lock = Locked(false)

    package struct StartError: Error, Sendable, CustomStringConvertible {
        package var step: String
        package var errno: Int32
        package var description: String { "\(step): \(String(cString: strerror(errno)))" }
    }

    /// Catches `signals` from now on and calls `handler(signal)` on `queue` for each delivery. Once per process:
    /// a second call is a programming error.
    package static func start(catching signals: [Int32], queue: DispatchQueue,
                              handler: @escaping @Sendable (Int32) -> Void) throws(StartError) {
        let first = lock.withLock { started -> Bool in
            defer { started = true }
            return !started
        }
        precondition(first, "SignalPipe.start called twice")
        let fd = csystem_signal_pipe()
        guard fd >= 0 else { throw StartError(step: "signal pipe", errno: errno) }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { @Sendable in
            for signal in drain(fd) { handler(signal) }
        }
        source.activate()
        Self.source = source
        for signal in signals where csystem_catch_signal(signal) != 0 {
            throw StartError(step: "sigaction(\(signal))", errno: errno)
        }
    }

    /// The signal numbers waiting in the pipe, in the order they came.
    package static func drain(_ fd: Int32) -> [Int32] {
        var numbers: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let result = buffer.withUnsafeMutableBytes { Syscall.readPipe(fd, into: $0) }
            guard case .done(let count) = result else { return numbers }
            numbers.append(contentsOf: buffer[..<count].map { Int32($0) })
        }
    }
}
