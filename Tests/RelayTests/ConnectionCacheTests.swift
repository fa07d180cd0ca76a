// The driver's estimate of curl's connection cache (`ConnectionCacheEstimate`): a new HTTP/1.1 transfer connects
// afresh only when no connection to its origin can be idle, and reuses one otherwise.
import HTTP1
import Support
import TestHarness
import Testing
import Transport
@testable import Upstream

@Suite("Connection cache estimate")
struct ConnectionCacheTests {
    @Test func countsSocketsAndRunningTransfersPerOrigin() {
        var cache = ConnectionCacheEstimate()
        let a: Substring = "http://a:1", b: Substring = "http://b:1"
        let first = cache.starting(a)
        #expect(first, "nothing open: connect afresh")
        cache.opened(10, origin: a)
        #expect(cache.idle(a) == 0)
        cache.ended(a)
        #expect(cache.idle(a) == 1, "the finished transfer left its connection")
        let second = cache.starting(a)
        #expect(!second, "an idle connection: let curl look for it")
        let other = cache.starting(b)
        #expect(other, "another origin has nothing idle")
        cache.opened(11, origin: b)
        let third = cache.starting(a)
        #expect(third, "the one idle connection of a is taken")
        cache.closed(10)
        #expect(cache.openSockets(a) == 0 && cache.idle(a) == -2)
        cache.closed(99)
        #expect(cache.openSockets(a) == 0 && cache.openSockets(b) == 1, "a socket not seen opening is ignored")
        cache.opened(11, origin: a)
        #expect(cache.openSockets(b) == 0 && cache.openSockets(a) == 1, "a number reused for another origin moves")
    }

    /// Three streams at once open three connections; the next three reuse them (none is opened afresh while one
    /// is idle), a fourth at once opens a fourth; a transfer cancelled mid-answer has its connection closed, and
    /// the driver counts every socket curl opens and closes.
    @Test func freshConnectionsOnlyWhenNoneIsIdle() throws {
        let release = HarnessMonitor(0)
        let upstream = try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 10) {
                try connection.writeHead(status: 200, headers: [("Content-Type", "text/event-stream"),
                                                                ("Transfer-Encoding", "chunked")])
                try connection.writeChunk("data: \(request.target)\n\n")
                // Each answer ends only when the test lets it: the transfers overlap for as long as it needs.
                try release.wait(timeout: 10) { count in count > 0 ? { count -= 1; return true }() : nil }
                try connection.writeLastChunk()
            }
        }
        defer { upstream.shutdown() }
        let loop = EventLoop(index: 0)
        let driver = CurlDriver(loop: loop)
        defer { loop.queue.sync { driver.shutdown() } }
        let origin = Substring(upstream.baseURL)

        func start(_ n: Int, round: String) throws -> [(CurlDriverTests.Heard, Transfer)] {
            let started = loop.queue.sync {
                (0..<n).map { i in
                    let heard = CurlDriverTests.Heard()
                    let request = UpstreamRequest(url: upstream.baseURL + "/\(round)/\(i)", method: "GET", headers: HTTPHeaders())
                    return (heard, driver.start(request, delegate: heard))
                }
            }
            for (heard, _) in started { try heard.log.wait(timeout: 10) { $0.status != 0 ? true : nil } }
            return started
        }
        func finish(_ started: [(CurlDriverTests.Heard, Transfer)]) throws {
            release.withLock { $0 += started.count }
            for (heard, _) in started {
                let done = try heard.log.wait(timeout: 10) { $0.completions.isEmpty ? nil : $0.completions }
                #expect(done == ["success"])
            }
        }

        try finish(try start(3, round: "one"))
        #expect(upstream.acceptedConnections == 3)
        #expect(loop.queue.sync { driver.freshStarts } == 3, "nothing to reuse at first")
        #expect(loop.queue.sync { (driver.openSockets(to: origin), driver.idleConnections(to: origin)) } == (3, 3))

        let second = try start(3, round: "two")
        #expect(upstream.acceptedConnections == 3, "three idle connections served three new streams")
        #expect(loop.queue.sync { driver.freshStarts } == 3, "curl looked for the idle ones")
        #expect(loop.queue.sync { driver.idleConnections(to: origin) } == 0)
        let fourth = try start(1, round: "three")
        #expect(upstream.acceptedConnections == 4, "none idle: a new connection")
        #expect(loop.queue.sync { driver.freshStarts } == 4, "and curl was spared the look")
        #expect(loop.queue.sync { driver.openSockets(to: origin) } == 4)

        // A transfer cancelled before its answer ended: curl closes its connection, through the driver.
        loop.queue.sync { fourth[0].1.cancel() }
        release.withLock { $0 += 1 }   // its script may finish writing into the closed connection
        #expect(loop.queue.sync { (driver.openSockets(to: origin), driver.idleConnections(to: origin)) } == (3, 0))
        try finish(second)
        #expect(loop.queue.sync { (driver.openSockets(to: origin), driver.idleConnections(to: origin)) } == (3, 3))
        let requests = upstream.requests.map(\.target).sorted()
        #expect(requests == ["/one/0", "/one/1", "/one/2", "/three/0", "/two/0", "/two/1", "/two/2"])
    }
}
