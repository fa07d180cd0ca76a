#if os(Linux)
import CBenchSupport
import Glibc

// Shared pieces of the fake upstream and the load client: a level-triggered epoll wrapper, a deadline heap,
// the event format both sides agree on (so the client can check byte-exactness), and small byte helpers.

@inline(__always) func monotonicNow() -> UInt64 { cbs_now_ns() }

/// Level-triggered epoll set; the token of each registration is the descriptor itself.
struct Poller {
    let fd: Int32
    private(set) var events: UnsafeMutableBufferPointer<epoll_event>

    init(capacity: Int = 1024) {
        fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(fd >= 0, "epoll_create1 failed")
        events = .allocate(capacity: capacity)
    }

    static let readable = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
    static let writable = EPOLLOUT.rawValue

    func add(_ target: Int32, _ mask: UInt32) {
        var e = epoll_event()
        e.events = mask
        e.data.fd = target
        _ = epoll_ctl(fd, EPOLL_CTL_ADD, target, &e)
    }

    func modify(_ target: Int32, _ mask: UInt32) {
        var e = epoll_event()
        e.events = mask
        e.data.fd = target
        _ = epoll_ctl(fd, EPOLL_CTL_MOD, target, &e)
    }

    func remove(_ target: Int32) {
        _ = epoll_ctl(fd, EPOLL_CTL_DEL, target, nil)
    }

    /// Waits up to `timeoutMs` (-1: forever); returns how many entries of `events` are filled.
    func wait(timeoutMs: Int32) -> Int {
        while true {
            let n = epoll_wait(fd, events.baseAddress, Int32(events.count), timeoutMs)
            if n >= 0 { return Int(n) }
            if errno != EINTR { return 0 }
        }
    }
}

/// A one-shot CLOCK_MONOTONIC timer descriptor armed at absolute deadlines.
struct DeadlineTimer {
    let fd: Int32
    private(set) var armedAt: UInt64 = 0
    init() {
        fd = cbs_timer_create()
        precondition(fd >= 0, "timerfd_create failed")
    }
    mutating func arm(at deadline: UInt64) {
        if deadline == armedAt { return }
        armedAt = deadline
        _ = cbs_timer_set(fd, max(deadline, 1))
    }
    mutating func acknowledge() {
        var value: UInt64 = 0
        _ = read(fd, &value, 8)
        armedAt = 0
    }
}

/// Min-heap of (deadline, fd, generation). Stale entries (generation changed) are skipped by the owner.
struct DeadlineHeap {
    struct Entry { var at: UInt64; var fd: Int32; var generation: UInt32 }
    private var items: [Entry] = []
    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var first: Entry? { items.first }

    mutating func push(_ e: Entry) {
        items.append(e)
        var i = items.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if items[p].at <= items[i].at { break }
            items.swapAt(p, i)
            i = p
        }
    }

    mutating func pop() -> Entry? {
        guard !items.isEmpty else { return nil }
        let top = items[0]
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            let n = items.count
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < n && items[l].at < items[m].at { m = l }
                if r < n && items[r].at < items[m].at { m = r }
                if m == i { break }
                items.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}

// MARK: - Bytes

extension Array where Element == UInt8 {
    @inline(__always) mutating func append(ascii s: StaticString) {
        s.withUTF8Buffer { self.append(contentsOf: $0) }
    }

    mutating func appendDecimal(_ value: UInt64) {
        if value == 0 { append(0x30); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var v = value
        var n = 0
        Swift.withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 { d[n] = UInt8(truncatingIfNeeded: v % 10) + 0x30; v /= 10; n += 1 }
            for i in stride(from: n - 1, through: 0, by: -1) { self.append(d[i]) }
        }
    }

    mutating func appendDecimal(_ value: Int) { appendDecimal(UInt64(Swift.max(0, value))) }

    /// Exactly `width` digits, zero-padded (the event stamp has a fixed width so sizes do not depend on time).
    mutating func appendPadded(_ value: UInt64, width: Int) {
        let start = count
        append(contentsOf: repeatElement(0x30, count: width))
        var v = value
        var i = start + width - 1
        while v > 0 && i >= start { self[i] = UInt8(truncatingIfNeeded: v % 10) + 0x30; v /= 10; i -= 1 }
    }

    mutating func appendHex(_ value: Int) {
        let hex: StaticString = "0123456789abcdef"
        var shift = 60
        while shift > 0 && (value >> shift) & 0xF == 0 { shift -= 4 }
        hex.withUTF8Buffer { h in
            while shift >= 0 { self.append(h[(value >> shift) & 0xF]); shift -= 4 }
        }
    }
}

/// Index of `needle` in `hay[from...]`, or nil.
func find(_ needle: StaticString, in hay: UnsafeRawBufferPointer, from: Int = 0) -> Int? {
    needle.withUTF8Buffer { n -> Int? in
        let m = n.count
        guard m > 0, hay.count - from >= m else { return nil }
        let first = n[0]
        var i = from
        let last = hay.count - m
        while i <= last {
            guard let p = memchr(hay.baseAddress! + i, Int32(first), last - i + 1) else { return nil }
            i = hay.baseAddress!.distance(to: UnsafeRawPointer(p))
            if memcmp(hay.baseAddress! + i, n.baseAddress!, m) == 0 { return i }
            i += 1
        }
        return nil
    }
}

func parseUInt(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
    guard !bytes.isEmpty else { return nil }
    var v: UInt64 = 0
    for b in bytes {
        guard b >= 0x30 && b <= 0x39 else { return nil }
        v = v &* 10 &+ UInt64(b - 0x30)
    }
    return v
}

// MARK: - The event format

/// OpenAI-shaped streaming chunks. The stamp `t` (CLOCK_MONOTONIC ns, 19 digits) is the last field, at a fixed
/// distance from the event's end, so the client reads it without parsing JSON; everything else is a function
/// of (seed, id, seq, size), so the client can rebuild the exact bytes the upstream sent.
enum EventFormat {
    static let stampWidth = 19
    /// Bytes after the stamp: `}\n\n`.
    static let suffixCount = 3
    static let done: [UInt8] = Array("data: [DONE]\n\n".utf8)

    static func render(into out: inout [UInt8], id: UInt64, seq: Int, seed: UInt64, size: Int, stamp: UInt64) {
        out.append(ascii: "data: {\"id\":\"chatcmpl-")
        out.appendDecimal(id)
        out.append(ascii: "\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"")
        appendPayload(into: &out, id: id, seq: seq, seed: seed, size: size)
        out.append(ascii: "\"},\"finish_reason\":null}],\"seq\":")
        out.appendDecimal(seq)
        out.append(ascii: ",\"t\":")
        out.appendPadded(stamp, width: stampWidth)
        out.append(ascii: "}\n\n")
    }

    static func appendPayload(into out: inout [UInt8], id: UInt64, seq: Int, seed: UInt64, size: Int) {
        let alphabet: StaticString = "abcdefghijklmnopqrstuvwxyz .,eta"
        var state = seed ^ (id &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(seq) &* 0xBF58_476D_1CE4_E5B9)
        var left = size
        alphabet.withUTF8Buffer { a in
            while left > 0 {
                state = state &+ 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                for _ in 0..<min(12, left) {
                    out.append(a[Int(z & 31)])
                    z >>= 5
                    left -= 1
                }
            }
        }
    }

    /// The stamp of a rendered event, or nil if the event is too short or not digits there.
    static func stamp(of event: UnsafeRawBufferPointer) -> UInt64? {
        guard event.count > stampWidth + suffixCount else { return nil }
        let end = event.count - suffixCount
        return parseUInt(UnsafeRawBufferPointer(rebasing: event[(end - stampWidth)..<end]))
    }
}

// MARK: - /proc readers (the proxy's CPU and memory)

enum ProcStats {
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        var total = 0
        while true {
            if total == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, $0.count - total) }
            if n <= 0 { break }
            total += n
        }
        return String(decoding: buffer[0..<total], as: UTF8.self)
    }

    /// utime + stime of the whole process (all threads, dead ones included), in seconds.
    static func cpuSeconds(pid: Int32) -> Double? {
        cpuTimes(pid: pid).map { $0.user + $0.system }
    }

    /// CPU time of the whole process (all threads, dead ones included) in seconds, to the nanosecond: its CPU-time
    /// clock (`clock_getcpuclockid`). /proc/PID/stat counts in clock ticks (10 ms here), which made S1t's CPU per
    /// stream (200 streams) a multiple of 50 µs.
    static func preciseCPUSeconds(pid: Int32) -> Double? {
        guard pid > 0 else { return nil }
        var clock = clockid_t()
        var now = timespec()
        guard clock_getcpuclockid(pid, &clock) == 0, clock_gettime(clock, &now) == 0 else { return nil }
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// utime and stime (the kernel's share: system calls, the network stack) of the whole process, in seconds.
    static func cpuTimes(pid: Int32) -> (user: Double, system: Double)? {
        guard pid > 0, let text = readFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime field 14, stime field 15 (1-based in proc(5)).
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u / ticksPerSecond, s / ticksPerSecond)
    }

    /// Busy and total jiffies of each CPU (from /proc/stat): busy = user + nice + system + irq + softirq + steal.
    static func coreTicks() -> [Int: (busy: UInt64, total: UInt64)] {
        var result: [Int: (busy: UInt64, total: UInt64)] = [:]
        guard let text = readFile("/proc/stat") else { return result }
        for line in text.split(separator: "\n") where line.hasPrefix("cpu") && !line.hasPrefix("cpu ") {
            let f = line.split(separator: " ")
            guard f.count > 8, let cpu = Int(f[0].dropFirst(3)) else { continue }
            let v = f[1...8].map { UInt64($0) ?? 0 }   // user nice system idle iowait irq softirq steal
            result[cpu] = (busy: v[0] + v[1] + v[2] + v[5] + v[6] + v[7], total: v.reduce(0, +))
        }
        return result
    }

    /// A `Vm...:` line of /proc/PID/status in kB.
    static func statusKB(pid: Int32, key: String) -> Int? {
        guard pid > 0, let text = readFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
            let digits = line.dropFirst(key.count + 1).filter { $0 >= "0" && $0 <= "9" }
            return Int(String(digits))
        }
        return nil
    }
}

func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

func writeStderr(_ s: String) {
    var line = s
    if !line.hasSuffix("\n") { line += "\n" }
    line.withCString { _ = write(2, $0, strlen($0)) }
}

func writeStdout(_ s: String) {
    var line = s
    if !line.hasSuffix("\n") { line += "\n" }
    line.withCString { _ = write(1, $0, strlen($0)) }
}

/// `--name value` options after the subcommand.
struct Options {
    private var values: [String: String] = [:]
    init(_ args: ArraySlice<String>) {
        var i = args.startIndex
        while i < args.endIndex {
            let a = args[i]
            if a.hasPrefix("--") {
                let key = String(a.dropFirst(2))
                if let eq = key.firstIndex(of: "=") {
                    values[String(key[..<eq])] = String(key[key.index(after: eq)...])
                } else if i + 1 < args.endIndex {
                    values[key] = args[i + 1]
                    i += 1
                } else {
                    values[key] = "1"
                }
            }
            i += 1
        }
    }
    func string(_ key: String, _ fallback: String) -> String { values[key] ?? fallback }
    func int(_ key: String, _ fallback: Int) -> Int { values[key].flatMap { Int($0) } ?? fallback }
    func double(_ key: String, _ fallback: Double) -> Double { values[key].flatMap { Double($0) } ?? fallback }
    func has(_ key: String) -> Bool { values[key] != nil }
}
#endif
