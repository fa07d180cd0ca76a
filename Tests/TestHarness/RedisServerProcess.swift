// Test harness: a real redis-server for the tests of the Redis client and the Redis admission store. Must not
// import the relay's modules (its PING and commands are written by hand, so a client bug cannot hide here).
import Foundation
import TestSupportCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `/usr/bin/redis-server` on a free loopback port with persistence off, started by the test that needs it (this
/// is how `make test` "starts redis-server on a free port": nothing outside the tests runs one). The port is found
/// by binding port 0 and releasing it (redis-server rejects `--port 0`); if another process takes it in between,
/// the server exits at once and the next free port is tried.
///
/// Shared by the threads of one test: the process handle is behind a lock.
package final class RedisServerProcess: @unchecked Sendable {
    // Invariant: `process` is read and replaced only under `lock`.
    package let port: Int
    private let extraArguments: [String]
    private let lock = NSLock()
    private var process: Process
    private let logFile: String

    package static let executable = "/usr/bin/redis-server"

    /// Starts a server and waits (bounded) until it answers PING. `extraArguments` go to the command line
    /// (e.g. `["--requirepass", "secret"]`).
    package convenience init(extraArguments: [String] = []) throws {
        try self.init(ports: { try closedPort() }, attempts: 5, extraArguments: extraArguments)
    }

    /// A server on exactly `port`; throws if it cannot be this process that answers there.
    package convenience init(port: Int) throws {
        try self.init(ports: { port }, attempts: 1, extraArguments: [])
    }

    private init(ports: () throws -> Int, attempts: Int, extraArguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw HarnessError.socket("\(Self.executable) is missing (make deps installs redis-server)")
        }
        self.extraArguments = extraArguments
        var lastError: Error = HarnessError.timeout
        for _ in 0..<attempts {
            let port = try ports()
            let logFile = NSTemporaryDirectory() + "redis-test-\(port)-\(UUID().uuidString).log"
            do {
                let process = try Self.launch(port: port, extraArguments: extraArguments, logFile: logFile)
                try Self.waitForPing(port: port, process: process, password: Self.password(in: extraArguments))
                self.port = port
                self.process = process
                self.logFile = logFile
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: logFile)
    }

    package var processIdentifier: Int32 { lock.withLock { process.processIdentifier } }

    /// SIGKILL: the server vanishes without a word (its clients see their connections reset or closed).
    package func kill() {
        let process = lock.withLock { self.process }
        guard process.isRunning else { return }
        _ = Glibc_kill(process.processIdentifier, SIGKILL)
        process.waitForExit()
    }

    /// SIGSTOP: the server keeps its connections but answers nothing (a stalled Redis) until `resume()`.
    package func pause() {
        _ = Glibc_kill(processIdentifier, SIGSTOP)
    }

    package func resume() {
        _ = Glibc_kill(processIdentifier, SIGCONT)
    }

    /// Kills the server if it runs, then starts a new one on the same port: empty data, empty script cache.
    package func restart() throws {
        kill()
        let deadline = HarnessDeadline(seconds: 10)
        while true {
            do {
                let process = try Self.launch(port: port, extraArguments: extraArguments, logFile: logFile)
                try Self.waitForPing(port: port, process: process, password: Self.password(in: extraArguments))
                lock.withLock { self.process = process }
                return
            } catch {
                if deadline.isExpired { throw error }
            }
        }
    }

    /// Ends the server (SIGCONT first, so a paused one can die) and waits for it. Idempotent.
    package func stop() {
        let process = lock.withLock { self.process }
        guard process.isRunning else { return }
        _ = Glibc_kill(process.processIdentifier, SIGCONT)
        kill()
    }

    /// One command in Redis's inline form (`"SCRIPT FLUSH"`, `"ZCARD key"`: arguments without spaces) on a new
    /// connection; returns its single-line reply (`+OK`, `:3`, `-ERR …`), or throws on timeout.
    package func command(_ inline: String, timeout: Double = 5) throws -> String {
        try Self.command(inline, port: port, password: Self.password(in: extraArguments), timeout: timeout)
    }

    /// `INFO section`'s text (a bulk reply), on a new connection.
    package func info(_ section: String, timeout: Double = 5) throws -> String {
        try Self.info(section, port: port, password: Self.password(in: extraArguments), timeout: timeout)
    }

    private static func info(_ section: String, port: Int, password: String?, timeout: Double) throws -> String {
        let deadline = HarnessDeadline(seconds: timeout)
        let socket = try HarnessSocket.connect(port: port, deadline: deadline)
        defer { socket.close(reset: false) }
        try socket.sendAll(Array(((password.map { "AUTH \($0)\r\n" } ?? "") + "INFO \(section)\r\n").utf8), deadline: deadline)
        var received: [UInt8] = []
        while true {
            if let text = bulkReply(in: received, after: password == nil ? 0 : 1) { return text }
            switch try socket.receive(deadline: deadline) {
            case .bytes(let bytes): received += bytes
            case .closed: throw HarnessError.connectionClosed
            }
        }
    }

    /// The text of a whole bulk reply (`$N\r\n…\r\n`) that follows `lines` single-line replies in `bytes`, or nil
    /// while it is incomplete.
    private static func bulkReply(in bytes: [UInt8], after lines: Int) -> String? {
        var start = 0
        for _ in 0..<lines {
            guard let lf = bytes[start...].firstIndex(of: 10) else { return nil }
            start = lf + 1
        }
        guard start < bytes.count, bytes[start] == UInt8(ascii: "$"), let lf = bytes[start...].firstIndex(of: 10), lf > start + 1,
              let length = Int(String(decoding: bytes[(start + 1)..<(lf - 1)], as: UTF8.self)), bytes.count >= lf + 1 + length + 2 else { return nil }
        return String(decoding: bytes[(lf + 1)..<(lf + 1 + length)], as: UTF8.self)
    }

    private static func password(in arguments: [String]) -> String? {
        guard let i = arguments.firstIndex(of: "--requirepass"), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }

    private static func launch(port: Int, extraArguments: [String], logFile: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--daemonize", "no", "--logfile", logFile, "--loglevel", "warning"] + extraArguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Bounded: PING every few milliseconds until PONG; a server that exited (port taken) fails at once.
    private static func waitForPing(port: Int, process: Process, password: String?) throws {
        let deadline = HarnessDeadline(seconds: 10)
        while true {
            if !process.isRunning { throw HarnessError.socket("redis-server exited (status \(process.terminationStatus))") }
            if let reply = try? command("PING", port: port, password: password, timeout: 1), reply == "+PONG" {
                // Another test's server may hold the port (it took the same free port first; ours then exits):
                // answering PING is not enough, the server must be this process.
                let server = try? info("server", port: port, password: password, timeout: 1)
                if server?.contains("\r\nprocess_id:\(process.processIdentifier)\r\n") == true { return }
                if server != nil {
                    Glibc_kill(process.processIdentifier, SIGKILL)
                    process.waitForExit()
                    throw HarnessError.socket("port \(port) answers for another redis-server")
                }
            }
            if deadline.isExpired {
                Glibc_kill(process.processIdentifier, SIGKILL)
                process.waitForExit()
                throw HarnessError.timeout
            }
            usleep(5_000)
        }
    }

    private static func command(_ inline: String, port: Int, password: String?, timeout: Double) throws -> String {
        let deadline = HarnessDeadline(seconds: timeout)
        let socket = try HarnessSocket.connect(port: port, deadline: deadline)
        defer { socket.close(reset: false) }
        var lines = password.map { "AUTH \($0)\r\n" } ?? ""
        lines += inline + "\r\n"
        try socket.sendAll(Array(lines.utf8), deadline: deadline)
        // Single-line replies only (status, error, integer): one LF each, the AUTH reply first.
        let expected = password == nil ? 1 : 2
        var received: [UInt8] = []
        while received.lazy.filter({ $0 == 10 }).count < expected {
            switch try socket.receive(deadline: deadline) {
            case .bytes(let bytes): received += bytes
            case .closed: throw HarnessError.connectionClosed
            }
        }
        let replies = String(decoding: received, as: UTF8.self).split(separator: "\r\n").map(String.init)
        return replies.last ?? ""
    }
}

#if canImport(Glibc)
@discardableResult @inline(__always) private func Glibc_kill(_ pid: Int32, _ signal: Int32) -> Int32 { Glibc.kill(pid, signal) }
#else
@discardableResult @inline(__always) private func Glibc_kill(_ pid: Int32, _ signal: Int32) -> Int32 { Darwin.kill(pid, signal) }
#endif
