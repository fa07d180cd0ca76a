internal import COpenSSL
import Support

/// App Attest public keys as OpenSSL objects, kept for the next assertion of the same key. Building one from its
/// X9.62 bytes (decoding the point and checking that it lies on P-256) was 57 000 of the 956 000 instructions of an
/// asserted request (callgrind, `relay-bench attest`), and an app instance signs request after request with one
/// key. A key is looked up by its exact bytes, so a kept object is the one those bytes would build again.
///
/// At most `capacity` keys (about 1 KB of OpenSSL memory each): when full, the older half goes, first in first
/// out. The cache's state is behind its lock; keys are built outside it. A key verifies on several threads at
/// once (OpenSSL 3 guards a key's own caches) and is freed when its last user lets go.
package final class P256KeyCache: Sendable {
    /// One built key. @unchecked Sendable invariant: `pointer` is set once, never exposed outside this module,
    /// and freed only in deinit, when no caller holds the key any more.
    final class Key: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { cossl_key_free(pointer) }
    }

    private struct State {
        var keys: [[UInt8]: Key] = [:]
        var order: [[UInt8]] = []
        var builds = 0
    }

    package let capacity: Int
    private let state = Locked(State())

    /// The process's cache, used by `AppAttestVerifier`.
    package static let shared = P256KeyCache(capacity: 1024)

    package init(capacity: Int) {
        self.capacity = max(2, capacity)
    }

    /// How many keys were built from their bytes so far (tests).
    package var builds: Int { state.withLock { $0.builds } }
    /// How many keys are kept now (tests).
    package var count: Int { state.withLock { $0.keys.count } }

    /// The key for an X9.62 uncompressed point (65 bytes, 04 ‖ x ‖ y); nil when it is not a point on P-256 (not
    /// kept: a valid key is what a registration stored).
    func key(x962 bytes: [UInt8]) -> Key? {
        if let kept = state.withLock({ $0.keys[bytes] }) { return kept }
        guard bytes.count == 65, bytes[0] == 0x04 else { return nil }
        let x = Array(bytes[1..<33])
        let y = Array(bytes[33..<65])
        guard let pointer = cossl_p256_public_key(x, y) else { return nil }
        let built = Key(pointer)
        return state.withLock { s -> Key in
            s.builds += 1
            if let kept = s.keys[bytes] { return kept }   // built meanwhile on another thread: one object per key
            if s.keys.count >= capacity {
                let dropped = s.order.prefix(capacity / 2)
                for old in dropped { s.keys[old] = nil }
                s.order.removeFirst(dropped.count)
            }
            s.keys[bytes] = built
            s.order.append(bytes)
            return built
        }
    }
}
