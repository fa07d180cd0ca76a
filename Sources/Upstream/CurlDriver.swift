import CCurl
import COpenSSL
import Dispatch
import HTTP1
import Support
import Transport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Drives libcurl multi handles with the socket-action API on an event loop's queue: curl's sockets are
/// watched by the loop's `Poller`, its timers are the loop's (run on the poller's thread), and every transfer's
/// callbacks therefore run on the same queue as the client connection they serve. No locks, no thread hops.
///
/// Several multi handles ("shards", `CurlShard`), added as the load needs them: libcurl 7.88 walks a multi
/// handle's whole connection cache when a transfer that kept its connection leaves (lib/multi.c,
/// `curl_multi_remove_handle`: `Curl_conncache_foreach` until it meets that connection), and hashes its sockets
/// into 911 buckets. With 10 000 HTTP/1.1 streams in one multi handle every stream's end walked thousands of
/// connections, a cache miss each (a tenth of the relay's CPU in `perf`, S5 of `make bench`). A shard holds up
/// to `connectionsPerShard` connections before another is made (at most `maxShards`); an HTTP/1.1 transfer goes
/// where a connection to its origin may be idle, else to the shard with the fewest connections
/// (`ConnectionCacheEstimate`). HTTP/2 transfers all use the first shard: their streams share connections.
///
/// Owned by `loop.queue`; call everything there.
public final class CurlDriver: @unchecked Sendable {
    // Invariant: all mutable state below is touched on `loop.queue` only.
    public let loop: EventLoop
    /// The multi handles, the first made with the driver, the others as connections fill them.
    private(set) var shards: [CurlShard] = []
    /// Connections a shard holds before another shard is made.
    let connectionsPerShard: Int
    static let maxShards = 64
    /// Shards curl was called into since their completions were last read.
    private var touchedShards: [CurlShard] = []
    // With room from the start: a dictionary type's first storage makes the Swift runtime scan every
    // conformance record for its key's, which otherwise fell on the first request (S1's cold first byte).
    fileprivate var transfers = [UnsafeMutableRawPointer: Transfer](minimumCapacity: 16)
    /// Depth of curl calls on the stack; removing a handle inside curl's own callbacks fails
    /// (CURLM_RECURSIVE_API_CALL), so cancellations made then are deferred until the outermost call returns.
    private var curlDepth = 0
    private var deferredRemovals: [Transfer] = []
    fileprivate private(set) var isShutDown = false
    /// The TLS session cache every easy handle of this driver uses, whatever its shard.
    private let share: UnsafeMutableRawPointer
    /// The connections curl holds, per origin and shard: where a new HTTP/1.1 transfer can find an idle one.
    private var connections = ConnectionCacheEstimate()
    /// Idle connections a shard's curl may keep (see `CurlShard.maxConnects`).
    static let idleConnectionsKept = 4096
    /// The socket of each HTTP/1.1 connection, by its addresses as curl's pre-request callback names them, and
    /// back (`dropsStaleConnection`). An entry leaves with its socket (`socketClosed`).
    /// Keyed by both ports (`ConnectionAddress.ports`), so a lookup per request hashes one integer.
    private var connectionsByPorts = [Int: [KnownConnection]](minimumCapacity: 16)
    private var portsBySocket = [Int32: Int](minimumCapacity: 16)

    public var activeTransferCount: Int { transfers.count }

    /// Shards made so far (tests).
    var shardCount: Int { shards.count }

    /// The driver itself until `shutdown`: curl's callbacks and the loop's poller reach the driver through its
    /// shards, which hold it unowned, so a driver its owner let go of without shutting it down must live on
    /// rather than be freed under them (`CurlDriverTests`). Cleared by `shutdown`.
    private var heldUntilShutdown: CurlDriver?

    /// Shards with a timer armed on the loop for curl (at most one each).
    public var armedTimerCount: Int { shards.reduce(0) { $0 + ($1.timerArmed ? 1 : 0) } }

    public init(loop: EventLoop, connectionsPerShard: Int = 256) {
        CurlDriver.globalInit
        self.loop = loop
        self.connectionsPerShard = max(1, connectionsPerShard)
        // TLS sessions live in each easy handle unless shared: without this, every new connection to a provider
        // made a full handshake (1 000 streams over HTTP/1.1: 1 000 of them). No lock callbacks: the share is
        // used on this loop's queue only, never by two threads at once (curl's rule for a lock-less share).
        guard let share = curl_share_init() else { fatalError("curl_share_init failed") }
        ccurl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        self.share = share
        shards.append(CurlShard(driver: self, index: 0))
        heldUntilShutdown = self
    }

    private static let globalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    /// Starts a transfer. The delegate hears from it on this loop, beginning on a later turn of the loop.
    public func start(_ request: UpstreamRequest, delegate: any TransferDelegate) -> Transfer {
        loop.assertOnLoop()
        let transfer = Transfer(driver: self, request: request, delegate: delegate)
        guard !isShutDown, transfer.configure() else {
            failLater(transfer, .other(isShutDown ? "relay shutting down" : "could not configure transfer"))
            return transfer
        }
        let shard: CurlShard
        if transfer.needsOwnConnection {
            let origin = connections.id(of: transfer.origin)
            transfer.originID = origin
            shard = shardForOwnConnection(to: origin)
            transfer.countedInCache = true
            // No connection to the origin in that shard can be idle: curl is spared its walk over the busy ones.
            if connections.starting(origin, shard: shard.index) {
                _ = ccurl_easy_setopt_long(transfer.easy, CURLOPT_FRESH_CONNECT, 1)
                freshStarts += 1
            }
        } else {
            transfer.originID = connections.id(of: transfer.origin)
            shard = shards[0]
        }
        transfer.shard = shard
        transfers[transfer.easy] = transfer
        shard.added()
        touch(shard)
        curlDepth += 1
        let rc = curl_multi_add_handle(shard.multi, transfer.easy)
        curlDepth -= 1
        if rc != CURLM_OK {
            transfers[transfer.easy] = nil
            left(transfer)
            failLater(transfer, .other("curl_multi_add_handle: \(rc.rawValue)"))
        }
        return transfer
    }

    /// Where an HTTP/1.1 transfer to `origin` goes: a shard where a connection to it may be idle; else the shard
    /// holding the fewest connections, or a new one when even that one is full.
    private func shardForOwnConnection(to origin: Int) -> CurlShard {
        if connections.idle(origin) > 0 {
            for shard in shards where connections.idle(origin, shard: shard.index) > 0 { return shard }
        }
        var least = shards[0], held = connections.connections(inShard: 0)
        for shard in shards.dropFirst() {
            let count = connections.connections(inShard: shard.index)
            if count < held { (least, held) = (shard, count) }
        }
        if held >= connectionsPerShard && shards.count < Self.maxShards {
            least = CurlShard(driver: self, index: shards.count)
            shards.append(least)
        }
        return least
    }

    /// A transfer that never reached curl completes on a later turn (the caller holds it by then), unless it was
    /// cancelled meanwhile: `didComplete` never follows a cancel.
    private func failLater(_ transfer: Transfer, _ failure: UpstreamFailure) {
        transfer.cleanup()
        loop.queue.async { [transfer] in
            guard transfer.state == .running else { return }
            transfer.state = .completed
            transfer.delegate?.transfer(transfer, didCompleteWith: .failure(failure))
        }
    }

    /// Removes the transfer: its connection is closed (curl does not cache a connection removed mid-response),
    /// and the delegate hears nothing more. Safe to call inside the transfer's own callbacks and after completion.
    func cancel(_ transfer: Transfer) {
        guard transfer.state == .running else { return }
        transfer.state = .cancelled
        if curlDepth > 0 {
            deferredRemovals.append(transfer)
        } else {
            remove(transfer)
        }
    }

    private func remove(_ transfer: Transfer) {
        let key = transfer.easy
        // Identity, not presence: a transfer that never reached curl gave its handle back, and the handle may
        // now serve another transfer under the same key.
        guard transfers[key] === transfer, let shard = transfer.shard else { return }
        let resetsStream = transfer.state == .cancelled && transfer.request.httpVersion == .http2
        if resetsStream {
            // A stream removed from a multiplexed connection is not closed by curl: it submits RST_STREAM and
            // keeps the connection. When no other stream uses the connection, close it instead: the provider
            // sees the connection end at once, and nothing stale is left to reuse.
            _ = ccurl_easy_setopt_long(transfer.easy, CURLOPT_FORBID_REUSE, 1)
        }
        curlDepth += 1
        curl_multi_remove_handle(shard.multi, transfer.easy)
        curlDepth -= 1
        transfers[key] = nil
        left(transfer)
        if resetsStream { flushHTTP2Output(origin: transfer.origin) }
        transfer.cleanup()
    }

    /// The transfer left its shard's multi handle (or never got into it).
    private func left(_ transfer: Transfer) {
        guard let shard = transfer.shard else { return }
        transfer.shard = nil
        shard.removed()
        guard transfer.countedInCache else { return }
        transfer.countedInCache = false
        connections.ended(transfer.originID, shard: shard.index)
    }

    /// curl opened `fd` for a connection to `origin` in `shard` (its open-socket callback, `Transfer`).
    func socketOpened(_ fd: Int32, origin: Int, shard: Int) {
        connections.opened(fd, origin: origin, shard: shard)
    }

    /// curl is done with `fd`: it is closed here (curl's close-socket callback).
    fileprivate func socketClosed(_ fd: Int32) {
        connections.closed(fd)
        if let ports = portsBySocket.removeValue(forKey: fd) {
            connectionsByPorts[ports]?.removeAll { $0.fd == fd }
            if connectionsByPorts[ports]?.isEmpty == true { connectionsByPorts[ports] = nil }
        }
        Syscall.close(fd)
    }

    /// curl is about to send `transfer`'s request on the HTTP/1.1 connection at `address` (its pre-request
    /// callback). A connection the transfer opened itself is noted by its address. A reused one is checked
    /// first: bytes waiting on it came after its last answer ended (a provider that wrote more than that answer),
    /// and libcurl 7.88 reuses such a connection (lib/cf-socket.c `cf_socket_conn_is_alive`: readable and not at
    /// its end counts as alive), so those bytes would be read as this request's answer. That connection is shut
    /// down instead: curl's send fails on it before a byte leaves, and curl sends the request on a fresh
    /// connection (lib/multi.c, MSTATE_DO: `Curl_retry_request`). Returns true then.
    ///
    /// Over TLS such bytes can also wait inside OpenSSL, with none in the socket: curl 7.88 reads a Content-Length
    /// body no further than its length (lib/transfer.c `readwrite_data`), OpenSSL decrypts a whole record at a
    /// time, so the rest of the record that carried an answer's last bytes stays in OpenSSL's buffer. So the
    /// connection's TLS is asked too (`SSL_has_pending`, on the `SSL *` curl names for the connection now).
    ///
    /// A transfer that asked for HTTP/2 may be on an HTTP/1.1 connection (a provider that offers no h2 in ALPN, or
    /// an http:// one, where curl never speaks HTTP/2: it keeps that connection like any other), checked as one. A
    /// connection that speaks HTTP/2 is left alone: streams share it, and bytes waiting there are the other
    /// streams' frames.
    func dropsStaleConnection(at address: ConnectionAddress, for transfer: Transfer) -> Bool {
        let ports = address.ports
        if let known = connectionsByPorts[ports]?.first(where: { $0.isAt(address) }), !transfer.opened(known.fd) {
            let ssl = ccurl_easy_openssl_ssl(transfer.easy)
            if !transfer.needsOwnConnection {   // https:// with HTTP/2 asked for
                // Without OpenSSL's view (another TLS library) the version is not known: nothing is peeked, as before.
                guard let ssl, cossl_tls_alpn_is_h2(ssl) == 0 else { return false }
            }
            guard Syscall.hasUnreadBytes(known.fd) || (ssl.map { cossl_tls_has_pending($0) == 1 } ?? false) else { return false }
            Syscall.shutdownBoth(known.fd)
            staleConnectionsDropped += 1
            return true
        }
        for fd in [transfer.openedSockets.0, transfer.openedSockets.1]
        where fd >= 0 && portsBySocket[fd] == nil && Syscall.localPort(fd) == address.localPort {
            connectionsByPorts[ports, default: []].append(KnownConnection(fd: fd, primaryIP: String(cString: address.primaryIP),
                                                                          localIP: String(cString: address.localIP)))
            portsBySocket[fd] = ports
        }
        return false
    }

    /// Reused connections shut down for the bytes waiting on them (tests).
    private(set) var staleConnectionsDropped = 0

    /// Transfers told to connect afresh (tests).
    private(set) var freshStarts = 0

    /// Sockets curl holds open for `origin` (tests).
    func openSockets(to origin: Substring) -> Int { connections.knownID(of: origin).map { connections.openSockets($0) } ?? 0 }

    /// Connections to `origin` that may be idle (tests).
    func idleConnections(to origin: Substring) -> Int { connections.knownID(of: origin).map { connections.idle($0) } ?? 0 }

    /// libcurl 7.88 queues the RST_STREAM of a removed HTTP/2 stream in the connection's output buffer
    /// (frames under 1 KiB are buffered, lib/http2.c `send_callback`) and writes it only when a transfer next
    /// sends on that connection: with a silent sibling stream, a cancel would reach the provider seconds later
    /// or never. Un-pausing a transfer makes curl flush its connection's buffer (`http2_data_pause` →
    /// `h2_session_send`), so each running HTTP/2 sibling to the same origin gets a pause-state change that
    /// is undone at once. Siblings whose receiving is paused are skipped: un-pausing those would deliver
    /// held bytes; their own resume flushes the buffer.
    private func flushHTTP2Output(origin: Substring) {
        for other in transfers.values
        where other.state == .running && other.request.httpVersion == .http2 && !other.receivePaused && other.origin == origin {
            let mask = other.pauseMask
            if let shard = other.shard { touch(shard) }
            curlDepth += 1
            curl_easy_pause(other.easy, mask ^ Int32(CURLPAUSE_SEND))
            curl_easy_pause(other.easy, mask)
            curlDepth -= 1
        }
    }

    /// Re-enables a paused direction. curl may deliver the held bytes synchronously, from inside this call.
    func updatePause(_ transfer: Transfer) {
        guard transfer.state == .running else { return }
        if let shard = transfer.shard { touch(shard) }
        curlDepth += 1
        curl_easy_pause(transfer.easy, transfer.pauseMask)
        curlDepth -= 1
        finishCurlCall()
    }

    /// Easy handles kept for reuse: `curl_easy_init` allocates and `curl_easy_reset` keeps those buffers.
    private var idleEasyHandles: [UnsafeMutableRawPointer] = []

    func takeEasyHandle() -> UnsafeMutableRawPointer {
        let easy: UnsafeMutableRawPointer
        if let idle = idleEasyHandles.popLast() {
            easy = idle
        } else {
            guard let new = curl_easy_init() else { fatalError("curl_easy_init failed") }
            easy = new
        }
        // Set on every take: `curl_easy_reset` clears it.
        ccurl_easy_setopt_ptr(easy, CURLOPT_SHARE, share)
        return easy
    }

    /// Takes back a handle that is no longer in a multi handle.
    func recycleEasyHandle(_ easy: UnsafeMutableRawPointer) {
        if isShutDown || idleEasyHandles.count >= 256 {
            curl_easy_cleanup(easy)
        } else {
            curl_easy_reset(easy)
            idleEasyHandles.append(easy)
        }
    }

    /// Cancels every transfer (without delegate calls) and releases curl's resources. Call once, on the loop. A
    /// driver is freed only after this: it holds itself until then (`heldUntilShutdown`).
    public func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        for transfer in Array(transfers.values) { cancel(transfer) }
        for shard in shards { shard.stop() }
        for easy in idleEasyHandles { curl_easy_cleanup(easy) }
        idleEasyHandles.removeAll()
        curl_share_cleanup(share)   // after every handle that used it
        heldUntilShutdown = nil
    }

    // MARK: curl → us

    fileprivate func transfer(for easy: UnsafeMutableRawPointer?) -> Transfer? {
        guard let easy else { return nil }
        return transfers[easy]
    }

    /// A transfer's response began: the socket it was set up on joins the streams' events.
    func setUpDone(socket fd: Int32) {
        if let shard = loop.poller.handler(of: fd) as? CurlShard, shard.driver === self {
            loop.poller.setHandlesFirst(fd, false)
        }
    }

    /// Notes that curl was called into `shard`: its completions are read when the outermost call returns.
    @inline(__always)
    private func touch(_ shard: CurlShard) {
        guard !shard.touched else { return }
        shard.touched = true
        touchedShards.append(shard)
    }

    func socketAction(_ shard: CurlShard, _ fd: curl_socket_t, events: Int32) {
        guard !isShutDown else { return }
        var running: Int32 = 0
        touch(shard)
        curlDepth += 1
        curl_multi_socket_action(shard.multi, fd, events, &running)
        curlDepth -= 1
        finishCurlCall()
    }

    /// After the outermost curl call: deliver completions, then carry out removals deferred during callbacks.
    private func finishCurlCall() {
        guard curlDepth == 0 else { return }
        var remaining: Int32 = 0
        while let shard = touchedShards.popLast() {
            shard.touched = false
            while let message = curl_multi_info_read(shard.multi, &remaining) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                guard let transfer = transfers[easy] else { continue }
                if transfer.state == .running {
                    transfer.state = .completed
                    let result = transfer.result(for: code)
                    remove(transfer)
                    transfer.delegate?.transfer(transfer, didCompleteWith: result)
                }
            }
        }
        while !deferredRemovals.isEmpty {
            let pending = deferredRemovals
            deferredRemovals.removeAll()
            for transfer in pending { remove(transfer) }
        }
    }
}

extension CurlDriver: UpstreamClient {
    public func call(_ request: UpstreamRequest, delegate: any TransferDelegate) -> any UpstreamCall {
        start(request, delegate: delegate)
    }
}

/// One multi handle of a `CurlDriver` (see there): its sockets in the loop's poller, its timer, its connection
/// cache. Owned by the driver's loop queue, like the driver.
final class CurlShard: PollerHandler, @unchecked Sendable {
    // Invariant: all mutable state below is touched on the driver's loop queue only.
    /// Unowned: the driver owns its shards and outlives them while it runs; after its shutdown no curl socket
    /// of a shard is watched any more and its timer is cancelled.
    unowned let driver: CurlDriver
    let index: Int
    let multi: UnsafeMutableRawPointer
    /// curl's timeout, one of the loop's timers (`EventLoop.schedule`: run on the poller's thread when due); nil
    /// when none is armed.
    private var timer: LoopTimer?
    /// In the driver's list of shards whose completions are to be read.
    var touched = false
    /// `stop` ran: the timer's handler does nothing any more.
    private var stopped = false
    /// Transfers in this multi handle.
    private var transferCount = 0
    /// CURLMOPT_MAXCONNECTS: curl compares it with every connection it holds, busy ones included, and when a
    /// returned connection makes it over, walks all of them for the oldest idle one to close (lib/conncache.c,
    /// `Curl_conncache_extract_oldest`): with 10 000 streams running, every stream's end walked 10 000 connections
    /// (an eighth of the relay's CPU in `perf`, S5). So the bound follows the most transfers ever running at once,
    /// plus `CurlDriver.idleConnectionsKept`, in steps of 1 024: idle connections past it are the rare ones a burst
    /// left, and curl closes them once idle longer than `idleConnectionSeconds`.
    private var maxConnects = CurlDriver.idleConnectionsKept

    init(driver: CurlDriver, index: Int) {
        self.driver = driver
        self.index = index
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        // curl's default cache keeps 4 idle connections per handle *currently added*: with short requests the
        // count drops between bursts and good keep-alive connections were closed (TIME_WAIT piling up on the
        // relay's side). Keep plenty; idle ones cost a descriptor each, the provider closes them in time, and
        // none idle longer than its upstream's `idleConnectionSeconds` is reused (CURLOPT_MAXAGE_CONN, per
        // transfer): curl closes it when the next transfer looks for a connection. The bound grows with the load
        // (`maxConnects`).
        ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnects)
        ccurl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        ccurl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        ccurl_multi_setopt_socket_callback(multi) { easy, socket, what, userp, _ in
            guard let userp else { return 0 }
            Unmanaged<CurlShard>.fromOpaque(userp).takeUnretainedValue().socketChanged(socket, what: what, easy: easy)
            return 0
        }
        ccurl_multi_setopt_timer_callback(multi) { _, timeoutMs, userp in
            guard let userp else { return 0 }
            Unmanaged<CurlShard>.fromOpaque(userp).takeUnretainedValue().timerChanged(timeoutMs)
            return 0
        }
    }

    /// A transfer joins: the connection bound follows the load (`maxConnects`).
    func added() {
        transferCount += 1
        let wanted = (transferCount + CurlDriver.idleConnectionsKept + 1023) / 1024 * 1024
        if wanted > maxConnects {
            maxConnects = wanted
            ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnects)
        }
    }

    func removed() { transferCount -= 1 }

    /// Stops the timer and frees the multi handle, closing its cached connections. Once, at the driver's shutdown.
    /// Cancelling the timer frees its action at once (`LoopTimer.cancel`), which holds the shard and the driver.
    func stop() {
        stopped = true
        timer?.cancel()
        timer = nil
        curl_multi_cleanup(multi)
    }

    /// curl's sockets live in the loop's poller beside the client connections. A REMOVE can come late, for a
    /// descriptor curl already closed itself (its resolver's socket pair) whose number now belongs to someone
    /// else: only a registration that is still this shard's own is dropped.
    ///
    /// A socket first watched for a transfer that has not seen a response byte yet is served first (with the
    /// client connections, `Poller`): a new stream's connect and request do not wait behind the running
    /// streams' events. The response's first bytes move it to the streams' class (`CurlDriver.setUpDone`).
    private func socketChanged(_ fd: curl_socket_t, what: Int32, easy: UnsafeMutableRawPointer?) {
        let poller = driver.loop.poller
        switch what {
        case CURL_POLL_IN, CURL_POLL_OUT, CURL_POLL_INOUT:
            let read = what != CURL_POLL_OUT, write = what != CURL_POLL_IN
            if poller.handler(of: fd) === self {
                poller.update(fd, read: read, write: write)
            } else {
                var first = false
                if let transfer = driver.transfer(for: easy), transfer.setupSocket < 0, !transfer.hasResponded {
                    transfer.setupSocket = fd
                    first = true
                }
                poller.watch(fd, read: read, write: write, handler: self, first: first)
            }
        default:
            if poller.handler(of: fd) === self { poller.remove(fd) }
        }
    }

    func pollerEvent(fd: Int32, readable: Bool, writable: Bool) {
        driver.socketAction(self, fd, events: (readable ? CURL_CSELECT_IN : 0) | (writable ? CURL_CSELECT_OUT : 0))
    }

    /// curl's timer wishes, with as few timer changes as possible: curl revises its timeout after almost every
    /// action. An armed timer that fires no later than curl's new deadline is left alone (firing early is
    /// harmless: curl re-arms with what is left), and "no timer" leaves it armed for the same reason.
    private func timerChanged(_ timeoutMs: Int) {
        if timeoutMs < 0 { return }
        if timeoutMs == 0 {
            // Not from inside the callback (curl forbids re-entering socket_action from its own callbacks), but
            // in the same turn of the loop (`EventLoop.soon`, once for every transfer the slice of handlers
            // added): a new transfer starts connecting without waiting for the rest of a long batch (it once
            // waited for a queue hop: 16 ms median with 5 000 streams running).
            guard !immediateTimeoutPending else { return }
            immediateTimeoutPending = true
            let queuedAt = LatencyTrace.now()
            let driver = self.driver   // held by the task, as the loop's poller holds the shard
            driver.loop.soon { [self, driver] in
                LatencyTrace.since(queuedAt, .hop)
                immediateTimeoutPending = false
                if !driver.isShutDown { driver.socketAction(self, ccurl_socket_timeout, events: 0) }
            }
            return
        }
        let now = MonotonicClock().now().nanoseconds
        let deadline = now &+ UInt64(timeoutMs) &* 1_000_000
        if let armed = timerArmedAt, armed <= deadline { return }
        arm(after: deadline &- now, at: deadline)
    }

    /// The timer's action holds the shard and the driver strongly, until it runs or `stop` (the driver's
    /// `shutdown`) cancels it. Not weak: a weak reference gives the object a side table, and then every retain and
    /// release of it takes the runtime's slow path (the shard and the driver are retained several times for
    /// every relayed event: about 500 instructions an event, callgrind). Real time, not the loop's clock: curl
    /// measures its timeouts on CLOCK_MONOTONIC, also in tests that move the loop's clock by hand.
    private func arm(after nanoseconds: UInt64, at deadline: UInt64) {
        timer?.cancel()
        timerArmedAt = deadline
        let driver = self.driver
        timer = driver.loop.schedule(afterRealNanoseconds: nanoseconds) { [self, driver] in
            timer = nil
            timerArmedAt = nil
            guard !stopped else { return }
            driver.socketAction(self, ccurl_socket_timeout, events: 0)
            // curl reports a deadline only when its earliest one changes: one it reported while an earlier timer
            // was armed, or one still ahead in curl's own reckoning, is asked for again rather than lost.
            guard !stopped, timer == nil else { return }
            var left = -1
            if curl_multi_timeout(multi, &left) == CURLM_OK, left >= 0 { timerChanged(left) }
        }
    }

    /// The deadline of the armed timer (CLOCK_MONOTONIC nanoseconds); nil when none is armed.
    private var timerArmedAt: UInt64?
    var timerArmed: Bool { timer != nil }
    private var immediateTimeoutPending = false
}

/// curl closes a socket of one of this driver's connections (the callback data is the driver).
let driverCloseSocket: ccurl_closesocket_callback = { clientp, fd in
    guard let clientp else { return 1 }
    Unmanaged<CurlDriver>.fromOpaque(clientp).takeUnretainedValue().socketClosed(fd)
    return 0
}
