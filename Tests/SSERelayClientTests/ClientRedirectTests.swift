import Foundation
import RelayTestSupport
import RelayWire
import SSERelayClient
import TestHarness
import Testing
import TestSupportCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the client does with a redirect: the relay never answers one, so a 3xx comes from something else (a
/// captive portal, a misconfigured proxy, an attacker on the path) and is never followed. Followed, URLSession
/// would send the request again, with the app's token, App Check token or assertion, to wherever `Location`
/// points (swift-corelibs-foundation copies every header; a POST may turn into a GET and lose its body).
@Suite("Client: redirects", .serialized)
struct ClientRedirectTests {
    static let question = ChatRequest(model: "gpt-4o-mini", messages: [.user("hi")])

    /// Another origin that would answer a whole chat, and records what reached it.
    static func elsewhere() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest(timeout: 30)
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk(ClientThroughRelayTests.chunk("stolen", finish: "stop"))
                try connection.writeChunk("data: [DONE]\n\n")
                try connection.writeLastChunk()
            }
        }
    }

    /// A "relay" that answers every request with `status` and `Location: <target>` plus the request's own target.
    static func redirecting(_ status: Int, to target: String) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 30)
                let body = "moved"
                try connection.writeHead(status: status, headers: [("Location", target + request.target),
                                                                   ("Content-Length", "\(body.utf8.count)")])
                try connection.write(body)
            }
        }
    }

    /// The credentials that reached the other origin, for the failure message.
    static func credentials(_ requests: [RecordedRequest]) -> [String] {
        requests.flatMap { request in
            ["Authorization", AttestationWire.appCheckHeader].compactMap { name in request.header(name).map { "\(name): \($0)" } }
        }
    }

    static func client(_ upstream: ScriptedUpstream, configure: (inout SSERelayClient.Configuration) -> Void = { _ in }) -> SSERelayClient {
        var configuration = SSERelayClient.Configuration(baseURL: URL(string: upstream.baseURL)!) { _ in "app-token-secret" }
        configuration.attestation = AppCheckProvider { _ in "app-check-secret" }
        configure(&configuration)
        return SSERelayClient(configuration: configuration)
    }

    @Test("a redirect of a chat is not followed: nothing reaches the other origin, the app gets the 3xx",
          arguments: [301, 302, 303, 307, 308])
    func chatRedirectIsNotFollowed(status: Int) async throws {
        let other = try Self.elsewhere()
        let relay = try Self.redirecting(status, to: other.baseURL)
        let client = Self.client(relay)
        do {
            for try await _ in client.chat(Self.question) {}
            Issue.record("expected the \(status) as an error")
        } catch let error as RelayAPIError {
            #expect(error.status == status)
        }
        #expect(relay.requests.count == 1)
        #expect(other.requests.count == 0, "followed, with \(Self.credentials(other.requests))")
    }

    @Test("a redirect to the same origin is not followed either (the assertion covers the path it was made for)")
    func sameOriginRedirectIsNotFollowed() async throws {
        let relay = try Self.redirecting(307, to: "")
        let client = Self.client(relay)
        await #expect(throws: RelayAPIError.self) {
            for try await _ in client.events(for: URLRequest(url: URL(string: relay.baseURL + "/v1/anything")!)) {}
        }
        #expect(relay.requests.count == 1)
    }

    @Test("the stop of a resumable stream is not redirected with its credentials")
    func stopRedirectIsNotFollowed() async throws {
        let other = try Self.elsewhere()
        let stops = Mailbox<RecordedRequest>()
        let closed = Mailbox<PeerClose>()
        let streamID = "AAECAwQFBgcICQoLDA0ODw"
        let relay = try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 30)
                if request.method == "DELETE" {
                    stops.put(request)
                    try connection.writeHead(status: 307, headers: [("Location", other.baseURL + request.target),
                                                                   ("Content-Length", "0")])
                    continue
                }
                var head = sseHead
                head.append((StreamWire.streamHeader, streamID))
                try connection.writeHead(status: 200, headers: head)
                try connection.writeChunk(ClientThroughRelayTests.chunk("first "))
                closed.put(try connection.waitForPeerClose(timeout: 60))
                return
            }
        }
        // The stream's connection closes once the DELETE has its final answer (a followed redirect's included).
        // The stall watchdog is kept out of it: the relay sends nothing after "first ", and under ThreadSanitizer,
        // with the whole test run beside it, the DELETE took over 20 s (the default stall) to reach the relay twice
        // in three runs; the watchdog then closed the stream before the DELETE had its answer.
        let client = Self.client(relay) {
            $0.stopGrace = 60
            $0.stallTimeout = 120
        }
        try await client.withChat(Self.question) { stream in
            for try await event in stream {
                if case .chunk = event { break }
            }
        }
        try await eventually("the stream closed after its stop", timeout: 30 * ClientThroughRelayTests.slowdown) { closed.count == 1 }
        #expect(stops.count == 1)
        #expect(other.requests.count == 0, "followed, with \(Self.credentials(other.requests))")
    }
}

/// `events(for:)` takes any request: one to another origin than the relay's goes out as the app built it, without
/// the token, the proof of the genuine app, or a resume (a stream named by a stranger is not the relay's).
@Suite("Client: credentials only to the relay", .serialized)
struct ClientOriginTests {
    @Test("a request to another origin gets neither the token nor the proof")
    func otherOriginGetsNoCredentials() async throws {
        let relay = try ClientRedirectTests.elsewhere()
        let other = try ClientRedirectTests.elsewhere()
        let client = ClientRedirectTests.client(relay) { $0.additionalHeaders = ["X-App-Key": "app-key-secret"] }
        var events = 0
        for try await _ in client.events(for: URLRequest(url: URL(string: other.baseURL + "/feed")!)) { events += 1 }
        #expect(events == 2)
        #expect(other.requests.count == 1)
        #expect(ClientRedirectTests.credentials(other.requests).isEmpty)
        #expect(other.requests.first?.header("X-App-Key") == nil)
        // The relay's own origin still gets them, whatever the path.
        for try await _ in client.events(for: URLRequest(url: URL(string: relay.baseURL + "/v1/other")!)) {}
        #expect(ClientRedirectTests.credentials(relay.requests).count == 2)
        #expect(relay.requests.first?.header("X-App-Key") == "app-key-secret")
    }

    @Test("the same host on another port or scheme is another origin",
          arguments: [("http://127.0.0.1:1", "http://127.0.0.1:2/x", false), ("http://127.0.0.1", "http://127.0.0.1:80/x", true),
                      ("https://Relay.example.com/base", "https://relay.example.com:443/v1", true),
                      ("https://relay.example.com", "http://relay.example.com/v1", false),
                      ("https://relay.example.com", "https://relay.example.com.evil.example/v1", false)])
    func origins(base: String, url: String, same: Bool) {
        #expect(SSERelayClient.isRelayOrigin(URL(string: url)!, base: URL(string: base)!) == same)
    }
}
