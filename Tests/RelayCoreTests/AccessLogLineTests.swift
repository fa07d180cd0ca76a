import HTTP1
@testable import Relay
@testable import RelayCore
import Support
import Testing
import Usage

/// The access line is written by the record itself (`ExchangeRecord.writeLogFields`), not from a list of fields:
/// every field it can have, in order, gives the same bytes as the list did.
@Suite struct AccessLogLineTests {
    static func fullRecord() -> ExchangeRecord {
        var r = ExchangeRecord(requestID: "req-1", method: "POST", path: "/v1/chat/completions?x=\"1\"", route: "/v1/",
                               upstream: "openai", clientAddress: "192.0.2.7", startedAt: Instant(nanoseconds: 0))
        r.status = 200
        r.bytesIn = 67
        r.bytesOut = 1234
        r.outcome = "completed"
        r.identity = "user:é"
        r.rejection = "rate_limited"
        r.upstreamHeadAt = Instant(nanoseconds: 1_500_000)
        r.firstBodyAt = Instant(nanoseconds: 2_250_000)
        r.endedAt = Instant(nanoseconds: 3_000_001)
        r.failure = "broken\nresponse"
        r.model = "gpt-4o\u{1}"
        r.attestation = "app_attest"
        r.attestationStep = "signature"
        r.heartbeats = 3
        r.detachedMs = 12.5
        r.resumes = 1
        r.keyLabel = "primary"
        r.attempts = 2
        r.failover = "429"
        r.usage = Usage(prompt: 10, completion: 20, cached: 4, reasoning: 5, source: .provider)
        r.cost = ExchangeCost(nanoUSD: 1_234_567, source: .provider, model: "gpt-4o")
        return r
    }

    @Test(arguments: [false, true])
    func theRecordWritesTheSameLineAsItsList(full: Bool) throws {
        let record = full ? Self.fullRecord()
            : ExchangeRecord(requestID: "r", method: "GET", path: "/v1/models", route: "/v1/", upstream: "u",
                             clientAddress: "192.0.2.7", startedAt: Instant(nanoseconds: 0))
        let direct = MemoryLogSink(), listed = MemoryLogSink()
        Logger(label: "sse-relay", sink: direct).log(.info, "exchange", fields: record)
        Logger(label: "sse-relay", sink: listed).info("exchange", record.logFields)
        let a = try #require(direct.lines.first), b = try #require(listed.lines.first)
        // The same but for the time (the first 24 bytes after `{"time":"`).
        #expect(a.dropFirst(33) == b.dropFirst(33))
        #expect(record.logFields.map(\.0) == (full ? [
            "request_id", "client_ip", "method", "path", "route", "upstream", "status", "bytes_in", "bytes_out", "outcome",
            "identity", "reason", "upstream_head_ms", "first_byte_ms", "duration_ms", "error", "model", "attestation",
            "attestation_step", "heartbeats", "resumes", "detached_ms", "key", "attempts", "failover", "prompt_tokens",
            "completion_tokens", "cached_tokens", "reasoning_tokens", "usage_source", "cost_usd", "cost_source",
        ] : ["request_id", "client_ip", "method", "path", "route", "upstream", "status", "bytes_in", "bytes_out", "outcome"]))
        if full {
            #expect(a.contains(#","error":"broken\nresponse","model":"gpt-4o\u0001","#))
            #expect(a.contains(#","upstream_head_ms":1.500,"first_byte_ms":2.250,"duration_ms":3.000,"#))
            #expect(a.hasSuffix(#","usage_source":"provider","cost_usd":"0.001234567","cost_source":"provider"}"#), "\(a)")
        }
    }
}
