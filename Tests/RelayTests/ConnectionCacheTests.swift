// The driver's estimate of curl's connection cache (`ConnectionCacheEstimate`): a new HTTP/1.1 transfer connects
// afresh only when no connection to its origin can be idle, and reuses one otherwise.
import HTTP1
import Support
import TestHarness
import Testing
import Transport
import Foundation
@testable import Upstream

@Suite("Connection cache estimate")
struct ConnectionCacheTests {
    @Test func countsSocketsAndRunningTransfersPerOrigin() {
        var cache = ConnectionCacheEstimate()
        let a = cache.id(of: "http://a:1"), b = cache.id(of: "http://b:1")
        #expect(cache.id(of: "http://a:1") == a && a != b, "one number per origin")
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
        // A second shard: its counts start at zero, the origin's totals span both.
        let fourth = cache.starting(a, shard: 1)
        #expect(fourth && cache.idle(a, shard: 1) == -1 && cache.connections(inShard: 1) == 1)
        cache.opened(12, origin: a, shard: 1)
        cache.ended(a, shard: 1)
        #expect(cache.idle(a, shard: 1) == 1 && cache.openSockets(a) == 2 && cache.connections(inShard: 0) == 3)
    }

    /// The origin a transfer's connections are counted under: scheme, host and port, found on the URL's bytes.
    @Test(arguments: [("http://127.0.0.1:8080/v1/chat?x=1", "http://127.0.0.1:8080"), ("https://api.example.com/v1", "https://api.example.com"),
                      ("https://h:1", "https://h:1"), ("no-scheme/path", "no-scheme/path"), ("a:b://h/p", "a:b://h")])
    func originOfAURL(_ url: String, _ origin: String) {
        let loop = EventLoop(index: 0)
        let driver = CurlDriver(loop: loop)
        let found = loop.queue.sync {
            let transfer = Transfer(driver: driver, request: UpstreamRequest(url: url, method: "GET", headers: HTTPHeaders()),
                                    delegate: CurlDriverTests.Heard())
            defer { transfer.cleanup() }
            return String(transfer.origin)
        }
        #expect(found == origin)
        loop.queue.sync { driver.shutdown() }
    }

    /// A scripted upstream whose answers end only when the test lets them (the transfers overlap as long as it
    /// needs), and a driver on its own loop.
    final class Rig: Sendable {
        /// Requests whose answers may end, by target.
        let release = HarnessMonitor(Set<String>())
        let upstream: ScriptedUpstream
        let loop = EventLoop(index: 0)
        let driver: CurlDriver
        var origin: Substring { Substring(upstream.baseURL) }

        init(connectionsPerShard: Int = 256) throws {
            let release = self.release
            upstream = try ScriptedUpstream { connection in
                while let request = try? connection.readRequest(timeout: 10) {
                    try connection.writeHead(status: 200, headers: [("Content-Type", "text/event-stream"),
                                                                    ("Transfer-Encoding", "chunked")])
                    try connection.writeChunk("data: \(request.target)\n\n")
                    try release.wait(timeout: 10) { $0.contains(request.target) ? true : nil }
                    try connection.writeLastChunk()
                }
            }
            driver = CurlDriver(loop: loop, connectionsPerShard: connectionsPerShard)
        }

        func stop() {
            loop.queue.sync { driver.shutdown() }
            upstream.shutdown()
        }

        /// Starts `n` streams in one turn of the loop and waits for every answer's head.
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

        /// Lets the answers end; every transfer completes.
        func finish(_ started: [(CurlDriverTests.Heard, Transfer)]) throws {
            let targets = started.map { String($0.1.request.url.dropFirst(upstream.baseURL.count)) }
            release.withLock { $0.formUnion(targets) }
            for (heard, _) in started {
                let done = try heard.log.wait(timeout: 10) { $0.completions.isEmpty ? nil : $0.completions }
                #expect(done == ["success"])
                #expect(heard.log.withLock { $0.body }.starts(with: Array("data: /".utf8)))
            }
        }

        /// (sockets open, connections maybe idle, transfers told to connect afresh, shards).
        var counts: (Int, Int, Int, Int) {
            loop.queue.sync { (driver.openSockets(to: origin), driver.idleConnections(to: origin), driver.freshStarts, driver.shardCount) }
        }
    }

    /// Three streams at once open three connections; the next three reuse them (none is opened afresh while one
    /// is idle), a fourth at once opens a fourth; a transfer cancelled mid-answer has its connection closed, and
    /// the driver counts every socket curl opens and closes.
    @Test func freshConnectionsOnlyWhenNoneIsIdle() throws {
        let rig = try Rig()
        defer { rig.stop() }
        try rig.finish(try rig.start(3, round: "one"))
        #expect(rig.upstream.acceptedConnections == 3)
        #expect(rig.counts == (3, 3, 3, 1), "nothing to reuse at first")

        let second = try rig.start(3, round: "two")
        #expect(rig.upstream.acceptedConnections == 3, "three idle connections served three new streams")
        #expect(rig.counts == (3, 0, 3, 1), "curl looked for the idle ones")
        let fourth = try rig.start(1, round: "three")
        #expect(rig.upstream.acceptedConnections == 4, "none idle: a new connection")
        #expect(rig.counts == (4, 0, 4, 1), "and curl was spared the look")

        // A transfer cancelled before its answer ended: curl closes its connection, through the driver.
        rig.loop.queue.sync { fourth[0].1.cancel() }
        rig.release.withLock { _ = $0.insert("/three/0") }   // its script ends writing into the closed connection
        #expect(rig.counts == (3, 0, 4, 1))
        try rig.finish(second)
        #expect(rig.counts == (3, 3, 4, 1))
        let requests = rig.upstream.requests.map(\.target).sorted()
        #expect(requests == ["/one/0", "/one/1", "/one/2", "/three/0", "/two/0", "/two/1", "/two/2"])
    }

    /// Two connections a shard: five streams at once spread over three multi handles, each answer whole; the next
    /// five find their idle connections in whichever shard holds them; a cancel in a later shard closes its
    /// connection; shutting down frees every shard.
    @Test func connectionsSpreadOverShards() throws {
        let rig = try Rig(connectionsPerShard: 2)
        defer { rig.stop() }
        try rig.finish(try rig.start(5, round: "one"))
        #expect(rig.upstream.acceptedConnections == 5)
        #expect(rig.counts == (5, 5, 5, 3))
        let second = try rig.start(5, round: "two")
        #expect(rig.upstream.acceptedConnections == 5, "every idle connection was found in its shard")
        #expect(rig.counts == (5, 0, 5, 3))
        let sixth = try rig.start(1, round: "three")
        #expect(rig.counts == (6, 0, 6, 3), "a shard with room (the third holds one) takes the new connection")
        rig.loop.queue.sync { sixth[0].1.cancel() }
        rig.release.withLock { _ = $0.insert("/three/0") }
        #expect(rig.counts == (5, 0, 6, 3))
        try rig.finish(second)
        #expect(rig.counts == (5, 5, 6, 3))
    }

    /// Over TLS, one connection a shard: a request is answered on the first shard's connection; then two held at
    /// once, one reusing that connection, the other opening one in a second shard, which resumes the first one's
    /// TLS session (the session cache is the driver's, not a shard's).
    @Test func aNewShardResumesTheTLSSession() throws {
        let upstream = try TLSUpstream()
        defer { upstream.shutdown() }
        let loop = EventLoop(index: 0)
        let driver = CurlDriver(loop: loop, connectionsPerShard: 1)
        defer { loop.queue.sync { driver.shutdown() } }
        func request(_ path: String) -> UpstreamRequest {
            var request = UpstreamRequest(url: upstream.baseURL + path, method: "GET", headers: HTTPHeaders())
            request.caFile = upstream.caFile
            return request
        }
        let first = CurlDriverTests.Heard()
        _ = loop.queue.sync { driver.start(request("/v1/first"), delegate: first) }
        #expect(try first.log.wait(timeout: 10) { $0.completions.isEmpty ? nil : $0.completions } == ["success"])
        let held = [CurlDriverTests.Heard(), CurlDriverTests.Heard()]
        let transfers = loop.queue.sync { [driver.start(request("/v1/hold-1"), delegate: held[0]),
                                           driver.start(request("/v1/hold-2"), delegate: held[1])] }
        for path in ["/v1/hold-1", "/v1/hold-2"] {
            _ = try upstream.waitFor(timeout: 10, "request for \(path)") { $0.kind == "request" && $0.detail == path }
        }
        let opens = upstream.allEvents.filter { $0.kind == "open" }
        #expect(opens.count == 2, "\(opens)")
        #expect(opens.last?.sessionResumed == true, "the second shard's connection made a full handshake: \(opens)")
        #expect(loop.queue.sync { driver.shardCount } == 2)
        loop.queue.sync { for transfer in transfers { transfer.cancel() } }
        #expect(loop.queue.sync { driver.openSockets(to: Substring(upstream.baseURL)) } == 0, "cancelled: both closed")
    }
}
