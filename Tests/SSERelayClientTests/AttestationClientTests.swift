import AttestationTestSupport
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import RelayWire
import SSERelayClient
import Support
import TestHarness
import Testing
import TestSupportCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client library's attestation hook against the real relay: the bytes the client signs are the bytes the
/// relay checks (one function, `AttestationWire.clientData`, on both sides), refusals lead to one re-registration
/// or token refresh and one retry, and App Check tokens come from the app's closure.
@Suite("Client attestation through the relay", .serialized)
struct AttestationClientTests {
    /// The relay here reads the real clock, so the device's certificates are issued around it.
    static let now = Int64(Date().timeIntervalSince1970)
    static let appId = "ABCDE12345.com.example.relay"
    static let ca = TestAppAttestCA(notBefore: now - 86_400, notAfter: now + 86_400)

    /// What `AppAttestProvider` does on a phone, with the software device: registers through the relay's endpoints
    /// on first use (or after `attestation_invalid`) and asserts every request over `request.clientData`.
    final class SoftwareDeviceProvider: RelayAttestationProvider, @unchecked Sendable {
        // Invariant: mutable state only under `state`'s lock.
        struct State {
            var device: SoftwareAppAttestDevice?
            var registered = false
            var registrations = 0
            var refusals: [String] = []
            var requests: [AttestedRequest] = []
            /// The next assertion reuses counter 0 (a replay), once.
            var replayOnce = false
        }
        let port: Int
        let state = Locked(State())

        init(port: Int, registered: Bool = false, replayOnce: Bool = false) {
            self.port = port
            state.withLock {
                $0.device = SoftwareAppAttestDevice(appId: AttestationClientTests.appId, now: AttestationClientTests.now, ca: AttestationClientTests.ca)
                $0.registered = registered
                $0.replayOnce = replayOnce
            }
        }

        func headers(for request: AttestedRequest) async throws -> [String: String] {
            if !state.withLock({ $0.registered }) { try register() }
            return state.withLock { s in
                s.requests.append(request)
                let hash = TestSHA256.digest(request.clientData)
                let assertion: [UInt8]
                if s.replayOnce {
                    s.replayOnce = false
                    assertion = s.device!.assertion(clientDataHash: hash, counter: 0)
                } else {
                    assertion = s.device!.assertion(clientDataHash: hash)
                }
                return [AttestationWire.keyIDHeader: Data(s.device!.keyId).base64EncodedString(),
                        AttestationWire.assertionHeader: Data(assertion).base64EncodedString()]
            }
        }

        func proofRefused(code: String) async -> Bool {
            state.withLock { s in
                s.refusals.append(code)
                if code == "attestation_invalid" {
                    s.device = SoftwareAppAttestDevice(appId: AttestationClientTests.appId, now: AttestationClientTests.now, ca: AttestationClientTests.ca)
                    s.registered = false
                }
            }
            return true
        }

        private func register() throws {
            let challenge = try Self.post(port, AttestationWire.challengePath, body: [])
            let text = try #require((try JSONSerialization.jsonObject(with: Data(challenge.1)) as? [String: Any])?["challenge"] as? String)
            let device = state.withLock { $0.device! }
            let object = ["keyId": Data(device.keyId).base64EncodedString(), "challenge": text,
                          "attestation": Data(device.attestation(clientDataHash: TestSHA256.digest(Array(text.utf8)))).base64EncodedString()]
            let registered = try Self.post(port, AttestationWire.registerPath, body: Array(try JSONSerialization.data(withJSONObject: object)))
            guard registered.0 == 201 else { throw RelayAPIError(status: registered.0, type: nil, code: nil, message: "registration failed") }
            state.withLock {
                $0.registered = true
                $0.registrations += 1
            }
        }

        static func post(_ port: Int, _ path: String, body: [UInt8]) throws -> (Int, [UInt8]) {
            let client = try TestClient(port: port)
            defer { client.close() }
            try client.sendRequest(path: path, headers: [("Content-Type", "application/json")], body: body)
            let head = try client.readHead()
            return (head.status, try client.readBody(head: head))
        }
    }

    static func relay(_ requests: Mailbox<RecordedRequest>? = nil) throws -> ClientThroughRelayTests.DevRelay {
        try ClientThroughRelayTests.DevRelay { config in
            config.attestation.apple = .init(appIds: [Self.appId], rootCAPEM: Self.ca.rootPEM)
            config.routes[0].attestation = .required
        }
    }

    static func client(_ port: Int, _ provider: any RelayAttestationProvider) -> SSERelayClient {
        ClientThroughRelayTests.client(port) { $0.attestation = provider }
    }

    static func answer(_ client: SSERelayClient) async throws -> String {
        var text = ""
        for try await snapshot in client.chatSnapshots(ClientThroughRelayTests.question) { text = snapshot.text }
        return text
    }

    @Test("the request the client signs is the request the relay checks (method, path with query, exact body)")
    func clientDataIsTheRelaysOwn() throws {
        var request = URLRequest(url: URL(string: "https://relay.example/base/v1/chat/completions?api-version=2024-10-21&x=%2F")!)
        request.httpMethod = "POST"
        request.httpBody = Data(chatBody)
        let attested = AttestedRequest(request)
        #expect(attested.pathWithQuery == "/base/v1/chat/completions?api-version=2024-10-21&x=%2F")
        #expect(attested.clientData == Array("POST /base/v1/chat/completions?api-version=2024-10-21&x=%2F\n".utf8) + chatBody)
        #expect(attested.clientData == AttestationWire.clientData(method: "POST", pathWithQuery: attested.pathWithQuery, body: chatBody))
        #expect(AttestedRequest(URLRequest(url: URL(string: "https://relay.example")!)).clientData == Array("GET /\n".utf8))
    }

    @Test("a chat through a relay that requires App Attest: the client registers once and asserts each request")
    func chatWithAppAttest() async throws {
        let dev = try Self.relay()
        let provider = SoftwareDeviceProvider(port: dev.relay.port)
        let client = Self.client(dev.relay.port, provider)
        #expect(try await Self.answer(client) == FakeProvider.answer)
        #expect(try await Self.answer(client) == FakeProvider.answer)
        provider.state.withLock { s in
            #expect(s.registrations == 1)
            #expect(s.refusals.isEmpty)
            #expect(s.requests.map(\.pathWithQuery) == ["/v1/chat/completions", "/v1/chat/completions"])
            #expect(s.requests.allSatisfy { $0.method == "POST" && String(decoding: $0.body, as: UTF8.self).contains(#""model":"gpt-4o-mini""#) })
        }
        // Without the provider: refused.
        do {
            _ = try await Self.answer(ClientThroughRelayTests.client(dev.relay.port))
            Issue.record("answered without a proof")
        } catch let error as RelayAPIError {
            #expect(error.status == 401 && error.code == "attestation_required")
        }
    }

    @Test("401 attestation_invalid (a key the relay does not know) → the provider registers again and the retry passes")
    func reRegistersAfterAttestationInvalid() async throws {
        let dev = try Self.relay()
        let provider = SoftwareDeviceProvider(port: dev.relay.port, registered: true)   // believes it is registered
        #expect(try await Self.answer(Self.client(dev.relay.port, provider)) == FakeProvider.answer)
        provider.state.withLock { s in
            #expect(s.refusals == ["attestation_invalid"])
            #expect(s.registrations == 1)
            #expect(s.requests.count == 2)
        }
    }

    @Test("401 assertion_replayed → one retry with a fresh assertion")
    func retriesAfterAReplay() async throws {
        let dev = try Self.relay()
        let provider = SoftwareDeviceProvider(port: dev.relay.port, replayOnce: true)
        #expect(try await Self.answer(Self.client(dev.relay.port, provider)) == FakeProvider.answer)
        provider.state.withLock { #expect($0.refusals == ["assertion_replayed"]) }
    }

    @Test("AppCheckProvider: the closure's token goes in X-Firebase-AppCheck; after a refusal it is asked to refresh, once")
    func appCheckProvider() async throws {
        let dev = try ClientThroughRelayTests.DevRelay { config in
            config.attestation.firebase = .init(projectNumber: "123456789012", appIds: ["1:123456789012:ios:0a1b2c3d4e5f"], jwksURL: nil,
                                                keys: testJWKS())
            config.routes[0].attestation = .required
        }
        let calls = Locked<[Bool]>([])
        let now = Date().timeIntervalSince1970
        let provider = AppCheckProvider { refresh in
            calls.withLock { $0.append(refresh) }
            // A stale token first (expired), a good one when asked to refresh.
            return testAppCheckToken(["exp": refresh ? now + 3600 : now - 3600, "iat": now - 7200], now: now)
        }
        #expect(try await Self.answer(Self.client(dev.relay.port, provider)) == FakeProvider.answer)
        #expect(calls.withLock { $0 } == [false, true])

        // A token that stays bad: one refresh, then the error reaches the app.
        let bad = AppCheckProvider { _ in testAppCheckToken(["sub": "1:123456789012:ios:other"], now: now) }
        await #expect(throws: RelayAPIError.self) { _ = try await Self.answer(Self.client(dev.relay.port, bad)) }
    }
}
