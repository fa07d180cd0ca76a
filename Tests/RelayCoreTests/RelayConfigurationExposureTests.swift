// Where /metrics and the admin listener may be reached: never beyond the host the operator chose.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite struct RelayConfigurationExposureTests {
    @Test(arguments: [
        ("127.0.0.1", true), ("127.8.9.10", true), ("127.255.255.255", true), ("localhost", true), ("LocalHost", true),
        ("::1", true), ("0:0:0:0:0:0:0:1", true), ("::ffff:127.0.0.1", true),
        ("0.0.0.0", false), ("::", false), ("10.0.0.5", false), ("128.0.0.1", false), ("126.255.255.255", false),
        ("::2", false), ("::ffff:10.0.0.1", false), ("fe80::1", false), ("relay.internal", false), ("", false),
        ("127.0.0.1.example.com", false),
        // Spellings inet_pton refuses count as not loopback (the safe reading), whatever they would mean elsewhere.
        ("127.1", false), ("0x7f.0.0.1", false), ("0177.0.0.1", false), ("127.0.0.1 ", false), ("[::1]", false),
        ("::1%lo", false),
    ])
    func loopbackHosts(host: String, loopback: Bool) {
        #expect(RelayConfiguration.Listen(host: host, port: 8080).isLoopback == loopback)
    }

    @Test(arguments: [
        ("http://10.0.0.5:8000/v1", true), ("http://vllm.internal", true), ("HTTP://api.example.com", true),
        ("http://user@127.0.0.1/", true), ("http://127.0.0.1.example.com/", true), ("http://[fe80::1]:80/", true),
        ("http://127.0.0.1:8000", false), ("http://localhost/v1", false), ("http://[::1]:9000/", false),
        ("https://api.openai.com", false), ("https://10.0.0.5", false),
    ])
    func clearTextBeyondThisHost(url: String, clear: Bool) {
        #expect(RelayConfiguration.isClearTextBeyondThisHost(url) == clear)
    }

    @Test func upstreamsWithAKeyOverHTTPToAnotherHostAreNamed() {
        var c = RelayConfiguration()
        c.upstreams["tls"] = .init(name: "tls", baseURL: "https://api.openai.com", key: Secret("k"))
        c.upstreams["local"] = .init(name: "local", baseURL: "http://127.0.0.1:8000", key: Secret("k"))
        c.upstreams["cluster"] = .init(name: "cluster", baseURL: "http://vllm.internal:8000", key: Secret("k"))
        c.upstreams["keyless"] = .init(name: "keyless", baseURL: "http://ollama.internal:11434", key: nil)
        #expect(c.upstreamsSendingKeysInClearText == ["cluster"])
    }

    @Test func metricsOnThePublicListenerOnlyWhenItIsLoopbackAndNoAdminExists() {
        var c = RelayConfiguration()
        #expect(c.listen.host == "127.0.0.1")
        #expect(c.publicListenerServesMetrics)
        c.listen.host = "::1"
        #expect(c.publicListenerServesMetrics)
        c.listen.host = "0.0.0.0"
        #expect(!c.publicListenerServesMetrics, "a public listener on every interface must not serve /metrics")
        c.listen.host = "::"
        #expect(!c.publicListenerServesMetrics)
        c.listen.host = "10.0.0.5"
        #expect(!c.publicListenerServesMetrics)
        c.listen.host = "127.0.0.1"
        c.trustedProxies = [CIDR("127.0.0.1/32")!]
        #expect(!c.publicListenerServesMetrics, "behind a proxy on this host, a loopback listener serves everyone the proxy does")
        c.trustedProxies = [CIDR("10.0.0.0/8")!]
        #expect(!c.publicListenerServesMetrics, "a listener with trusted proxies is one that sits behind a proxy")
        c.trustedProxies = []
        #expect(c.publicListenerServesMetrics)
        c.admin = .init(host: "127.0.0.1", port: 9090)
        #expect(!c.publicListenerServesMetrics, "with an admin listener, /metrics lives only there")
    }

    @Test func theAdminPortAloneBindsLoopback() throws {
        var c = RelayConfiguration()
        c.listen = .init(host: "0.0.0.0", port: 8080)
        try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "9100"])
        #expect(c.admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 9100))
    }

    @Test func theAdminPortAloneFollowsALoopbackPublicHost() throws {
        for host in ["::1", "localhost", "127.0.0.2"] {
            var c = RelayConfiguration()
            c.listen = .init(host: host, port: 8080)
            try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "9100"])
            #expect(c.admin == RelayConfiguration.Listen(host: host, port: 9100))
        }
    }

    @Test func aPublicHostFromTheEnvironmentDoesNotWidenTheAdminListener() throws {
        var c = RelayConfiguration()
        try c.applyEnvironment(["SSE_RELAY_HOST": "0.0.0.0", "SSE_RELAY_ADMIN_PORT": "9100"])
        #expect(c.listen.host == "0.0.0.0")
        #expect(c.admin == RelayConfiguration.Listen(host: "127.0.0.1", port: 9100))
        #expect(!c.publicListenerServesMetrics)
    }

    @Test func anAdminHostChosenInTheFileIsKept() throws {
        var c = RelayConfiguration()
        c.listen = .init(host: "0.0.0.0", port: 8080)
        c.admin = .init(host: "0.0.0.0", port: 9090)
        try c.applyEnvironment(["SSE_RELAY_ADMIN_PORT": "9200"])
        #expect(c.admin == RelayConfiguration.Listen(host: "0.0.0.0", port: 9200))
    }
}
