// Provider presets: which header carries the key, which fields the provider needs, which client credentials never
// pass, and the route usage options, read from JSON with key-path errors.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import Usage

private let env = ["KEY": "sk-relay"]

private func load(_ json: String) throws -> RelayConfiguration {
    try RelayConfiguration.load(json: Data(json.utf8), sources: ConfigurationSources(environment: env, readFile: { _ in nil }))
}

private func config(upstream: String = "", route: String = "") -> String {
    """
    { "upstreams": { "u": { "baseURL": "https://provider.example", "key": { "env": "KEY" }\(upstream) } },
      "routes": [ { "prefix": "/v1/", "upstream": "u", "auth": "none"\(route) } ] }
    """
}

private func problems(_ json: String) -> [String] {
    do {
        _ = try load(json)
        return []
    } catch let error as ConfigurationError {
        return error.problems
    } catch {
        return ["\(error)"]
    }
}

@Suite struct ProviderPresetTests {
    struct PresetCase: Sendable, CustomTestStringConvertible {
        var provider: String?
        var extra: String = ""
        var header: String
        var prefix: String
        var injects: Bool
        var testDescription: String { "\(provider ?? "(default)")\(extra)" }
    }

    static let presets: [PresetCase] = [
        PresetCase(provider: nil, header: "Authorization", prefix: "Bearer ", injects: true),
        PresetCase(provider: "openai", header: "Authorization", prefix: "Bearer ", injects: true),
        PresetCase(provider: "anthropic", header: "x-api-key", prefix: "", injects: false),
        PresetCase(provider: "gemini", header: "x-goog-api-key", prefix: "", injects: false),
        PresetCase(provider: "azure-openai", header: "api-key", prefix: "", injects: true),
        PresetCase(provider: "anthropic", extra: #", "keyHeader": "Authorization""#, header: "Authorization", prefix: "Bearer ", injects: false),
        PresetCase(provider: "azure-openai", extra: #", "keyHeader": "Authorization", "keyPrefix": "Token ""#,
                   header: "Authorization", prefix: "Token ", injects: true),
        PresetCase(provider: "gemini", extra: #", "keyPrefix": "K ""#, header: "x-goog-api-key", prefix: "K ", injects: false),
    ]

    @Test(arguments: presets)
    func presetSuppliesTheKeyHeaderEachStillOverridable(_ c: PresetCase) throws {
        let providerJSON = c.provider.map { #", "provider": "\#($0)""# } ?? ""
        let loaded = try load(config(upstream: providerJSON + c.extra))
        let upstream = try #require(loaded.upstreams["u"])
        #expect(upstream.provider.rawValue == (c.provider ?? "openai"))
        #expect(upstream.keyHeader == c.header)
        #expect(upstream.keyPrefix == c.prefix)
        // The route carries its upstream's provider, and the inject default follows it.
        #expect(loaded.routes[0].provider == upstream.provider)
        #expect(loaded.routes[0].injectsUsage == c.injects)
        #expect(loaded.routes[0].usage == RouteUsage())
    }

    @Test func routeUsageOptionsAreRead() throws {
        let loaded = try load(config(route: #", "usage": { "inject": false }, "onClientCancel": "drain", "drainMaxSeconds": 12.5"#))
        #expect(loaded.routes[0].usage == RouteUsage(inject: false, onClientCancel: .drain, drainMaxSeconds: 12.5))
        #expect(!loaded.routes[0].injectsUsage)
        let anthropic = try load(config(upstream: #", "provider": "anthropic""#, route: #", "usage": { "inject": false }"#))
        #expect(!anthropic.routes[0].injectsUsage)
        #expect(!loaded.routes[0].referencedInput)
        #expect(try load(config(route: #", "referencedInput": true"#)).routes[0].referencedInput)
        #expect(!loaded.routes[0].providerTools)
        #expect(try load(config(route: #", "providerTools": true"#)).routes[0].providerTools)
    }

    struct ProblemCase: Sendable, CustomTestStringConvertible {
        var name: String
        var json: String
        var path: String
        var testDescription: String { name }
    }

    static let problemCases: [ProblemCase] = [
        ProblemCase(name: "unknown provider", json: config(upstream: #", "provider": "cohere""#), path: "upstreams.u.provider"),
        ProblemCase(name: "provider not a string", json: config(upstream: #", "provider": 1"#), path: "upstreams.u.provider"),
        ProblemCase(name: "provider in the wrong case", json: config(upstream: #", "provider": "OpenAI""#), path: "upstreams.u.provider"),
        ProblemCase(name: "usage not an object", json: config(route: #", "usage": true"#), path: "routes[0].usage"),
        ProblemCase(name: "referencedInput not a bool", json: config(route: #", "referencedInput": "yes""#), path: "routes[0].referencedInput"),
        ProblemCase(name: "providerTools not a bool", json: config(route: #", "providerTools": 1"#), path: "routes[0].providerTools"),
        ProblemCase(name: "usage unknown key", json: config(route: #", "usage": { "injct": true }"#), path: "routes[0].usage.injct"),
        ProblemCase(name: "usage.inject not a bool", json: config(route: #", "usage": { "inject": 1 }"#), path: "routes[0].usage.inject"),
        ProblemCase(name: "usage.inject on anthropic", json: config(upstream: #", "provider": "anthropic""#, route: #", "usage": { "inject": true }"#),
                    path: "routes[0].usage.inject"),
        ProblemCase(name: "usage.inject on gemini", json: config(upstream: #", "provider": "gemini""#, route: #", "usage": { "inject": true }"#),
                    path: "routes[0].usage.inject"),
        ProblemCase(name: "onClientCancel unknown", json: config(route: #", "onClientCancel": "ignore""#), path: "routes[0].onClientCancel"),
        ProblemCase(name: "onClientCancel not a string", json: config(route: #", "onClientCancel": true"#), path: "routes[0].onClientCancel"),
        ProblemCase(name: "drainMaxSeconds zero", json: config(route: #", "drainMaxSeconds": 0"#), path: "routes[0].drainMaxSeconds"),
        ProblemCase(name: "drainMaxSeconds too long", json: config(route: #", "drainMaxSeconds": 3601"#), path: "routes[0].drainMaxSeconds"),
        ProblemCase(name: "drainMaxSeconds a string", json: config(route: #", "drainMaxSeconds": "30""#), path: "routes[0].drainMaxSeconds"),
        ProblemCase(name: "drainMaxSeconds a bool", json: config(route: #", "drainMaxSeconds": true"#), path: "routes[0].drainMaxSeconds"),
    ]

    @Test(arguments: problemCases)
    func problemsNameTheirKeyPath(_ c: ProblemCase) {
        let found = problems(c.json)
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix(c.path + ":") == true, "\(found)")
    }

    /// The shipped example, at the package's top level. The image build copies it into its context for this test
    /// (`.dockerignore`, the Dockerfile's build stage), so the image's `swift test` checks it too.
    @Test func theExampleConfigurationLoads() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("config.example.json")
        try #require(FileManager.default.fileExists(atPath: url.path),
                     "\(url.path) is missing: a build context needs it next to Package.swift (see .dockerignore)")
        let data = try Data(contentsOf: url)
        let loaded = try RelayConfiguration.load(json: data, sources: ConfigurationSources(
            environment: ["OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_API_KEY_BACKUP": "sk-b"], readFile: { _ in nil }))
        #expect(loaded.upstreams["openai"]?.provider == .openai)
        #expect(loaded.upstreams["anthropic"]?.provider == .anthropic)
        #expect(loaded.upstreams["anthropic"]?.keyHeader == "x-api-key")
        #expect(loaded.routes.contains { $0.provider == .anthropic })
        #expect(loaded.attestation.apple?.appIds == ["ABCDE12345.com.example.app"])
        #expect(loaded.attestation.firebase?.jwksURL == AttestationConfiguration.Firebase.defaultJWKSURL)
        #expect(loaded.routes[0].attestation == .optional)
        #expect(loaded.upstreams["anthropic"]?.pool.map(\.label) == ["main", "backup"])
        // The example prices every model it routes (a dollar budget would refuse an unpriced one).
        let routed = loaded.routes.compactMap(\.bodyPolicy.models).joined()
        #expect(!routed.isEmpty)
        for model in routed { #expect(loaded.pricing.table.price(for: model) != nil, "\(model) has no price") }
        #expect(loaded.budgets?.perIdentity.nanoUSDPerDay == 2_000_000_000)
    }

    // MARK: Headers

    static let credentialFields = ["Authorization", "x-api-key", "X-Goog-Api-Key", "api-key", "Proxy-Authorization", "Cookie"]

    @Test(arguments: Provider.allCases)
    func clientCredentialsInEveryPresetHeaderGoAndTheKeyIsInjectedOnce(_ provider: Provider) {
        let upstream = RelayConfiguration.Upstream(name: "u", baseURL: "https://p.example", key: Secret("sk-relay"), provider: provider)
        var client = HTTPHeaders()
        for name in Self.credentialFields { client.add(name: name, value: "client-secret") }
        client.add(name: "Content-Type", value: "application/json")
        let out = RequestRewriter.upstreamHeaders(from: client, upstream: upstream, client: .direct("10.0.0.1"), requestID: "r")
        #expect(!out.contains { $0.value.contains("client-secret") })
        #expect(out.values(provider.keyHeader) == [Provider.keyPrefix(forHeader: provider.keyHeader) + "sk-relay"])
        #expect(Array(out).last?.name == provider.keyHeader)
        #expect(out.first("Content-Type") == "application/json")
    }

    @Test func anthropicVersionIsAddedUnlessTheClientSentOne() {
        let upstream = RelayConfiguration.Upstream(name: "a", baseURL: "https://api.anthropic.com", key: Secret("sk-ant"), provider: .anthropic)
        let plain = RequestRewriter.upstreamHeaders(from: HTTPHeaders(), upstream: upstream, client: .direct("10.0.0.1"), requestID: "r")
        #expect(plain.values("anthropic-version") == ["2023-06-01"])
        var pinned = HTTPHeaders()
        pinned.add(name: "Anthropic-Version", value: "2024-01-01")
        let kept = RequestRewriter.upstreamHeaders(from: pinned, upstream: upstream, client: .direct("10.0.0.1"), requestID: "r")
        #expect(kept.values("anthropic-version") == ["2024-01-01"])
        for provider in [Provider.openai, .gemini, .azureOpenAI] {
            let other = RelayConfiguration.Upstream(name: "o", baseURL: "https://p.example", key: nil, provider: provider)
            let out = RequestRewriter.upstreamHeaders(from: HTTPHeaders(), upstream: other, client: .direct("10.0.0.1"), requestID: "r")
            #expect(!out.contains("anthropic-version"))
        }
    }

    // MARK: Gemini's `key` query parameter

    struct QueryCase: Sendable, CustomTestStringConvertible {
        var query: String
        var expected: String
        var testDescription: String { query }
    }

    static let queryCases: [QueryCase] = [
        QueryCase(query: "alt=sse&key=AIzaClient", expected: "alt=sse"),
        QueryCase(query: "key=AIzaClient&alt=sse", expected: "alt=sse"),
        QueryCase(query: "key=AIzaClient", expected: ""),
        QueryCase(query: "key", expected: ""),
        QueryCase(query: "a=1&key=x&b=%20&key=y&c", expected: "a=1&b=%20&c"),
        QueryCase(query: "KEY=x&Key=y&%6Bey=z&k%65y=w&alt=sse", expected: "alt=sse"),
        QueryCase(query: "alt=sse&&x=1", expected: "alt=sse&&x=1"),
        QueryCase(query: "keys=1&apikey=2&key_=3&monkey=4&x=key", expected: "keys=1&apikey=2&key_=3&monkey=4&x=key"),
        QueryCase(query: "k%zzey=1&alt=sse", expected: "k%zzey=1&alt=sse"),
        QueryCase(query: "alt=sse;key=x", expected: "alt=sse;key=x"),
        QueryCase(query: "", expected: ""),
    ]

    @Test(arguments: queryCases)
    func keyParameterRemoval(_ c: QueryCase) {
        #expect(QueryParameters.removing("key", from: c.query) == c.expected)
    }

    @Test func geminiRoutesDropTheKeyParameterOthersKeepIt() throws {
        let path = try #require(try? RequestPath.parse("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIzaClient").get())
        let gemini = RelayConfiguration.Route(prefix: "/v1beta/", upstream: "g", provider: .gemini)
        #expect(RequestRewriter.upstreamURL(baseURL: "https://generativelanguage.googleapis.com", route: gemini, path: path)
                == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        let openai = RelayConfiguration.Route(prefix: "/v1beta/", upstream: "g", provider: .openai)
        #expect(RequestRewriter.upstreamURL(baseURL: "https://p.example", route: openai, path: path)
                == "https://p.example/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIzaClient")
        let onlyKey = try #require(try? RequestPath.parse("/v1beta/models?key=x").get())
        #expect(RequestRewriter.upstreamURL(baseURL: "https://g.example", route: gemini, path: onlyKey) == "https://g.example/v1beta/models")
    }

    // MARK: Google's system parameters

    /// On a Gemini route the query loses every system parameter a client must not choose, in every spelling Google
    /// reads (a `$` before it, percent-encoded, any case); every other byte stays. Elsewhere only the field mask and
    /// the content type override (`$ct`) go.
    static let systemParameterCases: [(query: String, gemini: String, openai: String)] = [
        ("alt=sse&$key=AIzaClient", "alt=sse", "alt=sse&$key=AIzaClient"),
        ("alt=sse&%24key=AIzaClient&%24KEY=x", "alt=sse", "alt=sse&%24key=AIzaClient&%24KEY=x"),
        ("access_token=ya29.x&alt=sse&$access_token=y", "alt=sse", "access_token=ya29.x&alt=sse&$access_token=y"),
        ("userProject=other&alt=sse&$userProject=p&USERPROJECT=q", "alt=sse", "userProject=other&alt=sse&$userProject=p&USERPROJECT=q"),
        ("alt=sse&fields=candidates", "alt=sse", "alt=sse"),
        ("alt=sse&$fields=candidates&%24fields=candidates.content&%66ields=x&Fields=y", "alt=sse", "alt=sse"),
        ("fields=candidates", "", ""),
        ("alt=sse&$ct=application%2Fx-protobuf&%24CT=x&ct=1", "alt=sse&ct=1", "alt=sse&ct=1"),
        ("alt=sse&quotaUser=u&prettyPrint=false&fieldsx=1&myfields=2&keys=3", "alt=sse&quotaUser=u&prettyPrint=false&fieldsx=1&myfields=2&keys=3",
         "alt=sse&quotaUser=u&prettyPrint=false&fieldsx=1&myfields=2&keys=3"),
        ("alt=sse&%2fields=1&%zzfields=2", "alt=sse&%2fields=1&%zzfields=2", "alt=sse&%2fields=1&%zzfields=2"),
        ("stream=0&size=64", "stream=0&size=64", "stream=0&size=64"),
    ]

    @Test(arguments: 0..<systemParameterCases.count)
    func systemParametersLeaveTheQuery(_ index: Int) throws {
        let c = Self.systemParameterCases[index]
        let path = try #require(try? RequestPath.parse("/v1beta/models/gemini-2.5-flash:streamGenerateContent?\(c.query)").get())
        let base = "https://g.example/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        for (provider, expected) in [(Provider.gemini, c.gemini), (.openai, c.openai), (.anthropic, c.openai), (.azureOpenAI, c.openai)] {
            let route = RelayConfiguration.Route(prefix: "/v1beta/", upstream: "g", provider: provider)
            #expect(RequestRewriter.upstreamURL(baseURL: "https://g.example", route: route, path: path)
                    == (expected.isEmpty ? base : base + "?" + expected), "\(provider)")
        }
    }

    /// Gemini streams for exactly one `alt` (or `$alt`), read as Google reads names, whose value decodes to `sse`;
    /// anything else is no stream, so the ceiling is written (a stream with one is only bounded).
    @Test func aStreamIsOneAltThatIsSSEInAnySpellingOfItsName() {
        let base = "/v1beta/models/m:streamGenerateContent?"
        for query in ["alt=sse", "$alt=sse", "%61lt=sse", "ALT=sse", "%24alt=%73se", "key=1&alt=sse&x=2"] {
            #expect(OutputCeiling.asksForEventStream(base + query), "\(query)")
        }
        for query in ["", "alt=json", "alt=sse&%61lt=json", "alt=sse&$alt=sse", "ALT=sse&alt=sse", "alt=SSE", "alt=sse%20",
                      "alt", "alt=%zzsse", "salt=sse", "xalt=sse"] {
            #expect(!OutputCeiling.asksForEventStream(base + query), "\(query)")
        }
        #expect(!OutputCeiling.asksForEventStream("/v1beta/models/m:streamGenerateContent"))
    }
}
