#if os(Linux)
import Glibc

/// Turns the `RESULT key=value ...` lines of one run into the comparison table (relay, nginx, haproxy, direct,
/// the relay/nginx and relay/haproxy ratios for every metric, and the target verdicts, judged against nginx).
enum Report {
    typealias Result = [String: String]

    struct Row { let title: String; let key: String; let proxyOnly: Bool; var lowerIsBetter = true }

    static func rows(for scenario: String) -> [Row] {
        switch scenario {
        case "S1", "S1x":
            return [Row(title: "event latency p50 (us)", key: "lat_p50_us", proxyOnly: false),
                    Row(title: "event latency p99 (us)", key: "lat_p99_us", proxyOnly: false),
                    Row(title: "event latency max (us)", key: "lat_max_us", proxyOnly: false),
                    Row(title: "time to first byte, cold proxy (us)", key: "ttfb_p50_us", proxyOnly: false),
                    Row(title: "events byte-exact / received", key: "exact_summary", proxyOnly: false),
                    Row(title: "errors", key: "errors", proxyOnly: false)]
        case "S1t", stateTTFBScenario:
            return [Row(title: "time to first byte p50 (us)", key: "ttfb_p50_us", proxyOnly: false),
                    Row(title: "time to first byte p99 (us)", key: "ttfb_p99_us", proxyOnly: false),
                    Row(title: "proxy CPU per stream (us)", key: "cpu_us_per_stream", proxyOnly: true),
                    Row(title: "  of which in the kernel (us)", key: "sys_us_per_stream", proxyOnly: true),
                    Row(title: "events byte-exact / received", key: "exact_summary", proxyOnly: false),
                    Row(title: "errors", key: "errors", proxyOnly: false)]
        case "S2", "S5", tlsScenario:
            return [Row(title: "event latency p50 (us)", key: "lat_p50_us", proxyOnly: false),
                    Row(title: "event latency p99 (us)", key: "lat_p99_us", proxyOnly: false),
                    Row(title: "time to first byte p50 (us)", key: "ttfb_p50_us", proxyOnly: false),
                    Row(title: "time to first byte p99 (us)", key: "ttfb_p99_us", proxyOnly: false),
                    Row(title: "events on time: latency < pace (%)", key: "on_time_pct", proxyOnly: false, lowerIsBetter: false),
                    Row(title: "streams ok / errors", key: "ok_errors", proxyOnly: false),
                    Row(title: "events received", key: "events", proxyOnly: false),
                    Row(title: "proxy peak RSS (MB)", key: "rss_peak_mb", proxyOnly: true),
                    Row(title: "proxy memory per stream (KB)", key: "mem_per_stream_kb", proxyOnly: true),
                    Row(title: "proxy CPU per event (us)", key: "cpu_us_per_event", proxyOnly: true),
                    Row(title: "  of which in the kernel (us)", key: "sys_us_per_event", proxyOnly: true),
                    Row(title: "proxy core busy (%)", key: "proxy_core_pct", proxyOnly: true),
                    Row(title: "load core busy: client+upstream (%)", key: "load_core_pct", proxyOnly: false)]
        case "S3", stateRPSScenario:
            return [Row(title: "requests/s", key: "rps", proxyOnly: false, lowerIsBetter: false),
                    Row(title: "latency p50 (ms)", key: "lat_p50_ms", proxyOnly: false),
                    Row(title: "latency p99 (ms)", key: "lat_p99_ms", proxyOnly: false),
                    Row(title: "errors (non-2xx + socket)", key: "errors", proxyOnly: false),
                    Row(title: "proxy CPU per request (us)", key: "cpu_us_per_request", proxyOnly: true),
                    Row(title: "  of which in the kernel (us)", key: "sys_us_per_request", proxyOnly: true),
                    Row(title: "proxy core busy (%)", key: "proxy_core_pct", proxyOnly: true),
                    Row(title: "load core busy: wrk+upstream (%)", key: "load_core_pct", proxyOnly: false)]
        case "S4":
            return [Row(title: "client close -> upstream sees close p50 (us)", key: "cancel_p50_us", proxyOnly: false),
                    Row(title: "client close -> upstream sees close p99 (us)", key: "cancel_p99_us", proxyOnly: false),
                    Row(title: "client close -> upstream sees close max (us)", key: "cancel_max_us", proxyOnly: false),
                    Row(title: "cancels reaching upstream / client closes", key: "cancel_summary", proxyOnly: false),
                    Row(title: "errors", key: "errors", proxyOnly: false)]
        case Self.attestScenario:
            return [Row(title: "CPU per asserted request (us)", key: "cpu_us_per_request", proxyOnly: true),
                    Row(title: "of which the signature check (us)", key: "verify_us_per_request", proxyOnly: true)]
        case "IR", Self.featuresScenario:
            return [Row(title: "instructions per request (S3 POST)", key: "ir_per_request", proxyOnly: true),
                    Row(title: "instructions per relayed event (S2)", key: "ir_per_event", proxyOnly: true),
                    Row(title: "instructions per stream set-up + teardown", key: "ir_per_stream", proxyOnly: true)]
        default:
            return []
        }
    }

    /// The performance round's targets (relay against nginx, or an absolute bound), where one was set.
    struct Goal {
        enum Bound { case ratioAtMost(Double), ratioAtLeast(Double), relayAtMost(Double), relayAtLeast(Double) }
        let text: String
        let bound: Bound

        /// " met" / " not met" when the row's numbers decide it.
        func verdict(ratio: Double?, relay: Double?) -> String {
            switch bound {
            case .ratioAtMost(let x): return ratio.map { $0 <= x ? " met" : " not met" } ?? ""
            case .ratioAtLeast(let x): return ratio.map { $0 >= x ? " met" : " not met" } ?? ""
            case .relayAtMost(let x): return relay.map { $0 <= x ? " met" : " not met" } ?? ""
            case .relayAtLeast(let x): return relay.map { $0 >= x ? " met" : " not met" } ?? ""
            }
        }
    }

    /// Issue 24's targets, one per row it lists: S1 latency p99 and time to first byte <= 1.2x nginx; S2 at
    /// 1 000 streams latency p50, p99 and first byte <= 2x; S2 at 5 000 streams pace >= 0.95x, p99 and first
    /// byte <= 2x, memory per stream and CPU per event <= 1.0x; S3 >= 0.5x; S4 cancel p99 <= 1 ms.
    static func goal(scenario: String, title: String, key: String) -> Goal? {
        let at1000 = title.hasPrefix("1000_"), at5000 = title.hasPrefix("5000_")
        switch (scenario, key) {
        case ("S1", "lat_p99_us"), ("S1", "ttfb_p50_us"), ("S1t", "ttfb_p50_us"): return Goal(text: "<=1.2x", bound: .ratioAtMost(1.2))
        case ("S2", "lat_p50_us") where at1000: return Goal(text: "<=2x", bound: .ratioAtMost(2))
        case ("S2", "lat_p99_us") where at1000 || at5000, ("S2", "ttfb_p50_us") where at1000 || at5000:
            return Goal(text: "<=2x", bound: .ratioAtMost(2))
        case ("S2", "on_time_pct") where at5000: return Goal(text: ">=0.95x", bound: .ratioAtLeast(0.95))
        case ("S2", "mem_per_stream_kb") where at5000, ("S2", "cpu_us_per_event") where at5000:
            return Goal(text: "<=1.0x", bound: .ratioAtMost(1.0))
        case ("S3", "rps"): return Goal(text: ">=0.5x", bound: .ratioAtLeast(0.5))
        case ("S4", "cancel_p99_us"): return Goal(text: "<=1000 us", bound: .relayAtMost(1000))
        case (Self.attestScenario, "cpu_us_per_request"): return Goal(text: "<100 us", bound: .relayAtMost(100))
        default: return nil
        }
    }

    /// What else ran on the two CPUs during the measurement (a shared machine's builds, say).
    static let interference = [
        Row(title: "other processes on proxy CPU (%)", key: "other_on_proxy_cpu_pct", proxyOnly: false),
        Row(title: "other processes on load CPU (%)", key: "other_on_load_cpu_pct", proxyOnly: false),
    ]

    static func parse(_ text: String) -> [Result] {
        var results: [Result] = []
        for line in text.split(separator: "\n") where line.hasPrefix("RESULT ") {
            var r: Result = [:]
            for pair in line.dropFirst(7).split(separator: " ") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { r[String(kv[0])] = String(kv[1]) }
            }
            summarize(&r)
            results.append(r)
        }
        return results
    }

    /// The values shown that are made from others: MB, and the "a/b" counts.
    static func summarize(_ r: inout Result) {
        if let peak = r["rss_peak_kb"].flatMap(Double.init) { r["rss_peak_mb"] = format1(peak / 1024) }
        if let ev = r["events"], let chk = r["exact_checked"] {
            r["exact_summary"] = "\((Int(chk) ?? 0) - (Int(r["err_exact"] ?? "0") ?? 0))/\(ev)"
        }
        if let ok = r["ok"], let err = r["errors"] { r["ok_errors"] = "\(ok)/\(err)" }
        if let seen = r["cancels_seen"], let closes = r["client_closes"] { r["cancel_summary"] = "\(seen)/\(closes)" }
    }

    /// S2 with the upstream behind TLS (Tests/bench/tls.sh): its own table, so the plain one keeps its columns.
    static let tlsScenario = "S2tls"
    static let tlsTargets = ["relay-tls", "relay-h2", "nginx-tls"]
    /// S3 and S1t with per-address limits on the memory backend and on Redis (Tests/bench/state.sh): their own table.
    static let stateRPSScenario = "S3state"
    static let stateTTFBScenario = "S1tstate"
    static let stateTargets = ["relay-mem", "relay-redis"]
    /// Instruction counts of the relay with a feature on beside the plain relay (Tests/bench/run.sh, `ir_run`).
    static let featuresScenario = "IRfeatures"
    static let featuresTargets = ["relay", "resume", "resume-redis", "noheartbeat", "budgets", "budgets-redis"]
    /// `relay-bench attest` (AttestBench): an App Attest assertion's CPU; the relay's own row, with its target.
    static let attestScenario = "ATTEST"

    static func render(_ results: [Result], header: String) -> String {
        var out = header.isEmpty ? "" : header + "\n"
        let own: Set<String?> = [tlsScenario, stateRPSScenario, stateTTFBScenario, featuresScenario, attestScenario]
        out += table(results.filter { !own.contains($0["scenario"]) }, targets: ["relay", "nginx", "haproxy", "direct"],
                     ratios: [("relay/nginx", "relay", "nginx"), ("relay/haproxy", "relay", "haproxy")], goals: true)
        let tls = results.filter { $0["scenario"] == tlsScenario }
        if !tls.isEmpty {
            out += "\nupstream over TLS: relay-tls = relay with HTTP/1.1, relay-h2 = relay with HTTP/2, nginx-tls = proxy_ssl\n"
            out += table(tls, targets: tlsTargets, ratios: [("relay/nginx", "relay-tls", "nginx-tls"),
                                                            ("h2/h1.1", "relay-h2", "relay-tls")])
        }
        let state = results.filter { $0["scenario"] == stateRPSScenario || $0["scenario"] == stateTTFBScenario }
        if !state.isEmpty {
            out += "\nshared state: relay-mem = per-address limits in memory, relay-redis = the same limits in Redis (on the load CPU)\n"
            out += table(state, targets: stateTargets, ratios: [("redis/memory", "relay-redis", "relay-mem")])
        }
        let features = results.filter { $0["scenario"] == featuresScenario }
        if !features.isEmpty {
            out += "\nfeatures: relay = usage and heartbeats (15 s) on; resume = the same route with routes[].resume (replay buffer in memory), resume-redis = the same on the Redis backend (buffer copied to Redis); noheartbeat = heartbeats off; budgets = token and dollar budgets per identity and in total (memory), budgets-redis = the same in Redis\n"
            out += table(features, targets: featuresTargets, ratios: [("resume/plain", "resume", "relay"), ("redis/plain", "resume-redis", "relay"),
                                                                      ("plain/no-hb", "relay", "noheartbeat"), ("budgets/plain", "budgets", "relay"),
                                                                      ("b-redis/plain", "budgets-redis", "relay")])
        }
        let attest = results.filter { $0["scenario"] == attestScenario }
        if !attest.isEmpty {
            out += "\napp attest: the relay's steps for one asserted request (headers, client data hash, key lookup in memory, ECDSA P-256 verify, counter raise); HTTP excluded (S3), Redis round trips excluded\n"
            out += table(attest, targets: ["relay"], ratios: [], goals: true)
        }
        return out
    }

    /// One table: a column per target, then each ratio (header, numerator target, denominator target).
    static func table(_ results: [Result], targets: [String], ratios: [(String, String, String)], goals: Bool = false) -> String {
        var out = ""
        let widths = (title: 46, col: max(11, (targets.map(\.count).max() ?? 0) + 2))
        func ratioWidth(_ header: String) -> Int { max(12, header.count + 2) }
        func pad(_ s: String, _ w: Int, left: Bool = false) -> String {
            let n = s.count
            if n >= w { return s }
            return left ? s + String(repeating: " ", count: w - n) : String(repeating: " ", count: w - n) + s
        }
        out += pad("metric", widths.title, left: true) + targets.map { pad($0, widths.col) }.joined()
            + ratios.map { pad($0.0, ratioWidth($0.0)) }.joined() + (goals ? "  target" : "") + "\n"
        out += String(repeating: "-", count: widths.title + widths.col * targets.count + ratios.map { ratioWidth($0.0) }.reduce(0, +)) + "\n"
        // Scenario groups in order of first appearance; a target measured in several rounds (BENCH_ROUNDS) has
        // a result per round, shown as their median.
        var groups: [String] = []
        var rounds: [String: [String: [Result]]] = [:]
        for r in results {
            let g = (r["scenario"] ?? "?") + "|" + (r["title"] ?? "")
            if rounds[g] == nil { groups.append(g); rounds[g] = [:] }
            rounds[g]![r["target"] ?? "?", default: []].append(r)
        }
        var byGroup: [String: [String: Result]] = [:]
        for (g, targets) in rounds { byGroup[g] = targets.mapValues(median) }
        for g in groups {
            let parts = g.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false)
            let scenario = String(parts[0])
            let most = rounds[g]!.values.map(\.count).max() ?? 1
            out += "\(scenario)  \(parts.count > 1 ? parts[1].replacingUnderscores() : "")"
                + (most > 1 ? " (median of \(most) rounds, targets interleaved)" : "") + "\n"
            // Instruction counts do not depend on what else runs.
            for row in rows(for: scenario) + (scenario == "IR" ? [] : interference) {
                var line = pad("  " + row.title, widths.title, left: true)
                var values: [String: String] = [:]
                for t in targets {
                    let v: String
                    if row.proxyOnly && t == "direct" { v = "-" } else { v = byGroup[g]![t]?[row.key] ?? "n/a" }
                    values[t] = v
                    line += pad(v, widths.col)
                }
                var ratio: Double?   // the first ratio's (relay/nginx): what the targets are judged on
                for (i, (header, numerator, denominator)) in ratios.enumerated() {
                    if let a = values[numerator].flatMap(Double.init), let b = values[denominator].flatMap(Double.init), b != 0 {
                        if i == 0 { ratio = a / b }
                        line += pad(format1(a / b, digits: 2) + "x", ratioWidth(header))
                    } else {
                        line += pad("", ratioWidth(header))
                    }
                }
                if goals, let goal = goal(scenario: scenario, title: String(parts.count > 1 ? parts[1] : ""), key: row.key) {
                    line += "  " + goal.text + goal.verdict(ratio: ratio, relay: values["relay"].flatMap(Double.init))
                }
                out += line + "\n"
            }
        }
        return out
    }
}

extension Report {
    /// Error counts, added up over the rounds rather than their median: an error in one round shows.
    static func isErrorCount(_ key: String) -> Bool { key == "errors" || key.hasPrefix("err_") }
    /// Worst cases: the worst round's, not the median of each round's worst.
    static let worst: Set<String> = ["lat_max_us", "cancel_max_us"]
    /// What the "a/b" summaries are made of: added up over the rounds for the summaries alone (the rows of these
    /// counts show medians, comparable between targets whatever their count of rounds).
    static let summaryCounts = ["events", "exact_checked", "err_exact", "ok", "errors", "cancels_seen", "client_closes"]

    /// One result from a target's rounds: error counts added up; worst cases the worst; each other numeric value
    /// the median of the rounds' (the mean of the middle two for an even count); any other value as it was when
    /// every round agrees, else the rounds' values joined with "|". The "a/b" summaries add up every round's
    /// counts, so a byte that differed in one round shows; they are "n/a" when a round has no such count (it failed).
    static func median(_ rounds: [Result]) -> Result {
        guard rounds.count > 1 else { return rounds.first ?? [:] }
        var out: Result = [:]
        for key in Set(rounds.flatMap(\.keys)) {
            let values = rounds.compactMap { $0[key] }
            let numbers = values.compactMap(Double.init)
            if isErrorCount(key), numbers.count == values.count {
                out[key] = String(Int(numbers.reduce(0, +)))
            } else if worst.contains(key), numbers.count == values.count, let m = numbers.max() {
                out[key] = values[numbers.firstIndex(of: m)!]
            } else if numbers.count == values.count, !numbers.isEmpty {
                let sorted = numbers.sorted()
                let mid = sorted.count / 2
                let m = sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
                // Integers stay integers (an even count can give a half); the rest to two decimals.
                out[key] = values.allSatisfy({ Int($0) != nil }) && m == m.rounded() ? String(Int(m)) : format1(m, digits: 2)
            } else {
                var seen: [String] = []
                for v in values where !seen.contains(v) { seen.append(v) }
                out[key] = seen.joined(separator: "|")
            }
        }
        summarize(&out)
        var sums: Result = [:]
        for key in summaryCounts {
            let counts = rounds.compactMap { $0[key].flatMap(Int.init) }
            if rounds.contains(where: { $0[key] != nil }) {
                sums[key] = counts.count == rounds.count || key == "err_exact" ? String(counts.reduce(0, +)) : "n/a"
            }
        }
        var summaries = sums
        summarize(&summaries)
        for key in ["exact_summary", "ok_errors", "cancel_summary"] {
            guard let summary = summaries[key] else { continue }
            out[key] = summary.contains("n/a") ? "n/a" : summary
        }
        return out
    }
}

extension Substring {
    func replacingUnderscores() -> String { String(self.map { $0 == "_" ? " " : $0 }) }
}
#endif
