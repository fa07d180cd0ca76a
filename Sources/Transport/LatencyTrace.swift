#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Support

/// Where an event's time goes inside the relay, for benchmarks only: off unless the process starts with
/// `SSE_RELAY_LATENCY_TRACE=1`, and then it writes one summary line per span to standard error every second
/// (`latency-trace <span> n= p50= p99= max=` in microseconds) and a `total` set when the interval lines stop.
///
/// The spans separate waiting from working along an event's path (readiness → handler → client write) and a
/// stream's set-up path (accept → request → upstream → first byte). Off, each probe is one load and branch of
/// `enabled`; nothing is allocated.
///
/// Shared by every loop, behind a lock (taken only when tracing is on).
public enum LatencyTrace {
    public enum Span: Int, CaseIterable, Sendable {
        /// epoll_wait returned → the batch starts on the loop's queue (waiting for the queue).
        case queueWait
        /// One batch: from its start to its end (all the handlers of up to 128 events).
        case batch
        /// epoll_wait returned → this event's handler starts (waiting behind the batch's earlier events).
        case position
        /// One handler's work.
        case handler
        /// A block handed to the loop with `queue.async` or `EventLoop.soon`: enqueued → started.
        case hop
        /// A connection accepted → its request head parsed (the exchange starts).
        case acceptToRequest
        /// The exchange starts → the response head is written (the upstream's part, curl included).
        case requestToHead
        /// The response head is written → it leaves on the socket (held for the first body delivery, or at most
        /// until the slice of handlers running ends).
        case headToSend
        /// Events handled per batch (a count, not microseconds).
        case eventsPerBatch

        var name: String {
            switch self {
            case .queueWait: "queue_wait"
            case .batch: "batch"
            case .position: "position_in_batch"
            case .handler: "handler"
            case .hop: "hop"
            case .acceptToRequest: "accept_to_request"
            case .requestToHead: "request_to_head"
            case .headToSend: "head_to_send"
            case .eventsPerBatch: "events_per_batch"
            }
        }
    }

    public static let enabled: Bool = getenv("SSE_RELAY_LATENCY_TRACE") != nil

    /// CLOCK_MONOTONIC in nanoseconds (0 when tracing is off, so probes cost no system call).
    @inline(__always)
    public static func now() -> UInt64 {
        guard enabled else { return 0 }
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Records `span` as the time from `start` (a `now()`) until now.
    @inline(__always)
    public static func since(_ start: UInt64, _ span: Span) {
        guard enabled, start != 0 else { return }
        record(span, now() &- start)
    }

    public static func record(_ span: Span, _ value: UInt64) {
        guard enabled else { return }
        let line: String? = state.withLock { s in
            s.interval.add(span, value)
            s.total.add(span, value)
            let t = now()
            if s.lastPrint == 0 { s.lastPrint = t }
            guard t &- s.lastPrint >= 1_000_000_000 else { return nil }
            s.lastPrint = t
            let text = s.interval.report(prefix: "latency-trace") + s.total.report(prefix: "latency-trace-total")
            s.interval = Histograms()
            return text
        }
        if let line { FileDescriptorLogSink.standardError.write(line: String(line.dropLast())) }
    }

    private struct Histograms {
        /// Per span, log2 buckets of nanoseconds (counts: of units).
        var buckets = [[UInt64]](repeating: [UInt64](repeating: 0, count: 64), count: Span.allCases.count)
        var maxima = [UInt64](repeating: 0, count: Span.allCases.count)

        mutating func add(_ span: Span, _ value: UInt64) {
            let bucket = value == 0 ? 0 : 64 - value.leadingZeroBitCount
            buckets[span.rawValue][bucket] += 1
            maxima[span.rawValue] = max(maxima[span.rawValue], value)
        }

        /// Percentiles as the upper bound of the bucket holding them (within a factor of 2).
        func report(prefix: String) -> String {
            var text = ""
            for span in Span.allCases {
                let counts = buckets[span.rawValue]
                let n = counts.reduce(0, +)
                guard n > 0 else { continue }
                func percentile(_ p: Double) -> UInt64 {
                    let rank = UInt64((Double(n) * p).rounded(.up))
                    var seen: UInt64 = 0
                    for (i, c) in counts.enumerated() {
                        seen += c
                        if seen >= max(rank, 1) { return i == 0 ? 0 : (UInt64(1) << UInt64(i)) - 1 }
                    }
                    return maxima[span.rawValue]
                }
                let scale: (UInt64) -> String = span == .eventsPerBatch
                    ? { String($0) } : { "\($0 / 1000).\($0 % 1000 / 100)" }
                text += "\(prefix) \(span.name) n=\(n) p50=\(scale(min(percentile(0.5), maxima[span.rawValue])))"
                text += " p99=\(scale(min(percentile(0.99), maxima[span.rawValue]))) max=\(scale(maxima[span.rawValue]))\n"
            }
            return text
        }
    }

    private struct State {
        var interval = Histograms()
        var total = Histograms()
        var lastPrint: UInt64 = 0
    }

    private static let state = Locked(State())
}
