import Redis
import Support
import Testing
import TestHarness
import TestSupportCore
import Transport

/// The client against a real redis-server: pipelining, timeouts that never block the loop, reconnects.
@Suite struct RedisClientTests {
    /// 1000 commands issued in one turn of the loop are all in flight at once on the one connection, and each
    /// gets its own reply (FIFO matching).
    @Test func pipelinesAThousandCommands() throws {
        let server = try RedisServerProcess()
        let client = try readyClient(server)
        let replies = Mailbox<(Int, Result<RESPValue, RedisError>)>()
        let inFlight = try onLoop(client.loop) { () -> Int in
            for i in 0..<1_000 {
                client.send(["ECHO", "value-\(i)"]) { replies.put((i, $0)) }
            }
            return client.inFlightCount
        }
        #expect(inFlight == 1_000)
        for expected in 0..<1_000 {
            let (i, result) = try replies.take(timeout: 5)
            #expect(i == expected)
            #expect(result == .success(.bulkString(Array("value-\(i)".utf8))))
        }
        #expect(try onLoop(client.loop) { client.inFlightCount } == 0)
    }

    /// A stopped server (SIGSTOP) answers nothing: the command fails with `.timeout` after about `timeoutMs`,
    /// the loop keeps running meanwhile, and once the server resumes the client recovers by itself.
    @Test func stalledServerTimesOutWithoutBlockingTheLoop() throws {
        let server = try RedisServerProcess()
        let client = try readyClient(server, timeoutMs: 100)
        server.pause()
        defer { server.resume() }
        let done = Mailbox<(Result<RESPValue, RedisError>, UInt64)>()
        let start = monotonicNanoseconds()
        client.loop.execute { client.send(["PING"]) { done.put(($0, monotonicNanoseconds())) } }
        // While the command waits, the loop still runs other work: this turn ends before the command does.
        let turn = try onLoop(client.loop) { monotonicNanoseconds() }
        let (result, finished) = try done.take(timeout: 5)
        #expect(turn < finished)
        #expect(result == .failure(.timeout))
        // About the timeout: never before it, and not held for anything else (the upper bound is wide, for a
        // loaded machine; a timeout that waited for a later command or a reconnect would be seconds).
        let elapsedMs = Double(finished - start) / 1e6
        #expect(elapsedMs >= 95 && elapsedMs < 1_000, "answered after \(elapsedMs) ms")
        server.resume()
        try eventually("PING answered after SIGCONT", timeout: 5) { (try? call(client, ["PING"])) == .success(.simpleString("PONG")) }
    }

    /// Every waiting command's timeout rides on one loop timer (at the oldest one's deadline), not a timer per
    /// command: 100 commands to a stopped server arm one timer, and at their deadline all of them time out.
    @Test func oneTimerForEveryWaitingCommand() throws {
        let server = try RedisServerProcess()
        let clock = ManualClock()
        let client = try readyClient(server, timeoutMs: 100, clock: clock)
        #expect(try onLoop(client.loop) { client.loop.armedTimerCount } <= 1, "at most the timer the ready PING left")
        server.pause()
        defer { server.resume() }
        let results = Mailbox<Result<RESPValue, RedisError>>()
        let armed = try onLoop(client.loop) { () -> Int in
            clock.advance(bySeconds: 1)   // past any deadline of the PINGs that made the client ready
            client.loop.runDueTimers()
            for _ in 0..<100 { client.send(["PING"]) { results.put($0) } }
            return client.loop.armedTimerCount
        }
        #expect(armed == 1)
        try onLoop(client.loop) {
            clock.advance(bySeconds: 0.099)
            client.loop.runDueTimers()
        }
        #expect(results.count == 0, "nothing times out before its deadline")
        try onLoop(client.loop) {
            clock.advance(bySeconds: 0.001)
            client.loop.runDueTimers()
        }
        for _ in 0..<100 { #expect(try results.take(timeout: 5) == .failure(.timeout)) }
    }

    /// Commands in flight when the server dies fail together at once (not each at its timeout); while Redis is
    /// down, commands fail fast; after a restart on the same port the client reconnects by itself.
    @Test func failsInFlightAtOnceAndReconnectsAfterRestart() throws {
        let server = try RedisServerProcess()
        let client = try readyClient(server, timeoutMs: 10_000)
        let failures = Mailbox<Result<RESPValue, RedisError>>()
        _ = try onLoop(client.loop) {
            // Blocking pops: no reply until a push that never comes.
            for i in 0..<5 { client.send(["BLPOP", "never-\(i)", "0"]) { failures.put($0) } }
        }
        let killedAt = monotonicNanoseconds()
        server.kill()
        for _ in 0..<5 { #expect(try failures.take(timeout: 2) == .failure(.connectionLost)) }
        #expect(monotonicNanoseconds() - killedAt < 1_000_000_000)
        let whileDown = try call(client, ["PING"], timeout: 2)
        #expect(whileDown == .failure(.notConnected) || whileDown == .failure(.connectionLost))
        try server.restart()
        try eventually("reconnected", timeout: 5) { (try? call(client, ["PING"])) == .success(.simpleString("PONG")) }
        #expect(try onLoop(client.loop) { client.connectionCount } == 2)
    }

    /// AUTH and SELECT on connect; a wrong password fails the commands instead of hanging them, and never
    /// reaches the log.
    @Test func authenticatesAndSelectsTheDatabase() throws {
        let server = try RedisServerProcess(extraArguments: ["--requirepass", "s3cret-pw"])
        let client = try readyClient(server, password: "s3cret-pw", database: 3)
        #expect(try call(client, ["SET", "k", "v"]) == .success(.simpleString("OK")))
        #expect(try call(client, ["DBSIZE"]) == .success(.integer(1)))
        #expect(try server.command("DBSIZE") == ":0", "the key went to database 3, not 0")

        let sink = MemoryLogSink()
        let loop = EventLoop(index: 1)
        let wrong = RedisClient(loop: loop, configuration: .init(port: server.port, password: Secret("wrong-pw"), timeoutMs: 2_000),
                                logger: Logger(label: "redis", level: .debug, sink: sink))
        let result = try call(wrong, ["PING"])
        #expect(result == .failure(.connectionLost))
        #expect(!sink.lines.isEmpty)
        #expect(sink.lines.allSatisfy { !$0.contains("wrong-pw") })
        _ = try onLoop(loop) { wrong.close() }
    }

    /// The harness: a test's server that could not bind its port (another test's server took it first) must not
    /// pass for ready because the other one answers PING there. Two tests would then share one Redis and see each
    /// other's keys (a budget test failed in CI so, once).
    @Test func aPortAnotherServerHoldsIsNeverTakenForOurs() throws {
        let first = try RedisServerProcess()
        #expect(throws: HarnessError.self) { _ = try RedisServerProcess(port: first.port) }
        #expect(try first.command("PING") == "+PONG")
        let password = try RedisServerProcess(extraArguments: ["--requirepass", "pw"])
        #expect(try password.info("server").contains("process_id:\(password.processIdentifier)\r\n"))
    }
}
