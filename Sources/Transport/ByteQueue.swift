/// Bytes waiting to be written, consumed from the front with a head index (removeFirst would be O(n)).
/// Owned by whoever owns the connection; not thread-safe by itself.
public struct ByteQueue {
    private var storage: [UInt8] = []
    private var head = 0

    public init() {}

    public var count: Int { storage.count - head }
    /// Bytes of storage held, used or not (tests).
    public var capacity: Int { storage.capacity }
    public var isEmpty: Bool { head == storage.count }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if head > 0 && head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Drained, the storage is freed: most connections queue bytes once (a response head held for its first
    /// chunk) and then write straight through for the rest of their life, so a kept buffer was about 700 bytes
    /// of every running stream's memory (massif, 500 streams). A reader that falls behind again allocates again.
    public mutating func consume(_ n: Int) {
        head += n
        if head == storage.count {
            storage = []
            head = 0
        } else if head >= 64 * 1024 && head * 2 >= storage.count {
            storage.removeSubrange(0..<head)
            head = 0
        }
    }

    public func withReadableBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[head...]))
        }
    }
}
