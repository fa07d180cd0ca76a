/// Bytes waiting to be written, consumed from the front with a head index (removeFirst would be O(n)).
/// Owned by whoever owns the connection; not thread-safe by itself.
package struct ByteQueue {
    private var storage: [UInt8] = []
    private var head = 0

    package init() {}

    package var count: Int { storage.count - head }
    package var isEmpty: Bool { head == storage.count }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if head > 0 && head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        }
        storage.append(contentsOf: bytes)
    }

    package mutating func consume(_ n: Int) {
        head += n
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= 64 * 1024)
            head = 0
        } else if head >= 64 * 1024 && head * 2 >= storage.count {
            storage.removeSubrange(0..<head)
            head = 0
        }
    }

    package func withReadableBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[head...]))
        }
    }
}
