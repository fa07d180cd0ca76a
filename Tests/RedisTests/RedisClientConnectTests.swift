#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Redis
import RelayTestSupport
import Support
import Testing
import TestHarness
import TestSupportCore
import Transport

/// How the client finds Redis: an address literal is connected to on the loop, a name goes through the resolver.
/// The clock is manual and the resolver answers when the test says, so "the resolver is late" is a state the test
/// holds, not a race it hopes to lose.
///
/// The flake these pin: ResumableStreamReplicaTests' first stream got 503 `state_unavailable` in an AddressSanitizer
/// run on a loaded machine. `127.0.0.1` was resolved on a Dispatch worker that did not come within the 1 s connect
/// timeout, and the admission waiting for the connection failed with it.
@Suite struct RedisClientConnectTests {
    static func client(_ host: String, _ server: RedisServerProcess, resolver: ManualHostResolver, clock: ManualClock) -> RedisClient {
        RedisClient(loop: EventLoop(index: 0, clock: clock),
                    configuration: .init(host: host, port: server.port, timeoutMs: 10_000, connectTimeoutMs: 1_000),
                    logger: Logger(label: "redis-test", level: .error), resolver: resolver)
    }

    @Test func anAddressLiteralIsConnectedWithoutTheResolver() throws {
        let server = try RedisServerProcess()
        let resolver = ManualHostResolver()   // never answered: a hop through it would never connect
        let client = Self.client("127.0.0.1", server, resolver: resolver, clock: ManualClock())
        client.loop.execute { client.start() }
        #expect(try call(client, ["PING"]) == .success(.simpleString("PONG")))
        #expect(resolver.askedHosts.isEmpty)
        _ = try onLoop(client.loop) { client.close() }
    }

    /// A command sent to a client never started connects it; with a literal the connect can finish in that same
    /// call, and the command must still go out.
    @Test func aCommandToAnIdleClientConnectsIt() throws {
        let server = try RedisServerProcess()
        let client = Self.client("127.0.0.1", server, resolver: ManualHostResolver(), clock: ManualClock())
        #expect(try call(client, ["PING"]) == .success(.simpleString("PONG")))
        _ = try onLoop(client.loop) { client.close() }
    }

    /// A name that does not resolve fails the commands waiting for it at once, and the client backs off.
    @Test func aNameThatDoesNotResolveFailsTheWaitingCommands() throws {
        let server = try RedisServerProcess()
        let resolver = ManualHostResolver()
        let client = Self.client("redis.test", server, resolver: resolver, clock: ManualClock())
        let replies = Mailbox<Result<RESPValue, RedisError>>()
        client.loop.execute { client.send(["PING"]) { replies.put($0) } }
        try resolver.answer(.failure(ResolveError(message: "cannot resolve redis.test")))
        #expect(try replies.take(timeout: 5) == .failure(.connectionLost))
        #expect(try onLoop(client.loop) { client.state } == .backingOff)
        _ = try onLoop(client.loop) { client.close() }
    }
}

/// Address literals are read without a resolver; names, and what only `getaddrinfo` reads, are not.
@Suite struct SocketAddressTests {
    @Test(arguments: [("127.0.0.1", AF_INET), ("10.1.2.3", AF_INET), ("::1", AF_INET6), ("2001:db8::7", AF_INET6),
                      ("::ffff:127.0.0.1", AF_INET6)])
    func anAddressLiteral(host: String, family: Int32) throws {
        let address = try #require(SocketAddress(numericHost: host, port: 6380))
        #expect(address.family == family)
        #expect(address.port == 6380)
        #expect(SocketAddress(numericHost: address.host, port: 6380)?.host == address.host)
    }

    @Test(arguments: ["localhost", "redis", "redis.internal", "", "127.1", "1.2.3.4.5", "fe80::1%eth0", "[::1]", " 127.0.0.1"])
    func notALiteral(host: String) {
        #expect(SocketAddress(numericHost: host, port: 6379) == nil)
    }

    @Test func aPortOutOfRange() {
        #expect(SocketAddress(numericHost: "127.0.0.1", port: 65_536) == nil)
        #expect(SocketAddress(numericHost: "127.0.0.1", port: -1) == nil)
        #expect(SocketAddress(numericHost: "127.0.0.1", port: 65_535)?.port == 65_535)
    }
}
