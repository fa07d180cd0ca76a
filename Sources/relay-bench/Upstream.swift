#if os(Linux)
import CBenchSupport
import Glibc

/// The fake LLM provider: one thread, one epoll set, one timerfd. Streams OpenAI-shaped SSE chunks (chunked
/// transfer encoding, one chunk per event, one send per chunk) at the pace the request asks for, stamping each
/// event with CLOCK_MONOTONIC just before its send; answers non-streaming requests with a small JSON body and a
/// Content-Length; keeps connections alive. It records when a connection closes while a stream is still
/// running (recv = 0 or ECONNRESET), by the stream id of the request, for the cancellation scenario.
///
/// Request parameters, from the query string or else from the JSON body (`"bench_<name>": number`):
///   stream=1 (or `"stream":true` in the body), n=events, pace_us (or pace_ms), size=content bytes per event,
///   seed, id (stream id for close records).
/// Control: GET /_bench/stats, GET /_bench/closes[?clear=1] (lines "id monotonic_ns").
final class FakeUpstream {
    final class Conn {
        let fd: Int32
        var input: [UInt8] = []
        var output: [UInt8] = []
        var outputHead = 0
        var writeArmed = false
        var closeAfterResponse = false
        // The running stream, if any.
        var streaming = false
        var id: UInt64 = 0
        var seed: UInt64 = 0
        var events = 0
        var paceNs: UInt64 = 0
        var size = 0
        var seq = 0
        var generation: UInt32 = 0
        init(fd: Int32) { self.fd = fd }
    }

    private var poller = Poller(capacity: 4096)
    private var timer = DeadlineTimer()
    private var heap = DeadlineHeap()
    private var conns: [Conn?]
    private let listenFD: Int32
    let port: Int
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    private var scratch: [UInt8] = []
    private var closes: [(UInt64, UInt64)] = []
    private var stats = (accepted: 0, requests: 0, streamsStarted: 0, streamsCompleted: 0, streamsClosedEarly: 0,
                         eventsSent: 0, bytesSent: 0, partialWrites: 0)

    init(host: String, port: Int, maxFDs: Int) throws(BenchError) {
        let fd = cbs_listen(host, Int32(port), 65535)
        guard fd >= 0 else { throw BenchError("upstream: cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        listenFD = fd
        self.port = Int(cbs_local_port(fd))
        conns = Array(repeating: nil, count: maxFDs + 16)
        scratch.reserveCapacity(64 * 1024)
        poller.add(listenFD, EPOLLIN.rawValue)
        poller.add(timer.fd, EPOLLIN.rawValue)
    }

    func run(untilSeconds maxSeconds: Double) {
        let deadline = monotonicNow() + UInt64(maxSeconds * 1e9)
        while monotonicNow() < deadline {
            let n = poller.wait(timeoutMs: 1000)
            for i in 0..<n {
                let e = poller.events[i]
                let fd = e.data.fd
                if fd == listenFD { acceptAll(); continue }
                if fd == timer.fd { timer.acknowledge(); fireDue(); continue }
                guard fd >= 0, Int(fd) < conns.count, let c = conns[Int(fd)] else { continue }
                if e.events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    readable(c)
                }
                if e.events & EPOLLOUT.rawValue != 0, conns[Int(fd)] === c { flush(c) }
            }
        }
    }

    private func acceptAll() {
        while true {
            let fd = cbs_accept(listenFD)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return   // EAGAIN, or EMFILE: the backlog holds the rest until descriptors free up
            }
            guard Int(fd) < conns.count else { close(fd); continue }
            stats.accepted += 1
            conns[Int(fd)] = Conn(fd: fd)
            poller.add(fd, Poller.readable)
        }
    }

    // MARK: Reading and requests

    private func readable(_ c: Conn) {
        while true {
            let n = recv(c.fd, readBuffer.baseAddress, readBuffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                c.input.append(contentsOf: UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]))
                if n < readBuffer.count { break }
                continue
            }
            if n == 0 { closeConn(c, peerGone: true); return }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            closeConn(c, peerGone: true)   // ECONNRESET and friends
            return
        }
        processRequests(c)
    }

    private func processRequests(_ c: Conn) {
        while !c.streaming, conns[Int(c.fd)] === c, !c.input.isEmpty {
            let consumed = c.input.withUnsafeBytes { buf -> Int? in
                guard let headEnd = find("\r\n\r\n", in: buf) else { return nil }
                let head = UnsafeRawBufferPointer(rebasing: buf[0..<headEnd])
                var contentLength = 0
                var connectionClose = false
                // Header lines (case-insensitive names we care about).
                var lineStart = 0
                while lineStart < head.count {
                    let lineEnd = find("\r\n", in: head, from: lineStart) ?? head.count
                    let line = UnsafeRawBufferPointer(rebasing: head[lineStart..<lineEnd])
                    if let colon = line.firstIndex(of: 0x3A) {
                        let name = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self).lowercased()
                        let value = String(decoding: UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]), as: UTF8.self)
                            .trimmingSpaces()
                        if name == "content-length" { contentLength = Int(value) ?? 0 }
                        if name == "connection" && value.lowercased().contains("close") { connectionClose = true }
                    }
                    lineStart = lineEnd + 2
                }
                let total = headEnd + 4 + contentLength
                guard buf.count >= total else { return nil }
                let firstLineEnd = find("\r\n", in: head) ?? head.count
                let requestLine = String(decoding: UnsafeRawBufferPointer(rebasing: head[0..<firstLineEnd]), as: UTF8.self)
                let body = UnsafeRawBufferPointer(rebasing: buf[(headEnd + 4)..<total])
                c.closeAfterResponse = connectionClose
                handle(c, requestLine: requestLine, body: body)
                return total
            }
            guard let consumed else { return }
            if consumed >= c.input.count { c.input.removeAll(keepingCapacity: true) } else { c.input.removeFirst(consumed) }
        }
    }

    private func handle(_ c: Conn, requestLine: String, body: UnsafeRawBufferPointer) {
        stats.requests += 1
        let parts = requestLine.split(separator: " ")
        let target = parts.count > 1 ? String(parts[1]) : "/"
        var path = target
        var query: [String: String] = [:]
        if let q = target.firstIndex(of: "?") {
            path = String(target[..<q])
            for pair in target[target.index(after: q)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                query[String(kv[0])] = kv.count > 1 ? String(kv[1]) : ""
            }
        }
        if path.hasPrefix("/_bench/") { control(c, path: path, query: query); return }

        func param(_ name: String) -> UInt64? {
            if let v = query[name] { return UInt64(v) }
            return bodyNumber(body, key: "bench_" + name)
        }
        let wantsStream: Bool
        if let s = query["stream"] { wantsStream = s == "1" || s == "true" } else { wantsStream = find("\"stream\":true", in: body) != nil }
        let size = Int(param("size") ?? 32)
        let seed = param("seed") ?? 1
        let id = param("id") ?? 0
        if !wantsStream {
            scratch.removeAll(keepingCapacity: true)
            var json: [UInt8] = []
            json.append(ascii: "{\"id\":\"chatcmpl-")
            json.appendDecimal(id)
            json.append(ascii: "\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":\"bench-model\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"")
            EventFormat.appendPayload(into: &json, id: id, seq: 0, seed: seed, size: size)
            json.append(ascii: "\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"total_tokens\":12}}")
            scratch.append(ascii: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ")
            scratch.appendDecimal(json.count)
            scratch.append(ascii: "\r\n")
            if c.closeAfterResponse { scratch.append(ascii: "Connection: close\r\n") }
            scratch.append(ascii: "\r\n")
            scratch.append(contentsOf: json)
            send(c, scratch)
            if c.closeAfterResponse { closeWhenFlushed(c) }
            return
        }
        c.streaming = true
        c.id = id
        c.seed = seed
        c.size = size
        c.events = Int(param("n") ?? 50)
        if let us = param("pace_us") { c.paceNs = us * 1000 } else { c.paceNs = (param("pace_ms") ?? 10) * 1_000_000 }
        c.seq = 0
        c.generation &+= 1
        stats.streamsStarted += 1
        scratch.removeAll(keepingCapacity: true)
        scratch.append(ascii: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n")
        if c.closeAfterResponse { scratch.append(ascii: "Connection: close\r\n") }
        scratch.append(ascii: "\r\n")
        // The head and the first event leave together; the rest follow at the pace.
        appendNextEvent(c)
        send(c, scratch)
        if c.streaming, conns[Int(c.fd)] === c {
            heap.push(.init(at: monotonicNow() + c.paceNs, fd: c.fd, generation: c.generation))
            rearm()
        }
    }

    /// Appends the next event's chunk to `scratch` (and the end of the stream after the last one).
    private func appendNextEvent(_ c: Conn) {
        if c.events > 0 {
            let sizeAt = scratch.count
            scratch.append(contentsOf: repeatElement(0x30, count: 6))   // placeholder: 4 hex digits + CRLF
            scratch.append(ascii: "\r\n")
            let payloadAt = scratch.count
            EventFormat.render(into: &scratch, id: c.id, seq: c.seq, seed: c.seed, size: c.size, stamp: monotonicNow())
            let length = scratch.count - payloadAt
            // Fixed-width hex size (leading zeros are valid chunk-size syntax) so no bytes move.
            let hex: StaticString = "0123456789abcdef"
            hex.withUTF8Buffer { h in
                for k in 0..<6 { scratch[sizeAt + k] = h[(length >> (4 * (5 - k))) & 0xF] }
            }
            scratch.append(ascii: "\r\n")
            c.seq += 1
            stats.eventsSent += 1
        }
        if c.seq >= c.events {
            scratch.append(ascii: "e\r\n")
            scratch.append(contentsOf: EventFormat.done)
            scratch.append(ascii: "\r\n0\r\n\r\n")
            c.streaming = false
            c.generation &+= 1
            stats.streamsCompleted += 1
        }
    }

    private func fireDue() {
        let now = monotonicNow()
        while let top = heap.first, top.at <= now + 20_000 {
            _ = heap.pop()
            guard let c = conns[Int(top.fd)], c.generation == top.generation, c.streaming else { continue }
            scratch.removeAll(keepingCapacity: true)
            appendNextEvent(c)
            let stillStreaming = c.streaming
            let fd = c.fd
            send(c, scratch)
            if conns[Int(fd)] === c {
                if stillStreaming {
                    heap.push(.init(at: top.at + c.paceNs, fd: c.fd, generation: c.generation))
                } else {
                    if c.closeAfterResponse { closeWhenFlushed(c) } else { processRequests(c) }
                }
            }
        }
        rearm()
    }

    private func rearm() {
        if let top = heap.first { timer.arm(at: top.at) }
    }

    // MARK: Writing

    private func send(_ c: Conn, _ bytes: [UInt8]) {
        stats.bytesSent += bytes.count
        if c.outputHead < c.output.count {
            c.output.append(contentsOf: bytes)
            return
        }
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n > 0 { sent += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            closeConn(c, peerGone: true)
            return
        }
        if sent < bytes.count {
            stats.partialWrites += 1
            c.output.removeAll(keepingCapacity: true)
            c.outputHead = 0
            c.output.append(contentsOf: bytes[sent...])
            if !c.writeArmed {
                c.writeArmed = true
                poller.modify(c.fd, Poller.readable | Poller.writable)
            }
        }
    }

    private func flush(_ c: Conn) {
        while c.outputHead < c.output.count {
            let n = c.output.withUnsafeBytes {
                Glibc.send(c.fd, $0.baseAddress! + c.outputHead, $0.count - c.outputHead, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n > 0 { c.outputHead += n; continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            closeConn(c, peerGone: true)
            return
        }
        c.output.removeAll(keepingCapacity: c.output.capacity <= 256 * 1024)
        c.outputHead = 0
        if c.writeArmed {
            c.writeArmed = false
            poller.modify(c.fd, Poller.readable)
        }
        if c.closeAfterResponse && !c.streaming { closeConn(c, peerGone: false) }
    }

    private func closeWhenFlushed(_ c: Conn) {
        if c.outputHead >= c.output.count { closeConn(c, peerGone: false) }
    }

    private func closeConn(_ c: Conn, peerGone: Bool) {
        guard conns[Int(c.fd)] === c else { return }
        if c.streaming && peerGone {
            closes.append((c.id, monotonicNow()))
            stats.streamsClosedEarly += 1
        }
        c.streaming = false
        c.generation &+= 1
        conns[Int(c.fd)] = nil
        poller.remove(c.fd)
        close(c.fd)
    }

    // MARK: Control endpoints

    private func control(_ c: Conn, path: String, query: [String: String]) {
        var body = ""
        if path == "/_bench/closes" {
            for (id, t) in closes { body += "\(id) \(t)\n" }
            if query["clear"] == "1" { closes.removeAll() }
        } else if path == "/_bench/stats" {
            body = "accepted=\(stats.accepted) requests=\(stats.requests) streams_started=\(stats.streamsStarted) "
                + "streams_completed=\(stats.streamsCompleted) streams_closed_early=\(stats.streamsClosedEarly) "
                + "events_sent=\(stats.eventsSent) bytes_sent=\(stats.bytesSent) partial_writes=\(stats.partialWrites)\n"
        } else {
            body = "unknown control path\n"
        }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n".utf8))
        scratch.append(contentsOf: Array(body.utf8))
        send(c, scratch)
    }

    private func bodyNumber(_ body: UnsafeRawBufferPointer, key: String) -> UInt64? {
        let pattern = Array("\"\(key)\":".utf8)
        guard body.count >= pattern.count else { return nil }
        for i in 0...(body.count - pattern.count) {
            var match = true
            for k in 0..<pattern.count where body[i + k] != pattern[k] { match = false; break }
            if match {
                var j = i + pattern.count
                while j < body.count && body[j] == 0x20 { j += 1 }
                var end = j
                while end < body.count && body[end] >= 0x30 && body[end] <= 0x39 { end += 1 }
                return parseUInt(UnsafeRawBufferPointer(rebasing: body[j..<end]))
            }
        }
        return nil
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
#endif
