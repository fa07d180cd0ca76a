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
import TestSupportCore

/// The accounting attacks found against the budgets (issue 18, sections 1 and 3), through the real relay: a body is
/// read as the provider reads it (escapes decoded, ambiguity refused, compression refused), and every endpoint a
/// budgeted route lets through is metered by its shape, whatever the preset. Each test failed before the fix.
@Suite("Hostile bodies and unmetered endpoints")
struct HostileBodyTests {
    static let auth = [("Authorization", "Bearer \(RelayFixture.clientToken)")]

    /// A relay with a daily budget per identity; `configure` adjusts the rest.
    static func relay(_ upstream: ScriptedUpstream, perDay: Int = 10_000, reserve: Int = 100,
                      _ configure: @escaping @Sendable (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: BudgetTests.now) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: perDay), defaultReserveTokens: reserve)
            config.admin = .init(host: "127.0.0.1", port: 0)
            configure(&config)
        }
    }

    /// An upstream that answers every request with one OpenAI chunk and a usage chunk, and records what it got.
    static func recordingUpstream(_ requests: Mailbox<RecordedRequest>, promptTokens: Int = 9) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while let request = try? connection.readRequest(timeout: 10) {
                requests.put(request)
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")
                try connection.writeChunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":\(promptTokens),\"completion_tokens\":1,\"total_tokens\":\(promptTokens + 1)}}\n\ndata: [DONE]\n\n")
                try connection.writeLastChunk()
            }
        }
    }

    /// Status and error code of one request.
    static func send(_ relay: RelayFixture, path: String = "/v1/chat/completions", method: String = "POST",
                     headers: [(String, String)] = [], body: [UInt8]) throws -> (Int, String?) {
        let client = try relay.client()
        defer { client.close() }
        try client.sendRequest(method: method, path: path, headers: auth + headers, body: body)
        let head = try client.readHead()
        let text = String(decoding: try client.readBody(head: head), as: UTF8.self)
        return (head.status, ClientAuthTests.code(text))
    }

    static func used(_ relay: RelayFixture) throws -> Int {
        let admin = try TestClient(port: relay.server.adminPort!)
        defer { admin.close() }
        try admin.sendRequest(method: "GET", path: "/usage?identity=static%3Aapp")
        let head = try admin.readHead()
        let json = try JSONSerialization.jsonObject(with: Data(try admin.readBody(head: head))) as? [String: Any]
        let day = (json?["windows"] as? [[String: Any]])?.first { $0["window"] as? String == "day" }
        return try #require(day?["used"] as? Int)
    }

    static let prompt = String(repeating: "a", count: 400_000)

    /// `"m\u0065ssages"` and `"c\u006fntent"` are `messages` and `content` to every provider's parser. A 400 000
    /// character prompt behind them was once estimated at 0 tokens and admitted with 5 000 tokens of budget left.
    @Test("escaped key names cannot hide the prompt from the reservation")
    func escapedKeysCannotHideThePrompt() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests), perDay: 5_000)
        let plain = #"{"model":"gpt-4o","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"\#(Self.prompt)"}]}"#
        let escaped = #"{"model":"gpt-4o","stream":true,"max_tokens":10,"m\u0065ssages":[{"role":"user","c\u006fntent":"\#(Self.prompt)"}]}"#
        let nested = #"{"model":"gpt-4o","stream":true,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","t\u0065xt":"\#(Self.prompt)"}]}]}"#
        for body in [plain, escaped, nested] {
            let (status, code) = try Self.send(relay, body: Array(body.utf8))
            #expect(status == 429)
            #expect(code == "budget_exhausted")
        }
        #expect(try Self.used(relay) == 0)
        #expect(requests.count == 0, "the provider was called")
    }

    /// A body a provider could read differently is refused on a route that meters, limits or rewrites: duplicates
    /// at any depth (after decoding escapes), invalid UTF-8, lone surrogates, data after the value.
    @Test("ambiguous bodies get 400 ambiguous_body; non-boolean stream switches 400")
    func ambiguousBodiesAreRefused() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests))
        let cases: [([UInt8], String)] = [
            // The provider keeps the last `include_usage`, sends no usage, and the stream would cost an estimate.
            (Array(#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true,"include_usage":false},"messages":[]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true,"include_\u0075sage":false},"messages":[]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","messages":[{"role":"user","content":"a","c\u006fntent":"b"}]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","messages":[{"role":"user","content":"\ud800"}]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","messages":[{"role":"user","content":""#.utf8) + [0xC0, 0xAF] + Array(#""}]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","messages":[]} {"messages":[{"content":"more"}]}"#.utf8), "ambiguous_body"),
            ([0xEF, 0xBB, 0xBF] + Array(#"{"model":"gpt-4o","messages":[]}"#.utf8), "ambiguous_body"),
            (Array(#"{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":"false"},"messages":[]}"#.utf8), "invalid_stream_option"),
            (Array(#"{"model":"gpt-4o","stream":"true","messages":[]}"#.utf8), "invalid_stream_option"),
            (Array(#"{"model":"gpt-4o","messages":[],}"#.utf8), "invalid_json"),
        ]
        for (body, expected) in cases {
            let (status, code) = try Self.send(relay, body: body)
            #expect(status == 400, "\(expected)")
            #expect(code == expected)
        }
        #expect(requests.count == 0, "the provider was called")
    }

    /// A compressed body cannot be read: on a route that reads bodies it is refused (415), not forwarded unread.
    @Test("compressed request bodies get 415 on routes that read bodies, and pass where nothing reads them")
    func compressedBodiesAreRefused() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests)) { config in
            config.routes.append(.init(prefix: "/raw/", upstream: "test", auth: .token))
            config.routes[1].unmetered = true
        }
        let body = Array(#"{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#.utf8)
        for coding in ["gzip", "deflate", "br", "GZIP", "identity, gzip", "x-gzip", "zstd"] {
            let (status, code) = try Self.send(relay, headers: [("Content-Encoding", coding)], body: body)
            #expect(status == 415, "\(coding)")
            #expect(code == "unsupported_content_encoding")
        }
        #expect(requests.count == 0)
        #expect(try Self.send(relay, headers: [("Content-Encoding", "identity")], body: body).0 == 200)
        _ = try requests.take()
        // An unmetered route reads nothing: the bytes go on with their encoding.
        let gz: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        #expect(try Self.send(relay, path: "/raw/upload", headers: [("Content-Encoding", "gzip")], body: gz).0 == 200)
        let forwarded = try requests.take()
        #expect(forwarded.body == gz)
        #expect(forwarded.header("Content-Encoding") == "gzip")
    }

    /// A body the relay reads as JSON goes to the provider only as JSON: Google reads `application/x-protobuf` as
    /// binary, `application/json+protobuf` as arrays and a form as fields, so another type could make the provider
    /// read another request in the bytes the relay checked (415). JSON in any spelling, or no type, passes; an
    /// unmetered route reads nothing and forwards any type.
    @Test("a body that is not JSON by its Content-Type gets 415 on routes that read bodies")
    func aBodyTypedOtherThanJSONIsRefused() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests)) { config in
            config.routes.append(.init(prefix: "/raw/", upstream: "test", auth: .token))
            config.routes[1].unmetered = true
        }
        let body = Array(#"{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#.utf8)
        for type in ["application/x-protobuf", "application/json+protobuf", "application/x-www-form-urlencoded", "text/plain",
                     "multipart/form-data; boundary=x", "application/jsonx", "+json"] {
            let (status, code) = try Self.send(relay, headers: [("Content-Type", type)], body: body)
            #expect(status == 415, "\(type)")
            #expect(code == "unsupported_media_type", "\(type)")
        }
        let (status, code) = try Self.send(relay, headers: [("Content-Type", "application/json"), ("Content-Type", "application/x-protobuf")], body: body)
        #expect(status == 415 && code == "unsupported_media_type", "two types, one not JSON")
        #expect(requests.count == 0)
        for type in ["application/json", "Application/JSON; charset=utf-8", " application/json ;charset=UTF-8", "application/vnd.api+json"] {
            #expect(try Self.send(relay, headers: [("Content-Type", type)], body: body).0 == 200, "\(type)")
            _ = try requests.take()
        }
        #expect(try Self.send(relay, headers: [], body: body).0 == 200, "no Content-Type")
        _ = try requests.take()
        #expect(try Self.send(relay, path: "/raw/upload", headers: [("Content-Type", "application/x-protobuf")], body: [0x0A, 0x01, 0x41]).0 == 200)
        #expect(try requests.take().header("Content-Type") == "application/x-protobuf")
    }

    /// Gemini's OpenAI-compatible endpoint on a `gemini` route streamed 400 chunks reporting 5 010 tokens and was
    /// charged 0. The endpoint's shape chooses the readers: it is read, injected and bounded as OpenAI chat.
    @Test("a Gemini route's OpenAI-compatible chat endpoint is metered as OpenAI chat")
    func geminiOpenAICompatibleEndpointIsMetered() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests, promptTokens: 5_009), perDay: 100_000) { config in
            config.upstreams["test"]!.provider = .gemini
            config.routes = [.init(prefix: "/v1beta/", upstream: "test", auth: .token, provider: .gemini)]
        }
        let stream = Array(#"{"model":"gemini-2.5-flash","stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8)
        let (status, _) = try Self.send(relay, path: "/v1beta/openai/chat/completions", body: stream)
        #expect(status == 200)
        let streamed = try requests.take()
        #expect(String(decoding: streamed.body, as: UTF8.self).hasSuffix(#","stream_options":{"include_usage":true}}"#),
                "usage asked for")
        try relay.waitUntilIdle()
        #expect(try Self.used(relay) == 5_010, "charged the provider's count")

        let plain = Array(#"{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}"#.utf8)
        _ = try Self.send(relay, path: "/v1beta/openai/chat/completions", body: plain)
        let bounded = try requests.take()
        #expect(String(decoding: bounded.body, as: UTF8.self).hasSuffix(#","max_completion_tokens":100}"#),
                "a non-streaming request without a ceiling carries the reserved one")
    }

    /// Anthropic's OpenAI-compatible endpoint on an `anthropic` route: the same.
    @Test("an Anthropic route's OpenAI-compatible chat endpoint is metered as OpenAI chat")
    func anthropicOpenAICompatibleEndpointIsMetered() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests, promptTokens: 300), perDay: 100_000) { config in
            config.upstreams["test"]!.provider = .anthropic
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token, provider: .anthropic)]
        }
        let stream = Array(#"{"model":"claude-sonnet-4","stream":true,"messages":[{"role":"user","content":"hi"}]}"#.utf8)
        #expect(try Self.send(relay, body: stream).0 == 200)
        _ = try requests.take()
        try relay.waitUntilIdle()
        #expect(try Self.used(relay) == 301)
    }

    /// Endpoints the relay cannot meter (embeddings, images, batches, files…) are refused on a budgeted route unless
    /// it says `"unmetered": true`; model lists and token counting are free and pass.
    @Test("a budgeted route refuses unmetered endpoints with 403, unless it says unmetered; free ones pass")
    func unmeteredEndpointsAreRefused() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(try Self.recordingUpstream(requests)) { config in
            config.routes.append(.init(prefix: "/open/", upstream: "test", auth: .token))
            config.routes[1].unmetered = true
        }
        let body = Array(#"{"model":"text-embedding-3-small","input":"hi"}"#.utf8)
        for path in ["/v1/embeddings", "/v1/images/generations", "/v1/batches", "/v1/audio/speech", "/v1/responses/r1/cancel"] {
            let (status, code) = try Self.send(relay, path: path, body: body)
            #expect(status == 403, "\(path)")
            #expect(code == "endpoint_not_metered")
        }
        #expect(requests.count == 0)
        #expect(try Self.send(relay, path: "/v1/models", method: "GET", body: []).0 == 200)
        #expect(try Self.send(relay, path: "/v1/messages/count_tokens", body: body).0 == 200)
        #expect(try Self.send(relay, path: "/open/embeddings", body: body).0 == 200)
        #expect(requests.count == 3)
        #expect(relay.logs.lines.contains { $0.contains("endpoint_not_metered") && $0.contains("\"level\":\"warning\"") },
                "the start-up warning names the broad budgeted route")
    }
}
