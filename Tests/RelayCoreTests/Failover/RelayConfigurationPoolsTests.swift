// `upstreams.NAME.keys`, `keyDisabledSeconds`, `routes[].upstreams` and `maxAttempts`: what loads, and every bad
// pool or fallback list reported with its key path.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite("Configuration: key pools and fallback upstreams")
struct RelayConfigurationPoolsTests {
    static let env = ["KEY_A": "sk-a-111", "KEY_B": "sk-b-222", "KEY_C": "sk-c-333",
                      "KEY_CRLF": "sk-d-444\r\nX-Injected: yes", "KEY_NUL": "sk-e\u{0}555", "KEY_SPACED": "  sk-f-666\n"]

    func load(_ upstreams: String, routes: String) throws -> RelayConfiguration {
        let json = "{\"upstreams\": {\(upstreams)}, \"routes\": [\(routes)]}"
        return try RelayConfiguration.load(json: Data(json.utf8), sources: ConfigurationSources(
            environment: Self.env, readFile: { $0 == "/run/secrets/b" ? "sk-file-444\n" : nil }))
    }

    func problems(_ upstreams: String, routes: String) -> [String] {
        do {
            _ = try load(upstreams, routes: routes)
            return []
        } catch let error as ConfigurationError {
            return error.problems
        } catch {
            return ["\(error)"]
        }
    }

    static let pool = #""p": {"baseURL": "http://127.0.0.1:1", "keys": [{"env": "KEY_A"}, {"file": "/run/secrets/b", "weight": 2, "id": "backup"}], "keyDisabledSeconds": 60}"#

    @Test("a pool loads with labels, weights and secrets; key stays a pool of one")
    func loads() throws {
        let config = try load(Self.pool + #", "s": {"baseURL": "http://127.0.0.1:2", "key": {"env": "KEY_C"}}"#,
                              routes: #"{"prefix": "/v1/", "upstreams": ["p", "s"], "maxAttempts": 4, "auth": "none"}"#)
        let p = config.upstreams["p"]!
        #expect(p.pool.map(\.label) == ["0", "backup"])
        #expect(p.pool.map(\.weight) == [1, 2])
        #expect(p.pool.map { $0.secret.revealForHeader() } == ["sk-a-111", "sk-file-444"])
        #expect(p.keyDisabledSeconds == 60)
        #expect(config.upstreams["s"]!.pool.map(\.label) == ["0"])
        #expect(config.upstreams["s"]!.keyDisabledSeconds == 600)
        #expect(config.routes[0].upstreamChain == ["p", "s"])
        #expect(config.routes[0].upstream == "p")
        #expect(config.routes[0].maxAttempts == 4)
        let single = try load(Self.pool, routes: #"{"prefix": "/v1/", "upstream": "p", "auth": "none"}"#)
        #expect(single.routes[0].upstreamChain == ["p"])
        #expect(single.routes[0].maxAttempts == 3)
    }

    @Test("an empty pool")
    func emptyPool() {
        #expect(problems(#""p": {"baseURL": "http://127.0.0.1:1", "keys": []}"#, routes: #"{"prefix": "/", "upstream": "p", "auth": "none"}"#)
            .contains { $0.hasPrefix("upstreams.p.keys: must be a non-empty list") })
    }

    @Test("a weight of 0 or below")
    func weights() {
        for weight in ["0", "-1", "1.5", "\"2\""] {
            let found = problems(#""p": {"baseURL": "http://127.0.0.1:1", "keys": [{"env": "KEY_A"}, {"env": "KEY_B", "weight": "# + weight + "}]}",
                                 routes: #"{"prefix": "/", "upstream": "p", "auth": "none"}"#)
            #expect(found.contains { $0.hasPrefix("upstreams.p.keys[1].weight: must be a whole number from 1") }, "\(weight): \(found)")
        }
    }

    @Test("two upstreams of different presets on one route")
    func presets() {
        let found = problems(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_A"}}, "a": {"baseURL": "http://127.0.0.1:2", "key": {"env": "KEY_B"}, "provider": "anthropic"}"#,
                             routes: #"{"prefix": "/", "upstreams": ["p", "a"], "auth": "none"}"#)
        #expect(found.contains { $0.hasPrefix("routes[0].upstreams[1]: provider \"anthropic\" differs") }, "\(found)")
    }

    @Test("an unknown upstream name, a name listed twice, both upstream and upstreams")
    func names() {
        let up = #""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_A"}}"#
        #expect(problems(up, routes: #"{"prefix": "/", "upstreams": ["p", "nope"], "auth": "none"}"#)
            .contains("routes[0].upstreams[1]: names no upstream (\"nope\")"))
        #expect(problems(up, routes: #"{"prefix": "/", "upstreams": ["p", "p"], "auth": "none"}"#)
            .contains { $0.hasPrefix("routes[0].upstreams[1]: \"p\" is listed twice") })
        #expect(problems(up, routes: #"{"prefix": "/", "upstream": "p", "upstreams": ["p"], "auth": "none"}"#)
            .contains { $0.hasPrefix("routes[0].upstreams: give either upstream or upstreams") })
        #expect(problems(up, routes: #"{"prefix": "/", "upstreams": [], "auth": "none"}"#)
            .contains { $0.hasPrefix("routes[0].upstreams: must be a non-empty list") })
        #expect(problems(up, routes: #"{"prefix": "/", "upstreams": ["p"], "maxAttempts": 0, "auth": "none"}"#)
            .contains { $0.hasPrefix("routes[0].maxAttempts:") })
    }

    @Test("key and keys together, a label used twice, an unset variable in a pool")
    func poolEntries() {
        let found = problems(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_A"}, "keys": [{"env": "KEY_A", "id": "x"}, {"env": "KEY_B", "id": "x"}, {"env": "UNSET"}, {"env": "KEY_C", "colour": 1}]}"#,
                             routes: #"{"prefix": "/", "upstream": "p", "auth": "none"}"#)
        #expect(found.contains { $0.hasPrefix("upstreams.p.keys: give either key or keys") })
        #expect(found.contains { $0.hasPrefix("upstreams.p.keys[1].id: label \"x\" is used twice") })
        #expect(found.contains("upstreams.p.keys[2].env: environment variable UNSET is not set"))
        #expect(found.contains("upstreams.p.keys[3].colour: unknown key"))
    }

    /// A CR or LF in a key would end the header line curl writes and add the rest as headers of its own upstream,
    /// and keep the masker (which looks for the whole key) from finding the first line in an echo.
    @Test("a key with a control character inside is refused, in key, in keys and in keyPrefix; surrounding space is trimmed")
    func controlCharactersInAKey() throws {
        let routes = #"{"prefix": "/", "upstream": "p", "auth": "none"}"#
        #expect(problems(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_CRLF"}}"#, routes: routes)
            .contains("upstreams.p.key: the key must be printable text without control characters"))
        #expect(problems(#""p": {"baseURL": "http://127.0.0.1:1", "keys": [{"env": "KEY_A"}, {"env": "KEY_NUL"}]}"#, routes: routes)
            .contains("upstreams.p.keys[1]: the key must be printable text without control characters"))
        #expect(problems(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_A"}, "keyPrefix": "Bearer\r\nX: y "}"#, routes: routes)
            .contains("upstreams.p.keyPrefix: must be printable text without control characters"))
        let config = try load(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_SPACED"}, "keyPrefix": "Token "}"#, routes: routes)
        #expect(config.upstreams["p"]!.key == Secret("sk-f-666"))
        #expect(config.upstreams["p"]!.keyPrefix == "Token ")
        for message in problems(#""p": {"baseURL": "http://127.0.0.1:1", "key": {"env": "KEY_CRLF"}}"#, routes: routes) {
            #expect(!message.contains("sk-d-444"), "a problem never names the key: \(message)")
        }
    }
}
