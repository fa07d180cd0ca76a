import Foundation
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// A client that does not read costs the relay a bounded number of bytes: above the high-water mark the curl
/// transfer is paused (the pause reaches the provider's TCP window), and resumed below the low-water mark,
/// losing and duplicating nothing.
@Suite("Backpressure")
struct BackpressureTests {
    @Test("a slow reader pauses the upstream; memory stays bounded; every byte arrives in order")
    func slowReader() throws {
        let blockSize = 64 * 1024
        let blocks = 1024   // 64 MiB: far more than the loopback socket buffers can hold on the way
        let finishedWriting = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/octet-stream"),
                                                            ("Content-Length", "\(blockSize * blocks)")])
            for i in 0..<blocks {
                try connection.write(Self.block(i, size: blockSize), timeout: 30)
            }
            finishedWriting.signal()
        }
        let highWater = 64 * 1024
        let relay = try RelayFixture(upstream: upstream) { config in
            config.buffers.highWaterBytes = highWater
            config.buffers.lowWaterBytes = 16 * 1024
        }
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/big")
        let head = try client.readHead()
        #expect(head.status == 200)
        // The client reads nothing for a while: the upstream cannot finish, because the relay stopped taking
        // its bytes. (If the relay queued without bound, all 64 MiB would be written at once.)
        #expect(throws: HarnessError.timeout) { try finishedWriting.wait(timeout: 1.0) }
        let pendingWhileStalled = relay.server.maxPendingBytesObserved()
        // One curl delivery (at most 16 KiB plus framing) may land on top of the high-water mark, no more.
        #expect(pendingWhileStalled <= highWater + 17 * 1024, "pending \(pendingWhileStalled) bytes")
        // Now read it all: byte-exact, in order, and the upstream finishes.
        let body = try client.readBody(head: head, timeout: 60)
        #expect(body.count == blockSize * blocks)
        var mismatches = 0
        for i in 0..<blocks where Array(body[(i * blockSize)..<((i + 1) * blockSize)]) != Self.block(i, size: blockSize) {
            mismatches += 1
        }
        #expect(mismatches == 0)
        try finishedWriting.wait(timeout: 5)
        #expect(relay.server.maxPendingBytesObserved() <= highWater + 17 * 1024)
    }

    static func block(_ index: Int, size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        var x = UInt32(truncatingIfNeeded: index &* 2_654_435_761 &+ 1)
        for j in 0..<size {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5
            bytes[j] = UInt8(truncatingIfNeeded: x)
        }
        return bytes
    }
}

/// Answers the relay writes on its own (built-in endpoints, rejections) are produced without an upstream, so no
/// paused transfer holds them back: a client that pipelines requests and reads none of the answers must still
/// cost a bounded number of bytes.
@Suite("Backpressure on the relay's own answers")
struct OwnAnswerBackpressureTests {
    /// HEAD: an answer without a body is counted too.
    @Test("pipelined requests whose answers are never read: memory stays bounded, the connection is closed",
          arguments: ["GET", "HEAD"])
    func pipelinedWithoutReading(method: String) throws {
        let highWater = 16 * 1024
        let relay = try RelayFixture(upstream: nil, baseURL: "http://127.0.0.1:9") { config in
            config.buffers.highWaterBytes = highWater
            config.buffers.lowWaterBytes = 4 * 1024
        }
        let client = try TestClient(port: relay.port, timeout: 30)
        // 8 MiB of requests make about 24 MiB of answers: far more than the loopback socket buffers hold.
        let request = Array("\(method) /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let flood = [[UInt8]](repeating: request, count: 8 * 1024 * 1024 / request.count).flatMap { $0 }
        do { try client.send(flood) } catch {}   // refused part-way: the relay closed the connection
        // Either the relay closed the connection, or its unread answers pile up beyond any bound.
        let bound = highWater + 128 * 1024
        try eventually("closed or over the bound") {
            relay.server.liveCounts().connections == 0 || relay.server.maxPendingBytesObserved() > bound
        }
        #expect(relay.server.maxPendingBytesObserved() <= bound, "\(relay.server.debugConnections())")
    }
}
