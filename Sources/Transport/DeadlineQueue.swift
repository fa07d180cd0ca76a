import Support

/// A min-heap of deadlines. Pure: no timers and no clock; the event loop asks it what is due at `now`.
/// Entries are never removed early: a cancelled timer is skipped when it comes due (lazy deletion keeps both
/// push and cancel cheap for thousands of streams that each re-arm an idle timeout).
public struct DeadlineQueue<Element> {
    private var heap: [(deadline: Instant, sequence: UInt64, element: Element)] = []
    private var nextSequence: UInt64 = 0

    public init() {}

    public var count: Int { heap.count }
    public var nextDeadline: Instant? { heap.first?.deadline }

    public mutating func push(_ element: Element, at deadline: Instant) {
        heap.append((deadline, nextSequence, element))
        nextSequence &+= 1
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.less(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns every element due at `now`, earliest first (ties in push order).
    public mutating func popDue(at now: Instant) -> [Element] {
        var due: [Element] = []
        while let first = heap.first, first.deadline <= now {
            due.append(first.element)
            removeFirst()
        }
        return due
    }

    private mutating func removeFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && Self.less(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count && Self.less(heap[right], heap[smallest]) { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    private static func less(_ a: (deadline: Instant, sequence: UInt64, element: Element),
                             _ b: (deadline: Instant, sequence: UInt64, element: Element)) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
    }
}
