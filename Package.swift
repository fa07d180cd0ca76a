// swift-tools-version:6.0
import PackageDescription

/// Release builds of the server's modules skip the run-time exclusivity checks (`swift_beginAccess` on every
/// access to a class's stored property: about 4 % of the relay's instructions per request, measured with callgrind).
/// Debug builds, which every test runs on (and the sanitizer builds), keep them, so an overlapping access is still
/// caught there; the compile-time checks stay in every build. Not applied to the client library's targets.
let serverRelease: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "sse-relay",
    // The floor of the client library apps link (`SSE`, `SSERelayClient`), and so of every target: a manifest has
    // one list. No target uses newer API (`Support.Locked` stands in for `Atomic` and `Mutex`), as far as
    // Tests/availability/check.sh can tell without an Apple compiler; see README, "Client library".
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .visionOS(.v1)],
    products: [
        .executable(name: "sse-relay", targets: ["sse-relay"]),
        // The app's side: streams chat through the relay (iOS, macOS, Linux; Foundation only).
        .library(name: "SSERelayClient", targets: ["SSERelayClient"]),
        .executable(name: "relay-chat", targets: ["relay-chat"]),
    ],
    targets: [
        // libcurl's headers plus typed wrappers for its variadic calls (Swift cannot call C varargs).
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        // HTTP messages as values: the HTTP/1.1 parser, headers, framing, client addresses behind proxies, the
        // server's error responses and the request sent upstream. Knows nothing of sockets.
        .target(name: "HTTP1", dependencies: ["Support"], swiftSettings: serverRelease),
        // Logger, clock, small shared values.
        .target(name: "Support", swiftSettings: serverRelease),
        // epoll's header, which Glibc's Swift module does not export.
        .target(name: "CSystem"),
        // Sockets and Dispatch: event loops (a serial queue and a poller each), listener, client connections with
        // high/low water marks, timers, and the one syscall wrapper every socket call goes through.
        .target(name: "Transport", dependencies: ["Support", "CSystem"], swiftSettings: serverRelease),
        // HTTP/1.1 server side: one connection's lifecycle (a pure state machine plus the socket shell that carries
        // out its actions), the request-handler and response-writer seams, connection deadlines, and `serve`,
        // which both the relay and the dev fake provider listen with. Knows no relay.
        .target(name: "HTTPServer", dependencies: ["HTTP1", "Transport", "Support"], swiftSettings: serverRelease),
        // libcurl multi driver: one transfer per relayed request, driven on an event loop's queue; the
        // UpstreamClient / UpstreamCall seams it implements.
        .target(name: "Upstream", dependencies: ["CCurl", "COpenSSL", "HTTP1", "Transport", "Support"], swiftSettings: serverRelease),
        // A small RESP2 client on our own poller: pure parser and encoder, and one pipelined connection per event loop
        // with timeouts and reconnects. Knows nothing of the relay.
        .target(name: "Redis", dependencies: ["Transport", "Support"], swiftSettings: serverRelease),
        // The relay's pure core: configuration values and their reader, routing and path rules, policies (auth
        // decisions, CORS, model allowlist, attestation, rate-limit buckets), the request body plan, usage and price
        // rules, the budget ledger, failover plans and the exchange state machine. Values in, decisions out: it
        // imports no I/O module (no Dispatch, Glibc, Transport, HTTPServer, Upstream or Redis; Tests/layout/core-imports.sh).
        .target(name: "RelayCore", dependencies: ["HTTP1", "Support", "JSON", "Usage", "SSE", "Auth", "Attestation", "RelayWire"],
                swiftSettings: serverRelease),
        // What replicas share: the admission and attestation store protocols, their memory and Redis stores, the
        // resumable-stream registry and its Redis mirror, the key pools' cool-downs.
        .target(name: "RelayState", dependencies: ["RelayCore", "HTTP1", "Transport", "Redis", "Support", "Auth"], swiftSettings: serverRelease),
        // The shell: the server and its handler, the exchange's I/O (client writer, curl calls, failover), the
        // attestation and stream endpoints, metrics and logs, and the composition root (`RelayServer`).
        .target(name: "Relay", dependencies: ["RelayCore", "RelayState", "HTTP1", "HTTPServer", "Transport", "Upstream", "Support", "Auth",
                                              "Usage", "SSE", "Redis", "JSON", "RelayWire", "Attestation"],
                swiftSettings: serverRelease),
        // The dev fake provider (`make run`, the tests, the bench): an OpenAI-style streaming upstream, no key.
        .target(name: "RelayDev", dependencies: ["Relay", "RelayCore", "Upstream", "HTTP1", "HTTPServer", "Transport", "Support", "Usage"], swiftSettings: serverRelease),
        // The command line: flags, configuration file and environment, signals, the dev fake provider.
        // Linked on Linux with full RELRO (`-z relro -z now`): the dynamic symbols are bound at start, so the global
        // offset table is read-only while the relay holds provider keys, and no request pays for binding them
        // lazily (the first stream's instructions: 1.19 M to 1.14 M). ELF linker flags: not on Apple platforms.
        .executableTarget(name: "sse-relay", dependencies: ["Relay", "RelayCore", "RelayDev", "Support", "Attestation", "Transport", "Upstream",
                                                            "Usage", "HTTP1"],
                          linkerSettings: [.unsafeFlags(["-Xlinker", "-z", "-Xlinker", "relro", "-Xlinker", "-z", "-Xlinker", "now"],
                                                         .when(platforms: [.linux]))]),
        // libFuzzer target for the request parser and, with `--cbor`, the App Attest CBOR reader and verifier
        // (`make fuzz`); a normal build replays a corpus instead.
        .executableTarget(name: "relay-fuzz", dependencies: ["HTTP1", "Attestation"]),
        // Benchmark (Tests/bench/run.sh, `make bench`): fake upstream + load client on epoll; not part of `make test`.
        .target(name: "CBenchSupport"),
        .executableTarget(name: "relay-bench", dependencies: ["CBenchSupport", "Usage", "HTTP1", "Auth", "Attestation", "RelayWire",
                                                              "RelayCore", "RelayState", "AttestationTestSupport"]),
        // The bench report's rules (medians of rounds, summed errors, verdicts), on made-up results.
        .testTarget(name: "BenchTests", dependencies: ["relay-bench"]),
        // Test support, in three layers so each test target takes only what it needs. Plain targets (not test
        // targets) so several test targets can share them; nothing in the products depends on them.
        // The seeded generator, `eventually`, deadlines: no sockets, for the pure-core tests too.
        .target(name: "TestSupportCore", dependencies: ["Support"], path: "Tests/TestSupportCore"),
        // The outside observer: raw loopback client, scripted HTTP/1.1 upstream, TLS upstream (a Python script
        // shipped as a resource), Gate and Mailbox. Depends on no relay module, so it cannot share the relay's bugs.
        .target(name: "TestHarness", dependencies: ["TestSupportCore"], path: "Tests/TestHarness",
                resources: [.copy("tls_upstream.py")]),
        // RelayFixture: the real relay on port 0 in front of the harness's upstream.
        .target(name: "RelayTestSupport", dependencies: ["Relay", "RelayCore", "RelayState", "RelayDev", "Redis", "Support", "Transport", "TestHarness", "TestSupportCore", "Auth", "COpenSSL",
                                                 "HTTP1", "HTTPServer"],
                path: "Tests/RelayTestSupport"),
        // The harness against itself (client ↔ scripted upstream), so a relay test failure is the relay's.
        .testTarget(name: "TestHarnessTests", dependencies: ["TestHarness", "TestSupportCore"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "TestSupportCore"]),
        // The connection state machine, deadlines and client-address rules, as values: no sockets, no sleeps.
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTP1", "Support", "TestSupportCore"]),
        // Pure cores (state machine, rewriting, configuration, timers): no sockets, no sleeps.
        .testTarget(name: "RelayCoreTests", dependencies: ["Relay", "RelayCore", "RelayState", "RelayDev", "RelayTestSupport", "HTTP1", "HTTPServer", "Transport", "Upstream", "Support", "TestSupportCore", "Usage",
                                                          "JSON", "Auth", "AttestationTestSupport"]),
        // The real server on port 0 between a raw test client and a scripted test upstream.
        .testTarget(name: "RelayTests", dependencies: ["Relay", "RelayCore", "RelayState", "RelayDev", "HTTP1", "HTTPServer", "Transport", "Upstream", "Support", "Auth", "COpenSSL",
                                                      "RelayTestSupport", "TestHarness", "TestSupportCore", "Usage", "Attestation",
                                                      "AttestationTestSupport", "RelayWire"]),
        // OpenSSL (libcrypto) behind one small C shim: hashing, HMAC, JWK public keys, RS256/ES256.
        .target(name: "COpenSSL", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // Apple App Attest verified offline: a bounded CBOR reader, attestation objects (x5c chain to Apple's root,
        // nonce, key id, app id, counter, aaguid) and assertions. Pure: bytes and the time in, a result out.
        .target(name: "Attestation", dependencies: ["COpenSSL", "Support"]),
        // A software App Attest "device" for tests: its own root CA and intermediate, a P-256 key, and attestation
        // objects and assertions built as a device builds them, with a knob to break each check.
        .target(name: "AttestationTestSupport", dependencies: ["Attestation", "COpenSSL"], path: "Tests/AttestationTestSupport"),
        .testTarget(name: "AttestationTests", dependencies: ["Attestation", "AttestationTestSupport", "COpenSSL"],
                    resources: [.copy("Fixtures")]),
        // Client authentication: static bearer tokens and JWTs (HS256/RS256/ES256, JWKS). Pure, no I/O.
        .target(name: "Auth", dependencies: ["COpenSSL", "Support", "JSON"]),
        // WHATWG event-stream parser: bytes in, events out. Pure Swift (no Foundation), shared by the client
        // library and anything in the relay that reads a stream's events.
        .target(name: "SSE"),
        // The bytes an App Attest assertion signs (`AttestationWire.clientData`), built by one function that the app's
        // client library and the relay both call, so the two cannot drift. Pure Swift, no Foundation.
        .target(name: "RelayWire"),
        // The client library apps link: URLSession streaming, chat deltas and snapshots, typed errors.
        .target(name: "SSERelayClient", dependencies: ["SSE", "RelayWire"]),
        // `relay-chat --url URL "prompt"`: a terminal chat through the relay, built on the client library.
        .executableTarget(name: "relay-chat", dependencies: ["SSERelayClient"]),
        .testTarget(name: "SSETests", dependencies: ["SSE", "TestSupportCore"]),
        // JSON in two modes. Strict, for request bodies, tokens and configuration values (`JSONDocument`): escapes
        // decoded, duplicate keys at any depth, invalid UTF-8, lone surrogates and trailing data refused; edits
        // applied in one pass. Lenient and allocation-free, for the provider's output the usage tap reads
        // (`JSONPeek`). Swift, but for one header-only C search (`CByteSearch`, SSE2 on x86-64).
        .target(name: "JSON", dependencies: ["CByteSearch"], swiftSettings: serverRelease),
        // The next byte of one value, sixteen bytes at a time: the lenient reader's quote search. `static inline`
        // C, so Swift inlines it; a plain loop where SSE2 is missing.
        .target(name: "CByteSearch"),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "CByteSearch", "TestSupportCore"]),
        // Token usage read from provider responses (OpenAI, Anthropic, Gemini, Azure OpenAI), the prompt estimate and
        // the filter that removes an injected usage event. Pure Swift on top of `SSE`: bytes in, counts out.
        .target(name: "Usage", dependencies: ["SSE", "JSON"], swiftSettings: serverRelease),
        .testTarget(name: "UsageTests", dependencies: ["Usage", "SSE", "TestSupportCore"]),
        // The client library against the real relay (dev fake provider, scripted upstream) on port 0.
        .testTarget(name: "SSERelayClientTests", dependencies: ["SSERelayClient", "SSE", "Relay", "RelayCore", "RelayDev", "Support", "Auth", "COpenSSL",
                                                               "RelayTestSupport", "TestHarness", "TestSupportCore", "AttestationTestSupport",
                                                               "RelayWire"]),
        // The RESP parser as a value; the Redis client and the Redis admission store against a real redis-server
        // (TestHarness's RedisServerProcess, on a free loopback port).
        .testTarget(name: "RedisTests", dependencies: ["Redis", "Relay", "RelayCore", "RelayState", "RelayTestSupport", "Transport", "Support", "TestHarness", "TestSupportCore"]),
        .testTarget(name: "AuthTests", dependencies: ["Auth", "COpenSSL", "Support", "TestSupportCore"], resources: [.copy("Fixtures")]),
    ],
    swiftLanguageModes: [.v6]
)
