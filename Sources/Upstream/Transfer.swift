import CCurl
import HTTP1
import Transport
import Support
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One upstream request on a curl easy handle: configuration, callbacks, pause state, and the request body
/// (whole before the call starts). A body of up to `inlineBodyLimit` bytes is handed to curl as it is
/// (CURLOPT_POSTFIELDS) and freed with the handle; a larger one is read out through the read callback and taken
/// back when no resend can need it.
///
/// Owned by its driver's loop queue. The driver holds it (strongly) from `start` until the handle has been
/// removed and cleaned up, which is what keeps the `Unmanaged` pointers given to curl as WRITEDATA, HEADERDATA,
/// READDATA, SEEKDATA, PREREQDATA valid for as long as curl can call back.
public final class Transfer: UpstreamCall, @unchecked Sendable {
    // Invariant: everything is touched on the driver's loop queue only.
    enum State { case running, completed, cancelled }
    unowned let driver: CurlDriver
    public weak var delegate: (any TransferDelegate)?
    let request: UpstreamRequest
    let easy: UnsafeMutableRawPointer
    var state = State.running
    var receivePaused = false
    /// A larger body while curl may still ask for it through the read callback: released once sent whole if the
    /// request may not be sent again, else at the first response byte (curl resends only before one).
    private var body: [UInt8]
    /// A body of up to `inlineBodyLimit` bytes, which curl reads in place (CURLOPT_POSTFIELDS does not copy) for
    /// as long as it holds the handle: freed in `cleanup`, after the handle was reset.
    private var inlineBody: UnsafeMutableRawBufferPointer?
    private let hasBody: Bool
    private let bodyLength: Int
    private var bodyOffset = 0
    private let replayable: Bool
    /// How many times curl was about to send the request (its pre-request callback runs once per attempt).
    private var attempts = 0
    /// curl wanted to send the request again and was refused: the transfer fails with `connectionReset`.
    private var resendRefused = false
    private var sawResponseBytes = false
    /// A byte of the response (head or body) arrived.
    var hasResponded: Bool { sawResponseBytes }
    /// The request's header lines as curl reads them (CURLOPT_HTTPHEADER, which curl does not copy): see
    /// `HeaderLines`.
    private var headerLines: HeaderLines?
    /// The request URL parsed once here and handed to curl (CURLOPT_CURLU), which curl does not copy: see
    /// `configureURL`. Freed in `cleanup`, after the handle was reset.
    private var parsedURL: OpaquePointer?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var headStatus = 0
    private var headFields = HTTPHeaders()
    private var headDelivered = false
    /// Body bytes came before a final head: the transfer was aborted (`onBody`).
    private var noFinalHead = false
    private var cleanedUp = false

    /// The response status once the head arrived, else 0.
    public private(set) var status = 0

    static let curlDefaultHeaders = ["Expect", "Accept", "Content-Type", "Transfer-Encoding"]

    /// The largest body handed to curl in place. curl 7.88 then builds the head and the body in one buffer and
    /// sends them in one write (lib/http.c, bodies under 64 KiB), and on plain HTTP/1.1 it never allocates its
    /// upload buffer: 4.0 KiB less resident memory per stream (2 000 streams, 27.2 to 23.2 KiB), and one send
    /// instead of two. Over TLS and HTTP/2 curl still copies through its upload buffer. The body is then held for
    /// the whole transfer instead of until sent, so the bound is the upload buffer's own size (16 KiB): an
    /// inline body never holds more than the buffer it spares. Chat requests are mostly far smaller.
    package static let inlineBodyLimit = 16 * 1024

    init(driver: CurlDriver, request: UpstreamRequest, delegate: any TransferDelegate) {
        self.driver = driver
        self.delegate = delegate
        self.easy = driver.takeEasyHandle()
        self.hasBody = request.body != nil
        self.bodyLength = request.body?.count ?? 0
        if let body = request.body, body.count <= Self.inlineBodyLimit {
            let inline = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, body.count), alignment: 1)
            body.withUnsafeBytes { inline.copyMemory(from: $0) }
            self.inlineBody = inline
            self.body = []
        } else {
            self.body = request.body ?? []
        }
        self.replayable = request.isReplayable
        var withoutBody = request
        withoutBody.body = nil   // `body` is the one reference, so releasing it frees the bytes
        self.request = withoutBody
        errorBuffer.initialize(to: 0)
    }

    deinit {
        cleanup()
        errorBuffer.deallocate()
    }

    /// Stops the transfer now; its connection is closed. No delegate call follows. Idempotent.
    public func cancel() {
        driver.loop.assertOnLoop()
        driver.cancel(self)
    }

    /// The delegate can take body bytes again (it refused some earlier).
    public func resumeReceiving() {
        driver.loop.assertOnLoop()
        guard receivePaused else { return }
        receivePaused = false
        driver.updatePause(self)
    }

    /// The pause state as `curl_easy_pause` takes it.
    var pauseMask: Int32 {
        receivePaused ? ccurl_pause_recv : 0
    }

    /// Counted as a running HTTP/1.1 transfer to its origin (`ConnectionCacheEstimate.starting`) until it leaves the
    /// multi handle.
    var countedInCache = false
    /// The driver's multi handle the transfer is in (nil before and after).
    var shard: CurlShard?
    /// The driver's number for `origin` (`ConnectionCacheEstimate.id(of:)`), set when the transfer starts.
    var originID = 0

    /// Whether the transfer needs a connection of its own: HTTP/1.1, which an http:// URL always speaks. An
    /// https:// URL offered HTTP/2 shares one (curl's walk over such connections is short).
    var needsOwnConnection: Bool {
        guard request.httpVersion == .http2 else { return true }
        let https = "https:".utf8
        return !(origin.utf8.count > https.count && zip(origin.utf8, https).allSatisfy { $0 | 0x20 == $1 })
    }

    /// Scheme, host and port of the URL: transfers with the same origin may share an HTTP/2 connection.
    /// Found on the URL's bytes: Foundation's `range(of:)` cost 16 k instructions per request (callgrind, S3).
    lazy var origin: Substring = {
        var url = request.url
        let end = url.withUTF8 { bytes -> Int in
            var i = 0
            while i + 2 < bytes.count {
                if bytes[i] == UInt8(ascii: ":") && bytes[i + 1] == UInt8(ascii: "/") && bytes[i + 2] == UInt8(ascii: "/") {
                    var j = i + 3
                    while j < bytes.count && bytes[j] != UInt8(ascii: "/") { j += 1 }
                    return j
                }
                i += 1
            }
            return bytes.count
        }
        return url[..<url.utf8.index(url.utf8.startIndex, offsetBy: end)]   // an ASCII boundary: a character one
    }()

    func cleanup() {
        guard !cleanedUp else { return }
        cleanedUp = true
        driver.recycleEasyHandle(easy)
        headerLines?.deallocate()
        headerLines = nil
        if let parsedURL { curl_url_cleanup(parsedURL) }
        parsedURL = nil
        inlineBody?.deallocate()
        inlineBody = nil
    }

    func configure() -> Bool {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var ok = true
        func check(_ code: CURLcode) { if code != CURLE_OK { ok = false } }
        if !configureURL() { ok = false }
        check(ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        check(ccurl_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1))
        // Every socket curl opens and closes passes through the driver, which counts them per origin
        // (`ConnectionCacheEstimate`). The close callback's data outlives the transfer (curl keeps it with the
        // connection in its cache): it is the driver, which outlives the multi handle.
        check(ccurl_easy_setopt_opensocket_callback(easy, transferOpenSocket))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, me))
        check(ccurl_easy_setopt_closesocket_callback(easy, driverCloseSocket))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(driver).toOpaque()))
        check(ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(request.connectTimeoutSeconds * 1000))))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me))
        // Only http and https, and never follow redirects: the client sees the provider's answer as it is.
        check(ccurl_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        // A provider on this host is reached directly, whatever proxy the environment names (`LoopbackURL`).
        if LoopbackURL.bypassesProxy(request.url) { check(ccurl_easy_setopt_str(easy, CURLOPT_NOPROXY, "*")) }
        check(ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        // The path the relay routed and checked is the path sent: curl would otherwise resolve "/./" and "/../".
        check(ccurl_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1))
        // Through an HTTPS proxy (https_proxy in the environment), the proxy's "200 Connection established"
        // must not be taken for the provider's response head.
        check(ccurl_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1))
        // curl keeps a 64 KiB upload buffer per transfer while a body read through the callback (or any body over
        // TLS or HTTP/2) goes out; chat bodies are small, and 16 KiB (curl's minimum) measured 15.5 KiB of relay
        // memory per stream instead of 19.8 (medians of 5, 5 000 streams). The receive buffer stays at curl's
        // 16 KiB: 4 KiB saved 0.4 KiB of resident memory per stream (curl touches only the pages it fills), about
        // 3 KiB when a saturated relay falls behind and reads fill it, and would split large JSON answers into more
        // client writes.
        check(ccurl_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 16384))
        check(ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, transferWrite))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me))
        check(ccurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, transferHeader))
        check(ccurl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me))
        // ALPN offers exactly the configured version; "2TLS" keeps plain http:// on HTTP/1.1 (no h2c upgrade).
        check(ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION,
                                     request.httpVersion == .http2 ? Int(CURL_HTTP_VERSION_2TLS) : Int(CURL_HTTP_VERSION_1_1)))
        // On HTTP/2, wait for a connection being set up to the same provider rather than opening another.
        if request.httpVersion == .http2 { check(ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)) }
        if let caFile = request.caFile { check(caFile.withCString { ccurl_easy_setopt_str(easy, CURLOPT_CAINFO, $0) }) }

        if !configureResends(me) { ok = false }

        let method = request.method
        if hasBody {
            check(ccurl_easy_setopt_long(easy, CURLOPT_POST, 1))
            check(ccurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyLength)))
            if let inlineBody {
                check(ccurl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, inlineBody.baseAddress))
            } else {
                check(ccurl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, transferRead))
                check(ccurl_easy_setopt_ptr(easy, CURLOPT_READDATA, me))
            }
            if method != "POST" { check(method.withCString { ccurl_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, $0) }) }
        } else if method == "HEAD" {
            check(ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1))
        } else {
            check(ccurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1))
            if method != "GET" { check(method.withCString { ccurl_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, $0) }) }
        }

        // Headers curl would add on its own: none of them may reach the provider unless the client sent them.
        // (Removing Expect also makes curl send the body at once instead of waiting up to a second for 100.)
        let lines = HeaderLines(request.headers, suppressing: Self.curlDefaultHeaders)
        headerLines = lines
        check(ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, lines.first))
        return ok
    }

    /// The URL as CURLOPT_URL and, parsed, as CURLOPT_CURLU. Given only the text, curl 7.88 parses it for every
    /// transfer and then rebuilds the whole URL from its parts with its printf (lib/url.c `parseurlandfillconn`):
    /// 9 000 instructions per request, most of it formatting a string nothing on the wire uses. Given a parsed
    /// URL, curl copies that (`curl_url_dup`) instead. The parse here is the one curl makes (the same flags:
    /// CURLOPT_PATH_AS_IS keeps "/./" and "/../"), so the request sent is the same bytes; CURLOPT_URL stays set
    /// for what curl reports about the transfer. A URL this parse refuses is left to curl, which fails the
    /// transfer with its own message, as before.
    private func configureURL() -> Bool {
        // `withCString` hands curl the string's own bytes (curl copies them); passing the String itself would
        // make a temporary array per call.
        let ok = request.url.withCString { url -> Bool in
            guard ccurl_easy_setopt_str(easy, CURLOPT_URL, url) == CURLE_OK else { return false }
            guard let parsed = curl_url() else { return true }
            let flags = UInt32(CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS)
            guard curl_url_set(parsed, CURLUPART_URL, url, flags) == CURLUE_OK,
                  ccurl_easy_setopt_ptr(easy, CURLOPT_CURLU, UnsafeMutableRawPointer(parsed)) == CURLE_OK else {
                curl_url_cleanup(parsed)
                return true
            }
            parsedURL = parsed
            return true
        }
        return ok
    }

    /// libcurl sends a request again by itself when a reused connection dies before the first response byte
    /// (lib/transfer.c `Curl_retry_request`, up to five times): through the seek callback when some of the body
    /// had been sent, and silently when none had (a request without a body, one that died before its body went
    /// out, or an inline body, which curl reads in place), so refusing the rewind alone is not enough. The
    /// pre-request callback runs before every send, the resends included (lib/multi.c, MSTATE_DO): a request that
    /// is not replayable is sent once, a replayable one at most twice. The race this retry covers (the provider
    /// closes an idle connection just as it is reused) is narrowed instead by never reusing a connection idle
    /// longer than `idleConnectionSeconds`.
    private func configureResends(_ me: UnsafeMutableRawPointer) -> Bool {
        var ok = ccurl_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, max(1, request.idleConnectionSeconds)) == CURLE_OK
        ok = ok && ccurl_easy_setopt_prereq_callback(easy, transferPrerequest) == CURLE_OK
        ok = ok && ccurl_easy_setopt_ptr(easy, CURLOPT_PREREQDATA, me) == CURLE_OK
        if hasBody && inlineBody == nil {
            ok = ok && ccurl_easy_setopt_seek_callback(easy, transferSeek) == CURLE_OK
            ok = ok && ccurl_easy_setopt_ptr(easy, CURLOPT_SEEKDATA, me) == CURLE_OK
        }
        return ok
    }

    func result(for code: CURLcode) -> Result<Void, UpstreamFailure> {
        if code == CURLE_OK { return .success(()) }
        if resendRefused {
            return .failure(.connectionReset("the connection died before an answer; the request is not sent again"))
        }
        if noFinalHead { return .failure(.brokenResponse("a body came without a final status (200 to 999)")) }
        let detail = errorBuffer.pointee == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorBuffer)
        if !sawResponseBytes && (code == CURLE_GOT_NOTHING || code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR) {
            return .failure(.connectionReset(detail))
        }
        // A failure is "not reached" (which failover may send on, and which is not charged) only while curl has
        // not yet been about to send the request: its pre-request callback counts `attempts`. After that the
        // same codes name a bad answer: curl 7.88 reports a reply that is not HTTP at all ("Received HTTP/0.9
        // when not allowed") as CURLE_UNSUPPORTED_PROTOCOL, although the provider read the request.
        let sent = attempts > 0
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT,
             CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CACERT_BADFILE, CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .failure(sent ? .brokenResponse(detail) : .connectFailed(detail))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(headDelivered || sent ? .other(detail) : .connectTimeout)
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_WEIRD_SERVER_REPLY,
             CURLE_SEND_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_BAD_CONTENT_ENCODING:
            return .failure(.brokenResponse(detail))
        default:
            return .failure(.other(detail))
        }
    }

    // MARK: Callbacks (run inside curl calls made on the loop queue)

    /// One header line as curl hands it over (status line, field, or the blank line ending a head), parsed on
    /// the bytes: this runs for every field of every response.
    fileprivate func onHeaderLine(_ line: UnsafeRawBufferPointer) {
        driver.loop.assertOnLoop()
        respondedAtAll()
        guard state == .running, !headDelivered else { return }   // trailers after the body are ignored
        var end = line.count
        while end > 0 && (line[end - 1] == 0x0A || line[end - 1] == 0x0D) { end -= 1 }
        if end >= 5 && line[0] == 0x48 && line[1] == 0x54 && line[2] == 0x54 && line[3] == 0x50 && line[4] == 0x2F {
            // A new head ("HTTP/1.1 200 OK", "HTTP/2 200"): 1xx heads (100 Continue) are followed by the real one.
            var i = 5
            while i < end && line[i] != 0x20 { i += 1 }
            while i < end && line[i] == 0x20 { i += 1 }
            var code = 0, digits = 0
            while i < end, digits < 3, line[i] >= 0x30, line[i] <= 0x39 {
                code = code * 10 + Int(line[i] - 0x30)
                i += 1
                digits += 1
            }
            headStatus = digits == 3 ? code : 0
            headFields = HTTPHeaders()
            return
        }
        if end == 0 {
            if headStatus >= 200 {
                headDelivered = true
                status = headStatus
                delegate?.transfer(self, didReceiveHead: headStatus, headers: headFields)
            }
            return
        }
        var colon = 0
        while colon < end && line[colon] != 0x3A { colon += 1 }
        guard colon < end else { return }
        var valueStart = colon + 1, valueEnd = end
        while valueStart < valueEnd && (line[valueStart] == 0x20 || line[valueStart] == 0x09) { valueStart += 1 }
        while valueEnd > valueStart && (line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09) { valueEnd -= 1 }
        headFields.add(name: String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self),
                       value: String(decoding: UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd]), as: UTF8.self))
    }

    fileprivate func onBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        driver.loop.assertOnLoop()
        respondedAtAll()
        guard state == .running, let delegate else { return 0 }   // 0 aborts the transfer
        if !headDelivered {
            // No final head was read: a 101, which the relay never asks for (no Upgrade goes upstream), after which
            // curl takes what follows for a body. An interim status is never the client's answer.
            guard headStatus >= 200 else {
                noFinalHead = true
                return 0
            }
            headDelivered = true
            status = headStatus
            delegate.transfer(self, didReceiveHead: headStatus, headers: headFields)
            guard state == .running else { return 0 }
        }
        if delegate.transfer(self, didReceiveBody: bytes) {
            return state == .running ? bytes.count : 0
        }
        guard state == .running else { return 0 }
        receivePaused = true
        return ccurl_writefunc_pause
    }

    /// A response byte arrived: curl never resends after one, so the body is no longer needed.
    private func respondedAtAll() {
        guard !sawResponseBytes else { return }
        sawResponseBytes = true
        body = []
        if setupSocket >= 0 {
            driver.setUpDone(socket: setupSocket)
            setupSocket = -1
        }
    }

    /// The upstream socket the driver registered as served first while this transfer was being set up (-1:
    /// none): it joins the streams' events when the response begins.
    var setupSocket: Int32 = -1

    fileprivate func onRead(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        driver.loop.assertOnLoop()
        guard state == .running else { return ccurl_readfunc_abort }
        let n = min(bodyLength - bodyOffset, buffer.count)
        guard n > 0 else { return 0 }
        guard body.count == bodyLength else { return ccurl_readfunc_abort }   // released: never read again
        body.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + bodyOffset, byteCount: n)
        }
        bodyOffset += n
        if bodyOffset == bodyLength && !replayable { body = [] }
        return n
    }

    /// The sockets this transfer opened (curl's open-socket callback; two when it raced two addresses), -1 for
    /// none.
    private(set) var openedSockets: (Int32, Int32) = (-1, -1)

    fileprivate func noteOpened(_ fd: Int32) {
        if openedSockets.0 < 0 { openedSockets.0 = fd } else { openedSockets.1 = fd }
    }

    func opened(_ fd: Int32) -> Bool { openedSockets.0 == fd || openedSockets.1 == fd }

    /// curl is about to send the request (again, if this is not the first attempt) on the connection at
    /// `address`. A reused HTTP/1.1 connection with bytes waiting is dropped first (`dropsStaleConnection`), also
    /// when HTTP/2 was asked for and the provider offered only HTTP/1.1: nothing is sent on it, so that is no attempt.
    fileprivate func onPrerequest(_ address: ConnectionAddress?) -> Bool {
        if state == .running, let address,
           driver.dropsStaleConnection(at: address, for: self) {
            return true
        }
        attempts += 1
        guard state == .running, attempts == 1 || (attempts == 2 && replayable) else {
            resendRefused = true
            return false
        }
        return true
    }

    /// curl wants the body from its start for a resend, which comes before that send's pre-request call.
    fileprivate func onRewind() -> Bool {
        // Nothing sent and nothing read yet (a reused connection dropped before its send): nothing to rewind.
        if state == .running, attempts == 0, bodyOffset == 0 { return true }
        guard state == .running, replayable, attempts == 1, body.count == bodyLength else {
            resendRefused = true
            return false
        }
        bodyOffset = 0
        return true
    }
}

/// A curl header list built in one allocation: the `curl_slist` nodes, then their NUL-terminated lines
/// ("Name: value", "Name;" for an empty value, which "Name:" would remove instead; "Name:" to stop curl sending
/// its own). `curl_slist_append` would make two allocations per line and each line a String first. curl only
/// reads the list; its owner deallocates it after the handle has left the multi handle.
struct HeaderLines {
    private let storage: UnsafeMutableRawPointer
    let first: UnsafeMutablePointer<curl_slist>?

    /// The lines of `headers`, then "Name:" for each of `suppressed` that `headers` does not have.
    init(_ headers: HTTPHeaders, suppressing suppressed: [String]) {
        var count = headers.count
        var textBytes = 0
        for field in headers { textBytes += field.name.utf8.count + (field.value.isEmpty ? 2 : field.value.utf8.count + 3) }
        var missing: UInt64 = 0   // which of `suppressed` the request lacks
        for (i, name) in suppressed.enumerated() where i < 64 && !headers.contains(name) {
            missing |= 1 << i
            count += 1
            textBytes += name.utf8.count + 2
        }
        let nodeBytes = count * MemoryLayout<curl_slist>.stride
        storage = UnsafeMutableRawPointer.allocate(byteCount: max(1, nodeBytes + textBytes), alignment: MemoryLayout<curl_slist>.alignment)
        let nodes = storage.bindMemory(to: curl_slist.self, capacity: count)
        let text = (storage + nodeBytes).bindMemory(to: UInt8.self, capacity: textBytes)
        var offset = 0
        var index = 0
        var lineStart = 0
        func put(_ part: String) {
            let copied = part.utf8.withContiguousStorageIfAvailable { bytes in
                if let base = bytes.baseAddress { (text + offset).update(from: base, count: bytes.count) }
                return bytes.count
            }
            if let copied {
                offset += copied
            } else {
                for byte in part.utf8 { text[offset] = byte; offset += 1 }
            }
        }
        func put(_ byte: UInt8) {
            text[offset] = byte
            offset += 1
        }
        func endLine() {
            text[offset] = 0
            offset += 1
            let next = index + 1 < count ? nodes + index + 1 : nil
            (nodes + index).initialize(to: curl_slist(data: UnsafeMutableRawPointer(text + lineStart).assumingMemoryBound(to: CChar.self), next: next))
            index += 1
            lineStart = offset
        }
        for field in headers {
            put(field.name)
            if field.value.isEmpty {
                put(UInt8(ascii: ";"))
            } else {
                put(UInt8(ascii: ":"))
                put(UInt8(ascii: " "))
                put(field.value)
            }
            endLine()
        }
        for (i, name) in suppressed.enumerated() where i < 64 && missing & (1 << i) != 0 {
            put(name)
            put(UInt8(ascii: ":"))
            endLine()
        }
        first = count > 0 ? nodes : nil
    }

    func deallocate() { storage.deallocate() }
}

private let transferWrite: ccurl_data_callback = { pointer, size, count, userdata in
    guard let userdata else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.onBody(UnsafeRawBufferPointer(start: pointer, count: size * count))
}

private let transferHeader: ccurl_data_callback = { pointer, size, count, userdata in
    guard let userdata else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    transfer.onHeaderLine(UnsafeRawBufferPointer(start: pointer, count: size * count))
    return size * count
}

private let transferSeek: ccurl_seek_callback = { userdata, offset, origin in
    guard let userdata, offset == 0, origin == SEEK_SET else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.onRewind() ? Int32(CURL_SEEKFUNC_OK) : Int32(CURL_SEEKFUNC_CANTSEEK)
}

private let transferPrerequest: ccurl_prereq_callback = { userdata, primaryIP, localIP, primaryPort, localPort in
    guard let userdata else { return Int32(CURL_PREREQFUNC_ABORT) }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    var address: ConnectionAddress?
    if let primaryIP, let localIP {
        address = ConnectionAddress(primaryIP: UnsafePointer(primaryIP), localIP: UnsafePointer(localIP), primaryPort: Int(primaryPort), localPort: Int(localPort))
    }
    return transfer.onPrerequest(address) ? Int32(CURL_PREREQFUNC_OK) : Int32(CURL_PREREQFUNC_ABORT)
}

private let transferRead: ccurl_data_callback = { pointer, size, count, userdata in
    guard let userdata, let pointer else { return ccurl_readfunc_abort }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.onRead(UnsafeMutableRawBufferPointer(start: pointer, count: size * count))
}

/// curl's socket for a connection of this transfer, opened here so the driver counts it (close-on-exec too).
private let transferOpenSocket: ccurl_opensocket_callback = { clientp, _, address in
    guard let clientp, let address else { return CURL_SOCKET_BAD }
    let fd = Syscall.openSocket(family: address.pointee.family, type: address.pointee.socktype,
                                protocol: address.pointee.protocol)
    guard fd >= 0 else { return CURL_SOCKET_BAD }
    let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
    transfer.noteOpened(fd)
    transfer.driver.socketOpened(fd, origin: transfer.originID, shard: transfer.shard?.index ?? 0)
    return fd
}
