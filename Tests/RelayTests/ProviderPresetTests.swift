import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import Usage

/// Provider presets through the real relay: what a Gemini and an Anthropic upstream receive, and the dev fake
/// provider's two usage shapes read back by the usage tap from what the client got.
@Suite("Provider presets end to end")
struct ProviderPresetEndToEndTests {
    @Test("gemini: the key goes in x-goog-api-key, a client's ?key= and x-goog-api-key never pass")
    func gemini() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try RequestForwardingTests.echoUpstream(requests: requests)
        let relay = try RelayFixture(upstream: upstream) { config in
            config.upstreams["test"] = .init(name: "test", baseURL: upstream.baseURL, key: .init(RelayFixture.providerKey),
                                             provider: .gemini)
            config.routes = [.init(prefix: "/v1beta/", upstream: "test", provider: .gemini)]
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=\(RelayFixture.clientToken)&x=1",
                               headers: [("x-goog-api-key", RelayFixture.clientToken)], body: Array(#"{"contents":[]}"#.utf8))
        _ = try client.readBody(head: try client.readHead())
        let request = try requests.take()
        #expect(request.target == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&x=1")
        #expect(request.headerValues("x-goog-api-key") == [RelayFixture.providerKey])
        #expect(request.header("Authorization") == nil)
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("anthropic: x-api-key and anthropic-version from the preset")
    func anthropic() throws {
        let requests = Mailbox<RecordedRequest>()
        let upstream = try RequestForwardingTests.echoUpstream(requests: requests)
        let relay = try RelayFixture(upstream: upstream) { config in
            config.upstreams["test"] = .init(name: "test", baseURL: upstream.baseURL, key: .init(RelayFixture.providerKey),
                                             provider: .anthropic)
            config.routes = [.init(prefix: "/v1/", upstream: "test", provider: .anthropic)]
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/messages", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)")], body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        let request = try requests.take()
        #expect(request.headerValues("x-api-key") == [RelayFixture.providerKey])
        #expect(request.headerValues("anthropic-version") == ["2023-06-01"])
        #expect(request.header("Authorization") == nil)
    }

    /// The relay in front of the dev fake provider, configured as `sse-relay --dev` does.
    static func devRelay() throws -> (FakeProvider, RelayFixture) {
        let provider = FakeProvider(paceSeconds: 0.001, logger: Logger(label: "fake", level: .error, sink: MemoryLogSink()))
        try provider.start()
        let relay = try RelayFixture(upstream: nil, baseURL: provider.baseURL) { config in
            config.upstreams["test"]!.key = Secret(FakeProvider.devKey)
            config.upstreams["anthropic"] = .init(name: "anthropic", baseURL: provider.baseURL, key: Secret(FakeProvider.devKey),
                                                  provider: .anthropic)
            config.routes.append(.init(prefix: "/v1/messages", upstream: "anthropic", exact: true, provider: .anthropic))
        }
        return (provider, relay)
    }

    static func usage(of body: [UInt8], provider: Provider, contentType: String?) -> (Usage, Int) {
        var tap = UsageTap(provider: provider, contentType: contentType)
        tap.feed(body)
        return (tap.usage(), tap.contentEvents)
    }

    /// The fake streams its answer a word at a time (each with its leading space).
    static let tokenCount = FakeProvider.answer.split(separator: " ").count

    @Test("dev fake provider: OpenAI usage chunk only when include_usage asks for it", arguments: [true, false])
    func fakeOpenAI(_ includeUsage: Bool) throws {
        let (provider, relay) = try Self.devRelay()
        defer { provider.shutdown() }
        let body = includeUsage
            ? #"{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"12345678"}]}"#
            : #"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"12345678"}]}"#
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: Array(body.utf8))
        let head = try client.readHead()
        #expect(head.status == 200)
        let received = try client.readBody(head: head)
        let (usage, deltas) = Self.usage(of: received, provider: .openai, contentType: head.header("Content-Type"))
        #expect(deltas == Self.tokenCount)
        if includeUsage {
            #expect(usage == Usage(prompt: 2, completion: Self.tokenCount, source: .provider))
        } else {
            // The estimate: the answer's text bytes / 4, more than its word-per-event count.
            #expect(usage == Usage(prompt: 0, completion: max(Self.tokenCount, FakeProvider.answer.utf8.count / 4), source: .estimate))
            #expect(!String(decoding: received, as: UTF8.self).contains("\"usage\""))
        }
    }

    @Test("dev fake provider: an Anthropic Messages stream and body with their usage")
    func fakeAnthropic() throws {
        let (provider, relay) = try Self.devRelay()
        defer { provider.shutdown() }
        for stream in [true, false] {
            let body = #"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":\#(stream),"system":"1234","messages":[{"role":"user","content":"5678"}]}"#
            let client = try relay.client()
            try client.sendRequest(path: "/v1/messages", body: Array(body.utf8))
            let head = try client.readHead()
            #expect(head.status == 200)
            let received = try client.readBody(head: head)
            let (usage, deltas) = Self.usage(of: received, provider: .anthropic, contentType: head.header("Content-Type"))
            #expect(usage == Usage(prompt: 2, completion: Self.tokenCount, cached: 0, cacheCreation: 0, source: .provider))
            #expect(deltas == (stream ? Self.tokenCount : 0))
            if stream { #expect(String(decoding: received, as: UTF8.self).hasPrefix("event: message_start\n")) }
        }
    }
}
