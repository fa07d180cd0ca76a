// RelayMetrics.render(): the exact Prometheus text (0.0.4) after a known sequence of updates, its structure
// (HELP/TYPE per family, cumulative histograms, +Inf == count, exact _sum), label escaping, and — when the
// binary is installed — `promtool check metrics` on the result.
import Dispatch
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import TestSupportCore

/// The exposition split on line-feed bytes (what a Prometheus parser does; `String.split` on Characters would
/// not split a "\r\n" grapheme). The text must end with "\n", so the last element is dropped when empty.
private func wireLines(_ text: String) -> [String] {
    var parts = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    if parts.last == "" { parts.removeLast() }
    return parts
}

private let bounds = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "120", "300"]

/// Histogram lines for `name` with the given cumulative counts (15 finite buckets), then +Inf, _sum and _count.
private func histogramLines(_ name: String, _ counts: [Int], infinity: Int, sum: String) -> [String] {
    precondition(counts.count == bounds.count)
    var out = zip(bounds, counts).map { "\(name)_bucket{le=\"\($0)\"} \($1)" }
    out.append("\(name)_bucket{le=\"+Inf\"} \(infinity)")
    out.append("\(name)_sum \(sum)")
    out.append("\(name)_count \(infinity)")
    return out
}

/// A fixed sequence of updates; every value is exact in binary so sums compare exactly.
private func populated() -> RelayMetrics {
    let m = RelayMetrics()
    m.exchangeEnded(route: "/v1/", status: 200, outcome: "completed", firstByteSeconds: 0.25, durationSeconds: 3)
    m.exchangeEnded(route: "/v1/", status: 200, outcome: "completed", firstByteSeconds: 0.00390625, durationSeconds: 48)
    m.exchangeEnded(route: "/anthropic/", status: 502, outcome: "upstream_error", firstByteSeconds: nil, durationSeconds: 0.5)
    m.exchangeEnded(route: "/v1/", status: 405, outcome: "rejected", firstByteSeconds: nil, durationSeconds: 0)
    m.exchangeEnded(route: "/v1/", status: 200, outcome: "completed", firstByteSeconds: 1, durationSeconds: 400)
    m.upstreamError(kind: "timeout")
    m.upstreamError(kind: "connect")
    m.upstreamError(kind: "timeout")
    m.cancelled(phase: "streaming")
    m.cancelled(phase: "before_head")
    m.cancelled(phase: "before_head")
    m.rejected(reason: "too_many_connections")
    m.rejected(reason: "method_not_allowed")
    m.tokens(route: "/v1/", model: "gpt-4o", source: "provider", prompt: 10, completion: 20)
    m.tokens(route: "/v1/", model: "gpt-4o", source: "provider", prompt: 5, completion: 7)
    m.tokens(route: "/v1/", model: "other", source: "estimate", prompt: 3, completion: 1)
    // Nano-dollars add up exactly: 0.1 + 0.2 is 0.3 here, not 0.30000000000000004.
    m.cost(route: "/v1/", model: "gpt-4o", source: "provider", nanoUSD: 100_000_000)
    m.cost(route: "/v1/", model: "gpt-4o", source: "provider", nanoUSD: 200_000_000)
    m.cost(route: "/v1/", model: "other", source: "estimate", nanoUSD: 1)
    m.attestation(kind: "none", result: "missing")
    m.attestation(kind: "app_attest", result: "valid")
    m.attestation(kind: "app_attest", result: "valid")
    m.attestationRegistration(result: "registered")
    m.streamResume(result: "resumed")
    m.streamResume(result: "not_found")
    m.streamResume(result: "resumed")
    m.activeConnections.add(5, ordering: .relaxed)
    m.activeConnections.subtract(2, ordering: .relaxed)
    m.activeStreams.add(2, ordering: .relaxed)
    m.bytesToClients.add(1234, ordering: .relaxed)
    m.bytesToUpstream.add(56, ordering: .relaxed)
    return m
}

private let expectedPopulated: [String] = [
    "# HELP sse_relay_requests_total Exchanges ended, by route, status and outcome.",
    "# TYPE sse_relay_requests_total counter",
    #"sse_relay_requests_total{route="/anthropic/",status="502",outcome="upstream_error"} 1"#,
    #"sse_relay_requests_total{route="/v1/",status="200",outcome="completed"} 3"#,
    #"sse_relay_requests_total{route="/v1/",status="405",outcome="rejected"} 1"#,
    "# HELP sse_relay_active_connections Open client connections.",
    "# TYPE sse_relay_active_connections gauge",
    "sse_relay_active_connections 3",
    "# HELP sse_relay_active_streams Exchanges in flight (upstream transfers running).",
    "# TYPE sse_relay_active_streams gauge",
    "sse_relay_active_streams 2",
    "# HELP sse_relay_bytes_relayed_total Body bytes relayed, by direction.",
    "# TYPE sse_relay_bytes_relayed_total counter",
    #"sse_relay_bytes_relayed_total{direction="to_client"} 1234"#,
    #"sse_relay_bytes_relayed_total{direction="to_upstream"} 56"#,
    "# HELP sse_relay_time_to_first_byte_seconds From request head to the first upstream body byte.",
    "# TYPE sse_relay_time_to_first_byte_seconds histogram",
] + histogramLines("sse_relay_time_to_first_byte_seconds",
                   [1, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3], infinity: 3, sum: "1.25390625") + [
    "# HELP sse_relay_request_duration_seconds From request head to the end of the exchange.",
    "# TYPE sse_relay_request_duration_seconds histogram",
] + histogramLines("sse_relay_request_duration_seconds",
                   [1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4], infinity: 5, sum: "451.5") + [
    "# HELP sse_relay_upstream_errors_total Upstream failures, by kind.",
    "# TYPE sse_relay_upstream_errors_total counter",
    #"sse_relay_upstream_errors_total{kind="connect"} 1"#,
    #"sse_relay_upstream_errors_total{kind="timeout"} 2"#,
    "# HELP sse_relay_cancellations_total Upstream transfers cancelled because the client left, by phase.",
    "# TYPE sse_relay_cancellations_total counter",
    #"sse_relay_cancellations_total{phase="before_head"} 2"#,
    #"sse_relay_cancellations_total{phase="streaming"} 1"#,
    "# HELP sse_relay_rejections_total Requests answered by the relay without reaching the provider, by reason.",
    "# TYPE sse_relay_rejections_total counter",
    #"sse_relay_rejections_total{reason="method_not_allowed"} 1"#,
    #"sse_relay_rejections_total{reason="too_many_connections"} 1"#,
    "# HELP sse_relay_budget_cuts_total Streams ended early because the token budget was used up, by route.",
    "# TYPE sse_relay_budget_cuts_total counter",
    "# HELP sse_relay_state_unavailable_total Admissions decided while the shared state store did not answer, by outcome (rejected, allowed, local).",
    "# TYPE sse_relay_state_unavailable_total counter",
    "# HELP sse_relay_settles_dropped_total Budget settlements the shared state store never applied (Redis away past the pending queue's bound, or refusing): that usage went uncounted.",
    "# TYPE sse_relay_settles_dropped_total counter",
    "sse_relay_settles_dropped_total 0",
    "# HELP sse_relay_attestations_total Proofs of the genuine app on routes that ask for one, by kind (app_attest, app_check, none) and result.",
    "# TYPE sse_relay_attestations_total counter",
    #"sse_relay_attestations_total{kind="app_attest",result="valid"} 2"#,
    #"sse_relay_attestations_total{kind="none",result="missing"} 1"#,
    "# HELP sse_relay_attestation_registrations_total Calls of the App Attest challenge and register endpoints, by result.",
    "# TYPE sse_relay_attestation_registrations_total counter",
    #"sse_relay_attestation_registrations_total{result="registered"} 1"#,
    "# HELP sse_relay_stream_resumes_total Resumes and stops of resumable streams, by result.",
    "# TYPE sse_relay_stream_resumes_total counter",
    #"sse_relay_stream_resumes_total{result="not_found"} 1"#,
    #"sse_relay_stream_resumes_total{result="resumed"} 2"#,
    "# HELP sse_relay_tokens_total Tokens used, by route, model (allowlisted or other), kind (prompt, completion) and source (provider, estimate).",
    "# TYPE sse_relay_tokens_total counter",
    #"sse_relay_tokens_total{route="/v1/",model="gpt-4o",kind="completion",source="provider"} 27"#,
    #"sse_relay_tokens_total{route="/v1/",model="gpt-4o",kind="prompt",source="provider"} 15"#,
    #"sse_relay_tokens_total{route="/v1/",model="other",kind="completion",source="estimate"} 1"#,
    #"sse_relay_tokens_total{route="/v1/",model="other",kind="prompt",source="estimate"} 3"#,
    "# HELP sse_relay_cost_usd_total US dollars spent at the configured prices, by route, model (allowlisted or other) and source (provider, estimate); exact to the nano-dollar.",
    "# TYPE sse_relay_cost_usd_total counter",
    #"sse_relay_cost_usd_total{route="/v1/",model="gpt-4o",source="provider"} 0.300000000"#,
    #"sse_relay_cost_usd_total{route="/v1/",model="other",source="estimate"} 0.000000001"#,
]

private let families: [(name: String, type: String)] = [
    ("sse_relay_requests_total", "counter"), ("sse_relay_active_connections", "gauge"),
    ("sse_relay_active_streams", "gauge"), ("sse_relay_bytes_relayed_total", "counter"),
    ("sse_relay_time_to_first_byte_seconds", "histogram"), ("sse_relay_request_duration_seconds", "histogram"),
    ("sse_relay_upstream_errors_total", "counter"), ("sse_relay_cancellations_total", "counter"),
    ("sse_relay_rejections_total", "counter"), ("sse_relay_budget_cuts_total", "counter"),
    ("sse_relay_state_unavailable_total", "counter"), ("sse_relay_settles_dropped_total", "counter"),
    ("sse_relay_attestations_total", "counter"), ("sse_relay_attestation_registrations_total", "counter"),
    ("sse_relay_stream_resumes_total", "counter"), ("sse_relay_tokens_total", "counter"), ("sse_relay_cost_usd_total", "counter"),
]

/// One histogram read back from the text.
private struct ParsedHistogram {
    var buckets: [(le: String, count: UInt64)] = []
    var sum: Double?
    var count: UInt64?
}

/// The value after the last space of a sample line.
private func sampleValue(_ line: String) -> String { String(line[line.index(after: line.lastIndex(of: " ")!)...]) }

private func parseHistogram(_ lines: [String], _ name: String, sourceLocation: SourceLocation = #_sourceLocation) -> ParsedHistogram {
    var h = ParsedHistogram()
    for line in lines {
        if line.hasPrefix("\(name)_bucket{le=\"") {
            let rest = line.dropFirst("\(name)_bucket{le=\"".count)
            let le = String(rest[..<rest.firstIndex(of: "\"")!])
            h.buckets.append((le, UInt64(sampleValue(line))!))
        } else if line.hasPrefix("\(name)_sum ") {
            #expect(h.sum == nil, "one _sum", sourceLocation: sourceLocation)
            h.sum = Double(sampleValue(line))
        } else if line.hasPrefix("\(name)_count ") {
            #expect(h.count == nil, "one _count", sourceLocation: sourceLocation)
            h.count = UInt64(sampleValue(line))
        }
    }
    return h
}

/// Buckets in ascending `le` ending with +Inf, counts non-decreasing, +Inf == _count.
private func expectWellFormed(_ h: ParsedHistogram, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(h.buckets.map(\.le) == bounds + ["+Inf"], sourceLocation: sourceLocation)
    let finite = h.buckets.dropLast().map { Double($0.le)! }
    #expect(finite == RelayMetrics.latencyBuckets, sourceLocation: sourceLocation)
    for (a, b) in zip(h.buckets, h.buckets.dropFirst()) {
        #expect(a.count <= b.count, "le=\(a.le) \(a.count) > le=\(b.le) \(b.count)", sourceLocation: sourceLocation)
    }
    #expect(h.buckets.last?.count == h.count, sourceLocation: sourceLocation)
}

/// promtool on the PATH (or in the usual places), if installed.
private let promtoolPath: String? = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let dirs = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"]
    return dirs.map { "\($0)/promtool" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}()

/// `promtool check metrics` on `text`: its exit status and combined output.
private func promtoolCheck(_ text: String) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: promtoolPath!)
    process.arguments = ["check", "metrics"]
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.run()
    input.fileHandleForWriting.write(Data(text.utf8))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitForExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite struct RelayMetricsTests {
    @Test func theBucketBoundsAreFixedAndAscending() {
        #expect(RelayMetrics.latencyBuckets == [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300])
        #expect(zip(RelayMetrics.latencyBuckets, RelayMetrics.latencyBuckets.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func theRenderedTextIsExact() {
        let text = populated().render()
        #expect(text.hasSuffix("\n"))
        let lines = wireLines(text)
        #expect(lines.count == expectedPopulated.count)
        for (i, (got, want)) in zip(lines, expectedPopulated).enumerated() {
            #expect(got == want, "line \(i + 1)")
        }
        #expect(text == expectedPopulated.joined(separator: "\n") + "\n")
    }

    @Test func aFreshRegistryRendersEveryFamilyWithZeros() {
        let lines = wireLines(RelayMetrics().render())
        for family in families {
            #expect(lines.contains("# TYPE \(family.name) \(family.type)"))
        }
        #expect(lines.contains("sse_relay_active_connections 0"))
        #expect(lines.contains("sse_relay_active_streams 0"))
        #expect(lines.contains(#"sse_relay_bytes_relayed_total{direction="to_client"} 0"#))
        #expect(lines.contains(#"sse_relay_bytes_relayed_total{direction="to_upstream"} 0"#))
        #expect(!lines.contains { $0.hasPrefix("sse_relay_requests_total") })
        #expect(!lines.contains { $0.hasPrefix("sse_relay_upstream_errors_total") })
        for name in ["sse_relay_time_to_first_byte_seconds", "sse_relay_request_duration_seconds"] {
            let h = parseHistogram(lines, name)
            expectWellFormed(h)
            #expect(h.buckets.allSatisfy { $0.count == 0 })
            #expect(h.sum == 0)
            #expect(h.count == 0)
            #expect(lines.contains("\(name)_sum 0"))
        }
    }

    @Test func everyFamilyHasOneHelpThenOneTypeAndItsSamplesFollow() {
        let lines = wireLines(populated().render())
        #expect(!lines.contains(""), "no blank lines")
        var current: (name: String, type: String)?
        var seen: [String] = []
        for (i, line) in lines.enumerated() {
            if line.hasPrefix("# HELP ") {
                let name = String(line.dropFirst(7).prefix { $0 != " " })
                #expect(!seen.contains(name), "second HELP for \(name)")
                seen.append(name)
                let typeLine = i + 1 < lines.count ? lines[i + 1] : ""
                #expect(typeLine.hasPrefix("# TYPE \(name) "), "HELP \(name) is followed by its TYPE")
                current = (name, String(typeLine.split(separator: " ").last ?? ""))
                #expect(line.count > "# HELP \(name) ".count, "HELP text is not empty")
            } else if line.hasPrefix("# TYPE ") {
                #expect(current.map { line == "# TYPE \($0.name) \($0.type)" } == true)
            } else {
                let metric = String(line.prefix { $0 != "{" && $0 != " " })
                guard let family = current else { Issue.record("sample before any TYPE: \(line)"); continue }
                let allowed = family.type == "histogram" ? ["_bucket", "_sum", "_count"].map { family.name + $0 } : [family.name]
                #expect(allowed.contains(metric), "\(metric) under family \(family.name)")
                #expect(Double(sampleValue(line)) != nil, "value of \(line)")
            }
        }
        #expect(seen == families.map(\.name))
        let types = lines.filter { $0.hasPrefix("# TYPE ") }
        #expect(types == families.map { "# TYPE \($0.name) \($0.type)" })
    }

    @Test func histogramsAreCumulativeWithInfEqualToCountAndAnExactSum() {
        let lines = wireLines(populated().render())
        let firstByte = parseHistogram(lines, "sse_relay_time_to_first_byte_seconds")
        expectWellFormed(firstByte)
        #expect(firstByte.count == 3)
        #expect(firstByte.sum == 0.25 + 0.00390625 + 1)
        let duration = parseHistogram(lines, "sse_relay_request_duration_seconds")
        expectWellFormed(duration)
        #expect(duration.count == 5)
        #expect(duration.sum == 451.5)
    }

    @Test func aValueExactlyOnABoundIsCountedInThatBucket() {
        let m = RelayMetrics()
        for bound in RelayMetrics.latencyBuckets {
            m.exchangeEnded(route: "/", status: 200, outcome: "completed", firstByteSeconds: bound, durationSeconds: bound)
        }
        let h = parseHistogram(wireLines(m.render()), "sse_relay_request_duration_seconds")
        expectWellFormed(h)
        #expect(h.buckets.map(\.count) == Array(1...15).map(UInt64.init) + [15])
    }

    @Test(arguments: [UInt64(1), 42, 0xDEAD_BEEF])
    func randomObservationsLandInTheRightBuckets(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let m = RelayMetrics()
        var values: [Double] = []
        for _ in 0..<500 {
            let r = rng.next()
            // Milliseconds up to 400 s, or an exact bound one time in eight.
            let v = r % 8 == 0 ? RelayMetrics.latencyBuckets[Int(r >> 8) % RelayMetrics.latencyBuckets.count]
                               : Double((r >> 8) % 400_000) / 1000
            values.append(v)
            m.exchangeEnded(route: "/", status: 200, outcome: "completed", firstByteSeconds: nil, durationSeconds: v)
        }
        let h = parseHistogram(wireLines(m.render()), "sse_relay_request_duration_seconds")
        expectWellFormed(h)
        let expected = RelayMetrics.latencyBuckets.map { bound in UInt64(values.filter { $0 <= bound }.count) } + [500]
        #expect(h.buckets.map(\.count) == expected)
        #expect(h.count == 500)
        #expect(h.sum == values.reduce(0, +), "the rendered sum round-trips exactly")
        let firstByte = parseHistogram(wireLines(m.render()), "sse_relay_time_to_first_byte_seconds")
        #expect(firstByte.count == 0, "nil first-byte times are not observed")
    }

    @Test func gaugesFollowTheAtomics() {
        let m = RelayMetrics()
        m.activeConnections.add(10, ordering: .relaxed)
        m.activeConnections.subtract(7, ordering: .relaxed)
        m.activeStreams.add(1, ordering: .relaxed)
        m.bytesToClients.add(1 << 40, ordering: .relaxed)
        let lines = wireLines(m.render())
        #expect(lines.contains("sse_relay_active_connections 3"))
        #expect(lines.contains("sse_relay_active_streams 1"))
        #expect(lines.contains(#"sse_relay_bytes_relayed_total{direction="to_client"} 1099511627776"#))
        m.activeConnections.subtract(3, ordering: .relaxed)
        m.activeStreams.subtract(1, ordering: .relaxed)
        let after = wireLines(m.render())
        #expect(after.contains("sse_relay_active_connections 0"))
        #expect(after.contains("sse_relay_active_streams 0"))
    }

    @Test func concurrentUpdatesAreAllCounted() {
        let m = RelayMetrics()
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            for _ in 0..<1000 {
                m.exchangeEnded(route: "/r\(i % 2)/", status: 200, outcome: "completed", firstByteSeconds: 0.5, durationSeconds: 2)
                m.upstreamError(kind: "timeout")
                m.bytesToClients.add(3, ordering: .relaxed)
            }
        }
        let lines = wireLines(m.render())
        #expect(lines.contains(#"sse_relay_requests_total{route="/r0/",status="200",outcome="completed"} 4000"#))
        #expect(lines.contains(#"sse_relay_requests_total{route="/r1/",status="200",outcome="completed"} 4000"#))
        #expect(lines.contains(#"sse_relay_upstream_errors_total{kind="timeout"} 8000"#))
        #expect(lines.contains(#"sse_relay_bytes_relayed_total{direction="to_client"} 24000"#))
        #expect(lines.contains("sse_relay_request_duration_seconds_count 8000"))
        #expect(lines.contains("sse_relay_request_duration_seconds_sum 16000"))
        #expect(lines.contains("sse_relay_time_to_first_byte_seconds_sum 4000"))
    }

    // MARK: label escaping

    @Test func quotesBackslashesAndNewlinesInLabelValuesAreEscaped() {
        let m = RelayMetrics()
        m.exchangeEnded(route: "/say \"hi\"/", status: 200, outcome: #"a\b"#, firstByteSeconds: nil, durationSeconds: 1)
        m.upstreamError(kind: "line1\nline2")
        m.cancelled(phase: #"all " \ and"# + "\n")
        m.rejected(reason: #"\"#)
        let text = m.render()
        let lines = wireLines(text)
        #expect(lines.contains(#"sse_relay_requests_total{route="/say \"hi\"/",status="200",outcome="a\\b"} 1"#))
        #expect(lines.contains(#"sse_relay_upstream_errors_total{kind="line1\nline2"} 1"#))
        #expect(lines.contains(#"sse_relay_cancellations_total{phase="all \" \\ and\n"} 1"#))
        #expect(lines.contains(#"sse_relay_rejections_total{reason="\\"} 1"#))
        #expect(lines.allSatisfy { $0.hasPrefix("# ") || $0.hasPrefix("sse_relay_") }, "no label broke a line")
    }

    @Test func otherCharactersPassThroughUnescaped() {
        let m = RelayMetrics()
        m.upstreamError(kind: "tab\there ü 🛰️ {x=1} ,")
        #expect(wireLines(m.render()).contains("sse_relay_upstream_errors_total{kind=\"tab\there ü 🛰️ {x=1} ,\"} 1"))
    }

    /// `quote` walks Characters (grapheme clusters): "\r\n" is ONE Character, not equal to "\n", so the line
    /// feed goes out raw and splits the sample line. Likewise a quote or backslash followed by a combining mark.
    @Test(arguments: [
        ("a\r\nb", "a\r\\nb"),                  // raw CR is legal; the LF must become \n
        ("e\"\u{301}", "e\\\"\u{301}"),          // quote + combining acute: the quote must still be escaped
        ("x\\\u{301}", "x\\\\\u{301}"),          // backslash + combining acute
    ])
    func escapingWorksOnScalarsNotGraphemeClusters(_ kind: String, _ escaped: String) {
        let m = RelayMetrics()
        m.upstreamError(kind: kind)
        let lines = wireLines(m.render())
        let family = "sse_relay_upstream_errors_total"
        let start = lines.firstIndex(of: "# TYPE \(family) counter")! + 1
        let end = lines[start...].firstIndex { $0.hasPrefix("# HELP ") }!
        #expect(Array(lines[start..<end]) == ["\(family){kind=\"\(escaped)\"} 1"])
    }

    // MARK: promtool, when installed

    @Test(.enabled(if: promtoolPath != nil, "promtool is not installed"))
    func promtoolAcceptsTheExposition() throws {
        let m = populated()
        m.upstreamError(kind: "odd \"kind\" \\ with\nnewline")
        let result = try promtoolCheck(m.render())
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "", "lint findings: \(result.output)")
    }

    @Test(.enabled(if: promtoolPath != nil, "promtool is not installed"))
    func promtoolAcceptsAFreshRegistry() throws {
        let result = try promtoolCheck(RelayMetrics().render())
        #expect(result.status == 0, "\(result.output)")
    }

    @Test(.enabled(if: promtoolPath != nil, "promtool is not installed"))
    func promtoolAcceptsALabelWithCRLF() throws {
        let m = RelayMetrics()
        m.exchangeEnded(route: "/a\r\nb/", status: 200, outcome: "completed", firstByteSeconds: nil, durationSeconds: 1)
        let result = try promtoolCheck(m.render())
        #expect(result.status == 0, "\(result.output)")
    }
}
