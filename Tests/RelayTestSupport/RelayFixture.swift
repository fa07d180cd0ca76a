// Test support for the targets that run the real relay: a relay on port 0 in front of the harness's upstream.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import TestHarness
import TestSupportCore
import Testing

/// A relay on 127.0.0.1:0 in front of a scripted upstream, with its log captured in memory.
package final class RelayFixture: Sendable {
    package static let providerKey = "sk-test-PROVIDERKEY-7f3a9c2e41d8b6"
    package static let clientToken = "client-token-SHOULD-NOT-TRAVEL-93ab"

    package let server: RelayServer
    package let logs: MemoryLogSink
    package let upstream: ScriptedUpstream?

    /// `onLogLine` sees every log line after it is kept, on the thread that wrote it (a relay loop's, for the
    /// access log): a test may hold that loop there. `makeStore` builds the admission store (`RelayServer`'s).
    package init(upstream: ScriptedUpstream?, baseURL: String? = nil, fixedWallClock: Double? = nil, clock: any Clock = MonotonicClock(),
         streamCopyLagSeconds: Double = ResumableStreams.defaultCopyLagSeconds,
         configure: (inout RelayConfiguration) -> Void = { _ in }, onLogLine: (@Sendable (String) -> Void)? = nil,
         makeStore: ((RelayConfiguration, RelayServer.StoreEnvironment) throws -> any AdmissionStore)? = nil) throws {
        var configuration = RelayConfiguration()
        configuration.listen = .init(host: "127.0.0.1", port: 0)
        configuration.workers = 2
        configuration.upstreams["test"] = .init(name: "test", baseURL: baseURL ?? upstream!.baseURL, key: Secret(Self.providerKey))
        configuration.routes = [.init(prefix: "/v1/", upstream: "test")]
        configure(&configuration)
        let logs = MemoryLogSink()
        self.logs = logs
        let sink: any LogSink = onLogLine.map { HookedLogSink(kept: logs, hook: $0) } ?? logs
        server = try RelayServer(configuration: configuration, logger: Logger(label: "test", level: .debug, sink: sink),
                                 clock: clock, wallClock: { fixedWallClock ?? Date().timeIntervalSince1970 },
                                 streamCopyLagSeconds: streamCopyLagSeconds, makeStore: makeStore)
        do {
            try server.start()
        } catch {
            server.shutdown()   // its upstream drivers are freed only once shut down
            throw error
        }
        self.upstream = upstream
    }

    package var port: Int { server.port }

    package func client() throws -> TestClient { try TestClient(port: port) }

    /// Waits (bounded) until the relay holds no exchange and no curl transfer: the end of every cleanup path.
    package func waitUntilIdle(timeout: Double = 2) throws {
        try waitUntil("idle", timeout: timeout) { $0.exchanges == 0 && $0.transfers == 0 }
    }

    /// Waits (bounded) until the relay's live counts satisfy `condition`.
    package func waitUntil(_ what: String, timeout: Double = 2,
                          _ condition: ((connections: Int, exchanges: Int, transfers: Int)) -> Bool) throws {
        try eventually("relay \(what): \(server.liveCounts())", timeout: timeout) { condition(server.liveCounts()) }
    }

    /// Waits (bounded) until the relay holds no client connection; the error names a few that are still open.
    package func waitUntilNoConnections(timeout: Double = 2) throws {
        try eventually("relay without connections: \(server.debugConnections().prefix(3))", timeout: timeout) {
            server.liveCounts().connections == 0
        }
    }

    /// Every byte a client could have seen and every log line: the provider key must be in none of them.
    package func assertNoSecretLeaks(clients: [TestClient], secrets: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) {
        let key = Array(Self.providerKey.utf8)
        for client in clients {
            #expect(!client.receivedBytes.contains(subsequence: key), "provider key in bytes sent to a client", sourceLocation: sourceLocation)
            for secret in secrets {
                #expect(!client.receivedBytes.contains(subsequence: Array(secret.utf8)), "a credential echoed to a client", sourceLocation: sourceLocation)
            }
        }
        for line in logs.lines {
            #expect(!line.contains(Self.providerKey), "provider key in a log line", sourceLocation: sourceLocation)
            #expect(!line.contains(Self.clientToken), "client token in a log line", sourceLocation: sourceLocation)
            for secret in secrets {
                #expect(!line.contains(secret), "a credential in a log line", sourceLocation: sourceLocation)
            }
        }
    }

    deinit {
        server.shutdown()
        upstream?.shutdown()
    }
}

/// The head of a streaming upstream answer: what a scripted provider writes before its events.
package let sseHead: [(String, String)] = [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]

/// A minimal streaming chat request body.
/// Keeps every line in `kept`, then hands it to `hook`.
private struct HookedLogSink: LogSink {
    let kept: MemoryLogSink
    let hook: @Sendable (String) -> Void
    func write(line: String) {
        kept.write(line: line)
        hook(line)
    }
}

package let chatBody = Array(#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8)

/// An upstream that answers one request with a one-event SSE stream (`data: x`, 9 bytes).
package func oneEventUpstream() throws -> ScriptedUpstream {
    try ScriptedUpstream { connection in
        _ = try connection.readRequest()
        try connection.writeHead(status: 200, headers: sseHead)
        try connection.writeChunk("data: x\n\n")
        try connection.writeLastChunk()
    }
}
