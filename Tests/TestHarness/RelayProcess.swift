// Test harness: the relay as its own process, started from the built `sse-relay` binary, as a replica runs in
// production (several of them share one Redis). Must not import the relay's modules.
import Foundation
import TestSupportCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One relay process with a configuration written for it. Its ports come from its own "relay listening" log line
/// (configure port 0); its log lines are kept for assertions. `terminate()` (SIGTERM), `kill()` (SIGKILL, as
/// `kill -9` leaves leases behind) or deinit stops it.
///
/// Invariant that justifies `@unchecked Sendable`: `process` and `directory` are set in `init` and only read
/// afterwards; the log lines live in a `HarnessMonitor`.
package final class RelayProcess: @unchecked Sendable {
    package let port: Int
    package let adminPort: Int?
    private let process: Process
    private let directory: URL
    private let lines = HarnessMonitor<[String]>([])

    /// The binary: `SSE_RELAY_BIN`, else `sse-relay` next to the test bundle (`swift build --build-tests` builds
    /// it there).
    package static func binaryPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["SSE_RELAY_BIN"], !path.isEmpty { return path }
        var candidates: [URL] = []
        for start in [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0])] {
            var dir = start.deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent("sse-relay"))
                dir = dir.deletingLastPathComponent()
            }
        }
        for candidate in candidates {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate.path
            }
        }
        throw HarnessError.socket("sse-relay binary not found next to the tests (set SSE_RELAY_BIN); looked at \(candidates.map(\.path))")
    }

    /// Starts the relay with `configuration` (JSON text) and waits up to `timeout` seconds for it to listen.
    package init(configuration: String, environment: [String: String] = [:], timeout: Double = 20) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configPath = directory.appendingPathComponent("config.json").path
        guard FileManager.default.createFile(atPath: configPath, contents: Data(configuration.utf8)) else {
            throw HarnessError.socket("cannot write \(configPath)")
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.binaryPath())
        process.arguments = ["--config", configPath]
        var env = ProcessInfo.processInfo.environment
        for (name, value) in environment { env[name] = value }
        process.environment = env
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()

        let reading = output.fileHandleForReading
        let lines = self.lines, running = process
        let reader = Thread {
            var pending = Data()
            while true {
                let data = reading.availableData
                if data.isEmpty {
                    // The process closed its output: wake a start-up wait, which then sees it is not running.
                    running.waitForExit()
                    lines.withLock { _ in }
                    return
                }
                pending.append(data)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    lines.withLock { $0.append(line) }
                }
            }
        }
        reader.start()
        let process = self.process
        do {
            let ports = try lines.wait(timeout: timeout) { lines -> (Int, Int?)? in
                for line in lines where line.contains("\"relay listening\"") {
                    guard let port = Self.intField("port", in: line) else { continue }
                    return (port, Self.intField("admin_port", in: line))
                }
                return process.isRunning ? nil : (-1, nil)
            }
            guard ports.0 > 0 else { throw HarnessError.socket("relay exited at start-up") }
            port = ports.0
            adminPort = ports.1
        } catch {
            if process.isRunning { process.terminate() }
            throw HarnessError.socket("relay process did not start: \(error); log: \(self.lines.withLock { $0 }.joined(separator: "\n"))")
        }
    }

    package var baseURL: String { "http://127.0.0.1:\(port)" }
    package var pid: Int32 { process.processIdentifier }
    package var isRunning: Bool { process.isRunning }
    package var log: [String] { lines.withLock { $0 } }

    /// The first log line containing `text`, waiting up to `timeout` seconds for it.
    @discardableResult
    package func waitForLog(_ text: String, timeout: Double = 5) throws -> String {
        do {
            return try lines.wait(timeout: timeout) { lines in lines.first(where: { $0.contains(text) }) }
        } catch {
            throw HarnessError.socket("relay: no log line with \(text) within \(timeout) s")
        }
    }

    /// SIGKILL: no drain, no clean-up, leases left behind (a replica lost to `kill -9` or the OOM killer).
    package func kill() {
        guard process.isRunning else { return }
        #if canImport(Glibc)
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        #else
        _ = Darwin.kill(process.processIdentifier, SIGKILL)
        #endif
        process.waitForExit()
    }

    /// SIGTERM and wait: the relay drains and exits.
    package func terminate() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitForExit()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `"name":123` from a JSON log line.
    package static func intField(_ name: String, in line: String) -> Int? {
        guard let range = line.range(of: "\"\(name)\":") else { return nil }
        return Int(line[range.upperBound...].prefix(while: { $0.isNumber }))
    }
}
