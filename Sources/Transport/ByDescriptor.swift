/// Values by descriptor number, in an array indexed by the number: a lookup is a bounds check and a load, not a hash
/// (the poller looks up its entry once for every relayed event: hashing the number cost about 100 instructions).
/// Descriptor numbers are small and dense, since the kernel hands out the lowest free one, so the array is about as
/// long as the most descriptors the process had open at once (it grows by doubling and is not shrunk). A plain
/// value; its owner says which queue touches it.
struct ByDescriptor<Value> {
    private var slots: [Value?] = []
    /// Descriptors that have a value.
    private(set) var count = 0

    subscript(fd: Int32) -> Value? {
        get { fd >= 0 && Int(fd) < slots.count ? slots[Int(fd)] : nil }
        set {
            precondition(fd >= 0, "a descriptor number is never negative")
            let i = Int(fd)
            if i >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: max(i + 1, 2 * slots.count, 64) - slots.count))
            }
            switch (slots[i] == nil, newValue == nil) {
            case (true, false): count += 1
            case (false, true): count -= 1
            default: break
            }
            slots[i] = newValue
        }
    }

    @discardableResult
    mutating func removeValue(forKey fd: Int32) -> Value? {
        guard let old = self[fd] else { return nil }
        self[fd] = nil
        return old
    }

    mutating func removeAll() {
        slots.removeAll()
        count = 0
    }
}
