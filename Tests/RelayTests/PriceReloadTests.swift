import Foundation
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `pricingFile` and SIGHUP on the built binary (issue 23): a changed file prices the next exchange anew; a bad file
/// is logged with its key path and the prices in force stay; the relay runs on through both.
@Suite("Price file reload and signals", .serialized)
struct PriceReloadTests {
    static func cost(of relay: RelayProcess, after count: Int) throws -> String {
        let (status, _) = try ReplicaTests.request(relay)
        #expect(status == 200)
        var line = ""
        try eventually("exchange \(count) logged", timeout: 5) {
            let lines = relay.log.filter { $0.contains(#""message":"exchange""#) }
            line = lines.count >= count ? lines[count - 1] : ""
            return !line.isEmpty
        }
        guard let range = line.range(of: #""cost_usd":""#) else { return "none: \(line)" }
        return String(line[range.upperBound...].prefix { $0 != "\"" })
    }

    /// A price file in its own temporary folder (removed by `remove`), and a relay that reads it, routing `/v1/` to
    /// `upstreamPort`.
    struct Setup {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prices-\(UUID().uuidString)")
        var file: URL { directory.appendingPathComponent("prices.json") }

        init() throws {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try write(#"{"gpt-4o-mini*": {"input": 1, "output": 1}}"#)
        }

        func write(_ text: String) throws { try Data(text.utf8).write(to: file, options: .atomic) }

        func relay(upstreamPort: Int) throws -> RelayProcess {
            let configuration = """
                {"listen": {"host": "127.0.0.1", "port": 0},
                 "upstreams": {"up": {"baseURL": "http://127.0.0.1:\(upstreamPort)", "key": {"env": "RELOAD_TEST_KEY"}}},
                 "routes": [{"prefix": "/v1/", "upstream": "up", "auth": "none"}],
                 "pricingFile": "\(file.path)"}
                """
            return try RelayProcess(configuration: configuration, environment: ["RELOAD_TEST_KEY": "sk-reload-test"])
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    @Test("SIGHUP re-reads the price file; a bad one is logged and the old prices stay")
    func reloadOnSIGHUP() throws {
        let upstream = try ReplicaTests.HeldUpstream()
        defer { upstream.server.shutdown() }
        upstream.gate.signal(10)
        let setup = try Setup()
        defer { setup.remove() }
        let relay = try setup.relay(upstreamPort: upstream.server.port)
        defer { relay.terminate() }
        // 9 prompt + 2 completion tokens (the upstream's usage chunk) at $1 per million: 11 000 n$.
        #expect(try Self.cost(of: relay, after: 1) == "0.000011000")

        try setup.write(#"{"gpt-4o-mini*": {"input": 2, "output": 3}}"#)
        kill(relay.pid, SIGHUP)
        _ = try relay.waitForLog("prices reloaded")
        #expect(try Self.cost(of: relay, after: 2) == "0.000024000", "9 × 2 + 2 × 3 $/M")

        try setup.write(#"{"gpt-4o-mini*": {"input": 2, "output": -3}}"#)
        kill(relay.pid, SIGHUP)
        let refused = try relay.waitForLog("price file not reloaded")
        #expect(refused.contains("pricingFile.gpt-4o-mini*.output"), "\(refused)")
        #expect(try Self.cost(of: relay, after: 3) == "0.000024000", "the prices in force stay")
        #expect(relay.isRunning)
    }

    @Test("every SIGHUP is one reload: twenty in a row, each logged, the relay up through all")
    func everySIGHUPIsAReload() throws {
        let setup = try Setup()
        defer { setup.remove() }
        // Port 9 (discard): no request is made; only the reloads are looked at.
        let relay = try setup.relay(upstreamPort: 9)
        defer { relay.terminate() }
        // Each signal is waited for before the next, so no two can merge into one delivery. (Before signals went
        // through `SignalPipe`, the second SIGHUP to a relay built with AddressSanitizer crashed it inside
        // Dispatch's own signal handling.)
        for round in 1...20 {
            kill(relay.pid, SIGHUP)
            try eventually("reload \(round) logged", timeout: 30) {
                relay.log.filter { $0.contains("prices reloaded") }.count >= round
            }
        }
        #expect(relay.log.filter { $0.contains("prices reloaded") }.count == 20)
        #expect(relay.isRunning)
    }

    /// Signals go through the command's signal pipe (`SignalPipe`): the first SIGTERM drains (a running stream holds
    /// the relay up), a second exits at once.
    @Test("SIGTERM drains while a stream runs; a second SIGTERM exits at once")
    func aSecondSignalExitsAtOnce() throws {
        let upstream = try ReplicaTests.HeldUpstream()   // its gate is closed: the stream is held until the end
        defer {
            upstream.gate.signal(1)
            upstream.server.shutdown()
        }
        let setup = try Setup()
        defer { setup.remove() }
        let relay = try setup.relay(upstreamPort: upstream.server.port)
        defer { relay.terminate() }
        let (client, head) = try ReplicaTests.open(relay)
        defer { client.close() }
        #expect(head.status == 200)
        kill(relay.pid, SIGTERM)
        _ = try relay.waitForLog("draining", timeout: 30)
        #expect(relay.isRunning, "the drain waits for the running stream")
        kill(relay.pid, SIGTERM)
        _ = try relay.waitForLog("second signal: exiting now", timeout: 30)
        try eventually("the relay exited", timeout: 30) { !relay.isRunning }
    }
}
