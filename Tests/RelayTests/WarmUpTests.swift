import Foundation
import RelayCore
import RelayDev
import Support
import Testing
import Upstream

/// The warm-up before the relay listens (`WarmUp`): a private relay on loopback serves the fake provider's answers,
/// copies the real configuration's features but never its provider, key, state or listeners, and leaves nothing open.
@Suite("Warm-up")
struct WarmUpTests {
    /// A deployment's configuration with every feature the warm-up copies or must leave out.
    static func deployed() -> RelayConfiguration {
        var real = RelayConfiguration()
        real.listen = .init(host: "0.0.0.0", port: 8080)
        real.admin = .init(host: "127.0.0.1", port: 9090)
        real.workers = 4
        real.limits.maxConnections = 1
        real.limits.maxConnectionsPerAddress = 1
        real.limits.maxBodyBytes = 4096
        real.upstreams["prod"] = .init(name: "prod", baseURL: "https://api.openai.com", key: Secret("sk-real-provider-key"))
        var route = RelayConfiguration.Route(prefix: "/v1/", upstream: "prod", auth: .token)
        route.heartbeatSeconds = 5
        route.resume = RouteResume(windowSeconds: 45, maxBufferBytes: 1 << 20)
        route.attestation = .required
        real.routes = [route]
        var redis = StateConfiguration.Redis(host: "redis.internal", port: 6380)
        redis.password = Secret("redis-password")
        real.state.backend = .redis(redis)
        var budgets = BudgetConfiguration()
        budgets.perIdentity = BudgetLimits(tokensPerDay: 10)
        budgets.total = BudgetLimits(tokensPerDay: 100)
        real.budgets = budgets
        return real
    }

    @Test("the private relay has the fake provider, loopback and memory only, with the real routes' features")
    func configurationCopiesFeaturesNotSecrets() throws {
        let c = WarmUp.configuration(like: Self.deployed(), providerURL: "http://127.0.0.1:4321")
        #expect(c.listen.host == "127.0.0.1" && c.listen.port == 0)
        #expect(c.admin == nil)
        #expect(c.workers == 1)
        #expect(c.limits.maxBodyBytes == 4096, "the parser's limits are the real ones")
        #expect(c.limits.maxConnections == RelayConfiguration.Limits().maxConnections && c.limits.maxConnectionsPerAddress == 0)
        #expect(c.state.backend == .memory)
        #expect(Set(c.upstreams.keys) == ["openai", "anthropic"])
        for upstream in c.upstreams.values {
            #expect(upstream.baseURL == "http://127.0.0.1:4321")
            #expect(upstream.key?.revealForHeader() == FakeProvider.devKey)
        }
        #expect(c.routes.map(\.prefix) == ["/v1/", "/v1/messages"])
        for route in c.routes {
            #expect(route.auth == .none && route.attestation == .off)
            #expect(route.heartbeatSeconds == 5)
            #expect(route.resume == RouteResume(windowSeconds: 45, maxBufferBytes: 1 << 20))
        }
        // Budgets on, too large to refuse anything: the budget path runs without a limit in the way.
        let budgets = try #require(c.budgets)
        #expect(budgets.total.tokensPerDay == 1 << 50 && budgets.perIdentity == BudgetLimits())
        // Nothing of the real provider, key or Redis anywhere in it.
        let text = String(reflecting: c) + c.upstreams.values.map { $0.key?.revealForHeader() ?? "" }.joined()
        for secret in ["api.openai.com", "sk-real-provider-key", "redis.internal", "redis-password"] {
            #expect(!text.contains(secret), "\(secret) reached the warm-up's configuration")
        }
    }

    @Test("without budgets, resume or heartbeats in the real configuration, the private relay has none")
    func configurationWithoutFeatures() {
        var real = RelayConfiguration()
        var route = RelayConfiguration.Route(prefix: "/v1/", upstream: "prod")
        route.heartbeatSeconds = 0
        real.routes = [route]
        let c = WarmUp.configuration(like: real, providerURL: "http://127.0.0.1:4321")
        #expect(c.budgets == nil)
        #expect(c.routes.allSatisfy { $0.heartbeatSeconds == 0 && $0.resume == nil })
    }

    @Test("every step is answered, with a deployment's features on, and nothing is left listening")
    func runsEveryStep() throws {
        let report = WarmUp.run(like: Self.deployed(), logger: Logger(label: "test", sink: MemoryLogSink()))
        #expect(report.failures == [])
        #expect(report.succeeded == 3)
        #expect(report.ports.count == 2)
        for port in report.ports {
            let after = Probe.post("http://127.0.0.1:\(port)/v1/chat/completions", headers: [], body: Array("{}".utf8),
                                   timeoutSeconds: 2)
            guard case .failure(let error) = after else {
                Issue.record("port \(port) still answers after the warm-up")
                continue
            }
            #expect(error.description.contains("connect"), "\(error)")
        }
    }

    @Test("the private relay's own log lines go nowhere; the summary is one line")
    func logsOneLine() {
        let sink = MemoryLogSink()
        let logger = Logger(label: "test", level: .debug, sink: sink)
        WarmUp.log(WarmUp.run(like: RelayConfiguration(), logger: logger), to: logger)
        #expect(sink.lines.count == 1)
        #expect(sink.lines.first?.contains(#""message":"warmed up"#) == true)
        #expect(sink.lines.first?.contains(#""exchanges":3,"succeeded":3"#) == true)
    }

    @Test("a failed step is reported as a warning with its reason, and nothing is thrown")
    func failuresAreReported() {
        let sink = MemoryLogSink()
        var report = WarmUp.Report()
        report.succeeded = 2
        report.failures = ["streamed message: answered 502"]
        WarmUp.log(report, to: Logger(label: "test", sink: sink))
        #expect(sink.lines.count == 1)
        #expect(sink.lines.first?.contains(#""level":"warning""#) == true)
        #expect(sink.lines.first?.contains("streamed message: answered 502") == true)
    }

    @Test("an answer is accepted only as a 200 of the expected type holding the marker")
    func checks() {
        let good = Probe.Answer(status: 200, contentType: "text/event-stream; charset=utf-8", body: Array("data: x\n\ndata: [DONE]\n\n".utf8))
        #expect(WarmUp.check(good, contentType: "text/event-stream", marker: "data: [DONE]\n\n") == nil)
        var refused = good
        refused.status = 401
        #expect(WarmUp.check(refused, contentType: "text/event-stream", marker: "data: [DONE]\n\n") == "answered 401")
        var json = good
        json.contentType = "application/json"
        #expect(WarmUp.check(json, contentType: "text/event-stream", marker: "data: [DONE]\n\n")?.contains("not text/event-stream") == true)
        var cut = good
        cut.body = Array("data: x\n\n".utf8)
        #expect(WarmUp.check(cut, contentType: "text/event-stream", marker: "data: [DONE]\n\n")?.contains("lacks") == true)
    }
}

/// What goes direct whatever proxy the environment names: this host only (`LoopbackURL`).
@Suite("Loopback URLs")
struct LoopbackURLTests {
    @Test(arguments: [
        ("http://127.0.0.1:8080/v1", true), ("https://127.0.0.1", true), ("http://127.8.9.10/", true),
        ("http://localhost:9000/healthz", true), ("HTTP://LocalHost", true), ("http://[::1]:8000/x", true),
        ("http://10.0.0.5/", false), ("https://api.openai.com/v1", false), ("http://127.0.0.1.example.com/", false),
        ("http://user@127.0.0.1/", false), ("http://127.1/", false), ("http://127.0.0.256/", false),
        ("http://[::2]/", false), ("ftp://127.0.0.1/", false), ("http://localhost.example/", false),
    ])
    func matches(_ url: String, _ loopback: Bool) {
        #expect(LoopbackURL.matches(url) == loopback)
    }
}
