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

/// A path the provider reads as `/v1/chat/completions` is judged as `/v1/chat/completions`: percent-encoded
/// unreserved characters (RFC 3986 §6.2.2.2: `%69` is `i`) and a trailing slash take the exact route, with its
/// model allowlist, usage injection and output ceiling, never the broad `/v1/` route beside it; and the provider
/// gets the decoded path the relay judged.
@Suite("Path equivalence")
struct PathEquivalenceTests {
    /// Spellings of `/v1/chat/completions`: an escape in every segment, both hex cases, and a trailing slash.
    static let spellings: [String] = [
        "/v1/chat/complet%69ons",
        "/v1/chat/completions/",
        "/%76%31/chat/completions",
        "/v%31/chat/completions",
        "/v1/%63hat/completions",
        "/v1/chat/c%6Fmpletions",
        "/v1/chat/c%6fmpletions",
        "/v1/chat/completion%73/",
        "/%76%31/%63%68%61%74/%63%6F%6D%70%6C%65%74%69%6F%6E%73",
        "/%76%31/%63%68%61%74/%63%6f%6d%70%6c%65%74%69%6f%6e%73/",
    ]

    static func relay(requests: Mailbox<RecordedRequest>, budgets: Bool = false) throws -> RelayFixture {
        let upstream = try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 5)
                requests.put(request)
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
                try connection.writeChunk("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
                try connection.writeChunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n")
                try connection.writeChunk("data: [DONE]\n\n")
                try connection.writeLastChunk()
            }
        }
        return try RelayFixture(upstream: upstream) { config in
            config.routes = [
                .init(prefix: "/v1/chat/completions", upstream: "test", methods: ["POST"], exact: true,
                      bodyPolicy: BodyPolicy(models: ["gpt-4o-mini"])),
                .init(prefix: "/v1/", upstream: "test", methods: ["GET", "POST"]),
            ]
            if budgets { config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000)) }
        }
    }

    static func post(_ relay: RelayFixture, path: String, body: String) throws -> (status: Int, body: String) {
        let client = try relay.client()
        try client.sendRequest(path: path, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        let head = try client.readHead()
        return (head.status, String(decoding: try client.readBody(head: head), as: UTF8.self))
    }

    @Test("a model outside the exact route's allowlist is refused however the path is spelled", arguments: spellings)
    func allowlistHoldsForEverySpelling(path: String) throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        let refused = try Self.post(relay, path: path, body: #"{"model":"gpt-4.5-preview","stream":true}"#)
        #expect(refused.status == 403, "\(path): \(refused.body)")
        #expect(requests.count == 0, "\(path) reached the provider")
        // The control: the broad route itself still takes the model, so the 403 above is the exact route's.
        let broad = try Self.post(relay, path: "/v1/other", body: #"{"model":"gpt-4.5-preview"}"#)
        #expect(broad.status == 200)
        #expect(try requests.take().target == "/v1/other")
    }

    @Test("the provider gets the decoded path, judged as the endpoint: usage injected, trailing slash kept", arguments: spellings)
    func decodedPathGoesUpstreamWithTheEndpointsTreatment(path: String) throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        let allowed = try Self.post(relay, path: path, body: #"{"model":"gpt-4o-mini","stream":true}"#)
        #expect(allowed.status == 200, "\(path): \(allowed.body)")
        let forwarded = try requests.take()
        let expected = path.hasSuffix("/") ? "/v1/chat/completions/" : "/v1/chat/completions"
        #expect(forwarded.target == expected)
        // Usage injection is decided on the endpoint: the provider is asked for usage, and the client's stream
        // loses the usage-only event it did not ask for.
        let sent = String(decoding: forwarded.body, as: UTF8.self)
        #expect(sent.contains(#""stream_options":{"include_usage":true}"#), "\(path): \(sent)")
        #expect(!allowed.body.contains("\"usage\""), "\(path): \(allowed.body)")
        try relay.waitUntilIdle()
        // The access log shows the decoded path, and the usage the provider reported.
        #expect(relay.logs.lines.contains { $0.contains(#""path":"\#(expected)""#) && $0.contains(#""usage_source":"provider""#) },
                "\(relay.logs.lines)")
    }

    @Test("with budgets, a request without a ceiling gets the chat endpoint's ceiling on a trailing-slash path too")
    func ceilingIsWrittenForTheTrailingSlash() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests, budgets: true)
        for path in ["/v1/chat/completions/", "/v1/chat/complet%69ons"] {
            let answer = try Self.post(relay, path: path, body: #"{"model":"gpt-4o-mini"}"#)
            #expect(answer.status == 200)
            let sent = String(decoding: try requests.take().body, as: UTF8.self)
            #expect(sent.contains(#""max_completion_tokens":4096"#), "\(path): \(sent)")
        }
    }

    @Test("a path parameter is refused with 400, never routed by the path before it",
          arguments: ["/v1/chat/completions;x", "/v1/chat/completions;", "/v1/chat;x/completions", "/v1/chat/completions%3Bx",
                      "/v1/chat/completions/;x"])
    func pathParameterIsRefused(path: String) throws {
        // A servlet-style server drops ";x", so the provider may read "/v1/chat/completions": the exact route's
        // allowlist must not be skipped by the broad route taking the other spelling.
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        let refused = try Self.post(relay, path: path, body: #"{"model":"gpt-4.5-preview","stream":true}"#)
        #expect(refused.status == 400, "\(path): \(refused.status) \(refused.body)")
        #expect(refused.body.contains(#""code":"invalid_path""#) && refused.body.contains("';'"), "\(refused.body)")
        #expect(requests.count == 0, "\(path) reached the provider")
        // The query is the provider's business: a ';' there is passed as sent.
        #expect(try Self.post(relay, path: "/v1/chat/completions?a=1;b=2", body: #"{"model":"gpt-4o-mini"}"#).status == 200)
        #expect(try requests.take().target == "/v1/chat/completions?a=1;b=2")
    }

    @Test("reserved and non-ASCII escapes stay as sent; %2E stays refused")
    func otherEscapesStay() throws {
        let requests = Mailbox<RecordedRequest>()
        let relay = try Self.relay(requests: requests)
        for path in ["/v1/files/a%3Ab%3ac", "/v1/files/caf%C3%A9", "/v1/files/a%20b%25c%40d"] {
            #expect(try Self.post(relay, path: path, body: "{}").status == 200)
            #expect(try requests.take().target == path)
        }
        #expect(try Self.post(relay, path: "/v1/chat/completions%2E", body: "{}").status == 400)
        #expect(try Self.post(relay, path: "/v1/chat/%2e%2e/completions", body: "{}").status == 400)
        #expect(requests.count == 0)
    }
}
