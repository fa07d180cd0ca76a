import Foundation

extension Process {
    /// Waits until the process has exited, without a run loop. Foundation's `waitUntilExit` (on Linux) runs the
    /// calling thread's run loop, creating one; swift-testing calls from Dispatch's pool threads, and when such a
    /// thread exits, Foundation finalizes that run loop in a thread-specific-data destructor that runs after
    /// ThreadSanitizer has let go of the thread: its allocation there crashed the sanitizer's runtime in three test
    /// runs of thirteen (SIGSEGV under `__CFFinalizeRunLoop`, caught under gdb). Foundation's own process thread
    /// clears `isRunning` when it reaps the child, so this polls that, every millisecond.
    package func waitForExit() {
        while isRunning { Thread.sleep(forTimeInterval: 0.001) }
    }
}
