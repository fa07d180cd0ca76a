// FailoverCall between a fake exchange and a fake driver, on a real loop with a manual clock: what the exchange
// hears of held-back answers, retries, a slow client and a cancel.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Support
import Testing
import Transport
import Upstream

@Suite struct FailoverCallTests {
    /// The exchange side: records what it hears, and refuses body bytes while `refusing`.
    final class Recorder: TransferDelegate, @unchecked Sendable {
        // Invariant: touched on the loop's queue only.
        enum Event: Equatable { case head(Int, retryAfter: String?), body([UInt8]), complete(Bool) }
        var events: [Event] = []
        var refusing = false
        func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) {
            events.append(.head(status, retryAfter: headers.first("Retry-After")))
        }
        func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
            if refusing { return false }
            events.append(.body(Array(bytes)))
            return true
        }
        func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
            if case .success = result { events.append(.complete(true)) } else { events.append(.complete(false)) }
        }
    }

    final class Harness: @unchecked Sendable {
        // Invariant: everything but `clock` is touched inside `run` (on the loop) only.
        let clock = ManualClock()
        let loop: EventLoop
        let driver = FakeUpstreamClient()
        let recorder = Recorder()
        let pools: UpstreamPools
        var call: (any UpstreamCall)!

        init(keys: [String] = ["sk-a", "sk-b"], upstreams: Int = 1) {
            loop = EventLoop(index: 0, clock: clock)
            var configured: [String: RelayConfiguration.Upstream] = [:]
            var targets: [FailoverClient.Target] = []
            for u in 0..<upstreams {
                let name = "u\(u)"
                var upstream = RelayConfiguration.Upstream(name: name, baseURL: "http://\(name).invalid", key: nil)
                upstream.keys = keys.enumerated().map { .init(label: String($0.offset), secret: Secret($0.element + "-\(u)")) }
                configured[name] = upstream
                targets.append(.init(name: name, url: "http://\(name).invalid/v1/chat/completions", headers: HTTPHeaders([("X-Fixed", "1")]),
                                     keyHeader: "Authorization", keyPrefix: "Bearer ", keys: upstream.keys, httpVersion: .http1_1,
                                     caFile: nil, idleConnectionSeconds: 30, keyDisabledSeconds: 600))
            }
            pools = UpstreamPools(upstreams: configured, redis: nil, logger: Logger(label: "test", level: .error, sink: MemoryLogSink()),
                                  clock: clock, wallClock: { 1_000_000 })
            let client = FailoverClient(targets: targets, pools: pools, driver: driver, loop: loop, requestID: "r", maxAttempts: 3,
                                        firstByteSeconds: 120, wallClock: { 1_000_000 })
            run {
                call = client.call(UpstreamRequest(url: "http://ignored.invalid", method: "POST", headers: HTTPHeaders(),
                                                   body: Array("{\"model\":\"m\"}".utf8), connectTimeoutSeconds: 1, idleConnectionSeconds: 30),
                                   delegate: recorder)
            }
        }

        func run<R>(_ step: () throws -> R) rethrows -> R { try loop.queue.sync { try step() } }
        func attempt(_ i: Int) -> FakeUpstreamClient.Call { driver.calls[i] }
    }

    @Test("a held 429 is never heard; the retry is the same request with the next key")
    func heldAndRetried() {
        let h = Harness()
        h.run {
            let first = h.attempt(0)
            first.head(429, [("Retry-After", "2"), ("Content-Type", "application/json")])
            first.body("{\"error\":{}}")
            #expect(h.recorder.events.isEmpty)
            first.complete()
            #expect(h.driver.calls.count == 2)
            let second = h.attempt(1)
            #expect(first.request.body == second.request.body && first.request.url == second.request.url)
            #expect(first.request.headers.first("Authorization") == "Bearer sk-a-0")
            #expect(second.request.headers.first("Authorization") == "Bearer sk-b-0")
            #expect(Array(first.request.headers).filter { $0.name != "Authorization" } == Array(second.request.headers).filter { $0.name != "Authorization" })
            second.head(200)
            second.body("data: x\n\n")
            second.complete()
            #expect(h.recorder.events == [.head(200, retryAfter: nil), .body(Array("data: x\n\n".utf8)), .complete(true)])
        }
    }

    @Test("the last held answer reaches a slow client whole, once, and ends only after its bytes")
    func slowClientGetsTheHeldAnswer() {
        let h = Harness(keys: ["sk-a"], upstreams: 1)
        h.run {
            let only = h.attempt(0)
            only.head(503, [("Retry-After", "4"), ("Content-Type", "application/json")])
            only.body("{\"error\":")
            only.body("{}}")
            h.recorder.refusing = true
            only.complete()
            #expect(h.recorder.events == [.head(503, retryAfter: "4")])
            h.recorder.refusing = false
            h.call.resumeReceiving()
            #expect(h.recorder.events == [.head(503, retryAfter: "4"), .body(Array("{\"error\":{}}".utf8)), .complete(true)])
            h.call.resumeReceiving()
            #expect(h.recorder.events.count == 3)
        }
    }

    @Test("a cancel while an answer is held: nothing heard, no new call")
    func cancelWhileHeld() {
        let h = Harness()
        h.run {
            let first = h.attempt(0)
            first.head(429, [("Content-Type", "application/json")])
            h.call.cancel()
            #expect(first.cancelled == 1)
            first.complete()
            #expect(h.driver.calls.count == 1)
            #expect(h.recorder.events.isEmpty)
        }
    }

    @Test("a connect failure on the first upstream: the second is called; a reset is not retried")
    func unreachableThenReset() {
        let h = Harness(keys: ["sk-a"], upstreams: 2)
        h.run {
            h.attempt(0).complete(.failure(.connectFailed("refused")))
            #expect(h.driver.calls.count == 2)
            #expect(h.attempt(1).request.url.hasPrefix("http://u1.invalid"))
            h.attempt(1).complete(.failure(.connectionReset("reset")))
            #expect(h.driver.calls.count == 2)
            #expect(h.recorder.events == [.complete(false)])
        }
    }
}
