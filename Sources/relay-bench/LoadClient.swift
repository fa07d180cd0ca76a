#if os(Linux)
import CBenchSupport
import Glibc

/// Opens `streams` concurrent streaming requests (ramped evenly over `rampMs`), one connection each, on one
/// thread with one epoll set. For every event it records the relay latency (its receive time minus the stamp
/// the upstream put in it, both CLOCK_MONOTONIC), rebuilds the bytes the upstream sent and compares; for every
/// stream, time to first byte (request written to first response byte), errors and bytes. With `closeAfter`
/// it closes each stream after that many events, notes the close time, and afterwards asks the upstream when
/// it saw each connection close. While it runs it samples the proxy's VmRSS and reads its CPU time.
final class LoadClient {
    struct Config {
        var host = "127.0.0.1"
        var port = 0
        var path = "/v1/chat/completions"
        var streams = 1
        var rampMs = 0.0
        var events = 50
        var paceUs = 10_000
        var size = 32
        var seed: UInt64 = 1
        var closeAfter = 0
        var idBase: UInt64 = 0
        var timeoutSeconds = 60.0
        var proxyPID: Int32 = 0
        var upstreamPID: Int32 = 0
        /// Another process of the load whose CPU counts with the upstream's (the TLS terminator in front of it).
        var extraLoadPID: Int32 = 0
        var upstreamPort = 0
        var labels = ""
        /// CPUs of the proxy and of the load (client + upstream), to report what else ran on them.
        var proxyCPU = -1
        var loadCPU = -1
        /// When set, every event's arrival (ms since the first stream started) and latency (µs) are written here,
        /// one line each: where in a run the slow events fall.
        var timelinePath = ""
    }

    enum Phase { case idle, connecting, sending, head, body, finished }
    enum ChunkState { case size, data, dataEnd, trailer, complete }

    final class Stream {
        let index: Int
        let id: UInt64
        var fd: Int32 = -1
        var phase = Phase.idle
        var request: [UInt8] = []
        var requestSent = 0
        var requestSentAt: UInt64 = 0
        var firstByteAt: UInt64 = 0
        var raw: [UInt8] = []
        var rawHead = 0
        var chunkState = ChunkState.size
        var chunkLeft = 0
        var sse: [UInt8] = []
        var sseScanned = 0
        var events = 0
        var sawDone = false
        var closedAt: UInt64 = 0
        init(index: Int, id: UInt64) { self.index = index; self.id = id }
    }

    let config: Config
    private var poller = Poller(capacity: 4096)
    private var timer = DeadlineTimer()
    private var sampler = DeadlineTimer()
    private var streams: [Stream] = []
    private var byFD: [Stream?]
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    private var expected: [UInt8] = []

    private var nextStart = 0
    private var active = 0
    private var finished = 0
    private var latencies: [UInt64] = []
    /// (arrival, latency) of every event, kept only with `timelinePath`.
    private var timeline: [(UInt64, UInt64)] = []
    private var ttfb: [UInt64] = []
    private var errors: [String: Int] = [:]
    private var firstErrors: [String] = []
    private var eventsReceived = 0
    private var exactChecked = 0
    private var bytesReceived = 0
    private var okStreams = 0
    private var rssMaxKB = 0

    init(config: Config, maxFDs: Int) {
        self.config = config
        byFD = Array(repeating: nil, count: maxFDs + 16)
        latencies.reserveCapacity(config.streams * config.events)
        expected.reserveCapacity(4096)
        poller.add(timer.fd, EPOLLIN.rawValue)
        poller.add(sampler.fd, EPOLLIN.rawValue)
    }

    private func fail(_ s: Stream, _ kind: String, _ detail: String = "") {
        errors[kind, default: 0] += 1
        if firstErrors.count < 5 { firstErrors.append("stream \(s.index): \(kind) \(detail)") }
        finish(s, ok: false)
    }

    private func finish(_ s: Stream, ok: Bool) {
        guard s.phase != .finished else { return }
        if s.fd >= 0 {
            poller.remove(s.fd)
            byFD[Int(s.fd)] = nil
            close(s.fd)
            s.fd = -1
        }
        if s.phase != .idle { active -= 1 }
        s.phase = .finished
        s.raw = []
        s.sse = []
        finished += 1
        if ok { okStreams += 1 }
    }

    func run() -> [(String, String)] {
        _ = cbs_raise_nofile(Int(config.streams) + 1024)
        var query = "stream=1&n=\(config.events)&pace_us=\(config.paceUs)&size=\(config.size)&seed=\(config.seed)"
        let body = "{\"model\":\"bench-model\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Say something long.\"}]}"
        streams.reserveCapacity(config.streams)
        for k in 0..<config.streams {
            let s = Stream(index: k, id: config.idBase + UInt64(k))
            query = "stream=1&n=\(config.events)&pace_us=\(config.paceUs)&size=\(config.size)&seed=\(config.seed)&id=\(s.id)"
            s.request = Array("POST \(config.path)?\(query) HTTP/1.1\r\nHost: 127.0.0.1:\(config.port)\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
            streams.append(s)
        }

        let cpuProxyStart = ProcStats.cpuTimes(pid: config.proxyPID)
        let preciseProxyStart = ProcStats.preciseCPUSeconds(pid: config.proxyPID)
        let cpuUpstreamStart = loadCPUSeconds()
        let cpuSelfStart = ProcStats.cpuSeconds(pid: getpid())
        let coresStart = ProcStats.coreTicks()
        let rssBase = ProcStats.statusKB(pid: config.proxyPID, key: "VmRSS") ?? 0
        rssMaxKB = rssBase

        let t0 = monotonicNow() + 1_000_000
        let rampNs = UInt64(config.rampMs * 1e6)
        let startAt: (Int) -> UInt64 = { k in
            self.config.streams <= 1 ? t0 : t0 + rampNs * UInt64(k) / UInt64(self.config.streams)
        }
        let deadline = t0 + rampNs + UInt64(config.timeoutSeconds * 1e9)
        timer.arm(at: startAt(0))
        sampler.arm(at: t0 + 50_000_000)

        while finished < streams.count {
            let now = monotonicNow()
            if now >= deadline {
                for s in streams where s.phase != .finished { fail(s, "timeout", "phase \(s.phase) events \(s.events)") }
                break
            }
            let n = poller.wait(timeoutMs: 200)
            for i in 0..<n {
                let e = poller.events[i]
                let fd = e.data.fd
                if fd == timer.fd {
                    timer.acknowledge()
                    let now = monotonicNow()
                    while nextStart < streams.count && startAt(nextStart) <= now { start(streams[nextStart]); nextStart += 1 }
                    if nextStart < streams.count { timer.arm(at: startAt(nextStart)) }
                    continue
                }
                if fd == sampler.fd {
                    sampler.acknowledge()
                    if let rss = ProcStats.statusKB(pid: config.proxyPID, key: "VmRSS") { rssMaxKB = max(rssMaxKB, rss) }
                    sampler.arm(at: monotonicNow() + 50_000_000)
                    continue
                }
                guard fd >= 0, Int(fd) < byFD.count, let s = byFD[Int(fd)] else { continue }
                if e.events & EPOLLOUT.rawValue != 0 || s.phase == .connecting { writable(s) }
                if byFD[Int(fd)] === s, e.events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    readable(s)
                }
            }
        }
        let end = monotonicNow()
        let wall = Double(end - t0) / 1e9
        let proxyTimes = ProcStats.cpuTimes(pid: config.proxyPID).flatMap { a in
            cpuProxyStart.map { (user: a.user - $0.user, system: a.system - $0.system) }
        }
        // The total to the nanosecond where the process's CPU clock can be read; the kernel's share (`system`)
        // stays in clock ticks, from /proc.
        let precise = ProcStats.preciseCPUSeconds(pid: config.proxyPID).flatMap { a in preciseProxyStart.map { a - $0 } }
        let cpuProxy = proxyTimes == nil ? nil : precise ?? proxyTimes.map { $0.user + $0.system }
        let cpuUpstream = loadCPUSeconds().flatMap { a in cpuUpstreamStart.map { a - $0 } }
        let cpuSelf = ProcStats.cpuSeconds(pid: getpid()).flatMap { a in cpuSelfStart.map { a - $0 } } ?? 0
        let coresEnd = ProcStats.coreTicks()
        /// Busy share of one CPU over the run (from /proc/stat), in percent.
        func coreBusy(_ cpu: Int) -> Double? {
            guard cpu >= 0, let a = coresStart[cpu], let b = coresEnd[cpu], b.total > a.total else { return nil }
            return Double(b.busy - a.busy) / Double(b.total - a.total) * 100
        }
        if let rss = ProcStats.statusKB(pid: config.proxyPID, key: "VmRSS") { rssMaxKB = max(rssMaxKB, rss) }
        let hwm = ProcStats.statusKB(pid: config.proxyPID, key: "VmHWM") ?? 0

        if !config.timelinePath.isEmpty, let first = timeline.map(\.0).min() {
            let lines = timeline.map { "\(($0.0 - first) / 1_000_000) \($0.1 / 1000)\n" }.joined()
            if let file = fopen(config.timelinePath, "w") {
                fputs(lines, file)
                fclose(file)
            }
        }
        latencies.sort()
        ttfb.sort()
        var out: [(String, String)] = []
        func put(_ k: String, _ v: String) { out.append((k, v)) }
        func us(_ ns: UInt64) -> String { String(format1(Double(ns) / 1000)) }
        put("streams", "\(config.streams)")
        put("ok", "\(okStreams)")
        put("errors", "\(errors.values.reduce(0, +))")
        for (k, v) in errors.sorted(by: { $0.key < $1.key }) { put("err_\(k)", "\(v)") }
        put("events", "\(eventsReceived)")
        put("exact_checked", "\(exactChecked)")
        put("bytes", "\(bytesReceived)")
        put("lat_p50_us", us(percentile(latencies, 50)))
        put("lat_p90_us", us(percentile(latencies, 90)))
        put("lat_p99_us", us(percentile(latencies, 99)))
        put("lat_max_us", us(latencies.last ?? 0))
        // Pace kept: an event is on time when it arrives before the next one is due (latency under the pace).
        let pace = UInt64(max(config.paceUs, 0)) * 1000
        let onTime = latencies.firstIndex { $0 >= pace } ?? latencies.count
        put("on_time_pct", format1(Double(onTime) / Double(max(latencies.count, 1)) * 100))
        put("ttfb_p50_us", us(percentile(ttfb, 50)))
        put("ttfb_p99_us", us(percentile(ttfb, 99)))
        put("wall_s", format1(wall, digits: 3))
        put("load_core_pct", format1((cpuSelf + (cpuUpstream ?? 0)) / wall * 100))
        // Everything else that ran on the two CPUs meanwhile (other builds on a shared machine): large values
        // mean the row is disturbed.
        if let busy = coreBusy(config.proxyCPU) {
            put("other_on_proxy_cpu_pct", format1(max(0, busy - (cpuProxy ?? 0) / wall * 100)))
        }
        if let busy = coreBusy(config.loadCPU) {
            put("other_on_load_cpu_pct", format1(max(0, busy - (cpuSelf + (cpuUpstream ?? 0)) / wall * 100)))
        }
        put("client_cpu_s", format1(cpuSelf, digits: 3))
        if let cpuUpstream { put("upstream_cpu_s", format1(cpuUpstream, digits: 3)) }
        if let cpuProxy {
            put("proxy_cpu_s", format1(cpuProxy, digits: 3))
            put("proxy_core_pct", format1(cpuProxy / wall * 100))
            let system = proxyTimes?.system ?? 0
            if eventsReceived > 0 {
                put("cpu_us_per_event", format1(cpuProxy * 1e6 / Double(eventsReceived), digits: 2))
                put("sys_us_per_event", format1(system * 1e6 / Double(eventsReceived), digits: 2))
            }
            put("cpu_us_per_stream", format1(cpuProxy * 1e6 / Double(config.streams)))
            put("sys_us_per_stream", format1(system * 1e6 / Double(config.streams)))
            put("rss_base_kb", "\(rssBase)")
            put("rss_peak_kb", "\(max(rssMaxKB, hwm))")
            put("mem_per_stream_kb", format1(Double(max(rssMaxKB, hwm) - rssBase) / Double(max(1, config.streams)), digits: 2))
        }
        if config.closeAfter > 0 { out += cancellationReport() }
        for line in firstErrors { writeStderr("relay-bench load: \(line)") }
        return out
    }

    /// CPU seconds of the upstream plus the extra load process, if any.
    private func loadCPUSeconds() -> Double? {
        guard let upstream = ProcStats.cpuSeconds(pid: config.upstreamPID) else { return nil }
        return upstream + (ProcStats.cpuSeconds(pid: config.extraLoadPID) ?? 0)
    }

    // MARK: Connections

    private func start(_ s: Stream) {
        let fd = cbs_connect(config.host, Int32(config.port))
        if fd < 0 { fail(s, "connect", String(cString: strerror(errno))); return }
        guard Int(fd) < byFD.count else { close(fd); fail(s, "fd_limit"); return }
        s.fd = fd
        s.phase = .connecting
        active += 1
        byFD[Int(fd)] = s
        poller.add(fd, Poller.readable | Poller.writable)
    }

    private func writable(_ s: Stream) {
        if s.phase == .connecting {
            let err = cbs_socket_error(s.fd)
            if err != 0 { fail(s, "connect", String(cString: strerror(err))); return }
            s.phase = .sending
        }
        guard s.phase == .sending else { return }
        // Stamped before the send: on a shared CPU the server may run (and answer) before send() returns.
        if s.requestSent == 0 { s.requestSentAt = monotonicNow() }
        while s.requestSent < s.request.count {
            let n = s.request.withUnsafeBytes {
                Glibc.send(s.fd, $0.baseAddress! + s.requestSent, $0.count - s.requestSent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n > 0 { s.requestSent += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            fail(s, "send", String(cString: strerror(errno)))
            return
        }
        s.phase = .head
        s.request = []
        poller.modify(s.fd, Poller.readable)
    }

    private func readable(_ s: Stream) {
        while s.phase == .head || s.phase == .body || s.phase == .sending || s.phase == .connecting {
            let n = recv(s.fd, readBuffer.baseAddress, readBuffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                let at = monotonicNow()
                if s.firstByteAt == 0 {
                    s.firstByteAt = at
                    if s.requestSentAt > 0 { ttfb.append(at - s.requestSentAt) }
                }
                bytesReceived += n
                s.raw.append(contentsOf: UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]))
                consume(s, at: at)
                if n < readBuffer.count { return }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n == 0 { fail(s, "eof", "after \(s.events) events"); return }
            fail(s, "reset", "\(String(cString: strerror(errno))) after \(s.events) events")
            return
        }
    }

    private func consume(_ s: Stream, at: UInt64) {
        if s.phase == .head {
            let headEnd = s.raw.withUnsafeBytes { find("\r\n\r\n", in: $0) }
            guard let headEnd else { return }
            let head = String(decoding: s.raw[0..<headEnd], as: UTF8.self)
            let status = head.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? ""
            guard status == "200" else { fail(s, "status", "\(status)"); return }
            guard head.lowercased().contains("transfer-encoding: chunked") else { fail(s, "not_chunked"); return }
            s.rawHead = headEnd + 4
            s.phase = .body
        }
        // De-chunk what is there into `sse`.
        let done: Bool = s.raw.withUnsafeBytes { raw -> Bool in
            var p = s.rawHead
            loop: while p < raw.count {
                switch s.chunkState {
                case .size:
                    guard let nl = memchr(raw.baseAddress! + p, 0x0A, raw.count - p) else { break loop }
                    let lineEnd = raw.baseAddress!.distance(to: UnsafeRawPointer(nl))
                    var size = 0
                    var q = p
                    while q < lineEnd, let h = hexValue(raw[q]) { size = size * 16 + h; q += 1 }
                    if q == p { s.chunkState = .complete; s.rawHead = raw.count; return false }   // malformed
                    p = lineEnd + 1
                    if size == 0 { s.chunkState = .trailer } else { s.chunkLeft = size; s.chunkState = .data }
                case .data:
                    let take = min(s.chunkLeft, raw.count - p)
                    s.sse.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[p..<(p + take)]))
                    p += take
                    s.chunkLeft -= take
                    if s.chunkLeft == 0 { s.chunkState = .dataEnd }
                case .dataEnd:
                    guard raw.count - p >= 2 else { break loop }
                    guard raw[p] == 0x0D && raw[p + 1] == 0x0A else { s.chunkState = .complete; s.rawHead = raw.count; return false }
                    p += 2
                    s.chunkState = .size
                case .trailer:
                    guard let nl = memchr(raw.baseAddress! + p, 0x0A, raw.count - p) else { break loop }
                    let lineEnd = raw.baseAddress!.distance(to: UnsafeRawPointer(nl))
                    let empty = lineEnd == p || (lineEnd == p + 1 && raw[p] == 0x0D)
                    p = lineEnd + 1
                    if empty { s.chunkState = .complete; s.rawHead = p; return true }
                case .complete:
                    break loop
                }
            }
            s.rawHead = p
            return false
        }
        if s.rawHead >= s.raw.count { s.raw.removeAll(keepingCapacity: true); s.rawHead = 0 }
        else if s.rawHead > 16 * 1024 { s.raw.removeFirst(s.rawHead); s.rawHead = 0 }
        if s.chunkState == .complete && !done { fail(s, "bad_chunking"); return }
        processEvents(s, at: at)
        if s.phase == .finished { return }
        if done {
            if s.events == config.events && s.sawDone && s.sse.isEmpty { finish(s, ok: true) }
            else { fail(s, "incomplete", "events \(s.events) done \(s.sawDone) leftover \(s.sse.count)") }
        }
    }

    private func processEvents(_ s: Stream, at: UInt64) {
        var start = 0
        let consumed: Int = s.sse.withUnsafeBytes { buf -> Int in
            var from = max(0, s.sseScanned - 1)
            while let end = find("\n\n", in: buf, from: from) {
                let event = UnsafeRawBufferPointer(rebasing: buf[start..<(end + 2)])
                start = end + 2
                from = start
                if event.count == EventFormat.done.count && memcmp(event.baseAddress!, EventFormat.done, event.count) == 0 {
                    s.sawDone = true
                    continue
                }
                guard let stamp = EventFormat.stamp(of: event) else {
                    errors["exact", default: 0] += 1
                    continue
                }
                latencies.append(at >= stamp ? at - stamp : 0)
                if !config.timelinePath.isEmpty { timeline.append((at, at >= stamp ? at - stamp : 0)) }
                expected.removeAll(keepingCapacity: true)
                EventFormat.render(into: &expected, id: s.id, seq: s.events, seed: config.seed, size: config.size, stamp: stamp)
                exactChecked += 1
                if expected.count != event.count || memcmp(expected, event.baseAddress!, event.count) != 0 {
                    errors["exact", default: 0] += 1
                    if firstErrors.count < 5 { firstErrors.append("stream \(s.index): event \(s.events) differs from what the upstream sent") }
                }
                s.events += 1
                eventsReceived += 1
                if config.closeAfter > 0 && s.events == config.closeAfter { return start }
            }
            s.sseScanned = buf.count
            return start
        }
        if consumed > 0 {
            s.sse.removeFirst(consumed)
            s.sseScanned = max(0, s.sseScanned - consumed)
        }
        if config.closeAfter > 0 && s.events >= config.closeAfter && s.phase != .finished {
            // Leave now, the way an app's Stop button does: close the socket.
            s.closedAt = monotonicNow()
            finish(s, ok: true)
        }
    }

    // MARK: Cancellation (S4)

    private func cancellationReport() -> [(String, String)] {
        // Ask the upstream for the closes it saw until it has seen one for every stream the client closed, or
        // for at most 3 s (a cancel that takes longer is as good as lost), then clear its list for the next run.
        // The first question waits 100 ms, so that it does not reach the upstream together with the last streams'
        // closes and hold them up while the upstream builds its answer.
        let wanted = Set(streams.lazy.filter { $0.closedAt > 0 }.map(\.id))
        var closes: [UInt64: UInt64] = [:]
        let deadline = monotonicNow() + 3_000_000_000
        var asked = 0
        repeat {
            usleep(asked == 0 ? 100_000 : 10_000)
            asked += 1
            closes = [:]
            if let text = httpGet(port: config.upstreamPort, path: "/_bench/closes") {
                for line in text.split(separator: "\n") {
                    let parts = line.split(separator: " ")
                    if parts.count == 2, let id = UInt64(parts[0]), let t = UInt64(parts[1]) { closes[id] = t }
                }
            }
        } while monotonicNow() < deadline && !wanted.allSatisfy({ closes[$0] != nil })
        _ = httpGet(port: config.upstreamPort, path: "/_bench/closes?clear=1")
        let missing = wanted.filter { closes[$0] == nil }.sorted()
        if !missing.isEmpty {
            let stats = httpGet(port: config.upstreamPort, path: "/_bench/stats") ?? "no stats\n"
            writeStderr("cancellation: the upstream saw no close for \(missing.count) of \(wanted.count) streams within 3 s "
                        + "(ids \(missing.prefix(10).map(String.init).joined(separator: " "))); upstream: \(stats)")
        }
        var delays: [UInt64] = []
        var closed = 0
        for s in streams where s.closedAt > 0 {
            closed += 1
            if let t = closes[s.id] { delays.append(t >= s.closedAt ? t - s.closedAt : 0) }
        }
        delays.sort()
        return [
            ("client_closes", "\(closed)"),
            ("cancels_seen", "\(delays.count)"),
            ("cancel_p50_us", format1(Double(percentile(delays, 50)) / 1000)),
            ("cancel_p99_us", format1(Double(percentile(delays, 99)) / 1000)),
            ("cancel_max_us", format1(Double(delays.last ?? 0) / 1000)),
        ]
    }
}

/// A blocking GET to 127.0.0.1:port (control endpoints), returning the body.
func httpGet(port: Int, path: String) -> String? {
    let fd = cbs_connect("127.0.0.1", Int32(port))
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    guard poll(&pfd, 1, 2000) == 1, cbs_socket_error(fd) == 0 else { return nil }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    let deadline = monotonicNow() + 5_000_000_000
    func body() -> String? {
        response.withUnsafeBytes { raw -> String? in
            guard let headEnd = find("\r\n\r\n", in: raw) else { return nil }
            let head = String(decoding: UnsafeRawBufferPointer(rebasing: raw[0..<headEnd]), as: UTF8.self).lowercased()
            guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                  let length = Int(line.dropFirst("content-length:".count).trimmingCharacters()),
                  raw.count - (headEnd + 4) >= length else { return nil }
            return String(decoding: UnsafeRawBufferPointer(rebasing: raw[(headEnd + 4)..<(headEnd + 4 + length)]), as: UTF8.self)
        }
    }
    while monotonicNow() < deadline {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 1000) >= 0 else { return nil }
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n > 0 { response.append(contentsOf: buffer[0..<n]) } else if n == 0 { break }
        else if errno != EAGAIN && errno != EINTR { break }
        if let text = body() { return text }
    }
    return body()
}

@inline(__always) private func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 0x30...0x39: return Int(b - 0x30)
    case 0x61...0x66: return Int(b - 0x61 + 10)
    case 0x41...0x46: return Int(b - 0x41 + 10)
    default: return nil
    }
}

func format1(_ v: Double, digits: Int = 1) -> String {
    guard v.isFinite else { return "nan" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let r = (v * scale).rounded() / scale
    var s = "\(r)"
    if s.hasSuffix(".0") && digits > 0 { s = String(s.dropLast(2)) }
    if let dot = s.firstIndex(of: "."), s.distance(from: dot, to: s.endIndex) - 1 > digits { s = String(s[...s.index(dot, offsetBy: digits)]) }
    return s
}

extension Substring {
    func trimmingCharacters() -> String { String(self).trimmingSpaces() }
}
#endif
