import Relay
import RelayCore
import RelayTestSupport
import Support
import TestHarness
import Testing

/// The relay's connections to Redis at an address literal (`redis://127.0.0.1:…`, a pod's IP) are made on the
/// loops, with no hop through the resolver: the first admission is answered however late a Dispatch worker would be.
/// ResumableStreamReplicaTests.resumeOnAnotherReplica once got 503 `state_unavailable` for its first stream (an
/// AddressSanitizer run on a loaded machine): the resolve of 127.0.0.1 outlasted the 1 s connect timeout, and the
/// admission waiting for the connection failed with the connect.
@Suite("Redis connect")
struct RedisConnectTests {
    @Test("a relay whose Redis is an address literal admits its first stream without asking the resolver")
    func firstStreamNeedsNoResolver() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        // Never answered: a connect waiting for it times out (1 s) and fails the admission waiting on it, as a
        // Dispatch worker that comes too late did.
        let resolver = ManualHostResolver()
        let relay = try RelayFixture(upstream: try oneEventUpstream(), configure: { config in
            var settings = StateConfiguration.Redis(host: "127.0.0.1", port: redis.port)
            settings.timeoutMilliseconds = 2000
            config.state.backend = .redis(settings)
        }, makeStore: { configuration, environment in
            try RelayServer.defaultStore(configuration, environment: environment, resolver: resolver)
        })
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == 200, "\(body) \(relay.logs.lines.filter { $0.contains("redis") }.suffix(3))")
        #expect(body == "data: x\n\n")
        #expect(resolver.askedHosts.isEmpty)
    }
}
