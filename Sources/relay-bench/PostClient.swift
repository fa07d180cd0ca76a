#if os(Linux)
import CBenchSupport
import Glibc

/// Exactly `requests` small non-streaming POSTs over `connections` keep-alive connections, each sent when the
/// connection's previous answer has been read whole (a closed loop, as wrk drives S3, but with a fixed count):
/// what an instruction count per request needs, since a profiler slows the proxy down by a varying factor and
/// wrk can only run for a time. Answers framed by Content-Length or chunked; anything else, or a status other
/// than 200, counts as an error.
final class PostClient {
    private final class Conn {
        let fd: Int32
        var input: [UInt8] = []
        var sent = 0
        var awaiting = false
        init(fd: Int32) { self.fd = fd }
    }

    private let host: String
    private let port: Int
    private let requestBytes: [UInt8]
    private let total: Int
    private let connectionCount: Int
    private var poller = Poller(capacity: 1024)
    private var conns: [Int32: Conn] = [:]
    private var started = 0
    private var completed = 0
    private var errors = 0
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    init(host: String, port: Int, path: String, requests: Int, connections: Int) {
        self.host = host
        self.port = port
        self.total = requests
        self.connectionCount = max(1, min(connections, requests))
        let body = "{\"model\":\"bench-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
        requestBytes = Array(("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
    }

    func run(timeoutSeconds: Double) -> [(String, String)] {
        let t0 = monotonicNow()
        for _ in 0..<connectionCount {
            let fd = cbs_connect(host, Int32(port))
            guard fd >= 0 else { errors += 1; continue }
            let c = Conn(fd: fd)
            conns[fd] = c
            poller.add(fd, Poller.readable | Poller.writable)
        }
        let deadline = t0 + UInt64(timeoutSeconds * 1e9)
        while completed + errors < total && !conns.isEmpty && monotonicNow() < deadline {
            let n = poller.wait(timeoutMs: 100)
            for i in 0..<n {
                let e = poller.events[i]
                guard let c = conns[e.data.fd] else { continue }
                if e.events & Poller.writable != 0 { writable(c) }
                if conns[c.fd] != nil, e.events & (Poller.readable | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { readable(c) }
            }
        }
        let wall = Double(monotonicNow() - t0) / 1e9
        for c in conns.values { close(c.fd) }
        conns.removeAll()
        let lost = total - completed - errors
        return [("requests", "\(completed)"), ("errors", "\(errors + lost)"), ("wall_s", format1(wall, digits: 3)),
                ("rps", format1(Double(completed) / max(wall, 1e-9)))]
    }

    private func writable(_ c: Conn) {
        if !c.awaiting {
            guard started < total else { poller.modify(c.fd, Poller.readable); return }
            started += 1
            c.awaiting = true
            c.sent = 0
        }
        while c.sent < requestBytes.count {
            let n = requestBytes.withUnsafeBytes {
                send(c.fd, $0.baseAddress! + c.sent, $0.count - c.sent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n > 0 { c.sent += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            drop(c)
            return
        }
        poller.modify(c.fd, Poller.readable)
    }

    private func readable(_ c: Conn) {
        while true {
            let n = recv(c.fd, readBuffer.baseAddress, readBuffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                c.input.append(contentsOf: UnsafeRawBufferPointer(rebasing: readBuffer[0..<n]))
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
            drop(c)
            return
        }
        while c.awaiting, let (length, ok) = responseLength(c.input) {
            c.input.removeFirst(length)
            c.awaiting = false
            if ok { completed += 1 } else { errors += 1 }
            if started < total { poller.modify(c.fd, Poller.readable | Poller.writable) }
        }
    }

    private func drop(_ c: Conn) {
        if c.awaiting { errors += 1 }
        poller.remove(c.fd)
        close(c.fd)
        conns[c.fd] = nil
    }

    /// The length of the complete response at the start of `bytes` and whether it was a 200, or nil if more
    /// bytes are needed.
    private func responseLength(_ bytes: [UInt8]) -> (Int, Bool)? {
        bytes.withUnsafeBytes { raw -> (Int, Bool)? in
            guard let headEnd = find("\r\n\r\n", in: raw) else { return nil }
            // The head lowercased, to find its fields whatever their case.
            let head = UnsafeRawBufferPointer(rebasing: raw[0..<headEnd]).map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
            return head.withUnsafeBytes { lower -> (Int, Bool)? in
                let ok = find("http/1.1 200 ", in: lower) == 0
                var at = headEnd + 4
                if let field = find("\r\ncontent-length:", in: lower) {
                    var length = 0
                    for b in UnsafeRawBufferPointer(rebasing: lower[(field + 17)...]) {
                        if b == 0x20 { continue }
                        guard b >= 0x30 && b <= 0x39 else { break }
                        length = length * 10 + Int(b - 0x30)
                    }
                    return raw.count - at >= length ? (at + length, ok) : nil
                }
                guard find("\r\ntransfer-encoding: chunked", in: lower) != nil else { return (at, false) }
                while true {
                    guard let lineEnd = find("\r\n", in: raw, from: at) else { return nil }
                    var size = 0
                    for b in UnsafeRawBufferPointer(rebasing: raw[at..<lineEnd]) {
                        guard let v = hexDigit(b) else { break }
                        size = size * 16 + v
                    }
                    at = lineEnd + 2 + size + 2
                    guard raw.count >= at else { return nil }
                    if size == 0 { return (at, ok) }
                }
            }
        }
    }

    private func hexDigit(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: Int(b - 0x30)
        case 0x41...0x46: Int(b - 0x41 + 10)
        case 0x61...0x66: Int(b - 0x61 + 10)
        default: nil
        }
    }
}
#endif
