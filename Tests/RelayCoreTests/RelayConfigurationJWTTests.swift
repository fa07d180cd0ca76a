// clients.jwt: maxLifetimeSeconds (default 24 h) and the issuer list that decides whether identities are
// qualified by their issuer.
import Auth
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

private let secret = String(repeating: "s", count: 40)

private func jwtConfig(_ jwtExtra: String = "", issuers: String = #"["https://issuer.example"]"#) -> String {
    """
    {
      "upstreams": { "openai": { "baseURL": "https://api.openai.com" } },
      "routes": [ { "prefix": "/v1/", "upstream": "openai", "auth": "jwt" } ],
      "clients": { "jwt": { "algorithms": ["HS256"], "issuers": \(issuers), "audiences": ["app"],
                            "hmacSecret": { "env": "JWT_SECRET" }\(jwtExtra) } }
    }
    """
}

private func load(_ json: String) throws -> RelayConfiguration {
    try RelayConfiguration.load(json: Data(json.utf8),
                                sources: ConfigurationSources(environment: ["JWT_SECRET": secret], readFile: { _ in nil }))
}

private func problems(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    configurationProblems(sourceLocation: sourceLocation) { _ = try load(json) }
}

@Suite struct RelayConfigurationJWTTests {
    @Test func maxLifetimeDefaultsToADay() throws {
        let jwt = try #require(try load(jwtConfig()).clients.jwt)
        #expect(jwt.settings.maxLifetimeSeconds == 86_400)
    }

    @Test func maxLifetimeIsRead() throws {
        let jwt = try #require(try load(jwtConfig(#", "maxLifetimeSeconds": 3600"#)).clients.jwt)
        #expect(jwt.settings.maxLifetimeSeconds == 3600)
    }

    @Test(arguments: ["0", "-5", "true", #""3600""#, "31622401"])
    func badMaxLifetimeNamesItsKeyPath(_ value: String) {
        let p = problems(jwtConfig(#", "maxLifetimeSeconds": \#(value)"#))
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("clients.jwt.maxLifetimeSeconds: ") == true, "\(p)")
    }

    @Test func severalIssuersAreAList() throws {
        let jwt = try #require(try load(jwtConfig(issuers: #"["https://a.example", "https://b.example"]"#)).clients.jwt)
        #expect(jwt.settings.issuers == ["https://a.example", "https://b.example"])
    }

    @Test func anIssuerWithTheIdentitySeparatorIsRefused() {
        let p = problems(jwtConfig(issuers: #"["https://a.example", "https://b.example|x"]"#))
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("clients.jwt: ") == true, "\(p)")
        #expect(p.first?.contains("must not contain \"|\"") == true, "\(p)")
    }
}
