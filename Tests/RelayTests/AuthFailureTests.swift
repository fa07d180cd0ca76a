import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore

/// Failed authentication is paid for: it draws from the address's buckets, and once the failure bucket is empty
/// the address gets 429 whatever it sends (so a right guess cannot be told from a wrong one). Rejection log
/// lines are throttled per reason. The relay's clock is a manual one: buckets refill only when the test says.
@Suite("Authentication failures")
struct AuthFailureTests {
    static let upstreamOK: @Sendable (UpstreamConnection) throws -> Void = { connection in
        while true {
            _ = try connection.readRequest(timeout: 5)
            try connection.writeHead(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "2")])
            try connection.write("ok")
        }
    }

    static func relay(clock: ManualClock, _ extra: @escaping (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: try ScriptedUpstream(script: upstreamOK), clock: clock) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 60, burst: 20)
            extra(&config)
        }
    }

    static func get(_ relay: RelayFixture, token: String) throws -> (status: Int, retryAfter: String?, code: String?) {
        let client = try relay.client()
        try client.sendRequest(method: "GET", path: "/v1/models", headers: [("Authorization", "Bearer \(token)")])
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        return (head.status, head.header("Retry-After"), ClientAuthTests.code(body))
    }

    @Test("after `burst` failures the address gets 429 with Retry-After, even with the right token, until it refills")
    func failuresEmptyTheBucket() throws {
        let clock = ManualClock()
        let relay = try Self.relay(clock: clock)
        for i in 0..<20 {
            #expect(try Self.get(relay, token: "wrong-\(i)").status == 401, "failure \(i)")
        }
        let limited = try Self.get(relay, token: "wrong-20")
        #expect(limited.status == 429)
        #expect(limited.code == "rate_limit_exceeded")
        #expect(limited.retryAfter == "1")
        // A right guess now is indistinguishable from a wrong one, and the provider is not called.
        #expect(try Self.get(relay, token: RelayFixture.clientToken).status == 429)
        #expect(relay.upstream?.requests.isEmpty == true)
        // One token back after a second (60 per minute): the right token passes without spending it, and one
        // more failure is allowed before the next 429.
        clock.advance(bySeconds: 1)
        #expect(try Self.get(relay, token: RelayFixture.clientToken).status == 200)
        #expect(try Self.get(relay, token: "wrong-21").status == 401)
        #expect(try Self.get(relay, token: "wrong-22").status == 429)
        relay.assertNoSecretLeaks(clients: [])
    }

    @Test("successes do not draw from the failure bucket")
    func successesAreFree() throws {
        let clock = ManualClock()
        let relay = try Self.relay(clock: clock)
        for _ in 0..<50 {
            #expect(try Self.get(relay, token: RelayFixture.clientToken).status == 200)
        }
    }

    @Test("failures also draw from rateLimits.perAddress")
    func failuresDrawFromThePerAddressBucket() throws {
        let clock = ManualClock()
        let relay = try Self.relay(clock: clock) { config in
            config.rateLimits.perAddress = RateLimits(requestsPerMinute: 60, burst: 5)
        }
        for i in 0..<5 {
            #expect(try Self.get(relay, token: "wrong-\(i)").status == 401)
        }
        let next = try Self.get(relay, token: RelayFixture.clientToken)
        #expect(next.status == 429)
        #expect(next.code == "rate_limit_exceeded")
    }

    @Test("rejection log lines are throttled per reason, with one summary of what was suppressed")
    func rejectionLinesAreThrottled() throws {
        let clock = ManualClock()
        let relay = try Self.relay(clock: clock) { config in
            config.rateLimits.authFailuresPerAddress = RateLimits(requestsPerMinute: 60, burst: 1000)
        }
        for i in 0..<50 {
            #expect(try Self.get(relay, token: "wrong-\(i)").status == 401)
        }
        let unauthorized = relay.logs.lines.filter { $0.contains(#""outcome":"rejected""#) && $0.contains(#""status":401"#) }
        #expect(unauthorized.count == 10)
        clock.advance(bySeconds: 1.5)
        #expect(try Self.get(relay, token: "wrong-again").status == 401)
        // The summary comes from the next rejection of that reason or from the once-a-second timer; either way
        // exactly one line carries the count.
        func summaries() -> [String] { relay.logs.lines.filter { $0.contains("similar rejections suppressed") } }
        try eventually("a suppression summary logged", timeout: 5) { !summaries().isEmpty }
        #expect(summaries().count == 1)
        #expect(summaries().first?.contains(#""suppressed":40"#) == true, "\(summaries())")
        #expect(relay.logs.lines.filter { $0.contains(#""status":401"#) }.count == 11)
    }
}
