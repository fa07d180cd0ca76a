import Support

/// A min-heap of deadlines. Pure: no timers and no clock; the event loop asks it what is due at `now`.
/// An entry can be removed before it is due (`remove(at:)`), in O(log n): the queue tells each element where it
/// moves (`moved`), so its owner can find it again. A cancelled timer therefore frees its entry at once: memory
/// follows the timers that are armed, never the requests that came and went (issue 19: lazy deletion once kept
/// every cancelled timer until its deadline, about 76 bytes a request for up to the longest timeout).
public struct DeadlineQueue<Element> {
    private var heap: [(deadline: Instant, sequence: UInt64, element: Element)] = []
    private var nextSequence: UInt64 = 0
    /// Told an element's new index after every move, and -1 when it leaves the queue.
    private let moved: ((Element, Int) -> Void)?

    public init(moved: ((Element, Int) -> Void)? = nil) {
        self.moved = moved
    }

    public var count: Int { heap.count }
    public var nextDeadline: Instant? { heap.first?.deadline }

    public mutating func push(_ element: Element, at deadline: Instant) {
        heap.append((deadline, nextSequence, element))
        nextSequence &+= 1
        moved?(element, heap.count - 1)
        siftUp(heap.count - 1)
    }

    /// Removes and returns every element due at `now`, earliest first (ties in push order).
    public mutating func popDue(at now: Instant) -> [Element] {
        var due: [Element] = []
        while let first = heap.first, first.deadline <= now {
            due.append(remove(at: 0))
        }
        return due
    }

    /// Removes the element at `index` (as last reported by `moved`).
    @discardableResult
    public mutating func remove(at index: Int) -> Element {
        let removed = heap[index].element
        let last = heap.removeLast()
        if index < heap.count {
            heap[index] = last
            moved?(last.element, index)
            siftDown(siftUp(index))
        }
        moved?(removed, -1)
        return removed
    }

    @discardableResult
    private mutating func siftUp(_ start: Int) -> Int {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.less(heap[child], heap[parent]) else { break }
            swap(child, parent)
            child = parent
        }
        return child
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && Self.less(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count && Self.less(heap[right], heap[smallest]) { smallest = right }
            if smallest == parent { return }
            swap(parent, smallest)
            parent = smallest
        }
    }

    private mutating func swap(_ i: Int, _ j: Int) {
        heap.swapAt(i, j)
        moved?(heap[i].element, i)
        moved?(heap[j].element, j)
    }

    private static func less(_ a: (deadline: Instant, sequence: UInt64, element: Element),
                             _ b: (deadline: Instant, sequence: UInt64, element: Element)) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
    }
}
