// `attestation` (App Attest and App Check) and `routes[].attestation`: what is read, and every bad value named by
// its key path at start-up.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

/// The test key set (Tests/AuthTests/Fixtures/jwks.json: three keys).
private let jwks = try! String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("AuthTests/Fixtures/jwks.json"), encoding: .utf8)

private func config(attestation: String? = nil, route: String = "", extraTop: String = "") -> String {
    """
    {
      "upstreams": { "openai": { "baseURL": "https://api.openai.com" } },
      "routes": [ { "prefix": "/v1/", "upstream": "openai", "auth": "none"\(route) } ]
      \(attestation.map { #", "attestation": \#($0)"# } ?? "")\(extraTop)
    }
    """
}

private let apple = #"{"apple": {"appIds": ["ABCDE12345.com.example.app"]}}"#

private func load(_ json: String, files: [String: String] = [:]) throws -> RelayConfiguration {
    try RelayConfiguration.load(json: Data(json.utf8), sources: ConfigurationSources(environment: [:], readFile: { files[$0] }))
}

private func problems(_ json: String, files: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    configurationProblems(sourceLocation: sourceLocation) { _ = try load(json, files: files) }
}

@Suite struct RelayConfigurationAttestationTests {
    @Test func offByDefault() throws {
        let c = try load(config())
        #expect(c.attestation.isEmpty)
        #expect(c.routes[0].attestation == .off)
    }

    @Test func appleDefaults() throws {
        let c = try load(config(attestation: apple, route: #", "attestation": "required""#))
        let a = try #require(c.attestation.apple)
        #expect(a.appIds == ["ABCDE12345.com.example.app"])
        #expect(a.environment == .production)
        #expect(a.rootCAPEM == nil)
        #expect(a.challengeTTLSeconds == 300)
        #expect(c.routes[0].attestation == .required)
    }

    @Test func appleSettings() throws {
        let json = config(attestation: #"{"apple": {"appIds": ["ABCDE12345.com.example.app", "ABCDE12345.com.example.app.beta"], "environment": "development", "challengeTTLSeconds": 60}}"#,
                          route: #", "attestation": "optional""#)
        let c = try load(json)
        #expect(c.attestation.apple?.environment == .development)
        #expect(c.attestation.apple?.challengeTTLSeconds == 60)
        #expect(c.attestation.apple?.appIds.count == 2)
        #expect(c.routes[0].attestation == .optional)
    }

    @Test func firebaseDefaultsToGooglesKeySet() throws {
        let c = try load(config(attestation: #"{"firebase": {"projectNumber": "123456789012", "appIds": ["1:123456789012:ios:ab12"]}}"#))
        let f = try #require(c.attestation.firebase)
        #expect(f.projectNumber == "123456789012")
        #expect(f.issuer == "https://firebaseappcheck.googleapis.com/123456789012")
        #expect(f.audience == "projects/123456789012")
        #expect(f.jwksURL == "https://firebaseappcheck.googleapis.com/v1/jwks")
        #expect(f.keys.isEmpty)
        #expect(f.jwksRefreshSeconds == 3600)
    }

    @Test func firebaseWithAKeyFileAloneFetchesNothing() throws {
        let c = try load(config(attestation: #"{"firebase": {"projectNumber": 42, "appIds": ["1:42:android:cd"], "jwksFile": "/k.json"}}"#),
                         files: ["/k.json": jwks])
        let f = try #require(c.attestation.firebase)
        #expect(f.projectNumber == "42")
        #expect(f.jwksURL == nil)
        #expect(f.keys.keys.count == 3)
    }

    struct ProblemCase: Sendable, CustomTestStringConvertible {
        var name: String
        var json: String
        var path: String
        var files: [String: String] = [:]
        var testDescription: String { name }
    }

    static let problemCases: [ProblemCase] = [
        .init(name: "route value", json: config(attestation: apple, route: #", "attestation": "yes""#), path: "routes[0].attestation"),
        .init(name: "route value a bool", json: config(attestation: apple, route: #", "attestation": true"#), path: "routes[0].attestation"),
        .init(name: "route asks, nothing configured", json: config(route: #", "attestation": "required""#), path: "routes[0].attestation"),
        .init(name: "not an object", json: config(attestation: "[]"), path: "attestation"),
        .init(name: "empty", json: config(attestation: "{}"), path: "attestation"),
        .init(name: "unknown key", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"]}, "google": {}}"#), path: "attestation.google"),
        .init(name: "apple not an object", json: config(attestation: #"{"apple": "x"}"#), path: "attestation.apple"),
        .init(name: "apple unknown key", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"], "teamId": "x"}}"#), path: "attestation.apple.teamId"),
        .init(name: "no app ids", json: config(attestation: #"{"apple": {}}"#), path: "attestation.apple.appIds"),
        .init(name: "empty app ids", json: config(attestation: #"{"apple": {"appIds": []}}"#), path: "attestation.apple.appIds"),
        .init(name: "app id without team", json: config(attestation: #"{"apple": {"appIds": ["com.example.app"]}}"#), path: "attestation.apple.appIds"),
        .init(name: "app id lower-case team", json: config(attestation: #"{"apple": {"appIds": ["abcde12345.com.example.app"]}}"#), path: "attestation.apple.appIds"),
        .init(name: "environment", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"], "environment": "sandbox"}}"#), path: "attestation.apple.environment"),
        .init(name: "root file missing", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"], "rootCAFile": "/nope.pem"}}"#), path: "attestation.apple.rootCAFile"),
        .init(name: "root file not a certificate", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"], "rootCAFile": "/x.pem"}}"#),
              path: "attestation.apple.rootCAFile", files: ["/x.pem": "-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n"]),
        .init(name: "challenge TTL", json: config(attestation: #"{"apple": {"appIds": ["ABCDE12345.a"], "challengeTTLSeconds": 0}}"#), path: "attestation.apple.challengeTTLSeconds"),
        .init(name: "firebase not an object", json: config(attestation: #"{"firebase": 1}"#), path: "attestation.firebase"),
        .init(name: "project number letters", json: config(attestation: #"{"firebase": {"projectNumber": "my-project", "appIds": ["1:2:ios:3"]}}"#),
              path: "attestation.firebase.projectNumber"),
        .init(name: "project number missing", json: config(attestation: #"{"firebase": {"appIds": ["1:2:ios:3"]}}"#), path: "attestation.firebase.projectNumber"),
        .init(name: "project number fraction", json: config(attestation: #"{"firebase": {"projectNumber": 1.5, "appIds": ["1:2:ios:3"]}}"#),
              path: "attestation.firebase.projectNumber"),
        .init(name: "firebase app ids", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": []}}"#), path: "attestation.firebase.appIds"),
        .init(name: "jwks URL", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "jwksURL": "ftp://x"}}"#), path: "attestation.firebase.jwksURL"),
        .init(name: "jwks URL in clear text", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "jwksURL": "http://firebaseappcheck.googleapis.com/v1/jwks"}}"#),
              path: "attestation.firebase.jwksURL"),
        .init(name: "jwks file missing", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "jwksFile": "/none"}}"#), path: "attestation.firebase.jwksFile"),
        .init(name: "jwks file garbage", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "jwksFile": "/g"}}"#),
              path: "attestation.firebase.jwksFile", files: ["/g": "{}"]),
        .init(name: "jwks refresh above 6 h", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "jwksRefreshSeconds": 21601}}"#),
              path: "attestation.firebase.jwksRefreshSeconds"),
        .init(name: "firebase unknown key", json: config(attestation: #"{"firebase": {"projectNumber": "1", "appIds": ["a"], "projectId": "x"}}"#),
              path: "attestation.firebase.projectId"),
    ]

    @Test(arguments: problemCases)
    func problemsNameTheirKeyPath(_ c: ProblemCase) {
        let found = problems(c.json, files: c.files)
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.hasPrefix(c.path + ":") == true, "\(found)")
    }
}
