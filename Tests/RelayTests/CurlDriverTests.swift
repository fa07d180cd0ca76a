// The driver's delegate contract: a cancelled transfer never calls `didComplete`, not even one whose failure
// was decided before curl saw it (shut-down driver) and is delivered on a later turn.
import HTTP1
import Support
import TestHarness
import Testing
import Transport
@testable import Upstream

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

    /// A driver its owner let go of lives on until it is shut down (`CurlDriver.heldUntilShutdown`: its shards and
    /// curl's callbacks reach it unowned); the shutdown cancels the shards' timers, whose actions hold the shard and
    /// the driver, and lets the driver go, and the shards with it.
    @Test("a driver lives until its shutdown; then it and its shards are freed")
    func freedAtShutdown() throws {
        let loop = EventLoop(index: 0)
        weak var shard: CurlShard?
        weak var held: CurlDriver?
        var made = 0
        do {
            let driver = CurlDriver(loop: loop)
            held = driver
            loop.queue.sync {
                made = driver.shards.count
                shard = driver.shards.first
            }
        }
        #expect(made == 1)
        #expect(held != nil && shard != nil, "the driver holds itself and its shards until the shutdown")
        loop.queue.sync { held?.shutdown() }
        // Whatever the shutdown left to the loop's queue has run after a few turns: each `sync` is one.
        var turns = 0
        while (shard != nil || held != nil) && turns < 100_000 {
            loop.queue.sync {}
            turns += 1
        }
        #expect(shard == nil, "the shard is still alive after \(turns) turns of its queue")
        #expect(held == nil, "the driver is still alive after \(turns) turns of its queue")
    }

    /// What one transfer's delegate heard, readable from the test thread while the loop writes it.
    final class Heard: TransferDelegate, Sendable {
        struct Log: Sendable {
            var status = 0
            var body: [UInt8] = []
            var completions: [String] = []
        }
        let log = HarnessMonitor(Log())
        func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) {
            log.withLock { $0.status = status }
        }
        func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            log.withLock { $0.body += bytes }
            return true
        }
        func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
            log.withLock { log in
                switch result {
                case .success: log.completions.append("success")
                case .failure(let failure): log.completions.append(failure.summary)
                }
            }
        }
    }

    /// Handles are reused (`curl_easy_reset`), so every option one request set must be gone for the next: a
    /// method, a body and its length, header lines, and the user-data pointers of the callbacks (a stale
    /// WRITEDATA would hand the next response to the previous transfer's delegate).
    @Test("a reused easy handle carries nothing from the request before it")
    func reusedHandleStartsClean() throws {
        let upstream = try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 10) {
                try connection.writeHead(status: 200, headers: [("Content-Length", "2")])
                if request.method != "HEAD" { try connection.write("ok") }
            }
        }
        defer { upstream.shutdown() }
        let loop = EventLoop(index: 0)
        let driver = CurlDriver(loop: loop)
        defer { loop.queue.sync { driver.shutdown() } }
        var heard: [Heard] = []
        var handles: [Int] = []
        func run(_ request: UpstreamRequest) throws {
            let delegate = Heard()
            heard.append(delegate)
            handles.append(loop.queue.sync { Int(bitPattern: driver.start(request, delegate: delegate).easy) })
            try delegate.log.wait(timeout: 10) { $0.completions.isEmpty ? nil : true }
        }
        let secretHeaders = HTTPHeaders([("X-Secret", "first-only"), ("Idempotency-Key", "k1"), ("Content-Type", "text/plain")])
        try run(UpstreamRequest(url: upstream.baseURL + "/first", method: "PUT", headers: secretHeaders,
                                body: Array("secret-body".utf8)))
        try run(UpstreamRequest(url: upstream.baseURL + "/second", method: "GET", headers: HTTPHeaders()))
        try run(UpstreamRequest(url: upstream.baseURL + "/third", method: "HEAD", headers: HTTPHeaders()))
        try run(UpstreamRequest(url: upstream.baseURL + "/fourth", method: "GET", headers: HTTPHeaders()))

        #expect(Set(handles).count == 1, "every request after the first ran on the first one's recycled handle")
        let requests = upstream.requests
        #expect(requests.map(\.method) == ["PUT", "GET", "HEAD", "GET"])
        #expect(requests.map(\.target) == ["/first", "/second", "/third", "/fourth"])
        #expect(requests.first?.body == Array("secret-body".utf8))
        for request in requests.dropFirst() {
            #expect(request.body.isEmpty)
            let names = request.headers.map { $0.name.lowercased() }
            for leaked in ["x-secret", "idempotency-key", "content-length", "content-type", "transfer-encoding"] {
                #expect(!names.contains(leaked), "\(request.method) \(request.target) carried \(leaked)")
            }
        }
        let logs = heard.map { $0.log.withLock { $0 } }
        #expect(logs.map(\.completions) == [["success"], ["success"], ["success"], ["success"]])
        #expect(logs.map(\.status) == [200, 200, 200, 200])
        #expect(logs.map { String(decoding: $0.body, as: UTF8.self) } == ["ok", "ok", "", "ok"])
    }
}
