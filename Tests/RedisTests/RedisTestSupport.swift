import Redis
import Support
import TestHarness
import TestSupportCore
import Transport

/// A client on its own loop against `server`, started and ready (it answered PING).
func readyClient(_ server: RedisServerProcess, timeoutMs: Int = 1_000, password: String? = nil, database: Int = 0,
                 logger: Logger = Logger(label: "redis-test", level: .error), clock: any Clock = MonotonicClock()) throws -> RedisClient {
    let loop = EventLoop(index: 0, clock: clock)
    let client = RedisClient(loop: loop, configuration: .init(port: server.port, database: database, password: password.map(Secret.init),
                                                               timeoutMs: timeoutMs), logger: logger)
    loop.execute { client.start() }
    // The first PING may wait out a connect on a loaded machine: asked again until it is answered.
    try eventually("PING answered", timeout: 10) { (try? call(client, ["PING"])) == .success(.simpleString("PONG")) }
    return client
}

/// Sends one command from the client's loop and waits (bounded) for its completion.
func call(_ client: RedisClient, _ arguments: [String], timeout: Double = 5) throws -> Result<RESPValue, RedisError> {
    let box = Mailbox<Result<RESPValue, RedisError>>()
    client.loop.execute { client.send(arguments) { box.put($0) } }
    return try box.take(timeout: timeout)
}

/// Runs `body` on `loop` and waits for it.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) throws -> T {
    let box = Mailbox<T>()
    loop.execute { box.put(body()) }
    return try box.take(timeout: 5)
}
