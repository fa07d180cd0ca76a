// The driver's delegate contract: a cancelled transfer never calls `didComplete`, not even one whose failure
// was decided before curl saw it (shut-down driver) and is delivered on a later turn.
import HTTP1
import Support
import Testing
import Transport
import Upstream

@Suite("Curl driver")
struct CurlDriverTests {
    /// Touched on the loop's queue only (the test reads it through `queue.sync`).
    final class Recorder: TransferDelegate, @unchecked Sendable {
        var completions: [String] = []
        func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) { completions.append("head") }
        func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool { true }
        func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
            switch result {
            case .success: completions.append("success")
            case .failure(let failure): completions.append(failure.summary)
            }
        }
    }

    @Test("a transfer cancelled before its deferred failure is delivered never completes")
    func cancelBeforeDeferredFailure() throws {
        let loop = EventLoop(index: 0)
        let driver = CurlDriver(loop: loop)
        let cancelled = Recorder(), kept = Recorder()
        let request = UpstreamRequest(url: "http://127.0.0.1:9/v1/x", method: "POST", headers: HTTPHeaders(), body: [1, 2])
        loop.queue.sync {
            driver.shutdown()
            driver.start(request, delegate: cancelled).cancel()
            _ = driver.start(request, delegate: kept)
            #expect(driver.activeTransferCount == 0)
        }
        // Both deferred failures were queued by the block above: the next turn has run them.
        loop.queue.sync {
            #expect(cancelled.completions == [])
            #expect(kept.completions == ["upstream transfer failed: relay shutting down"])
        }
    }
}
