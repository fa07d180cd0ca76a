#if DEBUG
import Foundation

/// Debug builds only: counts the parses of bodies that carry a marker, so a test can show a request's body is read
/// once (issue 19) while other tests parse their own bodies in parallel. Release builds have no hook at all.
public enum JSONParseCount {
    private static let counters = Counters()

    /// The markers being counted. Not `Mutex` (macOS 15; the package's floor is macOS 13), and the JSON target
    /// links no `Support`.
    private final class Counters: @unchecked Sendable {
        // Invariant for `@unchecked Sendable`: `list` is read and written only while `lock` is held.
        private let lock = NSLock()
        private var list: [(marker: [UInt8], parses: Int)] = []

        func withLock<R>(_ body: (inout [(marker: [UInt8], parses: Int)]) -> R) -> R {
            lock.lock()
            defer { lock.unlock() }
            return body(&list)
        }
    }

    /// Runs `body` and returns how many times a buffer containing `marker` was parsed meanwhile.
    public static func counting<R>(marker: String, _ body: () throws -> R) rethrows -> (result: R, parses: Int) {
        let marker = Array(marker.utf8)
        counters.withLock { $0.append((marker, 0)) }
        let result = try body()
        let parses = counters.withLock { list in
            let i = list.lastIndex { $0.marker == marker }!
            return list.remove(at: i).parses
        }
        return (result, parses)
    }

    /// One parse of `bytes`: `JSONDocument` calls this first.
    static func note(_ bytes: [UInt8]) {
        counters.withLock { list in
            for i in list.indices where contains(bytes, list[i].marker) { list[i].parses += 1 }
        }
    }

    private static func contains(_ bytes: [UInt8], _ marker: [UInt8]) -> Bool {
        guard !marker.isEmpty, bytes.count >= marker.count else { return false }
        for start in 0...(bytes.count - marker.count) where bytes[start..<(start + marker.count)].elementsEqual(marker) {
            return true
        }
        return false
    }
}
#endif
