#if os(Linux)
import Glibc
import Usage

/// `relay-bench tap`: the usage tap's CPU per relayed event, on the benchmark's own events (`EventFormat`), one
/// event per delivery as the relay sees them. Three passes over the same deliveries: nothing (the loop's own cost),
/// the tap (`UsageTap.feed`), and the tap plus the usage-event filter (a route that injected `include_usage`).
/// Process CPU time (`CLOCK_PROCESS_CPUTIME_ID`), so other load on the machine does not count.
enum TapBench {
    static func run(events: Int, streams: Int, size: Int) -> String {
        var deliveries: [[UInt8]] = []
        for seq in 0..<events {
            var out: [UInt8] = []
            EventFormat.render(into: &out, id: 1, seq: seq, seed: 1, size: size, stamp: 1_700_000_000_000_000_000)
            deliveries.append(out)
        }
        deliveries.append(EventFormat.done)
        var sink = 0
        func measure(_ body: () -> Void) -> Double {
            let start = cpuNanoseconds()
            body()
            return Double(cpuNanoseconds() - start) / Double(streams * deliveries.count)
        }
        let none = measure {
            for _ in 0..<streams { for d in deliveries { sink &+= d.count } }
        }
        let tap = measure {
            for _ in 0..<streams {
                var t = UsageTap(provider: .openai, contentType: "text/event-stream")
                for d in deliveries { d.withUnsafeBytes { t.feed($0) } }
                sink &+= t.contentEvents
            }
        }
        let tapAndFilter = measure {
            for _ in 0..<streams {
                var t = UsageTap(provider: .openai, contentType: "text/event-stream")
                var f = UsageEventStripper()
                for d in deliveries {
                    d.withUnsafeBytes { b in
                        t.feed(b)
                        if case .bytes(let kept) = f.process(b) { sink &+= kept.count }
                    }
                }
                sink &+= t.contentEvents
            }
        }
        func ns(_ v: Double) -> String { String(Int(v.rounded())) }
        return "RESULT tap events_per_stream=\(events) streams=\(streams) size=\(size) sink=\(sink % 10)"
            + " loop_ns_per_event=\(ns(none)) tap_ns_per_event=\(ns(tap - none)) tap_and_filter_ns_per_event=\(ns(tapAndFilter - none))"
    }

    private static func cpuNanoseconds() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }
}
#endif
