import Foundation
import HTTP1
import Relay
import Support
import Testing

/// A relay on 127.0.0.1:0 in front of a scripted upstream, with its log captured in memory.
final class RelayFixture: Sendable {
    static let providerKey = "sk-test-PROVIDERKEY-7f3a9c2e41d8b6"
    static let clientToken = "client-token-SHOULD-NOT-TRAVEL-93ab"

    let server: RelayServer
    let logs: MemoryLogSink
    let upstream: ScriptedUpstream?

    init(upstream: ScriptedUpstream?, baseURL: String? = nil, fixedWallClock: Double? = nil, clock: any Clock = MonotonicClock(),
         configure: (inout RelayConfiguration) -> Void = { _ in }) throws {
        var configuration = RelayConfiguration()
        configuration.listen = .init(host: "127.0.0.1", port: 0)
        configuration.workers = 2
        configuration.upstreams["test"] = .init(name: "test", baseURL: baseURL ?? upstream!.baseURL, key: Secret(Self.providerKey))
        configuration.routes = [.init(prefix: "/v1/", upstream: "test")]
        configure(&configuration)
        logs = MemoryLogSink()
        server = try RelayServer(configuration: configuration, logger: Logger(label: "test", level: .debug, sink: logs),
                                 clock: clock, wallClock: { fixedWallClock ?? Date().timeIntervalSince1970 })
        try server.start()
        self.upstream = upstream
    }

    var port: Int { server.port }

    func client() throws -> TestClient { try TestClient(port: port) }

    /// Waits (bounded) until the relay holds no exchange and no curl transfer: the end of every cleanup path.
    func waitUntilIdle(timeout: Double = 2) throws {
        try waitUntil("idle", timeout: timeout) { $0.exchanges == 0 && $0.transfers == 0 }
    }

    /// Waits (bounded) until the relay's live counts satisfy `condition`.
    func waitUntil(_ what: String, timeout: Double = 2,
                   _ condition: ((connections: Int, exchanges: Int, transfers: Int)) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let counts = server.liveCounts()
            if condition(counts) { return }
            if Date() > deadline {
                throw HarnessError.socket("relay not \(what): \(counts)")
            }
            usleep(1000)
        }
    }

    /// Every byte a client could have seen and every log line: the provider key must be in none of them.
    func assertNoSecretLeaks(clients: [TestClient], secrets: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) {
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

extension Array where Element == UInt8 {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}

let sseHead: [(String, String)] = [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]
let chatBody = Array(#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8)

func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// A port with nothing listening: bound, then closed.
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    close(fd)
    return Int(UInt16(bigEndian: address.sin_port))
}
