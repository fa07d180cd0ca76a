import Dispatch
import Foundation
import Relay
import RelayCore
import RelayDev
import Support
import Transport
import Upstream
import Usage

/// The command line: arguments → configuration → server → run until a signal. Lives here rather than in
/// `main.swift` because closures written in top-level code are main-actor isolated, and a Dispatch signal
/// handler running one on another queue traps at run time.
package enum RelayCommand {
    package static let version = "0.1.0"

    package static let usage = """
    sse-relay \(version): relays an LLM provider's Server-Sent Events to mobile apps without giving them the key.

    Usage:
      sse-relay --config FILE        run with a JSON configuration (see config.example.json)
      sse-relay --dev                run on 127.0.0.1:8080 with the built-in fake provider (no key needed)
      sse-relay --check-config FILE  validate a configuration (secrets included) and exit 0, or print every problem
      sse-relay --probe URL          GET URL; exit 0 on a 2xx answer (a container health check without curl)
      sse-relay --verify-app-attest[-assertion] FILE …  check an iOS App Attest attestation or assertion offline
      sse-relay --help | --version

    Options:
      --host HOST            listen address (overrides the configuration)
      --port PORT            listen port (overrides the configuration; 0 picks a free port)
      --log-level LEVEL      debug, info, warning or error
      --dev-pace-ms N        dev mode: milliseconds between streamed tokens (default 50)
    """

    struct Options {
        var configPath: String?
        var checkPath: String?
        var probeURL: String?
        var dev = false
        var host: String?
        var port: Int?
        var logLevel: LogLevel?
        var devPaceMs = 50.0
    }

    enum Parsed {
        case run(Options)
        case exit(code: Int32, message: String, toStderr: Bool)
    }

    static func parse(_ arguments: [String]) -> Parsed {
        var options = Options()
        var i = 0
        func value(_ flag: String) -> String? {
            i += 1
            return i < arguments.count ? arguments[i] : nil
        }
        while i < arguments.count {
            let arg = arguments[i]
            switch arg {
            case "--help", "-h": return .exit(code: 0, message: usage, toStderr: false)
            case "--version": return .exit(code: 0, message: "sse-relay \(version)", toStderr: false)
            case "--dev": options.dev = true
            case "--config", "--check-config", "--probe", "--host", "--port", "--log-level", "--dev-pace-ms":
                guard let v = value(arg) else { return .exit(code: 2, message: "\(arg) needs a value\n\n\(usage)", toStderr: true) }
                switch arg {
                case "--config": options.configPath = v
                case "--check-config": options.checkPath = v
                case "--probe": options.probeURL = v
                case "--host": options.host = v
                case "--port":
                    guard let p = Int(v), (0...65535).contains(p) else { return .exit(code: 2, message: "--port must be 0 to 65535", toStderr: true) }
                    options.port = p
                case "--log-level":
                    guard let l = LogLevel(name: v) else { return .exit(code: 2, message: "--log-level must be debug, info, warning or error", toStderr: true) }
                    options.logLevel = l
                default:
                    guard let ms = Double(v), ms >= 0 else { return .exit(code: 2, message: "--dev-pace-ms must be a number", toStderr: true) }
                    options.devPaceMs = ms
                }
            default:
                return .exit(code: 2, message: "unknown argument \(arg)\n\n\(usage)", toStderr: true)
            }
            i += 1
        }
        if options.checkPath == nil && options.configPath == nil && options.probeURL == nil && !options.dev {
            return .exit(code: 2, message: "give --config FILE or --dev\n\n\(usage)", toStderr: true)
        }
        return .run(options)
    }

    /// Runs the command; returns only for `--help`, `--version`, `--check-config` and errors (with the exit code).
    package static func main(_ arguments: [String]) -> Int32 {
        let options: Options
        switch parse(Array(arguments.dropFirst())) {
        case .exit(let code, let message, let toStderr):
            (toStderr ? FileDescriptorLogSink.standardError : FileDescriptorLogSink.standardOutput).write(line: message)
            return code
        case .run(let o):
            options = o
        }
        if let url = options.probeURL { return probe(url) }
        if let path = options.checkPath { return check(path) }

        var logger = Logger(label: "sse-relay")
        if let level = options.logLevel { logger.level = level }
        var configuration: RelayConfiguration
        var fakeProvider: FakeProvider?
        if options.dev {
            guard let dev = devConfiguration(options, logger: logger) else { return 1 }
            (configuration, fakeProvider) = dev
        } else {
            do {
                configuration = try RelayConfiguration.load(path: options.configPath!)
                try configuration.applyEnvironment(ProcessInfo.processInfo.environment)
            } catch {
                FileDescriptorLogSink.standardError.write(line: "\(options.configPath!): configuration has problems:\n\(error)")
                return 1
            }
        }
        if let host = options.host { configuration.listen.host = host }
        if let port = options.port { configuration.listen.port = port }
        if options.logLevel == nil { logger.level = configuration.logLevel }
        if options.dev && !["127.0.0.1", "localhost", "::1"].contains(configuration.listen.host) {
            FileDescriptorLogSink.standardError.write(line: "dev mode listens on loopback only (127.0.0.1, ::1 or localhost)")
            return 2
        }
        return run(configuration, fakeProvider: fakeProvider, logger: logger)
    }

    /// `--probe URL`: 0 for a 2xx answer.
    static func probe(_ url: String) -> Int32 {
        let status = Probe.status(of: url, timeoutSeconds: 3)
        FileDescriptorLogSink.standardOutput.write(line: status.map { "\(url): \($0)" } ?? "\(url): no answer")
        return (200..<300).contains(status ?? 0) ? 0 : 1
    }

    /// `--check-config FILE`: the file and the environment, secrets included; 0 when valid.
    static func check(_ path: String) -> Int32 {
        do {
            var configuration = try RelayConfiguration.load(path: path)
            try configuration.applyEnvironment(ProcessInfo.processInfo.environment)
            FileDescriptorLogSink.standardOutput.write(line: "\(path): configuration is valid")
            return 0
        } catch {
            FileDescriptorLogSink.standardError.write(line: "\(path): configuration has problems:\n\(error)")
            return 1
        }
    }

    /// `--dev`: the fake provider started, and a configuration that routes to it; nil when it cannot start.
    static func devConfiguration(_ options: Options, logger: Logger) -> (RelayConfiguration, FakeProvider)? {
        var configuration = RelayConfiguration()
        let provider = FakeProvider(paceSeconds: options.devPaceMs / 1000, logger: logger)
        do { try provider.start() } catch {
            FileDescriptorLogSink.standardError.write(line: "cannot start the fake provider: \(error)")
            return nil
        }
        // The same fake behind two presets: OpenAI's chat completions under /v1/, Anthropic's Messages at
        // /v1/messages (the longer, exact route wins), so both usage shapes can be tried.
        configuration.upstreams["dev"] = .init(name: "dev", baseURL: provider.baseURL, key: Secret(FakeProvider.devKey))
        configuration.upstreams["dev-anthropic"] = .init(name: "dev-anthropic", baseURL: provider.baseURL,
                                                         key: Secret(FakeProvider.devKey), provider: .anthropic)
        configuration.routes = [
            .init(prefix: "/v1/", upstream: "dev"),
            .init(prefix: "/v1/messages", upstream: "dev-anthropic", methods: ["POST"], exact: true, provider: .anthropic),
        ]
        logger.warning("dev mode: requests go to the built-in fake provider, and no client authentication is checked",
                       [("fake_provider", .string(provider.baseURL)), ("pace_ms", .double(options.devPaceMs))])
        return (configuration, provider)
    }

    /// Starts the server and serves until a signal drains it (never returns then); 1 when it cannot start.
    static func run(_ configuration: RelayConfiguration, fakeProvider: FakeProvider?, logger: Logger) -> Int32 {
        // Room in the descriptor table for a loaded relay's sockets, made before the event loops run: growing it
        // later holds the loop that opens a descriptor for tens of milliseconds (`Syscall.reserveDescriptorTable`).
        let table = Syscall.reserveDescriptorTable(Syscall.reservedDescriptorCeiling)
        logger.debug("descriptor table reserved", [("descriptors", .int(table))])
        let server: RelayServer
        // Before the relay listens: its path once, against the built-in fake provider (RelayDev/WarmUp.swift).
        WarmUp.log(WarmUp.run(like: configuration, logger: logger), to: logger)
        do {
            server = try RelayServer(configuration: configuration, logger: logger)
            try server.start()
        } catch {
            FileDescriptorLogSink.standardError.write(line: "cannot start: \(error)")
            return 1
        }
        let drainSeconds = configuration.timeouts.drainSeconds
        let prices = server.prices
        let signals = SignalHandling()
        do {
            try signals.start(reloading: prices.file != nil, logger: logger) { signal in
                switch signal {
                case .reload:
                    ReloadSignal.reload(prices, logger: logger)
                case .drain:
                    server.beginDrain(deadline: drainSeconds) { aborted in
                        server.shutdown()
                        fakeProvider?.shutdown()
                        logger.info("stopped", [("aborted_exchanges", .int(aborted))])
                        exit(0)
                    }
                case .exitNow:
                    logger.warning("second signal: exiting now")
                    exit(0)
                }
            }
        } catch {
            FileDescriptorLogSink.standardError.write(line: "cannot start: \(error)")
            return 1
        }
        dispatchMain()
    }
}

/// SIGINT and SIGTERM, and SIGHUP when there is a price file to reload, through `SignalPipe`: caught from the
/// moment the server runs, so none is lost to whichever thread the kernel picks. The first SIGINT or SIGTERM starts
/// a drain; a second one exits at once. Without a price file SIGHUP keeps its default action.
struct SignalHandling {
    enum Action: Equatable, Sendable {
        case reload
        case drain
        case exitNow
    }

    /// Stops (SIGINT or SIGTERM) seen so far; touched only on the signal queue, so a counter in a lock is enough.
    private let stops = Locked(0)

    /// What one delivered signal asks for.
    func action(for signal: Int32) -> Action {
        if signal == SIGHUP { return .reload }
        let seen = stops.wrappingAdd(1, ordering: .relaxed).newValue
        return seen > 1 ? .exitNow : .drain
    }

    func start(reloading: Bool, logger: Logger, _ perform: @escaping @Sendable (Action) -> Void) throws(SignalPipe.StartError) {
        let caught = reloading ? [SIGINT, SIGTERM, SIGHUP] : [SIGINT, SIGTERM]
        try SignalPipe.start(catching: caught, queue: DispatchQueue(label: "sse-relay.signals")) { signal in
            if signal != SIGHUP { logger.info("signal received", [("signal", .int(Int(signal)))]) }
            perform(action(for: signal))
        }
    }
}
