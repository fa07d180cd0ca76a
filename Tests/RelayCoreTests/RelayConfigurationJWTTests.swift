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

    /// Whoever can change the JWKS on its way can sign any token: keys travel over TLS, or stay on this host.
    @Test(arguments: ["http://keys.example/jwks.json", "http://10.0.0.7:8080/jwks", "http://user@127.0.0.1/jwks",
                      "http://127.0.0.1.example.com/jwks", "http://[fe80::1]/jwks", "ftp://keys.example/jwks", "https:/x"])
    func aJWKSURLThatAnyoneOnThePathCouldAnswerIsRefused(_ url: String) {
        let p = problems(jwtConfig(#", "jwksURL": "\#(url)""#))
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("clients.jwt.jwksURL: ") == true, "\(p)")
    }

    @Test(arguments: ["https://keys.example/jwks.json", "http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9000/jwks",
                      "http://127.0.0.2"])
    func aJWKSURLOverTLSOrToThisHostIsAccepted(_ url: String) throws {
        #expect(try load(jwtConfig(#", "jwksURL": "\#(url)""#)).clients.jwt?.jwksURL == url)
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
