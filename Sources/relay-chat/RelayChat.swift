import Foundation
import SSERelayClient
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `relay-chat`: asks one question through an SSE Relay and prints the answer as it streams. Built on the
/// client library exactly as an app uses it (scoped `withChat`, token, typed errors), so it doubles as a
/// hand check and a black-box test of the library.
@main
enum RelayChat {
    static let usage = """
    relay-chat: streams one chat answer through an SSE Relay.

    Usage:
      relay-chat --url URL [--token TOKEN] [--model MODEL] [--max-events N] [--drop-after-events N] "prompt"

    Options:
      --url URL              the relay, e.g. http://127.0.0.1:8080 (`make run`)
      --token TOKEN          bearer token for the relay (default: $RELAY_TOKEN, or none)
      --model MODEL          model name (default gpt-4o-mini)
      --max-events N         stop after N chunks, closing the request (the relay cancels the provider)
      --idle-timeout S       seconds of silence before giving up (default 310)
      --drop-after-events N  drop the connection once after N events, then resume the answer (a route with
                             `resume` in the relay's configuration); the text printed is the whole answer
      --repeat N             ask N times in a row (leak checks); --report-resources prints the process's
                             open descriptors and threads after the first and the last run, to stderr
    Exit status: 0 answered (or stopped by --max-events), 1 the relay or network failed, 2 bad arguments.
    """

    struct Options {
        var url: URL?
        var token = ProcessInfo.processInfo.environment["RELAY_TOKEN"]
        var model = "gpt-4o-mini"
        var maxEvents: Int?
        var dropAfterEvents: Int?
        var idleTimeout: TimeInterval = 310
        var repeatCount = 1
        var reportResources = false
        var prompt: String?
    }

    static func main() async {
        let options: Options
        switch parse(Array(CommandLine.arguments.dropFirst())) {
        case .success(let o): options = o
        case .failure(let problem):
            if problem.code == 0 { writeOut(problem.message + "\n") } else { writeError(problem.message) }
            exit(problem.code)
        }
        var configuration = SSERelayClient.Configuration(baseURL: options.url!)
        configuration.idleTimeout = options.idleTimeout
        configuration.dropAfterEvents = options.dropAfterEvents
        if let token = options.token, !token.isEmpty {
            configuration.tokenProvider = { _ in token }
        }
        let client = SSERelayClient(configuration: configuration)
        let request = ChatRequest(model: options.model, messages: [.user(options.prompt!)])
        for run in 0..<options.repeatCount {
            do {
                try await ask(client, request, maxEvents: options.maxEvents)
            } catch {
                writeError("relay-chat: \(describe(error))")
                exit(1)
            }
            if options.reportResources && (run == 0 || run == options.repeatCount - 1) {
                await settle()
                writeError("resources run=\(run + 1) fds=\(count("/proc/self/fd")) threads=\(count("/proc/self/task")) live_streams=\(SSERelayClient.liveStreams)")
            }
        }
        exit(0)
    }

    /// One answer, printed piece by piece as it arrives; `maxEvents` chunks end it early.
    static func ask(_ client: SSERelayClient, _ request: ChatRequest, maxEvents: Int?) async throws {
        var chunks = 0
        try await client.withChat(request) { stream in
            for try await event in stream {
                switch event {
                case .chunk(let chunk):
                    if let text = chunk.text { writeOut(text) }
                    chunks += 1
                case .finished(let summary):
                    if summary.skippedChunks > 0 { writeError("relay-chat: skipped \(summary.skippedChunks) malformed chunk(s)") }
                }
                // Leaving the loop (and with it the withChat body) closes the request.
                if let maxEvents, chunks >= maxEvents { break }
            }
        }
        writeOut("\n")
    }

    /// Waits (bounded) until every ended stream has released its URLSession, so the counts printed next are
    /// the steady state, not a teardown in progress.
    static func settle() async {
        let deadline = Date().addingTimeInterval(2)
        while SSERelayClient.liveStreams > 0 && Date() < deadline {
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    static func count(_ directory: String) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: directory).count) ?? -1
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as RelayAPIError:
            return error.description
        case let error as URLError:
            return "network error \(error.code.rawValue): \(error.localizedDescription)"
        case let error as SSERelayClientError where error.code == .notAnEventStream:
            return "\(error) (is --url the relay?)"
        case let error as SSERelayClientError:
            return error.description
        default:
            return "\(error)"
        }
    }

    struct Problem: Error {
        var message: String
        var code: Int32
    }

    static func parse(_ arguments: [String]) -> Result<Options, Problem> {
        var options = Options()
        var i = 0
        func value() -> String? {
            i += 1
            return i < arguments.count ? arguments[i] : nil
        }
        while i < arguments.count {
            let arg = arguments[i]
            switch arg {
            case "--help", "-h":
                return .failure(Problem(message: usage, code: 0))
            case "--url", "--token", "--model", "--max-events", "--idle-timeout", "--repeat",
                 "--drop-after-events":
                guard let v = value() else { return .failure(Problem(message: "relay-chat: \(arg) needs a value\n\n\(usage)", code: 2)) }
                switch arg {
                case "--url":
                    guard let url = URL(string: v), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
                        return .failure(Problem(message: "relay-chat: --url must be an http(s) URL, e.g. http://127.0.0.1:8080", code: 2))
                    }
                    options.url = url
                case "--token": options.token = v
                case "--model": options.model = v
                case "--max-events":
                    guard let n = Int(v), n > 0 else { return .failure(Problem(message: "relay-chat: --max-events must be a positive number", code: 2)) }
                    options.maxEvents = n
                case "--drop-after-events":
                    guard let n = Int(v), n > 0 else { return .failure(Problem(message: "relay-chat: --drop-after-events must be a positive number", code: 2)) }
                    options.dropAfterEvents = n
                case "--idle-timeout":
                    guard let s = TimeInterval(v), s >= 1 else { return .failure(Problem(message: "relay-chat: --idle-timeout must be at least 1 second", code: 2)) }
                    options.idleTimeout = s
                default:
                    guard let n = Int(v), n > 0 else { return .failure(Problem(message: "relay-chat: --repeat must be a positive number", code: 2)) }
                    options.repeatCount = n
                }
            case "--report-resources":
                options.reportResources = true
            default:
                if arg.hasPrefix("--") { return .failure(Problem(message: "relay-chat: unknown option \(arg)\n\n\(usage)", code: 2)) }
                guard options.prompt == nil else { return .failure(Problem(message: "relay-chat: give one prompt (quote it)", code: 2)) }
                options.prompt = arg
            }
            i += 1
        }
        guard options.url != nil else { return .failure(Problem(message: "relay-chat: --url is required\n\n\(usage)", code: 2)) }
        guard let prompt = options.prompt, !prompt.isEmpty else { return .failure(Problem(message: "relay-chat: give a prompt\n\n\(usage)", code: 2)) }
        return .success(options)
    }

    /// Unbuffered: `print` to a pipe is block-buffered, and the point is to see the answer as it streams.
    static func writeOut(_ text: String) {
        FileHandle.standardOutput.write(Data(printable(text).utf8))
    }

    static func writeError(_ text: String) {
        FileHandle.standardError.write(Data((printable(text) + "\n").utf8))
    }

    /// `text` with every control character but line feed and tab shown as U+FFFD: what the model or the server
    /// wrote reaches a terminal, and an escape sequence (ESC, CSI), a carriage return or a backspace in it would
    /// move the cursor, rewrite what was printed, or worse.
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { out.append(isControl(scalar) ? "\u{FFFD}" : scalar) }
        return String(out)
    }

    /// C0 but LF and TAB, DEL, and C1.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: return false
        case 0x00...0x1F, 0x7F...0x9F: return true
        default: return false
        }
    }
}
