/// The body bytes a resumable stream has written (README, "Resumable streams"): exactly as written, heartbeats
/// included, without the chunked framing, so that "the bytes before offset N" plus "what a resume at N gets" is
/// the stream. A value: `ResumableStream` keeps it under its lock.
///
/// Bounded twice: a stream that writes more than `maxBytes` stops being resumable (its bytes are dropped and a
/// later resume gets 410); the registry caps all buffers together (`limits.resumeBufferBytes`).
package struct ReplayBuffer: Sendable, Equatable {
    package let maxBytes: Int
    /// Every byte from offset 0, while the stream is resumable; empty once it overflowed.
    private(set) var bytes: [UInt8] = []
    /// Body bytes written so far (the offset the next byte will have).
    package private(set) var written = 0
    /// The stream outgrew `maxBytes`: nothing is kept, no resume is answered but 410.
    package private(set) var overflowed = false

    package init(maxBytes: Int) { self.maxBytes = maxBytes }

    /// What a resume at an offset gets.
    package enum Position: Equatable, Sendable {
        /// Replay from this offset (every byte from it is kept).
        case replay(Int)
        /// Past what was written: 416.
        case beyondWritten
        /// Before what is still kept: 410.
        case expired
    }

    package func position(_ offset: Int) -> Position {
        if offset > written { return .beyondWritten }
        if overflowed { return .expired }
        return .replay(offset)
    }

    /// Notes bytes written; returns how many bytes the buffer's size changed by (negative when this append made it
    /// overflow and dropped what it held), for the registry's total.
    package mutating func append(_ more: UnsafeRawBufferPointer) -> Int {
        written += more.count
        if overflowed { return 0 }
        if bytes.count + more.count > maxBytes {
            let freed = bytes.count
            overflowed = true
            bytes = []
            return -freed
        }
        bytes.append(contentsOf: more)
        return more.count
    }

    /// Up to `limit` bytes from `offset` (empty when there is nothing new, or nothing kept).
    package func read(from offset: Int, limit: Int) -> ArraySlice<UInt8> {
        guard !overflowed, offset >= 0, offset < bytes.count else { return [] }
        return bytes[offset..<min(bytes.count, offset + limit)]
    }

    /// Nobody can read the stream any more: frees what is kept; returns how many bytes that was.
    package mutating func free() -> Int {
        let held = bytes.count
        bytes = []
        return held
    }

    /// Bytes held (what the registry's total counts).
    package var heldBytes: Int { bytes.count }
}
