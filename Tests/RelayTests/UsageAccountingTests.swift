import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing
import Usage

/// Usage end to end: include_usage injected and its event stripped at every split, a client that asked for usage
/// untouched, the access log's usage fields and the tokens metric, Anthropic through the dev fake provider, an
/// estimate on cancel, and a drain that reads the upstream to its usage with nothing written to the departed client.
@Suite("Usage accounting")
struct UsageAccountingTests {
    static let chunk = #"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"#
    static let content = ["Hello", " there", "!"].map { "data: \(chunk)\"\($0)\"},\"finish_reason\":null}],\"usage\":null}\n\n" }
    static let stop = #"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"# + "\n\n"
    static let usage = #"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"# + "\n\n"
    static let done = "data: [DONE]\n\n"
    static let stream = Array((content.joined() + stop + usage + done).utf8)
    static let streamWithoutUsage = Array((content.joined() + stop + done).utf8)

    static func accessLog(_ relay: RelayFixture) throws -> [[String: Any]] {
        try relay.logs.lines.filter { $0.contains(#""message":"exchange""#) }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    /// An upstream that answers every request on a connection with `stream`, written in two writes split at the
    /// request's `X-Split` (so the relay's deliveries split there).
    static func splittingUpstream() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            while let request = try? connection.readRequest() {
                let split = Int(request.header("X-Split") ?? "") ?? 0
                try connection.writeHead(status: 200, headers: sseHead)
                if split > 0 { try connection.writeChunk(Array(stream[..<split])) }
                try connection.writeChunk(Array(stream[split...]))
                try connection.writeLastChunk()
            }
        }
    }

    @Test("include_usage is injected and exactly its event removed, at every split position")
    func injectedAndStrippedAtEverySplit() throws {
        let upstream = try Self.splittingUpstream()
        let relay = try RelayFixture(upstream: upstream) { config in config.routes[0].bodyPolicy.models = ["gpt-4o-mini"] }
        let client = try relay.client()
        var wrongAt: [Int] = []
        for split in 0..<Self.stream.count {
            try client.sendRequest(path: "/v1/chat/completions", headers: [("X-Split", "\(split)")], body: chatBody)
            if try client.readBody(head: try client.readHead()) != Self.streamWithoutUsage { wrongAt.append(split) }
        }
        #expect(wrongAt.isEmpty, "the client's bytes differ from the provider's minus the usage event at splits \(wrongAt.prefix(10))…")
        let forwarded = try #require(upstream.requests.first)
        #expect(String(decoding: forwarded.body, as: UTF8.self)
                == #"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}"#)
        try relay.waitUntilIdle()
        let log = try Self.accessLog(relay)
        #expect(log.count == Self.stream.count)
        #expect(log.allSatisfy { $0["usage_source"] as? String == "provider" && $0["prompt_tokens"] as? Int == 8 })
        let first = try #require(log.first)
        #expect(first["model"] as? String == "gpt-4o-mini")
        #expect(first["completion_tokens"] as? Int == 3)
        #expect(first["cached_tokens"] as? Int == 0)
        #expect(first["reasoning_tokens"] as? Int == 0)
        let metrics = try TestClient.get(port: relay.port, path: "/metrics").body
        let n = Self.stream.count
        #expect(metrics.contains(#"sse_relay_tokens_total{route="/v1/",model="gpt-4o-mini",kind="prompt",source="provider"} \#(8 * n)"#))
        #expect(metrics.contains(#"sse_relay_tokens_total{route="/v1/",model="gpt-4o-mini",kind="completion",source="provider"} \#(3 * n)"#))
    }

    @Test("a client that asked for usage gets the provider's stream untouched; the model label is other off the allowlist")
    func askedForUsage() throws {
        let upstream = try Self.splittingUpstream()
        let relay = try RelayFixture(upstream: upstream)
        let body = Array(#"{"model":"my-own-model","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#.utf8)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", headers: [("X-Split", "100")], body: body)
        #expect(String(decoding: try client.readBody(head: try client.readHead()), as: UTF8.self) == String(decoding: Self.stream, as: UTF8.self))
        #expect(try #require(upstream.requests.first).body == body)
        try relay.waitUntilIdle()
        #expect(try Self.accessLog(relay).first?["model"] as? String == "my-own-model")
        let metrics = try TestClient.get(port: relay.port, path: "/metrics").body
        #expect(metrics.contains(#"sse_relay_tokens_total{route="/v1/",model="other",kind="completion",source="provider"} 3"#))
    }

    @Test("Anthropic through the dev fake provider: the provider's usage in the log")
    func anthropic() throws {
        let (provider, relay) = try ProviderPresetEndToEndTests.devRelay()
        defer { provider.shutdown() }
        let client = try relay.client()
        let body = #"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"system":"1234","messages":[{"role":"user","content":"5678"}]}"#
        try client.sendRequest(path: "/v1/messages", body: Array(body.utf8))
        _ = try client.readBody(head: try client.readHead())
        try relay.waitUntilIdle()
        let line = try #require(try Self.accessLog(relay).first)
        #expect(line["usage_source"] as? String == "provider")
        #expect(line["prompt_tokens"] as? Int == 2)
        #expect(line["completion_tokens"] as? Int == ProviderPresetEndToEndTests.tokenCount)
        #expect(line["model"] as? String == "claude-sonnet-4-5")
    }

    /// A stream that stops after two content events until `proceed`, then sends the rest (usage included).
    static func pausingUpstream(sent: Gate, proceed: Gate, finished: Mailbox<Bool>) throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(content[0] + content[1])
            sent.signal()
            try proceed.wait(timeout: 5)
            for part in [content[2], stop, usage] { try connection.writeChunk(part) }
            finished.put(true)
            // A draining relay cancels as soon as the usage arrived: what follows may meet a closed connection.
            try? connection.writeChunk(done)
            try? connection.writeLastChunk()
        }
    }

    @Test("a client that leaves: cancel (default) gives an estimate; drain reads the upstream to its usage", arguments: ["cancel", "drain"])
    func clientLeaves(mode: String) throws {
        let sent = Gate(), proceed = Gate()
        let finished = Mailbox<Bool>()
        let upstream = try Self.pausingUpstream(sent: sent, proceed: proceed, finished: finished)
        let relay = try RelayFixture(upstream: upstream) { config in
            if mode == "drain" { config.routes[0].usage.onClientCancel = .drain }
        }
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        try sent.wait()
        _ = try client.readHead()
        let before = try client.readChunkedBody(until: Self.content[1])
        client.close()
        // The relay has seen the client leave (its connection is gone) before the upstream goes on.
        try relay.waitUntilNoConnections()
        proceed.signal()
        try relay.waitUntilIdle()
        let line = try #require(try Self.accessLog(relay).first)
        #expect(line["outcome"] as? String == "client_cancelled")
        #expect(line["bytes_out"] as? Int == before.count, "bytes written after the client left")
        if mode == "drain" {
            #expect(try finished.take(timeout: 2), "the upstream was not read to its usage")
            #expect(line["usage_source"] as? String == "provider")
            #expect(line["prompt_tokens"] as? Int == 8)
            #expect(line["completion_tokens"] as? Int == 3)
        } else {
            #expect(line["usage_source"] as? String == "estimate")
            #expect(line["prompt_tokens"] as? Int == 1, "\"hi\": 2 characters, one token")
            #expect(line["completion_tokens"] as? Int == 2, "two content events relayed")
        }
    }
}
