// Test support: a host resolver the test answers by hand.
import Redis
import TestHarness
import Transport

/// A `HostResolver` whose asks wait until the test answers them: a client stays between "resolving" and
/// "resolved" for as long as the test likes, as behind a resolver that is slow or whose Dispatch worker is late.
/// Each ask is also a sync point (`nextAsk`): the client is resolving now.
package final class ManualHostResolver: HostResolver {
    package typealias Done = @Sendable (Result<SocketAddress, ResolveError>) -> Void

    private let asks = HarnessMonitor<[(host: String, done: Done)]>([])
    private let hosts = HarnessMonitor<[String]>([])

    package init() {}

    package func resolve(host: String, port: Int, _ done: @escaping Done) {
        hosts.withLock { $0.append(host) }
        asks.withLock { $0.append((host, done)) }
    }

    /// Every host asked for so far, answered or not.
    package var askedHosts: [String] { hosts.withLock { $0 } }

    /// Waits (bounded) for an ask not answered yet and returns its host, leaving it waiting.
    package func nextAsk(timeout: Double = 5) throws -> String {
        try asks.wait(timeout: timeout) { $0.first?.host }
    }

    /// Answers the oldest waiting ask with `result` (waiting, bounded, for one to come).
    package func answer(_ result: Result<SocketAddress, ResolveError>, timeout: Double = 5) throws {
        let done = try asks.wait(timeout: timeout) { asks -> Done? in asks.isEmpty ? nil : asks.removeFirst().done }
        done(result)
    }
}
