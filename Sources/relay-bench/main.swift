// relay-bench: the fake upstream and the load client of the SSE Relay benchmark (Tests/bench/run.sh).
//
//   relay-bench upstream [--host 127.0.0.1] [--port 0] [--max-seconds 7200]
//       prints `{"message":"upstream listening","port":N}` and serves until killed or max-seconds pass.
//   relay-bench load --port P [--streams C] [--ramp-ms R] [--events N] [--pace-us U] [--size S] [--seed X]
//       [--close-after K] [--id-base B] [--timeout-s T] [--proxy-pid PID] [--upstream-pid PID]
//       [--upstream-port P] [--extra-load-pid PID] [--proxy-cpu N] [--load-cpu N] [--labels "k=v k=v"]
//       [--timeline FILE]
//       prints one line `RESULT <labels> key=value ...`; with --timeline, FILE gets one line per event: its arrival
//       in ms since the first event, and its latency in µs (where in a run the slow events fall).
//   relay-bench posts --port P [--requests 2000] [--connections 50] [--path /v1/chat/completions?stream=0&size=64]
//       exactly N small non-streaming POSTs, closed loop over keep-alive connections (PostClient); prints one line
//       `RESULT requests=N errors=E wall_s=S rps=R`.
//   relay-bench tap [--events 50] [--streams 20000] [--size 32]
//       prints one line `RESULT tap ...`: the usage tap's CPU per relayed event (TapBench).
//   relay-bench attest [--requests 5000] [--body-bytes 300]
//       prints one line `RESULT scenario=ATTEST ...`: the CPU an App Attest assertion adds to a request (AttestBench).
//   relay-bench free-port
//       prints a free TCP port on 127.0.0.1.
//   relay-bench report FILE [--header TEXT]
//       prints the comparison table for the RESULT lines in FILE.
#if os(Linux)
import CBenchSupport
import Glibc

func benchMain(_ args: [String]) -> Int32 {
    guard args.count >= 2 else {
        writeStderr("usage: relay-bench upstream|load|report [options]")
        return 2
    }
    signal(SIGPIPE, SIG_IGN)
    let options = Options(args.dropFirst(2))
    switch args[1] {
    case "upstream":
        let limit = Int(cbs_raise_nofile(1 << 20))
        do {
            let upstream = try FakeUpstream(host: options.string("host", "127.0.0.1"), port: options.int("port", 0), maxFDs: limit)
            writeStdout("{\"message\":\"upstream listening\",\"port\":\(upstream.port),\"pid\":\(getpid())}")
            upstream.run(untilSeconds: options.double("max-seconds", 7200))
            return 0
        } catch {
            writeStderr(error.description)
            return 1
        }
    case "load":
        let limit = Int(cbs_raise_nofile(1 << 20))
        var c = LoadClient.Config()
        c.host = options.string("host", c.host)
        c.port = options.int("port", 0)
        c.path = options.string("path", c.path)
        c.streams = max(1, options.int("streams", 1))
        c.rampMs = options.double("ramp-ms", 0)
        c.events = options.int("events", 50)
        c.paceUs = options.int("pace-us", 10_000)
        c.size = options.int("size", 32)
        c.seed = UInt64(options.int("seed", 1))
        c.closeAfter = options.int("close-after", 0)
        c.idBase = UInt64(options.int("id-base", 0))
        c.timeoutSeconds = options.double("timeout-s", 60)
        c.proxyPID = Int32(options.int("proxy-pid", 0))
        c.upstreamPID = Int32(options.int("upstream-pid", 0))
        c.extraLoadPID = Int32(options.int("extra-load-pid", 0))
        c.upstreamPort = options.int("upstream-port", 0)
        c.labels = options.string("labels", "")
        c.proxyCPU = options.int("proxy-cpu", -1)
        c.loadCPU = options.int("load-cpu", -1)
        c.timelinePath = options.string("timeline", "")
        guard c.port > 0 else { writeStderr("load: --port is required"); return 2 }
        guard c.streams + 64 < limit else { writeStderr("load: \(c.streams) streams need more descriptors than the limit \(limit)"); return 2 }
        let client = LoadClient(config: c, maxFDs: limit)
        let result = client.run()
        var line = "RESULT"
        if !c.labels.isEmpty { line += " " + c.labels }
        for (k, v) in result { line += " \(k)=\(v)" }
        writeStdout(line)
        return 0
    case "posts":
        guard options.int("port", 0) > 0 else { writeStderr("posts: --port is required"); return 2 }
        let client = PostClient(host: options.string("host", "127.0.0.1"), port: options.int("port", 0),
                                path: options.string("path", "/v1/chat/completions?stream=0&size=64"),
                                requests: max(1, options.int("requests", 2000)), connections: options.int("connections", 50))
        writeStdout("RESULT " + client.run(timeoutSeconds: options.double("timeout-s", 600)).map { "\($0.0)=\($0.1)" }.joined(separator: " "))
        return 0
    case "tap":
        writeStdout(TapBench.run(events: options.int("events", 50), streams: options.int("streams", 20_000),
                                 size: options.int("size", 32)))
        return 0
    case "attest":
        writeStdout(AttestBench.run(requests: max(1, options.int("requests", 5000)), bodyBytes: options.int("body-bytes", 300)))
        return 0
    case "free-port":
        // A port that was free a moment ago (for nginx, which cannot listen on port 0 and report it).
        let fd = cbs_listen("127.0.0.1", 0, 1)
        guard fd >= 0 else { return 1 }
        writeStdout("\(cbs_local_port(fd))")
        close(fd)
        return 0
    case "report":
        guard args.count >= 3, let text = ProcStats.readFile(args[2]) else { writeStderr("report: cannot read results file"); return 2 }
        writeStdout(Report.render(Report.parse(text), header: Options(args.dropFirst(3)).string("header", "")))
        return 0
    default:
        writeStderr("unknown subcommand \(args[1])")
        return 2
    }
}

exit(benchMain(CommandLine.arguments))
#else
print("relay-bench needs Linux (epoll, timerfd)")
#endif
