// RelayConfiguration.load: a valid file loads to exact values; every problem is reported with its key path,
// all of them at once; secrets come from the injected environment and file reader.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import Upstream

private let exampleJSON = #"""
{
  "listen": { "host": "0.0.0.0", "port": 8080 },
  "upstreams": {
    "openai": {
      "baseURL": "https://api.openai.com",
      "key": { "env": "OPENAI_API_KEY" },
      "keyHeader": "Authorization",
      "keyPrefix": "Bearer "
    }
  },
  "routes": [
    { "prefix": "/v1/", "upstream": "openai", "auth": "none" }
  ],
  "limits": { "maxHeadBytes": 32768, "maxHeaderCount": 100, "maxURIBytes": 8192, "maxBodyBytes": 1048576 },
  "timeouts": { "upstreamConnectSeconds": 10, "upstreamFirstByteSeconds": 120, "upstreamIdleSeconds": 300 },
  "buffers": { "highWaterBytes": 262144, "lowWaterBytes": 65536 },
  "workers": 0,
  "logLevel": "info"
}
"""#

private let env = ["OPENAI_API_KEY": "sk-test-123", "ANTHROPIC_API_KEY": "sk-ant-456"]

private func sources(env: [String: String] = env, files: [String: String] = [:]) -> ConfigurationSources {
    ConfigurationSources(environment: env, readFile: { files[$0] })
}

private func load(_ json: String, env: [String: String] = env, files: [String: String] = [:]) throws -> RelayConfiguration {
    try RelayConfiguration.load(json: Data(json.utf8), sources: sources(env: env, files: files))
}

/// The problems `json` is refused with (records an issue when it loads).
private func problems(
    _ json: String, env: [String: String] = env, files: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) -> [String] {
    configurationProblems(sourceLocation: sourceLocation) { _ = try load(json, env: env, files: files) }
}

/// The key path each problem names (the text before ": ").
private func paths(_ problems: [String]) -> [String] {
    problems.map { p in p.range(of: ": ").map { String(p[..<$0.lowerBound]) } ?? p }
}

/// A minimal valid configuration with `extra` members spliced into the root and the first upstream / route.
private func minimal(root: String = "", upstream: String = "", route: String = "") -> String {
    """
    {
      "upstreams": { "openai": { "baseURL": "https://api.openai.com", "key": { "env": "OPENAI_API_KEY" }\(upstream) } },
      "routes": [ { "prefix": "/v1/", "upstream": "openai", "auth": "none"\(route) } ]\(root)
    }
    """
}

@Suite struct RelayConfigurationTests {
    @Test func theExampleLoadsWithTheKeyFromTheEnvironment() throws {
        let c = try load(exampleJSON)
        #expect(c.listen == RelayConfiguration.Listen(host: "0.0.0.0", port: 8080))
        #expect(c.upstreams.count == 1)
        let openai = try #require(c.upstreams["openai"])
        #expect(openai.name == "openai")
        #expect(openai.baseURL == "https://api.openai.com")
        #expect(openai.key?.revealForHeader() == "sk-test-123")
        #expect(openai.keyHeader == "Authorization")
        #expect(openai.keyPrefix == "Bearer ")
        #expect(c.routes == [RelayConfiguration.Route(prefix: "/v1/", upstream: "openai", stripPrefix: false)])
        #expect(c.limits.request == RequestLimits(maxHeadBytes: 32768, maxHeaderCount: 100, maxURIBytes: 8192, maxBodyBytes: 1_048_576))
        #expect(c.timeouts.upstreamConnectSeconds == 10)
        #expect(c.timeouts.upstreamFirstByteSeconds == 120)
        #expect(c.timeouts.upstreamIdleSeconds == 300)
        #expect(c.buffers.highWaterBytes == 262_144)
        #expect(c.buffers.lowWaterBytes == 65536)
        #expect(c.workers == 0)
        #expect(c.logLevel == .info)
    }

    @Test func theMinimalConfigurationGetsTheDefaults() throws {
        let c = try load(minimal())
        #expect(c.listen == RelayConfiguration.Listen(host: "127.0.0.1", port: 8080))
        #expect(c.limits.request == RequestLimits())
        #expect(c.timeouts == RelayConfiguration.Timeouts())
        #expect(c.buffers == RelayConfiguration.Buffers())
        #expect(c.workers == 0)
        #expect(c.logLevel == .info)
        #expect(c.upstreams["openai"]?.keyHeader == "Authorization")
        #expect(c.upstreams["openai"]?.keyPrefix == "Bearer ")
        #expect(c.upstreams["openai"]?.httpVersion == .http2, "https:// defaults to HTTP/2")
        #expect(c.upstreams["openai"]?.caFile == nil)
    }

    @Test func plainHTTPUpstreamsDefaultToHTTP1AndHTTPSOnesToHTTP2() throws {
        let plain = minimal().replacingOccurrences(of: "https://api.openai.com", with: "http://127.0.0.1:9")
        #expect(try load(plain).upstreams["openai"]?.httpVersion == .http1_1)
        #expect(try load(minimal()).upstreams["openai"]?.httpVersion == .http2)
        #expect(try load(minimal(upstream: #", "httpVersion": "1.1""#)).upstreams["openai"]?.httpVersion == .http1_1)
    }

    @Test func httpVersionAndCAFileAreRead() throws {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        let c = try load(minimal(upstream: #", "httpVersion": "2", "caFile": "/etc/relay/ca.pem""#),
                         files: ["/etc/relay/ca.pem": pem])
        #expect(c.upstreams["openai"]?.httpVersion == .http2)
        #expect(c.upstreams["openai"]?.caFile == "/etc/relay/ca.pem")
        #expect(try load(minimal(upstream: #", "httpVersion": "1.1""#)).upstreams["openai"]?.httpVersion == .http1_1)
    }

    @Test func idleConnectionSecondsDefaultsTo30AndIsRangeChecked() throws {
        #expect(try load(minimal()).upstreams["openai"]?.idleConnectionSeconds == 30)
        #expect(try load(minimal(upstream: #", "idleConnectionSeconds": 4"#)).upstreams["openai"]?.idleConnectionSeconds == 4)
        for bad in ["0", "1.5", "3601", "\"30\"", "true"] {
            #expect(problems(minimal(upstream: #", "idleConnectionSeconds": \#(bad)"#))
                    == ["upstreams.openai.idleConnectionSeconds: must be a whole number from 1 to 3600"])
        }
    }

    @Test func resumesPerStreamDefaultsAndIsRead() throws {
        #expect(try load(minimal()).rateLimits.resumesPerStream == RateLimits(requestsPerMinute: 120, burst: 30))
        let c = try load(minimal(root: #", "rateLimits": {"resumesPerStream": {"requestsPerMinute": 10, "burst": 4}}"#))
        #expect(c.rateLimits.resumesPerStream == RateLimits(requestsPerMinute: 10, burst: 4))
        #expect(problems(minimal(root: #", "rateLimits": {"resumesPerStream": {"burst": 4}}"#))
                == ["rateLimits.resumesPerStream.requestsPerMinute: is required"])
        #expect(paths(problems(minimal(root: #", "rateLimits": {"resumesPerStream": {"requestsPerMinute": 10, "concurrentStreams": 2}}"#)))
                == ["rateLimits.resumesPerStream.concurrentStreams"])
    }

    @Test func theEnvironmentKeyIsTrimmed() throws {
        let c = try load(minimal(), env: ["OPENAI_API_KEY": "  sk-padded\n"])
        #expect(c.upstreams["openai"]?.key?.revealForHeader() == "sk-padded")
    }

    @Test func theKeyComesFromAFileTrimmed() throws {
        let json = #"""
        { "upstreams": { "a": { "baseURL": "https://api.anthropic.com", "key": { "file": "/run/secrets/anthropic" },
                                "keyHeader": "x-api-key" } },
          "routes": [ { "prefix": "/anthropic/", "upstream": "a", "auth": "none", "stripPrefix": true } ] }
        """#
        let c = try load(json, env: [:], files: ["/run/secrets/anthropic": "\n  sk-ant-from-file \r\n"])
        let a = try #require(c.upstreams["a"])
        #expect(a.key?.revealForHeader() == "sk-ant-from-file")
        #expect(a.keyHeader == "x-api-key")
        #expect(a.keyPrefix == "")
        #expect(c.routes == [RelayConfiguration.Route(prefix: "/anthropic/", upstream: "a", stripPrefix: true)])
    }

    @Test func anUnreadableOrEmptyKeyFileIsAProblem() {
        let json = minimal().replacingOccurrences(of: #"{ "env": "OPENAI_API_KEY" }"#, with: #"{ "file": "/k" }"#)
        #expect(problems(json, files: [:]) == ["upstreams.openai.key.file: cannot read /k"])
        #expect(problems(json, files: ["/k": " \n"]) == ["upstreams.openai.key.file: /k is empty"])
    }

    @Test func anUnsetEnvironmentVariableNamesItsKeyPath() {
        let p = problems(minimal(), env: ["OTHER": "x"])
        #expect(p == ["upstreams.openai.key.env: environment variable OPENAI_API_KEY is not set"])
        #expect(problems(minimal(), env: ["OPENAI_API_KEY": ""]) == p)
    }

    @Test func aBlankEnvironmentVariableIsAProblemLikeABlankFile() {
                    let p = problems(minimal(), env: ["OPENAI_API_KEY": "  \n"])
            #expect(paths(p) == ["upstreams.openai.key.env"])
    }

    @Test func noKeyIsAllowed() throws {
        let json = #"{ "upstreams": { "local": { "baseURL": "http://127.0.0.1:11434" } }, "routes": [ { "prefix": "/", "upstream": "local", "auth": "none" } ] }"#
        let c = try load(json, env: [:])
        #expect(c.upstreams["local"]?.key == nil)
    }

    struct ProblemCase: Sendable, CustomTestStringConvertible {
        var name: String
        var json: String
        var path: String
        var testDescription: String { name }
    }

    static let singleProblems: [ProblemCase] = [
        ProblemCase(name: "unknown route upstream",
                    json: minimal().replacingOccurrences(of: #""upstream": "openai", "auth": "none""#, with: #""upstream": "anthropic", "auth": "none""#),
                    path: "routes[0].upstream"),
        ProblemCase(name: "missing baseURL",
                    json: minimal().replacingOccurrences(of: #""baseURL": "https://api.openai.com", "#, with: ""),
                    path: "upstreams.openai.baseURL"),
        ProblemCase(name: "baseURL not http(s)",
                    json: minimal().replacingOccurrences(of: "https://api.openai.com", with: "ftp://api.openai.com"),
                    path: "upstreams.openai.baseURL"),
        ProblemCase(name: "baseURL with query",
                    json: minimal().replacingOccurrences(of: "https://api.openai.com", with: "https://api.openai.com/?x=1"),
                    path: "upstreams.openai.baseURL"),
        ProblemCase(name: "baseURL not a string", json: minimal().replacingOccurrences(of: #""https://api.openai.com""#, with: "42"),
                    path: "upstreams.openai.baseURL"),
        ProblemCase(name: "port too large", json: minimal(root: #", "listen": { "port": 70000 }"#), path: "listen.port"),
        ProblemCase(name: "port negative", json: minimal(root: #", "listen": { "port": -1 }"#), path: "listen.port"),
        ProblemCase(name: "port as string", json: minimal(root: #", "listen": { "port": "8080" }"#), path: "listen.port"),
        ProblemCase(name: "port fractional", json: minimal(root: #", "listen": { "port": 80.5 }"#), path: "listen.port"),
        ProblemCase(name: "port boolean", json: minimal(root: #", "listen": { "port": true }"#), path: "listen.port"),
        ProblemCase(name: "host not a string", json: minimal(root: #", "listen": { "host": 1 }"#), path: "listen.host"),
        ProblemCase(name: "listen not an object", json: minimal(root: #", "listen": 8080"#), path: "listen"),
        ProblemCase(name: "prefix without leading slash",
                    json: minimal().replacingOccurrences(of: #""prefix": "/v1/""#, with: #""prefix": "v1/""#),
                    path: "routes[0].prefix"),
        ProblemCase(name: "prefix missing",
                    json: minimal().replacingOccurrences(of: #""prefix": "/v1/", "#, with: ""),
                    path: "routes[0].prefix"),
        ProblemCase(name: "bad logLevel", json: minimal(root: #", "logLevel": "verbose""#), path: "logLevel"),
        ProblemCase(name: "unknown top-level key", json: minimal(root: #", "listn": {}"#), path: "listn"),
        ProblemCase(name: "workers boolean", json: minimal(root: #", "workers": true"#), path: "workers"),
        ProblemCase(name: "workers false", json: minimal(root: #", "workers": false"#), path: "workers"),
        ProblemCase(name: "workers fractional", json: minimal(root: #", "workers": 1.5"#), path: "workers"),
        ProblemCase(name: "workers too many", json: minimal(root: #", "workers": 257"#), path: "workers"),
        ProblemCase(name: "stripPrefix number", json: minimal(route: #", "stripPrefix": 1"#), path: "routes[0].stripPrefix"),
        ProblemCase(name: "stripPrefix zero", json: minimal(route: #", "stripPrefix": 0"#), path: "routes[0].stripPrefix"),
        ProblemCase(name: "stripPrefix string", json: minimal(route: #", "stripPrefix": "true""#), path: "routes[0].stripPrefix"),
        ProblemCase(name: "httpVersion 3", json: minimal(upstream: #", "httpVersion": "3""#),
                    path: "upstreams.openai.httpVersion"),
        ProblemCase(name: "httpVersion number", json: minimal(upstream: #", "httpVersion": 2"#),
                    path: "upstreams.openai.httpVersion"),
        ProblemCase(name: "caFile unreadable", json: minimal(upstream: #", "caFile": "/nonexistent/ca.pem""#),
                    path: "upstreams.openai.caFile"),
        ProblemCase(name: "keyHeader not a token", json: minimal(upstream: #", "keyHeader": "X Api Key""#),
                    path: "upstreams.openai.keyHeader"),
        ProblemCase(name: "key neither env nor file", json: minimal(upstream: "").replacingOccurrences(
            of: #"{ "env": "OPENAI_API_KEY" }"#, with: #"{ "value": "sk-inline" }"#), path: "upstreams.openai.key"),
        ProblemCase(name: "key as plain string", json: minimal(upstream: "").replacingOccurrences(
            of: #"{ "env": "OPENAI_API_KEY" }"#, with: #""sk-inline""#), path: "upstreams.openai.key"),
        ProblemCase(name: "zero idle timeout", json: minimal(root: #", "timeouts": { "upstreamIdleSeconds": 0 }"#),
                    path: "timeouts.upstreamIdleSeconds"),
        ProblemCase(name: "boolean timeout", json: minimal(root: #", "timeouts": { "upstreamConnectSeconds": true }"#),
                    path: "timeouts.upstreamConnectSeconds"),
        ProblemCase(name: "low water not below high water",
                    json: minimal(root: #", "buffers": { "highWaterBytes": 65536, "lowWaterBytes": 65536 }"#),
                    path: "buffers.lowWaterBytes"),
        ProblemCase(name: "head limit too small", json: minimal(root: #", "limits": { "maxHeadBytes": 10 }"#),
                    path: "limits.maxHeadBytes"),
        ProblemCase(name: "limits not an object", json: minimal(root: #", "limits": []"#), path: "limits"),
        ProblemCase(name: "no routes",
                    json: #"{ "upstreams": { "openai": { "baseURL": "https://api.openai.com" } }, "routes": [] }"#,
                    path: "routes"),
        ProblemCase(name: "route not an object", json: minimal().replacingOccurrences(
            of: #"[ { "prefix": "/v1/", "upstream": "openai", "auth": "none" } ]"#, with: #"[ "/v1/" ]"#), path: "routes[0]"),
        ProblemCase(name: "root not an object", json: "[]", path: "(root)"),
    ]

    @Test(arguments: singleProblems)
    func eachProblemIsReportedWithItsKeyPath(_ c: ProblemCase) {
        let p = problems(c.json)
        #expect(paths(p) == [c.path], "\(p)")
    }

    @Test func noUpstreamsAlsoLeavesTheRouteNamingNone() {
        let p = problems(#"{ "upstreams": {}, "routes": [ { "prefix": "/", "upstream": "x", "auth": "none" } ] }"#)
        #expect(p == ["upstreams: at least one upstream is required", "routes[0].upstream: names no upstream (\"x\")"])
        #expect(paths(problems(#"{ "routes": [] }"#)) == ["upstreams", "routes"])
    }

    @Test func notJSONAtAll() {
        let p = problems("{ upstreams: ")
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("the configuration is not valid JSON") == true)
    }

    @Test func severalProblemsAreReportedTogether() {
        let json = #"""
        {
          "listen": { "port": 99999 },
          "upstreams": {
            "good": { "baseURL": "https://api.openai.com", "key": { "env": "MISSING_KEY" } },
            "nourl": { "keyHeader": "x-api-key" }
          },
          "routes": [
            { "prefix": "v1/", "upstream": "good", "auth": "none" },
            { "prefix": "/x/", "upstream": "nowhere", "auth": "none", "stripPrefix": 1 }
          ],
          "workers": true,
          "logLevel": "loud",
          "extra": 1
        }
        """#
        let p = problems(json)
        #expect(Set(paths(p)) == [
            "listen.port", "upstreams.good.key.env", "upstreams.nourl.baseURL", "routes[0].prefix",
            "routes[1].upstream", "routes[1].stripPrefix", "workers", "logLevel", "extra",
        ])
        #expect(p.count == 9)
        #expect(p.contains("upstreams.good.key.env: environment variable MISSING_KEY is not set"))
        #expect(p.contains("routes[1].upstream: names no upstream (\"nowhere\")"))
    }

    @Test func booleansAndNumbersAreTold() throws {
        let c = try load(minimal(root: #", "workers": 4, "logLevel": "DEBUG", "listen": { "port": 0 }"#,
                                 route: #", "stripPrefix": true"#))
        #expect(c.workers == 4)
        #expect(c.logLevel == .debug)
        #expect(c.listen.port == 0)
        #expect(c.routes.first?.stripPrefix == true)
        let off = try load(minimal(route: #", "stripPrefix": false"#))
        #expect(off.routes.first?.stripPrefix == false)
        let whole = try load(minimal(root: #", "workers": 2.0, "timeouts": { "upstreamIdleSeconds": 0.5 }"#))
        #expect(whole.workers == 2)
        #expect(whole.timeouts.upstreamIdleSeconds == 0.5)
    }

    @Test(arguments: [
        ("https://openrouter.ai/api/", "https://openrouter.ai/api"),
        ("https://api.openai.com/", "https://api.openai.com"),
        ("http://127.0.0.1:8081//", "http://127.0.0.1:8081"),
        ("https://api.openai.com", "https://api.openai.com"),
    ])
    func aTrailingSlashOnBaseURLIsRemoved(given: String, expected: String) throws {
        let c = try load(minimal().replacingOccurrences(of: "https://api.openai.com", with: given))
        #expect(c.upstreams["openai"]?.baseURL == expected)
    }

    @Test func twoUpstreamsWithTheirOwnKeyHeaders() throws {
        let json = #"""
        { "upstreams": {
            "openai": { "baseURL": "https://api.openai.com", "key": { "env": "OPENAI_API_KEY" } },
            "anthropic": { "baseURL": "https://api.anthropic.com", "key": { "env": "ANTHROPIC_API_KEY" },
                           "keyHeader": "x-api-key" } },
          "routes": [ { "prefix": "/v1/", "upstream": "openai", "auth": "none" },
                      { "prefix": "/anthropic/", "upstream": "anthropic", "auth": "none", "stripPrefix": true } ] }
        """#
        let c = try load(json)
        #expect(c.upstreams["anthropic"]?.key?.revealForHeader() == "sk-ant-456")
        #expect(c.upstreams["anthropic"]?.keyPrefix == "")
        #expect(c.upstreams["openai"]?.key?.revealForHeader() == "sk-test-123")
        #expect(c.route(for: "/anthropic/v1/messages")?.upstream == "anthropic")
    }

    // MARK: route(for:)

    static let routed: RelayConfiguration = {
        var c = RelayConfiguration()
        c.routes = [
            RelayConfiguration.Route(prefix: "/v1/", upstream: "openai"),
            RelayConfiguration.Route(prefix: "/v1/chat/", upstream: "chat"),
            RelayConfiguration.Route(prefix: "/anthropic/", upstream: "anthropic", stripPrefix: true),
            RelayConfiguration.Route(prefix: "/v1/chat/completions", upstream: "exact"),
        ]
        return c
    }()

    @Test(arguments: [
        ("/v1/models", "openai"), ("/v1/chat/x", "chat"), ("/v1/chat/completions", "exact"),
        ("/v1/chat/completions/x", "exact"), ("/v1/chat/completionsX", "chat"), ("/anthropic/v1/messages", "anthropic"),
        ("/v1/", "openai"), ("/v1", "openai"), ("/anthropic", "anthropic"), ("/v1/chat/completions/", "exact"),
    ])
    func routePicksTheLongestPrefix(path: String, upstream: String) {
        #expect(Self.routed.route(for: path)?.upstream == upstream)
    }

    @Test(arguments: ["/", "/v1x", "/v2/models", "/anthropicx", "", "v1/models"])
    func routeIsNilWhenNothingMatches(path: String) {
        #expect(Self.routed.route(for: path) == nil)
    }

    @Test func routeOrderDoesNotMatter() {
        var c = Self.routed
        c.routes.reverse()
        #expect(c.route(for: "/v1/chat/completions")?.upstream == "exact")
        #expect(c.route(for: "/v1/chat/x")?.upstream == "chat")
    }
}

/// `state` and `budgets`: defaults, the Redis URL parsed into its parts, and each problem named by its key path.
@Suite struct RelayConfigurationStateTests {
    @Test func memoryAndNoBudgetsByDefault() throws {
        let c = try load(minimal())
        #expect(c.state.backend == .memory)
        #expect(c.budgets == nil)
    }

    @Test func redisLoadsWithEveryKey() throws {
        let c = try load(minimal(root: #""#
            + #","state": {"backend": "redis", "redis": {"url": "redis://10.0.0.5:6380/2", "password": {"env": "REDIS_PASSWORD"}, "#
            + #""keyPrefix": "relay-a:", "timeoutMs": 20, "onUnavailable": "local", "leaseTTLSeconds": 15}}"#),
                         env: env.merging(["REDIS_PASSWORD": "s3cret"]) { $1 })
        guard case .redis(let r) = c.state.backend else { Issue.record("not redis"); return }
        #expect(r.host == "10.0.0.5" && r.port == 6380 && r.database == 2)
        #expect(r.password?.revealForHeader() == "s3cret")
        #expect(r.keyPrefix == "relay-a:" && r.timeoutMilliseconds == 20 && r.onUnavailable == .local && r.leaseTTLSeconds == 15)
        let defaults = try load(minimal(root: #","state": {"backend": "redis", "redis": {"url": "redis://[::1]"}}"#))
        #expect(defaults.state.backend == .redis(StateConfiguration.Redis(host: "::1", port: 6379, database: 0)))
    }

    @Test func redisProblemsNameTheirKeyPaths() {
        #expect(paths(problems(minimal(root: #","state": {"backend": "etcd"}"#))) == ["state.backend"])
        #expect(paths(problems(minimal(root: #","state": {"backend": "redis"}"#))) == ["state.redis"])
        #expect(paths(problems(minimal(root: #","state": {"backend": "memory", "redis": {}}"#))) == ["state.redis"])
        for url in ["rediss://h:6379", "redis://user:pw@h", "redis://h:0", "redis://h:70000", "redis://h/x", "redis://", "http://h", "redis://h?db=1"] {
            #expect(paths(problems(minimal(root: #","state": {"backend": "redis", "redis": {"url": "\#(url)"}}"#))) == ["state.redis.url"], "\(url)")
        }
        let bad = problems(minimal(root: #","state": {"backend": "redis", "redis": {"url": "redis://h", "password": {"env": "NOPE"}, "#
                                   + #""timeoutMs": 0, "onUnavailable": "maybe", "leaseTTLSeconds": 0, "keyPrefix": "a b", "db": 1}}"#))
        #expect(Set(paths(bad)) == ["state.redis.password.env", "state.redis.timeoutMs", "state.redis.onUnavailable",
                                    "state.redis.leaseTTLSeconds", "state.redis.keyPrefix", "state.redis.db"])
        #expect(!bad.joined().contains("s3cret"))
    }

    @Test func budgetsLoadWithDefaults() throws {
        let c = try load(minimal(root: #","budgets": {"perIdentity": {"tokensPerDay": 200000, "tokensPerMonth": 3000000}, "total": {"tokensPerDay": 20000000}}"#))
        #expect(c.budgets == BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 200_000, tokensPerMonth: 3_000_000),
                                                 total: BudgetLimits(tokensPerDay: 20_000_000), onExceed: .cut, defaultReserveTokens: 4096))
        let finish = try load(minimal(root: #","budgets": {"total": {"tokensPerMonth": 5}, "onExceed": "finish", "defaultReserveTokens": 1000}"#))
        #expect(finish.budgets?.onExceed == .finish && finish.budgets?.defaultReserveTokens == 1000)
        #expect(c.budgets?.cancelFloorTokensPerSecond == 50)
        let floor = try load(minimal(root: #","budgets": {"total": {"tokensPerMonth": 5}, "cancelFloorTokensPerSecond": 0}"#))
        #expect(floor.budgets?.cancelFloorTokensPerSecond == 0)
        #expect(c.budgets?.mediaTokens == 2_000)
        let media = try load(minimal(root: #","budgets": {"total": {"tokensPerMonth": 5}, "mediaTokens": 50000}"#))
        #expect(media.budgets?.mediaTokens == 50_000)
    }

    @Test func maxTrackedIdentitiesIsRead() throws {
        #expect(try load(minimal()).limits.maxTrackedIdentities == 100_000)
        #expect(try load(minimal(root: #","limits": {"maxTrackedIdentities": 5000}"#)).limits.maxTrackedIdentities == 5_000)
        #expect(paths(problems(minimal(root: #","limits": {"maxTrackedIdentities": 0}"#))) == ["limits.maxTrackedIdentities"])
    }

    /// `upstreams.NAME.headers` (issue 18 §5): fixed fields the operator sets, checked at start-up.
    @Test func upstreamHeadersAreReadAndCheckedByKeyPath() throws {
        let c = try load(minimal(upstream: #", "headers": {"OpenAI-Organization": "org-1", "OpenAI-Project": "proj_2"}"#))
        #expect(Array(c.upstreams["openai"]!.headers) == [HTTPField(name: "OpenAI-Organization", value: "org-1"),
                                                          HTTPField(name: "OpenAI-Project", value: "proj_2")])
        #expect(try load(minimal()).upstreams["openai"]!.headers.count == 0)
        let refused = problems(minimal(upstream: #", "keyHeader": "X-Provider-Token", "headers": {"Authorization": "Bearer sk-x", "x-api-key": "k", "# + #""x-provider-token": "k", "Host": "h", "Content-Length": "1", "X-Forwarded-For": "1.2.3.4", "X_Under": "1", "bad name": "1", "# + #""X-Crlf": "a\r\nX-Injected: 1", "X-Nul": "a\u0000", "X-Spaced": " a", "X-Number": 7, "Cookie": "a=b"}"#))
        #expect(Set(paths(refused)) == Set([
            "upstreams.openai.headers.Authorization", "upstreams.openai.headers.x-api-key", "upstreams.openai.headers.x-provider-token",
            "upstreams.openai.headers.Host", "upstreams.openai.headers.Content-Length", "upstreams.openai.headers.X-Forwarded-For",
            "upstreams.openai.headers.X_Under", "upstreams.openai.headers.bad name", "upstreams.openai.headers.X-Crlf",
            "upstreams.openai.headers.X-Nul", "upstreams.openai.headers.X-Spaced", "upstreams.openai.headers.X-Number",
            "upstreams.openai.headers.Cookie",
        ]), "\(refused)")
        #expect(refused.count == 13)
        #expect(paths(problems(minimal(upstream: #", "headers": {"X-A": "1", "x-a": "2"}"#))).count == 1)
        #expect(paths(problems(minimal(upstream: #", "headers": ["X-A: 1"]"#))) == ["upstreams.openai.headers"])
    }

    @Test func budgetProblemsNameTheirKeyPaths() {
        #expect(paths(problems(minimal(root: #","budgets": {}"#))) == ["budgets"])
        #expect(Set(paths(problems(minimal(root: #","budgets": {"perIdentity": {"tokensPerDay": 0, "tokensPerWeek": 5}, "onExceed": "stop", "#
                                           + #""defaultReserveTokens": -1, "total": {"tokensPerMonth": 1.5}, "cancelFloorTokensPerSecond": -1, "#
                                           + #""mediaTokens": 0}"#))))
                == ["budgets.perIdentity.tokensPerDay", "budgets.perIdentity.tokensPerWeek", "budgets.onExceed",
                    "budgets.defaultReserveTokens", "budgets.total.tokensPerMonth", "budgets.cancelFloorTokensPerSecond",
                    "budgets.mediaTokens", "budgets"])
    }
}

@Suite struct RelayConfigurationResumeTests {
    @Test func heartbeatsDefaultToFifteenSecondsAndResumeIsOff() throws {
        let c = try load(minimal())
        #expect(c.routes[0].heartbeatSeconds == 15)
        #expect(c.routes[0].resume == nil)
        #expect(c.limits.resumeBufferBytes == 256 * 1024 * 1024)
    }

    @Test func theFieldsLoad() throws {
        let c = try load(minimal(root: #", "limits": { "resumeBufferBytes": 1048576 }"#,
                                 route: #", "heartbeatSeconds": 0, "resume": { "windowSeconds": 45, "maxBufferBytes": 65536 }"#))
        #expect(c.routes[0].heartbeatSeconds == 0)
        #expect(c.routes[0].resume == RouteResume(windowSeconds: 45, maxBufferBytes: 65536))
        #expect(c.limits.resumeBufferBytes == 1_048_576)
        let d = try load(minimal(route: #", "resume": {}"#))
        #expect(d.routes[0].resume == RouteResume(windowSeconds: 30, maxBufferBytes: 4_194_304))
    }

    @Test func badValuesAreNamed() {
        let p = paths(problems(minimal(root: #", "limits": { "resumeBufferBytes": -1 }"#,
                                       route: #", "heartbeatSeconds": -1, "resume": { "windowSeconds": 0, "maxBufferBytes": 10, "extra": 1 }"#)))
        #expect(Set(p) == ["routes[0].heartbeatSeconds", "routes[0].resume.windowSeconds", "routes[0].resume.maxBufferBytes",
                           "routes[0].resume.extra", "limits.resumeBufferBytes"])
        #expect(paths(problems(minimal(route: #", "resume": true"#))) == ["routes[0].resume"])
        #expect(paths(problems(minimal(route: #", "heartbeatSeconds": "15""#))) == ["routes[0].heartbeatSeconds"])
    }
}
