import Support

/// The relay's metrics, rendered in the Prometheus text format (version 0.0.4).
///
/// Hot-path updates (bytes relayed, gauges) each take their own small lock (`Locked` with `Atomic`'s calls: see
/// `Locked+Atomic.swift` for why not `Atomic`); labelled counters and histograms are updated once per exchange,
/// at its end, under one mutex. Shared by every loop; safe from any thread.
package final class RelayMetrics: Sendable {
    package static let latencyBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]

    struct Histogram: Sendable {
        var counts: [UInt64] = Array(repeating: 0, count: RelayMetrics.latencyBuckets.count)
        var sum: Double = 0
        var count: UInt64 = 0
        mutating func observe(_ value: Double) {
            for (i, bound) in RelayMetrics.latencyBuckets.enumerated() where value <= bound { counts[i] += 1 }
            sum += value
            count += 1
        }
    }

    /// Label sets as values: hashing the labels themselves costs no string built per exchange. Rendered in the
    /// order of their labels' text, as Prometheus clients expect a stable order.
    struct RequestKey: Hashable, Sendable {
        let route: String, status: Int, outcome: String
        var sortKey: [String] { [route, String(status), outcome] }
    }

    struct TokenKey: Hashable, Sendable {
        let route: String, model: String, completion: Bool, source: String
        var kind: String { completion ? "completion" : "prompt" }
        var sortKey: [String] { [route, model, kind, source] }
    }

    struct Labelled: Sendable {
        // With room from the start: a dictionary type's first storage makes the Swift runtime scan every
        // conformance record for its key's, which otherwise fell on the first request (S1's cold first byte).
        var requests = [RequestKey: UInt64](minimumCapacity: 16)
        var upstreamErrors: [String: UInt64] = [:]      // kind
        var cancellations: [String: UInt64] = [:]       // phase
        var rejections: [String: UInt64] = [:]          // reason
        var tokens = [TokenKey: UInt64](minimumCapacity: 16)
        var budgetCuts: [String: UInt64] = [:]          // route
        var stateUnavailable: [String: UInt64] = [:]    // outcome
        var attestations: [[String]: UInt64] = [:]      // kind, result
        var registrations: [String: UInt64] = [:]       // result
        var costs: [[String]: Int] = [:]                // route, model, source → nano-dollars
        var streamResumes: [String: UInt64] = [:]       // result
        var firstByte = Histogram()
        var duration = Histogram()
    }

    private let labelled = Locked(Labelled())
    package let activeConnections = Locked(0)
    package let activeStreams = Locked(0)
    package let bytesToClients = Locked(0)
    package let bytesToUpstream = Locked(0)
    /// Settles the shared store gave up on (`RedisAdmissionStore`): their streams' usage went uncounted.
    package let settlesDropped = Locked(0)

    package init() {}

    package func exchangeEnded(route: String, status: Int, outcome: String, firstByteSeconds: Double?, durationSeconds: Double) {
        labelled.withLock { m in
            m.requests[RequestKey(route: route, status: status, outcome: outcome), default: 0] += 1
            if let firstByteSeconds { m.firstByte.observe(firstByteSeconds) }
            m.duration.observe(durationSeconds)
        }
    }

    /// Tokens of one exchange. `model` must be a bounded label value (`UsageLabels.model`); `source` is
    /// `provider` or `estimate` (an exchange with nothing to count adds nothing).
    package func tokens(route: String, model: String, source: String, prompt: Int, completion: Int) {
        labelled.withLock { m in
            m.tokens[TokenKey(route: route, model: model, completion: false, source: source), default: 0] += UInt64(max(prompt, 0))
            m.tokens[TokenKey(route: route, model: model, completion: true, source: source), default: 0] += UInt64(max(completion, 0))
        }
    }

    package func upstreamError(kind: String) { labelled.withLock { $0.upstreamErrors[kind, default: 0] += 1 } }
    package func cancelled(phase: String) { labelled.withLock { $0.cancellations[phase, default: 0] += 1 } }
    package func rejected(reason: String) { labelled.withLock { $0.rejections[reason, default: 0] += 1 } }
    /// A stream ended by the relay because its budget could not cover the next extension (`onExceed: cut`).
    package func budgetCut(route: String) { labelled.withLock { $0.budgetCuts[route, default: 0] += 1 } }
    /// An admission decided while the shared store was unavailable: `rejected`, `allowed` or `local`.
    package func stateUnavailable(outcome: String) { labelled.withLock { $0.stateUnavailable[outcome, default: 0] += 1 } }

    /// A proof of the genuine app presented (or not) on a route that asks for one: `kind` is `app_attest`,
    /// `app_check` or `none`; `result` what became of it (`valid`, `invalid`, `replayed`, …).
    package func attestation(kind: String, result: String) { labelled.withLock { $0.attestations[[kind, result], default: 0] += 1 } }
    /// A call of the App Attest challenge or register endpoint: `challenge`, `registered`, `invalid`, `conflict`, …
    package func attestationRegistration(result: String) { labelled.withLock { $0.registrations[result, default: 0] += 1 } }

    /// Nano-dollars one exchange cost (`ExchangeCost`); `model` a bounded label value, like `tokens`.
    package func cost(route: String, model: String, source: String, nanoUSD: Int) {
        labelled.withLock { m in
            let (sum, overflow) = m.costs[[route, model, source], default: 0].addingReportingOverflow(max(0, nanoUSD))
            m.costs[[route, model, source]] = overflow ? Int.max : sum
        }
    }
    /// A call of `/v1/relay/streams/<id>`: `resumed`, `stopped`, `not_found`, `expired`, `out_of_range`, `invalid`,
    /// `rate_limited`.
    package func streamResume(result: String) { labelled.withLock { $0.streamResumes[result, default: 0] += 1 } }

    /// The exposition text.
    package func render() -> String {
        let m = labelled.withLock { $0 }
        var out = ""
        func header(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        header("sse_relay_requests_total", "counter", "Exchanges ended, by route, status and outcome.")
        for key in m.requests.keys.sorted(by: { $0.sortKey.lexicographicallyPrecedes($1.sortKey) }) {
            out += "sse_relay_requests_total{route=\(quote(key.route)),status=\(quote(String(key.status))),outcome=\(quote(key.outcome))} \(m.requests[key]!)\n"
        }
        header("sse_relay_active_connections", "gauge", "Open client connections.")
        out += "sse_relay_active_connections \(activeConnections.load(ordering: .relaxed))\n"
        header("sse_relay_active_streams", "gauge", "Exchanges in flight (upstream transfers running).")
        out += "sse_relay_active_streams \(activeStreams.load(ordering: .relaxed))\n"
        header("sse_relay_bytes_relayed_total", "counter", "Body bytes relayed, by direction.")
        out += "sse_relay_bytes_relayed_total{direction=\"to_client\"} \(bytesToClients.load(ordering: .relaxed))\n"
        out += "sse_relay_bytes_relayed_total{direction=\"to_upstream\"} \(bytesToUpstream.load(ordering: .relaxed))\n"
        histogram(&out, "sse_relay_time_to_first_byte_seconds", "From request head to the first upstream body byte.", m.firstByte)
        histogram(&out, "sse_relay_request_duration_seconds", "From request head to the end of the exchange.", m.duration)
        counterFamily(&out, "sse_relay_upstream_errors_total", "Upstream failures, by kind.", "kind", m.upstreamErrors)
        counterFamily(&out, "sse_relay_cancellations_total", "Upstream transfers cancelled because the client left, by phase.", "phase", m.cancellations)
        counterFamily(&out, "sse_relay_rejections_total", "Requests answered by the relay without reaching the provider, by reason.", "reason", m.rejections)
        counterFamily(&out, "sse_relay_budget_cuts_total", "Streams ended early because the token budget was used up, by route.", "route", m.budgetCuts)
        counterFamily(&out, "sse_relay_state_unavailable_total", "Admissions decided while the shared state store did not answer, by outcome (rejected, allowed, local).", "outcome", m.stateUnavailable)
        header("sse_relay_settles_dropped_total", "counter", "Budget settlements the shared state store never applied (Redis away past the pending queue's bound, or refusing): that usage went uncounted.")
        out += "sse_relay_settles_dropped_total \(settlesDropped.load(ordering: .relaxed))\n"
        header("sse_relay_attestations_total", "counter", "Proofs of the genuine app on routes that ask for one, by kind (app_attest, app_check, none) and result.")
        for key in m.attestations.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            out += "sse_relay_attestations_total{kind=\(quote(key[0])),result=\(quote(key[1]))} \(m.attestations[key]!)\n"
        }
        counterFamily(&out, "sse_relay_attestation_registrations_total", "Calls of the App Attest challenge and register endpoints, by result.", "result", m.registrations)
        counterFamily(&out, "sse_relay_stream_resumes_total", "Resumes and stops of resumable streams, by result.", "result", m.streamResumes)
        header("sse_relay_tokens_total", "counter", "Tokens used, by route, model (allowlisted or other), kind (prompt, completion) and source (provider, estimate).")
        for key in m.tokens.keys.sorted(by: { $0.sortKey.lexicographicallyPrecedes($1.sortKey) }) {
            out += "sse_relay_tokens_total{route=\(quote(key.route)),model=\(quote(key.model)),kind=\(quote(key.kind)),source=\(quote(key.source))} \(m.tokens[key]!)\n"
        }
        header("sse_relay_cost_usd_total", "counter", "US dollars spent at the configured prices, by route, model (allowlisted or other) and source (provider, estimate); exact to the nano-dollar.")
        for key in m.costs.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            out += "sse_relay_cost_usd_total{route=\(quote(key[0])),model=\(quote(key[1])),source=\(quote(key[2]))} \(Cost.decimalString(nanoUSD: m.costs[key]!))\n"
        }
        return out
    }

    private func histogram(_ out: inout String, _ name: String, _ help: String, _ h: Histogram) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        for (i, bound) in RelayMetrics.latencyBuckets.enumerated() {
            out += "\(name)_bucket{le=\"\(format(bound))\"} \(h.counts[i])\n"
        }
        out += "\(name)_bucket{le=\"+Inf\"} \(h.count)\n"
        out += "\(name)_sum \(format(h.sum))\n\(name)_count \(h.count)\n"
    }

    private func counterFamily(_ out: inout String, _ name: String, _ help: String, _ label: String, _ values: [String: UInt64]) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
        for key in values.keys.sorted() { out += "\(name){\(label)=\(quote(key))} \(values[key]!)\n" }
    }

    private func format(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }

    private func quote(_ s: String) -> String {
        // Unicode scalars, not Characters: "\r\n" is one Character, and its line feed must still be escaped.
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
