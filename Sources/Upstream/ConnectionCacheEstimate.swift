#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the relay knows of curl's connection caches, per origin and per multi handle ("shard", see `CurlDriver`):
/// whether a new HTTP/1.1 transfer can find an idle connection, and where.
///
/// Why: libcurl 7.88 looks for a connection to reuse by walking every connection to the transfer's host, busy ones
/// included (lib/url.c `ConnectionExists`), one cache miss each. An HTTP/1.1 connection serves one stream at a time,
/// so with 10 000 streams running each new one walked 10 000 busy connections: in `perf`, that walk was a third of
/// the relay's CPU, and a new stream's first byte waited half a second (S5 of `make bench`). When no connection to
/// the origin can be idle, the transfer is told to connect afresh (`CURLOPT_FRESH_CONNECT`), which skips the walk;
/// otherwise it goes to a shard that may hold an idle one, and curl walks that shard's connections and reuses it.
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
    /// Each origin gets a small number once (`id(of:)`), which the counts are indexed by: hashing the origin's text
    /// for each count cost about 4 k instructions per request (callgrind, S3).
    private var ids: [Substring: Int]
    /// Sockets open and HTTP/1.1 transfers running, per origin and shard.
    private var open: [[Int]] = []
    private var running: [[Int]] = []
    /// The same per origin over all shards, and per shard over all origins.
    private var openByOrigin: [Int] = []
    private var runningByOrigin: [Int] = []
    private var openByShard: [Int] = []
    private var runningByShard: [Int] = []
    /// Which origin and shard each open socket was opened for (a socket is closed by whatever transfer closes it,
    /// or by none).
    private var sockets: [Int32: (origin: Int, shard: Int)]

    /// With room from the start, made with the driver: a dictionary type's first storage scans the runtime's
    /// conformance records, which would otherwise fall on the first request.
    init() {
        ids = Dictionary(minimumCapacity: 16)
        sockets = Dictionary(minimumCapacity: 64)
    }

    /// The origin asked for last and its number: most relays call one or two providers, and comparing the bytes
    /// costs less than hashing them.
    private var last: (origin: Substring, id: Int)?

    /// The number the counts of `origin` go by (made on first use).
    mutating func id(of origin: Substring) -> Int {
        if let last, last.origin == origin { return last.id }
        let id = knownOrNew(origin)
        last = (origin, id)
        return id
    }

    private mutating func knownOrNew(_ origin: Substring) -> Int {
        if let id = ids[origin] { return id }
        let id = ids.count
        ids[origin] = id
        open.append(Array(repeating: 0, count: openByShard.count))
        running.append(Array(repeating: 0, count: openByShard.count))
        openByOrigin.append(0)
        runningByOrigin.append(0)
        return id
    }

    /// The number of an origin seen before (tests).
    func knownID(of origin: Substring) -> Int? { ids[origin] }

    /// Counts for shard `shard` exist from now on.
    private mutating func grow(to shard: Int) {
        while openByShard.count <= shard {
            openByShard.append(0)
            runningByShard.append(0)
            for origin in open.indices {
                open[origin].append(0)
                running[origin].append(0)
            }
        }
    }

    /// Connections to `origin` that may be idle, in `shard` or (nil) in all of them; negative when transfers wait for
    /// connections.
    func idle(_ origin: Int, shard: Int? = nil) -> Int {
        guard let shard else { return openByOrigin[origin] - runningByOrigin[origin] }
        guard shard < openByShard.count else { return 0 }
        return open[origin][shard] - running[origin][shard]
    }

    /// Sockets open for `origin`, in every shard.
    func openSockets(_ origin: Int) -> Int { openByOrigin[origin] }

    /// The connections `shard` holds or is about to: its sockets, or its running transfers when more of those
    /// wait for their connections (transfers started together open theirs later).
    func connections(inShard shard: Int) -> Int {
        guard shard < openByShard.count else { return 0 }
        return max(openByShard[shard], runningByShard[shard])
    }

    /// curl opened `fd` for a connection to `origin` in `shard`.
    mutating func opened(_ fd: Int32, origin: Int, shard: Int = 0) {
        closed(fd)   // a number not seen closing (it cannot happen with curl's callbacks) leaves its old place
        grow(to: shard)
        sockets[fd] = (origin, shard)
        open[origin][shard] += 1
        openByOrigin[origin] += 1
        openByShard[shard] += 1
    }

    /// curl closed `fd` (a socket it did not open through us is ignored).
    mutating func closed(_ fd: Int32) {
        guard let (origin, shard) = sockets.removeValue(forKey: fd) else { return }
        open[origin][shard] -= 1
        openByOrigin[origin] -= 1
        openByShard[shard] -= 1
    }

    /// An HTTP/1.1 transfer to `origin` starts in `shard`: true when it should connect afresh (no connection of
    /// that shard can be idle).
    mutating func starting(_ origin: Int, shard: Int = 0) -> Bool {
        grow(to: shard)
        let fresh = idle(origin, shard: shard) <= 0
        running[origin][shard] += 1
        runningByOrigin[origin] += 1
        runningByShard[shard] += 1
        return fresh
    }

    /// An HTTP/1.1 transfer counted by `starting` left the multi handle.
    mutating func ended(_ origin: Int, shard: Int = 0) {
        running[origin][shard] -= 1
        runningByOrigin[origin] -= 1
        runningByShard[shard] -= 1
    }
}

/// Where a connection runs, as curl's pre-request callback names it (its C strings are curl's, valid during the
/// callback only): one connection at a time has these.
struct ConnectionAddress {
    var primaryIP: UnsafePointer<CChar>
    var localIP: UnsafePointer<CChar>
    var primaryPort: Int
    var localPort: Int

    /// Both ports in one integer: what connections are found by (an IP address pair rarely differs between two
    /// connections with the same ports, and is compared after).
    var ports: Int { localPort << 16 | primaryPort }
}

/// A connection's socket with the addresses it was first seen at (`CurlDriver.dropsStaleConnection`).
struct KnownConnection {
    var fd: Int32
    var primaryIP: String
    var localIP: String

    /// Whether `address` names this connection (its ports already matched).
    func isAt(_ address: ConnectionAddress) -> Bool {
        primaryIP.withCString { strcmp($0, address.primaryIP) == 0 } && localIP.withCString { strcmp($0, address.localIP) == 0 }
    }
}
