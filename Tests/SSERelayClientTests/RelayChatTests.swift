import Foundation
import TestSupportCore
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing

/// The built `relay-chat` executable against the relay in this process (dev fake provider or a scripted upstream): its output and exit
/// status, and, since it is a process of its own, the client library's descriptors and threads over 100
/// open-cancel cycles without the noise of the other suites running here.
@Suite("relay-chat", .serialized)
struct RelayChatTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `relay-chat` sits next to the test bundle in the build folder (`swift build --build-tests` builds both).
    static var executable: URL? {
        let candidates = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap { $0 }
        for candidate in candidates {
            var directory = candidate.deletingLastPathComponent()
            for _ in 0..<3 {
                let url = directory.appendingPathComponent("relay-chat")
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
                directory = directory.deletingLastPathComponent()
            }
        }
        return nil
    }

    static func run(_ arguments: [String]) throws -> Run {
        let executable = try #require(Self.executable, "relay-chat is not built next to the tests")
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes to the end before waiting, so a full pipe cannot stall the child.
        let errData = Mailbox<Data>()
        Thread { errData.put(err.fileHandleForReading.readDataToEndOfFile()) }.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = try errData.take(timeout: 60)
        process.waitForExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                   stderr: String(decoding: stderr, as: UTF8.self))
    }

    @Test("prints the answer as it streams and exits 0; --max-events stops early and the relay cancels")
    func answersAndStops() throws {
        let dev = try ClientThroughRelayTests.DevRelay()
        let url = "http://127.0.0.1:\(dev.relay.port)"
        let full = try Self.run(["--url", url, "hello"])
        #expect(full.status == 0, "\(full.stderr)")
        #expect(full.stdout == FakeProvider.answer + "\n")

        // A provider that never finishes on its own: the relay can only log client_cancelled if relay-chat stopped.
        let closed = Mailbox<PeerClose>()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            for word in ["One", " two", " three", " four"] { try connection.writeChunk(ClientThroughRelayTests.chunk(word)) }
            closed.put(try connection.waitForPeerClose(timeout: 30))
        }
        let relay = try RelayFixture(upstream: upstream)
        let early = try Self.run(["--url", "http://127.0.0.1:\(relay.port)", "--max-events", "3", "hello"])
        #expect(early.status == 0, "\(early.stderr)")
        #expect(early.stdout == "One two three\n")
        _ = try closed.take(timeout: 5)
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.contains { $0.contains(#""outcome":"client_cancelled""#) })
    }

    @Test("control characters from the server are shown as U+FFFD, in the answer and in an error: none reaches the terminal")
    func controlCharactersAreNotPrinted() throws {
        let hostile = "A\u{1B}[2J\u{1B}]0;title\u{07}B\rC\u{08}\u{9B}31mD\u{7F}\u{0}E\tF"
        let shown = "A\u{FFFD}[2J\u{FFFD}]0;title\u{FFFD}B\u{FFFD}C\u{FFFD}\u{FFFD}31mD\u{FFFD}\u{FFFD}E\tF"
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            // Each run is a process of its own, on a connection of its own: the first is answered, the second refused.
            guard connection.index > 0 else {
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk(ClientThroughRelayTests.chunk(hostile, finish: "stop"))
                try connection.writeChunk("data: [DONE]\n\n")
                try connection.writeLastChunk()
                return
            }
            let body = #"{"error":{"message":"no\u001b[31m","type":"x"}}"#
            try connection.writeHead(status: 400, headers: [("Content-Type", "application/json"),
                                                            ("Content-Length", String(body.utf8.count))])
            try connection.write(body)
        }
        let answer = try Self.run(["--url", upstream.baseURL, "hello"])
        #expect(answer.status == 0, "\(answer.stderr)")
        #expect(answer.stdout == shown + "\n")
        let refused = try Self.run(["--url", upstream.baseURL, "hello"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("no\u{FFFD}[31m"), "\(refused.stderr)")
        for run in [answer, refused] {
            #expect(!(run.stdout + run.stderr).unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" && $0 != "\t" })
        }
    }

    @Test("errors exit non-zero with a clear message")
    func errors() throws {
        let dev = try ClientThroughRelayTests.DevRelay { configuration in
            configuration.routes = [.init(prefix: "/v1/", upstream: "test", bodyPolicy: BodyPolicy(models: ["gpt-4o-mini"]))]
        }
        let refused = try Self.run(["--url", "http://127.0.0.1:\(dev.relay.port)", "--model", "gpt-5", "hello"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("HTTP 403 model_not_allowed"), "\(refused.stderr)")
        let refusing = try RefusingPort()
        let nobody = try Self.run(["--url", "http://127.0.0.1:\(refusing.port)", "hello"])
        #expect(nobody.status == 1)
        #expect(nobody.stderr.contains("network error"), "\(nobody.stderr)")
        let usage = try Self.run(["--url", "ftp://x", "hello"])
        #expect(usage.status == 2)
    }

    @Test("100 open-cancel cycles in a client process leak no descriptors and no threads",
          .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func noLeaksInTheClientProcess() throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(ClientThroughRelayTests.chunk("first"))
            _ = try connection.waitForPeerClose(timeout: 30)
        }
        let relay = try RelayFixture(upstream: upstream)
        let run = try Self.run(["--url", "http://127.0.0.1:\(relay.port)", "--max-events", "1", "--repeat", "101",
                                "--report-resources", "hello"])
        #expect(run.status == 0, "\(run.stderr)")
        // "resources run=1 fds=… threads=… live_streams=…", after the warm-up run and after the last one.
        let reports = run.stderr.split(separator: "\n").filter { $0.hasPrefix("resources ") }.map { line in
            Dictionary(uniqueKeysWithValues: line.split(separator: " ").dropFirst().compactMap { field -> (String, Int)? in
                let kv = field.split(separator: "=")
                return kv.count == 2 ? (String(kv[0]), Int(kv[1]) ?? -1) : nil
            })
        }
        try #require(reports.count == 2, "\(run.stderr)")
        let (warm, end) = (reports[0], reports[1])
        #expect(end["live_streams"] == 0)
        // A socket of the last cycle may still be closing on URLSession's queue (seen under load); a leak per
        // cycle would add ~100.
        #expect(end["fds"]! <= warm["fds"]! + 4, "descriptors: \(warm["fds"]!) after warm-up, \(end["fds"]!) after 100 cycles")
        // URLSession's Dispatch workers come and go; a leak per cycle would add ~100.
        #expect(end["threads"]! <= warm["threads"]! + 4, "threads: \(warm["threads"]!) after warm-up, \(end["threads"]!) after 100 cycles")
        try relay.waitUntilIdle()
        #expect(relay.logs.lines.filter { $0.contains(#""outcome":"client_cancelled""#) }.count == 101)
    }
}
