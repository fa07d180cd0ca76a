/// What the relay knows of curl's connection cache, per origin: whether a new HTTP/1.1 transfer can find an idle
/// connection there at all.
///
/// Why: libcurl 7.88 looks for a connection to reuse by walking every connection to the transfer's host, busy ones
/// included (lib/url.c `ConnectionExists`), one cache miss each. An HTTP/1.1 connection serves one stream at a time,
/// so with 10 000 streams running each new one walked 10 000 busy connections: in `perf`, that walk was a third of
/// the relay's CPU, and a new stream's first byte waited half a second (S5 of `make bench`). When no connection to
/// the origin can be idle, the transfer is told to connect afresh (`CURLOPT_FRESH_CONNECT`), which skips the walk;
/// otherwise curl walks as before and reuses what it finds.
///
/// The counts: the sockets curl opened for the origin and has not closed (its open- and close-socket callbacks,
/// which see every socket of a connection, cached ones included), less the HTTP/1.1 transfers to it in the multi
/// handle. A connection being set up for a running transfer cancels out; a transfer waiting for its name lookup
/// counts as busy without a socket, and a connection racing two addresses holds two sockets for a moment: either
/// makes the estimate wrong by one, which costs at most one walk or one new connection, never a wrong reuse (curl
/// still checks every connection it reuses).
///
/// A plain value inside `CurlDriver`, owned by its loop's queue.
struct ConnectionCacheEstimate {
    /// Sockets open per origin.
    private var open: [Substring: Int]
    /// HTTP/1.1 transfers running per origin.
    private var running: [Substring: Int]
    /// Which origin each open socket was opened for (a socket is closed by whatever transfer closes it, or by none).
    private var origins: [Int32: Substring]

    /// With room from the start, made with the driver: a dictionary type's first storage scans the runtime's
    /// conformance records, which would otherwise fall on the first request.
    init() {
        open = Dictionary(minimumCapacity: 16)
        running = Dictionary(minimumCapacity: 16)
        origins = Dictionary(minimumCapacity: 64)
    }

    /// Connections to `origin` that may be idle (negative when transfers wait for connections).
    func idle(_ origin: Substring) -> Int { open[origin, default: 0] - running[origin, default: 0] }

    /// Sockets open for `origin`.
    func openSockets(_ origin: Substring) -> Int { open[origin, default: 0] }

    /// curl opened `fd` for a connection to `origin`.
    mutating func opened(_ fd: Int32, origin: Substring) {
        if let previous = origins.updateValue(origin, forKey: fd) { open[previous, default: 1] -= 1 }
        open[origin, default: 0] += 1
    }

    /// curl closed `fd` (a socket it did not open through us is ignored).
    mutating func closed(_ fd: Int32) {
        guard let origin = origins.removeValue(forKey: fd) else { return }
        open[origin, default: 1] -= 1
    }

    /// An HTTP/1.1 transfer to `origin` starts: true when it should connect afresh (no connection can be idle).
    mutating func starting(_ origin: Substring) -> Bool {
        let fresh = idle(origin) <= 0
        running[origin, default: 0] += 1
        return fresh
    }

    /// An HTTP/1.1 transfer counted by `starting` left the multi handle.
    mutating func ended(_ origin: Substring) {
        running[origin, default: 1] -= 1
    }
}
