// Loop-confined types check their queue in debug builds (issue 19 §4): a call from another thread stops the
// process at once instead of racing. Exit tests, since the check traps.
import Dispatch
import Testing
import Transport

@Suite("Loop confinement")
struct LoopConfinementTests {
    #if DEBUG
    @Test("a connection written from off its loop stops a debug build")
    func offLoopWriteTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = EventLoop(index: 0)
            let connection = Connection(fd: -1, loop: loop, peerAddress: "test")
            _ = connection.write([1])
        }
    }

    @Test("a connection closed from off its loop stops a debug build")
    func offLoopCloseTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = EventLoop(index: 0)
            Connection(fd: -1, loop: loop, peerAddress: "test").close()
        }
    }
    #endif

    @Test("on its loop, the same calls run")
    func onLoopRuns() {
        let loop = EventLoop(index: 0)
        let connection = Connection(fd: -1, loop: loop, peerAddress: "test")
        loop.queue.sync {
            loop.assertOnLoop()
            connection.close()
        }
        #expect(loop.queue.sync { connection.pendingByteCount } == 0)
    }
}
