// Test harness: an HTTPS upstream speaking HTTP/2 or HTTP/1.1 (chosen by ALPN), run as a child process
// (tls_upstream.py on Debian's python3-h2) with a certificate authority generated for the test by the openssl CLI.
// Must not import the relay's modules.
import Foundation
import TestSupportCore

/// What the TLS upstream reported (see tls_upstream.py for the vocabulary).
package struct TLSUpstreamEvent: Sendable, CustomStringConvertible {
    /// "open", "request", "reset", "closed", "done", "idle-closed", "goaway", "stale".
    package var kind: String
    /// CLOCK_MONOTONIC nanoseconds, comparable with `monotonicNanoseconds()`.
    package var atNanoseconds: UInt64
    package var connection: Int
    /// The HTTP/2 stream id (1 for HTTP/1.1); -1 for connection events.
    package var stream: Int
    /// The ALPN protocol for "open", the path for "request", the error code for "reset".
    package var detail: String
    /// For "open": the client resumed an earlier TLS session (an abbreviated handshake).
    package var sessionResumed = false

    package var description: String { "\(kind) c\(connection) s\(stream) \(detail)" }
}

/// Starts the upstream on 127.0.0.1:0 and reads its event lines; `shutdown()` (or deinit) stops it.
///
/// Invariant that justifies `@unchecked Sendable`: `process` and `input` are set in `init` and then only used by
/// `closeIdle()` and `shutdown()`, which the test calls from its own thread; the events live in a `HarnessMonitor`.
package final class TLSUpstream: @unchecked Sendable {
    package let port: Int
    /// The PEM file of the test's certificate authority: what `upstreams.NAME.caFile` must name.
    package let caFile: String
    private let directory: URL
    private let process: Process
    private let input: FileHandle
    private let events = HarnessMonitor<[TLSUpstreamEvent]>([])
    private let portBox = Mailbox<Int>()

    package var baseURL: String { "https://127.0.0.1:\(port)" }

    /// `http2: false`: ALPN offers only http/1.1 (a provider without h2), whatever the client asks for.
    package init(http2: Bool = true) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tls-upstream-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let dir = directory.path
        caFile = "\(dir)/ca.pem"
        try Self.makeCertificates(in: dir)

        guard let script = Bundle.module.path(forResource: "tls_upstream", ofType: "py") else {
            throw HarnessError.socket("tls_upstream.py is not in the TestHarness resource bundle")
        }
        process = Process()
        // Debian's interpreter: python3-h2 is installed for it (another python3 first on PATH may lack it).
        process.executableURL = URL(fileURLWithPath: FileManager.default.fileExists(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/bin/python3")
        process.arguments = [script, "--cert", "\(dir)/server.pem", "--key", "\(dir)/server.key"] + (http2 ? [] : ["--http1-only"])
        let stdinPipe = Pipe(), stdoutPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        input = stdinPipe.fileHandleForWriting
        try process.run()

        let output = stdoutPipe.fileHandleForReading
        let events = self.events, portBox = self.portBox
        let reader = Thread {
            var pending = Data()
            while true {
                let data = output.availableData
                if data.isEmpty { return }
                pending.append(data)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    let fields = line.split(separator: " ").map(String.init)
                    guard let kind = fields.first else { continue }
                    if kind == "port", fields.count == 2, let port = Int(fields[1]) {
                        portBox.put(port)
                        continue
                    }
                    guard fields.count >= 3, let at = UInt64(fields[1]), let connection = Int(fields[2]) else { continue }
                    let stream = kind == "request" || kind == "reset" || kind == "done" ? Int(fields[3]) ?? -1 : -1
                    let detail = kind == "open" ? fields[3] : (fields.count > 4 ? fields[4] : "")
                    var event = TLSUpstreamEvent(kind: kind, atNanoseconds: at, connection: connection, stream: stream, detail: detail)
                    event.sessionResumed = kind == "open" && fields.count > 4 && fields[4] == "resumed"
                    events.withLock { $0.append(event) }
                }
            }
        }
        reader.start()
        do {
            port = try portBox.take(timeout: 20)
        } catch {
            process.terminate()
            throw HarnessError.socket("TLS upstream did not start (is python3-h2 installed?)")
        }
    }

    /// A CA and a server certificate for 127.0.0.1 signed by it (P-256, valid two days).
    private static func makeCertificates(in dir: String) throws {
        let extensions = "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        guard FileManager.default.createFile(atPath: "\(dir)/server.ext", contents: Data(extensions.utf8)) else {
            throw HarnessError.socket("cannot write server.ext")
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + ec + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=Relay Test CA"])
        try openssl(["req"] + ec + ["-keyout", "\(dir)/server.key", "-out", "\(dir)/server.csr", "-subj", "/CN=127.0.0.1"])
        try openssl(["x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                     "-CAcreateserial", "-out", "\(dir)/server.pem", "-days", "2", "-extfile", "\(dir)/server.ext"])
    }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitForExit()
        guard process.terminationStatus == 0 else { throw HarnessError.socket("openssl \(arguments[0]) failed") }
    }

    /// The first event (in arrival order) that `matches`, waiting for it up to `timeout` seconds.
    @discardableResult
    package func waitFor(timeout: Double = 5, _ what: String = "event", _ matches: @escaping (TLSUpstreamEvent) -> Bool) throws -> TLSUpstreamEvent {
        do {
            return try events.wait(timeout: timeout) { events in events.first(where: matches) }
        } catch {
            throw HarnessError.socket("TLS upstream: no \(what) within \(timeout) s; saw \(allEvents)")
        }
    }

    package var allEvents: [TLSUpstreamEvent] { events.withLock { $0 } }

    /// Closes every connection that has no stream in progress, as a provider's keep-alive timeout does
    /// (HTTP/2: GOAWAY, then close).
    package func closeIdle() throws {
        try input.write(contentsOf: Data("close-idle\n".utf8))
    }

    /// Sends GOAWAY on every idle HTTP/2 connection and keeps it open (a provider draining for a restart).
    package func goAwayIdle() throws {
        try input.write(contentsOf: Data("goaway-idle\n".utf8))
    }

    /// Writes a second, unasked-for answer on every idle HTTP/1.1 connection (a provider that answers twice); each
    /// reports `stale` once its bytes wait in the relay's socket.
    package func staleIdle() throws {
        try input.write(contentsOf: Data("stale-idle\n".utf8))
    }

    package func shutdown() {
        guard process.isRunning else { return }
        try? input.close()
        process.terminate()
        process.waitForExit()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { shutdown() }
}
