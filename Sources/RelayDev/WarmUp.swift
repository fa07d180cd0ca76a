import Foundation
import Relay
import RelayCore
import Support
import Upstream

/// What the relay does once before it listens: a private relay on loopback, built like the configured one but routed to
/// the built-in fake provider, serves a few exchanges to a client in this process, and is shut down.
///
/// Why: the first request a Swift process serves pays for the runtime's first use of every generic type on its path
/// (metadata built from mangled names, protocol conformances looked up): about 800 000 instructions, three times what a
/// request costs afterwards, and about 0.3 ms of the first client's time to first byte. That cost is per process,
/// not per server, so a private server's exchanges take it off the first real client. It also proves at start that
/// the path works (sockets, libcurl, the parsers), and says so in one log line.
///
/// No real provider is called, nothing is charged, no Redis command is sent, and the private server's lines go
/// nowhere: only the summary line reaches the relay's log. A warm-up that fails is reported and the relay starts anyway.
package enum WarmUp {
    /// What one warm-up did.
    package struct Report: Sendable, Equatable {
        /// Exchanges that answered as the fake provider does.
        package var succeeded = 0
        /// One line for each exchange that did not (empty when all did).
        package var failures: [String] = []
        package var milliseconds = 0.0
        /// The loopback ports the fake provider and the private relay listened on: both closed when `run` returns.
        package var ports: [Int] = []

        package init() {}
    }

    /// One exchange: what the client sends and what its answer must hold.
    struct Step {
        var name: String
        var path: String
        var headers: [String]
        var body: String
        var contentType: String
        var marker: String
    }

    /// Runs the warm-up; `like` is the relay's configuration, whose features (usage metering, budgets, heartbeats,
    /// resumable streams) the private relay copies.
    package static func run(like real: RelayConfiguration, logger: Logger, timeoutSeconds: Double = 2) -> Report {
        let started = MonotonicClock().now()
        var report = serve(like: real, logger: logger, timeoutSeconds: timeoutSeconds)
        report.milliseconds = Double(MonotonicClock().now().nanoseconds &- started.nanoseconds) / 1e6
        return report
    }

    private static func serve(like real: RelayConfiguration, logger: Logger, timeoutSeconds: Double) -> Report {
        var report = Report()
        // The private servers log at the relay's level (the access log is part of the path), into nothing.
        var quiet = logger
        quiet.sink = DiscardingLogSink()
        let provider = FakeProvider(paceSeconds: 0, logger: quiet)
        do { try provider.start() } catch {
            report.failures.append("the fake provider did not start: \(error)")
            return report
        }
        defer { provider.shutdown() }
        report.ports.append(provider.port)
        let server: RelayServer
        do {
            server = try RelayServer(configuration: configuration(like: real, providerURL: provider.baseURL), logger: quiet)
        } catch {
            report.failures.append("the private relay did not start: \(error)")
            return report
        }
        // Also when `start` fails: the server's upstream drivers are freed only once shut down.
        defer { server.shutdown() }
        do {
            try server.start()
        } catch {
            report.failures.append("the private relay did not start: \(error)")
            return report
        }
        report.ports.append(server.port)
        for step in steps {
            let url = "http://127.0.0.1:\(server.port)\(step.path)"
            switch Upstream.Probe.post(url, headers: step.headers, body: Array(step.body.utf8), timeoutSeconds: timeoutSeconds) {
            case .failure(let error):
                report.failures.append("\(step.name): \(error)")
            case .success(let answer):
                if let problem = check(answer, contentType: step.contentType, marker: step.marker) {
                    report.failures.append("\(step.name): \(problem)")
                } else {
                    report.succeeded += 1
                }
            }
        }
        return report
    }

    /// Logs `report` as one line: info when every exchange answered, a warning otherwise.
    package static func log(_ report: Report, to logger: Logger) {
        let fields: [(String, LogValue)] = [("exchanges", .int(report.succeeded + report.failures.count)),
                                            ("succeeded", .int(report.succeeded)),
                                            ("milliseconds", .double((report.milliseconds * 10).rounded() / 10))]
        if report.failures.isEmpty {
            logger.info("warmed up: the relay's path served the built-in fake provider's answers", fields)
        } else {
            logger.warning("warm-up failed; the relay starts anyway, and its first requests may be slower",
                           fields + [("failures", .string(report.failures.joined(separator: "; ")))])
        }
    }

    /// The private relay's configuration: one OpenAI-style and one Anthropic route to the fake provider on loopback,
    /// with the real configuration's features on those routes. Its state is this process's memory, whatever the real
    /// one uses, and its budgets (when the real relay has any) are too large to refuse anything.
    package static func configuration(like real: RelayConfiguration, providerURL: String) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.listen = .init(host: "127.0.0.1", port: 0)
        c.workers = 1
        c.logLevel = real.logLevel
        // The parser's limits and the replay buffers' bound; not the connection caps (its client connects three
        // times in a row, and a cap of one per address could refuse a connection before the last one's close is seen).
        c.limits.request = real.limits.request
        c.limits.resumeBufferBytes = real.limits.resumeBufferBytes
        c.buffers = real.buffers
        c.upstreams["openai"] = .init(name: "openai", baseURL: providerURL, key: Secret(FakeProvider.devKey))
        c.upstreams["anthropic"] = .init(name: "anthropic", baseURL: providerURL, key: Secret(FakeProvider.devKey),
                                         provider: .anthropic)
        var openAI = RelayConfiguration.Route(prefix: "/v1/", upstream: "openai")
        var anthropic = RelayConfiguration.Route(prefix: "/v1/messages", upstream: "anthropic", methods: ["POST"], exact: true,
                                                 provider: .anthropic)
        // The streaming features of the real routes: a heartbeat timer when any route has one, a replay buffer when
        // any route is resumable.
        let heartbeat = real.routes.map(\.heartbeatSeconds).filter { $0 > 0 }.min() ?? 0
        let resume = real.routes.compactMap(\.resume).first
        for i in [0, 1] {
            var route = i == 0 ? openAI : anthropic
            route.heartbeatSeconds = heartbeat
            route.resume = resume
            if i == 0 { openAI = route } else { anthropic = route }
        }
        c.routes = [openAI, anthropic]
        if real.budgets != nil {
            var budgets = BudgetConfiguration()
            budgets.total = BudgetLimits(tokensPerDay: 1 << 50)
            c.budgets = budgets
        }
        return c
    }

    /// A streamed and a whole chat completion, and a streamed Anthropic message.
    static let steps: [Step] = {
        let json = "Content-Type: application/json"
        let messages = #""messages":[{"role":"user","content":"Say hello."}]"#
        return [
            Step(name: "streamed chat completion", path: "/v1/chat/completions", headers: [json],
                  body: #"{"model":"gpt-4o-mini","stream":true,\#(messages)}"#,
                  contentType: "text/event-stream", marker: "data: [DONE]\n\n"),
            Step(name: "chat completion", path: "/v1/chat/completions", headers: [json],
                  body: #"{"model":"gpt-4o-mini",\#(messages)}"#,
                  contentType: "application/json", marker: #""object":"chat.completion""#),
            Step(name: "streamed message", path: "/v1/messages", headers: [json],
                  body: #"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,\#(messages)}"#,
                  contentType: "text/event-stream", marker: "event: message_stop\n"),
        ]
    }()

    /// nil when `answer` is a 200 of `contentType` whose body holds `marker`; else what is wrong.
    package static func check(_ answer: Upstream.Probe.Answer, contentType: String, marker: String) -> String? {
        guard answer.status == 200 else { return "answered \(answer.status)" }
        guard let type = answer.contentType, type.lowercased().hasPrefix(contentType) else {
            return "answered \(answer.contentType ?? "no Content-Type"), not \(contentType)"
        }
        guard answer.body.firstRange(of: Array(marker.utf8)) != nil else { return "the body lacks \(marker.debugDescription)" }
        return nil
    }
}

/// Drops every line: the private relay's access log and warnings are not the real relay's.
private struct DiscardingLogSink: LogSink {
    func write(line: String) {}
    func write(utf8 line: inout [UInt8]) {}
}
