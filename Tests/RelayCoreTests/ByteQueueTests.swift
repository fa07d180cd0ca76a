// The queue of bytes a connection could not write yet: first in, first out, and no memory kept once drained
// (issue 24: a kept buffer was about 700 bytes of every running stream).
import Testing
import Transport

@Suite struct ByteQueueTests {
    private static func contents(_ queue: ByteQueue) -> [UInt8] {
        queue.withReadableBytes { Array($0) }
    }

    @Test func bytesLeaveInOrderAndADrainedQueueHoldsNoStorage() {
        var queue = ByteQueue()
        let head = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
        let chunk = Array("6\r\nhello\n\r\n".utf8)
        head.withUnsafeBytes { queue.append($0) }
        chunk.withUnsafeBytes { queue.append($0) }
        #expect(queue.count == head.count + chunk.count)
        queue.consume(5)
        #expect(Self.contents(queue) == Array((head + chunk)[5...]))
        #expect(queue.capacity >= queue.count)
        queue.consume(queue.count)
        #expect(queue.isEmpty)
        #expect(queue.capacity == 0, "a drained queue still holds \(queue.capacity) bytes")
        chunk.withUnsafeBytes { queue.append($0) }
        #expect(Self.contents(queue) == chunk)
    }
}
