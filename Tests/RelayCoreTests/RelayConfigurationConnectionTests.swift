// RelayConfiguration's connection-level keys (admin listener, limits.maxConnections, routes[].methods, the
// server-side timeouts), unknown nested keys named by their path, and the SSE_RELAY_* environment overrides.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

private let env = ["OPENAI_API_KEY": "sk-test-123"]

private func load(_ json: String) throws -> RelayConfiguration {
    try RelayConfiguration.load(json: Data(json.utf8), sources: ConfigurationSources(environment: env, readFile: { _ in nil }))
}

/// The problems `json` is refused with (records an issue when it loads).
private func problems(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    configurationProblems(sourceLocation: sourceLocation) { _ = try load(json) }
}

/// A minimal valid configuration with members spliced into the root, the upstream ("x") and the route.
private func minimal(root: String = "", upstream: String = "", route: String = "") -> String {
    """
    {
      "upstreams": { "x": { "baseURL": "https://api.openai.com", "key": { "env": "OPENAI_API_KEY" }\(upstream) } },
      "routes": [ { "prefix": "/v1/", "upstream": "x", "auth": "none"\(route) } ]\(root)
    }
    """
}

/// The problems `applyEnvironment` throws for `environment` (records an issue when it does not throw).
private func environmentProblems(
    _ environment: [String: String], sourceLocation: SourceLocation = #_sourceLocation
) -> [String] {
    var c = RelayConfiguration()
    return configurationProblems(sourceLocation: sourceLocation) { try c.applyEnvironment(environment) }
}

@Suite struct RelayConfigurationConnectionTests {
    // MARK: defaults

    @Test func theNewKeysHaveTheirDefaultsWhenAbsent() throws {
        let c = try load(minimal())
        #expect(c.admin == nil)
        #expect(c.limits.maxConnections == 10_000)
        #expect(c.routes.first?.methods == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
        #expect(c.timeouts.headerReadSeconds == 10)
        #expect(c.timeouts.bodyReadSeconds == 30)
        #expect(c.timeouts.keepAliveIdleSeconds == 75)
        #expect(c.timeouts.clientWriteStallSeconds == 60)
        #expect(c.timeouts.drainSeconds == 30)
        #expect(c.timeouts.upstreamConnectSeconds == 10)
        #expect(c.timeouts.upstreamFirstByteSeconds == 120)
        #expect(c.timeouts.upstreamIdleSeconds == 300)
    }

    @Test func routeDefaultMethodsInCode() {
        #expect(RelayConfiguration.Route.defaultMethods == ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
        #expect(RelayConfiguration.Route(prefix: "/", upstream: "x").methods == RelayConfiguration.Route.defaultMethods)
    }

    // MARK: each key parses

    @Test func adminParsesHostAndPort() throws {
        let c = try load(minimal(root: #", "admin": { "host": "0.0.0.0", "port": 9191 }"#))
        #expect(c.admin == RelayConfiguration.Listen(host: "0.0.0.0", port: 9191))
        #expect(c.listen == RelayConfiguration.Listen(host: "127.0.0.1", port: 8080), "the public listener is untouched")
    }

    @Test func anEmptyAdminObjectListensOnLoopback9090() throws {
        #expect(try load(minimal(root: #", "admin": {}"#)).admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 9090))
        #expect(try load(minimal(root: #", "admin": { "port": 0 }"#)).admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 0))
        #expect(try load(minimal(root: #", "admin": { "host": "::1" }"#)).admin == RelayConfiguration.Listen(host: "::1", port: 9090))
    }

    @Test(arguments: [1, 500, 1_000_000])
    func maxConnectionsParses(_ n: Int) throws {
        let c = try load(minimal(root: #", "limits": { "maxConnections": \#(n) }"#))
        #expect(c.limits.maxConnections == n)
        #expect(c.limits.request == RequestLimits(), "the request limits keep their defaults")
    }

    @Test func maxConnectionsPerAddressIsOffUnlessSet() throws {
        #expect(try load(minimal(root: "")).limits.maxConnectionsPerAddress == 0)
        #expect(try load(minimal(root: #", "limits": { "maxConnectionsPerAddress": 64 }"#)).limits.maxConnectionsPerAddress == 64)
        #expect(problems(minimal(root: #", "limits": { "maxConnectionsPerAddress": -1 }"#)).first?.hasPrefix("limits.maxConnectionsPerAddress") == true)
    }

    @Test func maxConnectionsSitsBesideTheRequestLimits() throws {
        let c = try load(minimal(root: #", "limits": { "maxBodyBytes": 2048, "maxConnections": 64 }"#))
        #expect(c.limits.maxConnections == 64)
        #expect(c.limits.maxBodyBytes == 2048)
    }

    @Test func everyServerTimeoutParses() throws {
        let c = try load(minimal(root: #"""
            , "timeouts": { "headerReadSeconds": 2.5, "bodyReadSeconds": 7, "keepAliveIdleSeconds": 15,
                            "clientWriteStallSeconds": 45, "drainSeconds": 12.25 }
            """#))
        #expect(c.timeouts.headerReadSeconds == 2.5)
        #expect(c.timeouts.bodyReadSeconds == 7)
        #expect(c.timeouts.keepAliveIdleSeconds == 15)
        #expect(c.timeouts.clientWriteStallSeconds == 45)
        #expect(c.timeouts.drainSeconds == 12.25)
        #expect(c.timeouts.upstreamConnectSeconds == 10, "unmentioned timeouts keep their defaults")
        #expect(c.timeouts.upstreamFirstByteSeconds == 120)
        #expect(c.timeouts.upstreamIdleSeconds == 300)
    }

    @Test func theLongestAllowedTimeoutIsSevenDays() throws {
        let c = try load(minimal(root: #", "timeouts": { "drainSeconds": 604800 }"#))
        #expect(c.timeouts.drainSeconds == 604_800)
    }

    @Test(arguments: [
        (#"["post"]"#, ["POST"]),
        (#"["get", "Post", "DELETE"]"#, ["GET", "POST", "DELETE"]),
        (#"["PROPFIND"]"#, ["PROPFIND"]),
        (#"["m-search"]"#, ["M-SEARCH"]),
    ])
    func methodsAreUppercasedInOrder(_ list: String, _ expected: [String]) throws {
        let c = try load(minimal(route: #", "methods": \#(list)"#))
        #expect(c.routes.first?.methods == expected)
    }

    @Test func methodsArePerRoute() throws {
        let json = #"""
        { "upstreams": { "x": { "baseURL": "https://api.openai.com" } },
          "routes": [ { "prefix": "/v1/", "upstream": "x", "auth": "none", "methods": ["POST"] },
                      { "prefix": "/v1/models", "upstream": "x", "auth": "none", "methods": ["GET", "HEAD"] },
                      { "prefix": "/other/", "upstream": "x", "auth": "none" } ] }
        """#
        let c = try load(json)
        #expect(c.routes.map(\.methods) == [["POST"], ["GET", "HEAD"], RelayConfiguration.Route.defaultMethods])
        #expect(c.route(for: "/v1/models")?.methods == ["GET", "HEAD"])
    }

    // MARK: bad values, each with its exact problem

    struct ProblemCase: Sendable, CustomTestStringConvertible {
        var name: String
        var json: String
        var problem: String
        var testDescription: String { name }
    }

    static let secondsText = "must be a number of seconds above 0"
    static let methodsText = "must be a non-empty list of method names"

    static let badValues: [ProblemCase] = [
        ProblemCase(name: "admin port too large", json: minimal(root: #", "admin": { "port": 65536 }"#),
                    problem: "admin.port: must be a whole number from 0 to 65535"),
        ProblemCase(name: "admin port negative", json: minimal(root: #", "admin": { "port": -1 }"#),
                    problem: "admin.port: must be a whole number from 0 to 65535"),
        ProblemCase(name: "admin port string", json: minimal(root: #", "admin": { "port": "9090" }"#),
                    problem: "admin.port: must be a whole number from 0 to 65535"),
        ProblemCase(name: "admin port boolean", json: minimal(root: #", "admin": { "port": true }"#),
                    problem: "admin.port: must be a whole number from 0 to 65535"),
        ProblemCase(name: "admin host number", json: minimal(root: #", "admin": { "host": 127 }"#),
                    problem: "admin.host: must be a string"),
        ProblemCase(name: "admin not an object", json: minimal(root: #", "admin": 9090"#),
                    problem: "admin: must be an object"),
        ProblemCase(name: "maxConnections zero", json: minimal(root: #", "limits": { "maxConnections": 0 }"#),
                    problem: "limits.maxConnections: must be a whole number from 1 to 1000000"),
        ProblemCase(name: "maxConnections too many", json: minimal(root: #", "limits": { "maxConnections": 1000001 }"#),
                    problem: "limits.maxConnections: must be a whole number from 1 to 1000000"),
        ProblemCase(name: "maxConnections fractional", json: minimal(root: #", "limits": { "maxConnections": 10.5 }"#),
                    problem: "limits.maxConnections: must be a whole number from 1 to 1000000"),
        ProblemCase(name: "maxConnections boolean", json: minimal(root: #", "limits": { "maxConnections": true }"#),
                    problem: "limits.maxConnections: must be a whole number from 1 to 1000000"),
        ProblemCase(name: "maxConnections string", json: minimal(root: #", "limits": { "maxConnections": "100" }"#),
                    problem: "limits.maxConnections: must be a whole number from 1 to 1000000"),
        ProblemCase(name: "headerReadSeconds zero", json: minimal(root: #", "timeouts": { "headerReadSeconds": 0 }"#),
                    problem: "timeouts.headerReadSeconds: \(secondsText)"),
        ProblemCase(name: "headerReadSeconds string", json: minimal(root: #", "timeouts": { "headerReadSeconds": "10" }"#),
                    problem: "timeouts.headerReadSeconds: \(secondsText)"),
        ProblemCase(name: "bodyReadSeconds negative", json: minimal(root: #", "timeouts": { "bodyReadSeconds": -5 }"#),
                    problem: "timeouts.bodyReadSeconds: \(secondsText)"),
        ProblemCase(name: "keepAliveIdleSeconds null", json: minimal(root: #", "timeouts": { "keepAliveIdleSeconds": null }"#),
                    problem: "timeouts.keepAliveIdleSeconds: \(secondsText)"),
        ProblemCase(name: "clientWriteStallSeconds boolean",
                    json: minimal(root: #", "timeouts": { "clientWriteStallSeconds": true }"#),
                    problem: "timeouts.clientWriteStallSeconds: \(secondsText)"),
        ProblemCase(name: "drainSeconds over seven days", json: minimal(root: #", "timeouts": { "drainSeconds": 604801 }"#),
                    problem: "timeouts.drainSeconds: \(secondsText)"),
        ProblemCase(name: "drainSeconds false", json: minimal(root: #", "timeouts": { "drainSeconds": false }"#),
                    problem: "timeouts.drainSeconds: \(secondsText)"),
        ProblemCase(name: "timeouts not an object", json: minimal(root: #", "timeouts": 30"#),
                    problem: "timeouts: must be an object"),
        ProblemCase(name: "methods empty", json: minimal(route: #", "methods": []"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods a string", json: minimal(route: #", "methods": "POST""#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods with a number", json: minimal(route: #", "methods": ["GET", 1]"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods with a space", json: minimal(route: #", "methods": ["GET POST"]"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods with a separator", json: minimal(route: #", "methods": ["GET,POST"]"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods with an empty name", json: minimal(route: #", "methods": ["GET", ""]"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods an object", json: minimal(route: #", "methods": { "GET": true }"#),
                    problem: "routes[0].methods: \(methodsText)"),
        ProblemCase(name: "methods null", json: minimal(route: #", "methods": null"#),
                    problem: "routes[0].methods: \(methodsText)"),
    ]

    @Test(arguments: badValues)
    func eachBadValueIsReportedWithItsExactKeyPath(_ c: ProblemCase) {
        #expect(problems(c.json) == [c.problem])
    }

    @Test func aSecondRoutesBadMethodsNameItsIndex() {
        let json = #"""
        { "upstreams": { "x": { "baseURL": "https://api.openai.com" } },
          "routes": [ { "prefix": "/a/", "upstream": "x", "auth": "none", "methods": ["GET"] },
                      { "prefix": "/b/", "upstream": "x", "auth": "none", "methods": ["G\"T"] } ] }
        """#
        #expect(problems(json) == ["routes[1].methods: \(Self.methodsText)"])
    }

    // MARK: unknown nested keys

    @Test(arguments: [
        (minimal(root: #", "timeouts": { "idleSecond": 5 }"#), "timeouts.idleSecond"),
        (minimal(root: #", "listen": { "adress": "0.0.0.0" }"#), "listen.adress"),
        (minimal(upstream: #", "keyheader": "x-api-key""#), "upstreams.x.keyheader"),
        (minimal(route: #", "method": ["POST"]"#), "routes[0].method"),
        (minimal(root: #", "admin": { "adress": "0.0.0.0" }"#), "admin.adress"),
        (minimal(root: #", "limits": { "maxConnection": 5 }"#), "limits.maxConnection"),
        (minimal(root: #", "timeouts": { "HeaderReadSeconds": 5 }"#), "timeouts.HeaderReadSeconds"),
        (minimal(root: #", "buffers": { "highWater": 5 }"#), "buffers.highWater"),
    ])
    func anUnknownNestedKeyIsReportedWithItsPath(_ json: String, _ path: String) {
        #expect(problems(json) == ["\(path): unknown key"])
    }

    @Test func aMisspelledKeyDoesNotAlsoSetTheDefault() {
        // `timeouts.idleSecond` is refused; the whole file fails rather than running with defaults.
        #expect(throws: ConfigurationError.self) { try load(minimal(root: #", "timeouts": { "idleSecond": 5 }"#)) }
    }

    @Test func severalUnknownKeysInOneObjectAreAllReportedInNameOrder() {
        let p = problems(minimal(root: #", "timeouts": { "zeta": 1, "alpha": 2, "drainSeconds": 3 }"#))
        #expect(p == ["timeouts.alpha: unknown key", "timeouts.zeta: unknown key"])
    }

    @Test func unknownKeysAtEveryLevelAreReportedTogether() {
        let json = minimal(root: #", "listen": { "adress": "x" }, "timeouts": { "idleSecond": 5 }"#,
                           upstream: #", "keyheader": "x-api-key""#, route: #", "method": ["POST"]"#)
        #expect(Set(problems(json)) == [
            "listen.adress: unknown key", "timeouts.idleSecond: unknown key",
            "upstreams.x.keyheader: unknown key", "routes[0].method: unknown key",
        ])
    }

    // MARK: applyEnvironment

    @Test func theOverrideListNamesTheFiveVariables() {
        #expect(RelayConfiguration.environmentOverrides
            == ["SSE_RELAY_HOST", "SSE_RELAY_PORT", "SSE_RELAY_LOG_LEVEL", "SSE_RELAY_WORKERS", "SSE_RELAY_ADMIN_PORT"])
    }

    @Test func eachVariableApplies() throws {
        var c = RelayConfiguration()
        try c.applyEnvironment(["SSE_RELAY_HOST": "0.0.0.0"])
        #expect(c.listen == RelayConfiguration.Listen(host: "0.0.0.0", port: 8080))
        try c.applyEnvironment(["SSE_RELAY_PORT": "8443"])
        #expect(c.listen == RelayConfiguration.Listen(host: "0.0.0.0", port: 8443))
        try c.applyEnvironment(["SSE_RELAY_LOG_LEVEL": "warning"])
        #expect(c.logLevel == .warning)
        try c.applyEnvironment(["SSE_RELAY_LOG_LEVEL": "DEBUG"])
        #expect(c.logLevel == .debug)
        try c.applyEnvironment(["SSE_RELAY_WORKERS": "8"])
        #expect(c.workers == 8)
        #expect(c.admin == nil)
        try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "9100"])
        // No admin block: the admin listener stays on loopback even though the public one is on 0.0.0.0.
        #expect(c.admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 9100))
        #expect(c.listen == RelayConfiguration.Listen(host: "0.0.0.0", port: 8443), "the public listener is untouched")
    }

    @Test func allVariablesTogether() throws {
        var c = RelayConfiguration()
        try c.applyEnvironment([
            "SSE_RELAY_HOST": "::", "SSE_RELAY_PORT": "0", "SSE_RELAY_LOG_LEVEL": "error",
            "SSE_RELAY_WORKERS": "0", "SSE_RELAY_ADMIN_PORT": "65535",
        ])
        #expect(c.listen == RelayConfiguration.Listen(host: "::", port: 0))
        #expect(c.logLevel == .error)
        #expect(c.workers == 0)
        #expect(c.admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 65535))
    }

    @Test func theBoundsAreInclusive() throws {
        var c = RelayConfiguration()
        try c.applyEnvironment(["SSE_RELAY_PORT": "65535", "SSE_RELAY_WORKERS": "256", "SSE_RELAY_ADMIN_PORT": "0"])
        #expect(c.listen.port == 65535)
        #expect(c.workers == 256)
        #expect(c.admin?.port == 0)
    }

    @Test func theEnvironmentOverridesTheFile() throws {
        var c = try load(minimal(root: #", "listen": { "host": "127.0.0.1", "port": 8080 }, "workers": 2, "logLevel": "info""#))
        try c.applyEnvironment(["SSE_RELAY_HOST": "0.0.0.0", "SSE_RELAY_PORT": "9000", "SSE_RELAY_WORKERS": "4",
                                "SSE_RELAY_LOG_LEVEL": "debug"])
        #expect(c.listen == RelayConfiguration.Listen(host: "0.0.0.0", port: 9000))
        #expect(c.workers == 4)
        #expect(c.logLevel == .debug)
    }

    @Test func theAdminPortKeepsTheFilesAdminHost() throws {
        var c = try load(minimal(root: #", "admin": { "host": "10.0.0.5", "port": 9090 }"#))
        try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "9200"])
        #expect(c.admin == RelayConfiguration.Listen(host: "10.0.0.5", port: 9200))
    }

    @Test func emptyValuesAreIgnored() throws {
        var c = try load(minimal(root: #", "listen": { "host": "10.1.2.3", "port": 7000 }, "workers": 3, "logLevel": "warning""#))
        try c.applyEnvironment([
            "SSE_RELAY_HOST": "", "SSE_RELAY_PORT": "", "SSE_RELAY_LOG_LEVEL": "",
            "SSE_RELAY_WORKERS": "", "SSE_RELAY_ADMIN_PORT": "",
        ])
        #expect(c.listen == RelayConfiguration.Listen(host: "10.1.2.3", port: 7000))
        #expect(c.workers == 3)
        #expect(c.logLevel == .warning)
        #expect(c.admin == nil, "an empty admin port creates no admin listener")
    }

    @Test func otherVariablesAreIgnored() throws {
        var c = RelayConfiguration()
        try c.applyEnvironment(["SSE_RELAY_PORTS": "1", "PORT": "2", "sse_relay_port": "3", "SSE_RELAY_ADMIN_HOST": "x"])
        #expect(c.listen == RelayConfiguration.Listen(host: "127.0.0.1", port: 8080))
        #expect(c.admin == nil)
    }

    @Test(arguments: [
        ("SSE_RELAY_PORT", "http", "SSE_RELAY_PORT: must be 0 to 65535"),
        ("SSE_RELAY_PORT", "65536", "SSE_RELAY_PORT: must be 0 to 65535"),
        ("SSE_RELAY_PORT", "-1", "SSE_RELAY_PORT: must be 0 to 65535"),
        ("SSE_RELAY_PORT", "8080.0", "SSE_RELAY_PORT: must be 0 to 65535"),
        ("SSE_RELAY_LOG_LEVEL", "verbose", "SSE_RELAY_LOG_LEVEL: must be debug, info, warning or error"),
        ("SSE_RELAY_LOG_LEVEL", "warn", "SSE_RELAY_LOG_LEVEL: must be debug, info, warning or error"),
        ("SSE_RELAY_WORKERS", "257", "SSE_RELAY_WORKERS: must be 0 to 256"),
        ("SSE_RELAY_WORKERS", "-1", "SSE_RELAY_WORKERS: must be 0 to 256"),
        ("SSE_RELAY_WORKERS", "four", "SSE_RELAY_WORKERS: must be 0 to 256"),
        ("SSE_RELAY_ADMIN_PORT", "x", "SSE_RELAY_ADMIN_PORT: must be 0 to 65535"),
        ("SSE_RELAY_ADMIN_PORT", "99999", "SSE_RELAY_ADMIN_PORT: must be 0 to 65535"),
    ])
    func anInvalidValueThrowsNamingTheVariable(_ name: String, _ value: String, _ problem: String) {
        #expect(environmentProblems([name: value]) == [problem])
    }

    @Test func anInvalidAdminPortCreatesNoAdminListener() {
        var c = RelayConfiguration()
        #expect(throws: ConfigurationError.self) { try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "nine"]) }
        #expect(c.admin == nil)
    }

    @Test func everyBadVariableIsReportedTogetherInOrder() {
        let p = environmentProblems([
            "SSE_RELAY_ADMIN_PORT": "a", "SSE_RELAY_WORKERS": "b", "SSE_RELAY_LOG_LEVEL": "c", "SSE_RELAY_PORT": "d",
            "SSE_RELAY_HOST": "fine",
        ])
        #expect(p == [
            "SSE_RELAY_PORT: must be 0 to 65535",
            "SSE_RELAY_LOG_LEVEL: must be debug, info, warning or error",
            "SSE_RELAY_WORKERS: must be 0 to 256",
            "SSE_RELAY_ADMIN_PORT: must be 0 to 65535",
        ])
    }
}

/// `trustedProxies` and `listen.proxyProtocol`.
@Suite struct TrustedProxiesConfigurationTests {
    @Test func noneByDefault() throws {
        let config = try load(minimal())
        #expect(config.trustedProxies.isEmpty)
        #expect(config.listen.proxyProtocol == false)
    }

    @Test func blocksOfBothFamiliesAndSingleAddressesLoad() throws {
        let config = try load(minimal(root: #", "trustedProxies": ["10.0.0.0/8", "fd00::/8", "192.0.2.7"], "listen": { "proxyProtocol": true }"#))
        #expect(config.trustedProxies.map(\.description) == ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"])
        #expect(config.listen.proxyProtocol)
    }

    @Test(arguments: [
        (#"["10.0.0.0/33"]"#, "trustedProxies[0]"), (#"["10.0.0.0/8", "10.0.0.1/8"]"#, "trustedProxies[1]"),
        (#"["ingress.local"]"#, "trustedProxies[0]"), (#"[8]"#, "trustedProxies[0]"), (#""10.0.0.0/8""#, "trustedProxies"),
        (#"["fd00::/8", "fd00::/200"]"#, "trustedProxies[1]"), (#"[""]"#, "trustedProxies[0]"),
    ])
    func anInvalidBlockNamesItsKeyPath(_ value: String, _ path: String) {
        let p = problems(minimal(root: #", "trustedProxies": \#(value)"#))
        #expect(p.map { String($0.prefix { $0 != ":" }) } == [path], "\(p)")
    }

    @Test func proxyProtocolNeedsTrustedBalancers() {
        for root in [#", "listen": { "proxyProtocol": true }"#, #", "listen": { "proxyProtocol": true }, "trustedProxies": []"#] {
            let p = problems(minimal(root: root))
            #expect(p.count == 1 && p[0].hasPrefix("listen.proxyProtocol: requires trustedProxies"), "\(p)")
        }
        let p = problems(minimal(root: #", "listen": { "proxyProtocol": "yes" }"#))
        #expect(p.count == 1 && p[0].hasPrefix("listen.proxyProtocol:"), "\(p)")
    }
}
