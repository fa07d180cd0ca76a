import Foundation
import HTTP1
import JSON
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import TestHarness
import Testing
import TestSupportCore
import Usage

/// Output the relay cannot read is never cheap, and output it has already charged is not charged again: through
/// the real relay, with a token budget per identity, the spend read back from the admin listener.
@Suite("Unread output")
struct UnreadOutputTests {
    static let auth = [("Authorization", "Bearer \(RelayFixture.clientToken)")]

    static func relay(_ upstream: ScriptedUpstream, perDay: Int, reserve: Int = 4096,
                      _ configure: @escaping @Sendable (inout RelayConfiguration) -> Void = { _ in }) throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: BudgetTests.now, clock: ManualClock()) { config in
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: "/v1/", upstream: "test", auth: .token)]
            config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: perDay), defaultReserveTokens: reserve)
            config.admin = .init(host: "127.0.0.1", port: 0)
            configure(&config)
        }
    }

    /// The identity's tokens used today (`GET /usage` on the admin listener).
    static func usedToday(_ relay: RelayFixture) throws -> Int {
        let admin = try TestClient(port: relay.server.adminPort!)
        try admin.sendRequest(method: "GET", path: "/usage?identity=static%3Aapp")
        let json = String(decoding: try admin.readBody(head: try admin.readHead()), as: UTF8.self)
        let used = try #require(json.range(of: #""used":"#))
        return try #require(Int(json[used.upperBound...].prefix { $0.isNumber }))
    }

    /// A provider that answers every request with `body` as `contentType`, one request per connection.
    static func answering(_ body: [UInt8], contentType: String = "application/json") throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", contentType), ("Content-Length", "\(body.count)"),
                                                            ("Connection", "close")])
            try connection.write(body)
        }
    }

    static func exchange(_ relay: RelayFixture, method: String = "POST", path: String, body: String = "") throws -> (ResponseHeadResult, [UInt8]) {
        let client = try relay.client()
        try client.sendRequest(method: method, path: path, headers: auth, body: Array(body.utf8))
        let head = try client.readHead()
        return (head, try client.readBody(head: head))
    }

    /// 18 characters of message text: 5 estimated prompt tokens.
    static let question = #""messages":[{"role":"user","content":"How are you today?"}]"#

    /// Answers the usage reader cannot read: a JSON answer past its 1 MiB bound (`n` choices, logprobs, audio make
    /// one), and answers in a format it does not read (protobuf, which a client can ask Google for with `$alt=proto`
    /// or `Accept`; JSONP). Each is relayed whole and, its counts unread, charged everything it reserved:
    /// 2 choices × 1 000 + 5, not the prompt alone.
    static let unreadable: [(answer: [UInt8], contentType: String)] = [
        (Array(#"{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"\#(String(repeating: "a", count: 1_200_000))"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":300000,"total_tokens":300005}}"#.utf8),
         "application/json"),
        ([0x0A, 0x12, 0x0A, 0x10] + Array("candidates here!".utf8), "application/x-protobuf"),
        (Array(#"cb({"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}})"#.utf8), "text/javascript"),
    ]

    @Test("an answer too large or in a format the relay does not read is charged all it reserved",
          arguments: 0..<unreadable.count)
    func anUnreadableAnswerIsChargedItsReservation(_ index: Int) throws {
        let (answer, contentType) = Self.unreadable[index]
        let upstream = try Self.answering(answer, contentType: contentType)
        let relay = try Self.relay(upstream, perDay: 1_000_000)
        let (head, body) = try Self.exchange(relay, path: "/v1/chat/completions",
                                             body: #"{"model":"gpt-4o","n":2,"max_completion_tokens":1000,\#(Self.question)}"#)
        #expect(head.status == 200)
        #expect(body == answer)
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(try Self.usedToday(relay) == 2_005)
        #expect(relay.logs.lines.contains { $0.contains(#""message":"exchange""#) && $0.contains(#""completion_tokens":2000"#) })
    }

    /// The same answer under the bound is charged the provider's own count (the rule above changes nothing else).
    @Test("a JSON answer under the bound is charged the provider's count")
    func aJSONAnswerUnderTheBoundIsChargedItsCount() throws {
        let json = Array(#"{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#.utf8)
        let upstream = try Self.answering(json)
        let relay = try Self.relay(upstream, perDay: 1_000_000)
        _ = try Self.exchange(relay, path: "/v1/chat/completions", body: #"{"model":"gpt-4o","n":2,"max_completion_tokens":1000,\#(Self.question)}"#)
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(try Self.usedToday(relay) == 12)
    }

    /// A stream cancelled before OpenAI's usage event is charged an estimate. Images count in it: each at least
    /// `budgets.mediaTokens` (here 3 000), or its payload ÷ 4 if more, so a tiny, highly compressible image, or one by
    /// URL, which the provider bills by its size in pixels, is not free to a client that cancels before the counts.
    @Test("a stream cancelled before the provider's counts is charged each image at least budgets.mediaTokens")
    func aCancelledStreamIsChargedItsImages() throws {
        let sent = Gate(), proceed = Gate()
        let finished = Mailbox<Bool>()
        let upstream = try UsageAccountingTests.pausingUpstream(sent: sent, proceed: proceed, finished: finished)
        let relay = try Self.relay(upstream, perDay: 1_000_000) { $0.budgets?.mediaTokens = 3_000 }
        let client = try relay.client()
        let body = #"{"model":"gpt-4o","stream":true,"max_completion_tokens":10,"messages":[{"role":"user","content":["#
            + #"{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}},"#
            + #"{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}"#
        try client.sendRequest(method: "POST", path: "/v1/chat/completions", headers: Self.auth, body: Array(body.utf8))
        try sent.wait()
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: UsageAccountingTests.content[1])
        client.close()
        try relay.waitUntilNoConnections()
        proceed.signal()
        try relay.waitUntilIdle()
        // "abcd": 1 token; two images at 3 000 each; two content events relayed.
        #expect(try Self.usedToday(relay) == 1 + 2 * 3_000 + 2)
    }

    /// A Responses request with `"background": true` answers at once (`queued`, no usage) while the model runs on
    /// at the provider, its output read later by free GETs; with `previous_response_id` or a file by URL its prompt
    /// is a history or a document the relay never sees. On a budgeted route it is refused before the provider, in
    /// every spelling a provider could read as true (`"backgroun\u0064"` is the same key); `false` and `null` pass.
    @Test("a background response is refused on a budgeted route", arguments: [
        (#""background":true"#, 403), (#""backgroun\u0064":true"#, 403), (#""background":"true""#, 403), (#""background":1"#, 403),
        (#""background":false"#, 200), (#""background":null"#, 200),
    ])
    func aBackgroundResponseIsRefused(background: String, status: Int) throws {
        let done = Array(#"{"id":"resp_1","object":"response","status":"completed","model":"o3","output":[],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}"#.utf8)
        let upstream = try Self.answering(done)
        let relay = try Self.relay(upstream, perDay: 100_000, reserve: 3000)
        let (head, body) = try Self.exchange(relay, path: "/v1/responses",
                                             body: #"{"model":"o3",\#(background),"input":"How are you today?"}"#)
        #expect(head.status == status, "\(String(decoding: body, as: UTF8.self))")
        try relay.waitUntilIdle()
        if status == 403 {
            #expect(ClientAuthTests.code(String(decoding: body, as: UTF8.self)) == "background_not_metered")
            #expect(upstream.requests.isEmpty)
            #expect(try Self.usedToday(relay) == 0)
        } else {
            try upstream.waitForScriptsToFinish()
            #expect(try Self.usedToday(relay) == 12)
        }
    }

    /// Input the provider keeps or fetches by reference (a stored conversation, a file by id or URL) is billed in full
    /// and counted by the relay only from the provider's counts, which a stream cancelled early never brings; a tool
    /// the provider runs (a web search) is billed per call, never in the counts. On a budgeted route each is refused
    /// before the provider, unless the route accepts it (`referencedInput`, `providerTools`).
    @Test("input by reference and provider tools are refused on a budgeted route unless the route accepts them",
          arguments: [(false, false), (false, true), (true, false), (true, true)])
    func uncountedCostsAreRefused(tool: Bool, accepted: Bool) throws {
        let done = Array(#"{"id":"resp_2","object":"response","status":"completed","model":"o3","output":[],"usage":{"input_tokens":90000,"output_tokens":7,"total_tokens":90007}}"#.utf8)
        let upstream = try Self.answering(done)
        let relay = try Self.relay(upstream, perDay: 1_000_000) { config in
            if tool { config.routes[0].providerTools = accepted } else { config.routes[0].referencedInput = accepted }
        }
        let body = tool ? #"{"model":"o3","tools":[{"type":"web_search"}],"input":"news?"}"#
                        : #"{"model":"o3","previous_response_id":"resp_1","input":"and then?"}"#
        let (head, answer) = try Self.exchange(relay, path: "/v1/responses", body: body)
        try relay.waitUntilIdle()
        if accepted {
            #expect(head.status == 200)
            try upstream.waitForScriptsToFinish()
            #expect(try Self.usedToday(relay) == 90_007)
        } else {
            #expect(head.status == (tool ? 403 : 400))
            #expect(ClientAuthTests.code(String(decoding: answer, as: UTF8.self)) == (tool ? "tool_not_metered" : "input_not_metered"))
            #expect(upstream.requests.isEmpty)
        }
    }

    /// Which tools the provider runs (billed per call): anything in `tools` but the app's own, in every provider's
    /// shape and escape, a kind the relay does not know included; and the top-level switches for search and MCP.
    @Test func whatCountsAsAProviderTool() throws {
        func finds(_ json: String) throws -> Bool { ProviderTools.find(in: try JSONDocument(parsing: Array(json.utf8))) }
        for json in [
            #"{"tools":[{"type":"web_search_preview_2025_03_11"}]}"#,
            #"{"tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["vs_1"]}]}"#,
            #"{"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}"#, #"{"tools":[{"type":"image_generation"}]}"#,
            #"{"tools":[{"type":"mcp","server_url":"https://x"}]}"#, #"{"tools":[{"type":"web_search"}]}"#,
            #"{"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}"#,
            #"{"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}"#,
            #"{"tools":[{"googleSearch":{}}]}"#, #"{"tools":[{"functionDeclarations":[],"google_search":{}}]}"#,
            #"{"tools":[{"codeExecution":{}}]}"#, #"{"tools":[{"urlContext":{}}]}"#, #"{"tools":[{"someFutureTool":{}}]}"#,
            #"{"tools":[{"type":7}]}"#, #"{"tools":["web_search"]}"#,
            #"{"web_search_options":{}}"#, #"{"mcp_servers":[{"type":"url","url":"https://x","name":"n"}]}"#,
            #"{"data_sources":[{"type":"azure_search","parameters":{"endpoint":"https://s","index_name":"i"}}]}"#,
            #"{"model":"gpt-4o-search-preview","messages":[]}"#, #"{"model":"gpt-5-Search-api"}"#,
            #"{"model":"gpt-4o-s\u0065arch-preview"}"#,
        ] {
            #expect(try finds(json), "\(json)")
        }
        for json in [
            #"{"model":"m","input":"hi"}"#, #"{"tools":[]}"#, #"{"tools":null,"web_search_options":null}"#,
            #"{"model":"gpt-4o","messages":[{"role":"user","content":"search the web"}]}"#,
            #"{"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}"#,
            #"{"tools":[{"type":"custom","name":"grammar"}]}"#,
            #"{"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]}"#,
            #"{"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]}"#,
            #"{"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]}"#,
            #"{"tools":[{"type":"computer_use_preview","display_width":1024},{"type":"local_shell"},{"type":"apply_patch"}]}"#,
            #"{"tools":[{"functionDeclarations":[{"name":"f"}]}]}"#, #"{"tools":[{"function_declarations":[{"name":"f"}]}]}"#,
            #"{"messages":[{"role":"user","content":"use web_search_options"}],"metadata":{"tools":"googleSearch"}}"#,
        ] {
            #expect(try !finds(json), "\(json)")
        }
    }

    /// Which bodies bring input by reference: stored state at the top level; files by id or URL at any depth, in
    /// every provider's shape and escape; never the app's own names in a schema, `tools` or `metadata`.
    @Test func whatCountsAsInputByReference() throws {
        func finds(_ json: String) throws -> Bool { ReferencedInput.find(in: try JSONDocument(parsing: Array(json.utf8))) }
        for json in [
            #"{"previous_response_id":"resp_1"}"#, #"{"conversation":"conv_1"}"#, #"{"conversation":{"id":"conv_1"}}"#,
            #"{"previous_respons\u0065_id":"resp_1"}"#, #"{"prompt":{"id":"pmpt_1","version":"2"},"input":"hi"}"#,
            #"{"input":[{"type":"item_reference","id":"msg_1"},{"role":"user","content":"Summarise the above."}]}"#,
            #"{"input":[{"id":"msg_1"}]}"#, #"{"input":[{"typ\u0065":"item_reference","id":"msg_1"}]}"#,
            // Inline documents and video: their tokens are per page or per second, however few bytes they take.
            #"{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,AAAA"}}]}]}"#,
            #"{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.docx","file_data":"data:application/zip;base64,UEsD"}]}]}"#,
            #"{"contents":[{"parts":[{"inlineData":{"mimeType":"application/pdf","data":"AAAA"}}]}]}"#,
            #"{"contents":[{"parts":[{"inline_data":{"mime_type":"video/mp4","data":"AAAA"}}]}]}"#,
            #"{"contents":[{"parts":[{"inlineData":{"data":"AAAA"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AAAA"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}"#,
            #"{"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/big.pdf"}]}]}"#,
            #"{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file-2"}]}]}"#,
            #"{"contents":[{"parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"https://x/y"}}]}]}"#,
            #"{"contents":[{"parts":[{"file_data":{"file_uri":"gs://b/o"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}"#,
            // Reasoning handed back by id alone, an earlier answer's audio by id, a Gemini context cache.
            #"{"input":[{"type":"reasoning","id":"rs_1","summary":[]},{"role":"user","content":"go on"}]}"#,
            #"{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":null}]}"#,
            #"{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":""}]}"#,
            #"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","audio":{"id":"audio_1"}},{"role":"user","content":"again"}]}"#,
            #"{"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":"cachedContents/abc"}"#,
            #"{"contents":[{"parts":[{"text":"hi"}]}],"cached_content":"cachedContents/abc"}"#,
        ] {
            #expect(try finds(json), "\(json)")
        }
        for json in [
            #"{"model":"m","input":"hi"}"#, #"{"previous_response_id":null,"conversation":null}"#,
            #"{"input":[{"previous_response_id":"resp_1"}]}"#, #"{"model":"gpt-3.5-turbo-instruct","prompt":"Say hi"}"#,
            #"{"prompt":["a","b"]}"#, #"{"prompt":null}"#,
            #"{"input":[{"role":"user","id":"msg_1","content":"hi"}]}"#,
            // Function calls' arguments and results are the app's JSON, whatever their keys.
            #"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"files":[{"file_id":"x","inlineData":{}}]}}}]}]}"#,
            #"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"source":{"type":"file","file_id":"x"}}}]}]}"#,
            #"{"input":[{"type":"message","id":"msg_1","role":"assistant","content":[]},{"type":"function_call_output","call_id":"c","output":"x"}]}"#,
            #"{"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"file_id":{"type":"string"},"file_url":{}}}}}]}"#,
            #"{"metadata":{"conversation":"c","file_id":"x"}}"#,
            #"{"response_format":{"type":"json_schema","json_schema":{"schema":{"properties":{"fileUri":{}}}}}}"#,
            #"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}]}]}"#,
            #"{"contents":[{"parts":[{"inlineData":{"mimeType":"image/PNG","data":"AAAA"}},{"inline_data":{"mime_type":"audio/wav","data":"AAAA"}}]}]}"#,
            #"{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"mp3"}}]}]}"#,
            #"{"messages":[{"role":"user","content":"file_id"}]}"#,
            // Reasoning that carries its tokens; the answer's audio format (no id); no cache.
            #"{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA"}]}"#,
            #"{"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[]}"#,
            #"{"messages":[{"role":"assistant","audio":{"id":null}}]}"#, #"{"contents":[],"cachedContent":null}"#,
        ] {
            #expect(try !finds(json), "\(json)")
        }
    }

    /// Retrieving a stored response is free: its usage was charged when it was made, not again on each GET.
    @Test("retrieving a stored answer is not charged its usage again")
    func aRetrievalIsNotChargedAgain() throws {
        let done = Array(#"{"id":"resp_1","object":"response","status":"completed","model":"o3","output":[],"usage":{"input_tokens":5,"output_tokens":50000,"total_tokens":50005}}"#.utf8)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: [("Content-Type", "application/json"), ("Content-Length", "\(done.count)"),
                                                            ("Connection", "close")])
            try connection.write(done)
        }
        let relay = try Self.relay(upstream, perDay: 1_000_000)
        for _ in 0..<2 {
            let (head, body) = try Self.exchange(relay, method: "GET", path: "/v1/responses/resp_1")
            #expect(head.status == 200)
            #expect(body == done)
        }
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        #expect(upstream.requests.count == 2)
        #expect(try Self.usedToday(relay) == 0)
    }
}

/// Gemini names its model in the path: that is the model the allowlist checks and the budget prices, and
/// `alt=sse` in the query is what makes a stream (which the budget guard watches, with no ceiling written in).
@Suite("Gemini's path model")
struct GeminiPathModelTests {
    /// A relay whose one route (`prefix`, on `provider`) allows only `model`, with a token budget.
    static func relay(_ upstream: ScriptedUpstream, provider: Provider = .gemini, prefix: String = "/v1beta/",
                      model: String = "gemini-2.5-flash") throws -> RelayFixture {
        try RelayFixture(upstream: upstream, fixedWallClock: BudgetTests.now, clock: ManualClock()) { config in
            config.upstreams["test"] = .init(name: "test", baseURL: upstream.baseURL, key: .init(RelayFixture.providerKey), provider: provider)
            config.clients.tokens = [.init(id: "app", sha256Hex: ClientAuthTests.sha256Hex(RelayFixture.clientToken))]
            config.routes = [.init(prefix: prefix, upstream: "test", auth: .token, bodyPolicy: BodyPolicy(models: [model]), provider: provider)]
            config.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000), defaultReserveTokens: 4096)
        }
    }

    struct Refused: Sendable, CustomTestStringConvertible {
        var path: String
        var body: String
        var testDescription: String { "\(path) \(body)" }
    }

    @Test("a path naming a model the route does not allow is refused, whatever the body names", arguments: [
        Refused(path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body: #"{"model":"gemini-2.5-flash","contents":[]}"#),
        Refused(path: "/v1beta/models/gemini-2.5-pro%3AgenerateContent", body: #"{"contents":[]}"#),
        Refused(path: "/v1beta/models/gemini-2.5-flash:generateContent", body: #"{"model":"gemini-2.5-pro","contents":[]}"#),
        Refused(path: "/v1beta/models/gemini-2.5-flash/models/gemini-2.5-pro:generateContent", body: #"{"contents":[]}"#),
        Refused(path: "/v1beta/tunedModels/mine:generateContent", body: #"{"contents":[]}"#),
    ])
    func theAllowlistReadsThePath(_ c: Refused) throws {
        let upstream = try ScriptedUpstream { connection in _ = try connection.readRequest() }
        let relay = try Self.relay(upstream)
        let client = try relay.client()
        try client.sendRequest(path: c.path, headers: UnreadOutputTests.auth, body: Array(c.body.utf8))
        let head = try client.readHead()
        let body = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == 403, "\(body)")
        #expect(ClientAuthTests.code(body) == "model_not_allowed", "\(body)")
        try relay.waitUntilIdle()
        #expect(upstream.requests.isEmpty)
    }

    /// A provider that answers one request with an empty event stream.
    static func emptyStream() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: ReplicaTests.sseHead)
            try connection.writeLastChunk()
        }
    }

    /// Sends one Gemini request through a relay to a provider that answers an empty event stream; what the
    /// provider received.
    static func forwarded(path: String, headers: [(String, String)] = []) throws -> RecordedRequest {
        let upstream = try emptyStream()
        let relay = try Self.relay(upstream)
        let client = try relay.client()
        try client.sendRequest(path: path, headers: UnreadOutputTests.auth + headers,
                               body: Array(#"{"contents":[{"parts":[{"text":"hi"}]}]}"#.utf8))
        let head = try client.readHead()
        _ = try client.readBody(head: head)
        #expect(head.status == 200)
        try upstream.waitForScriptsToFinish()
        try relay.waitUntilIdle()
        return try #require(upstream.requests.first)
    }

    /// Google's field mask, in the query (`fields`, `$fields`, percent-encoded) or in `X-Goog-FieldMask`, would have
    /// the provider leave `usageMetadata` out of the answer: none reaches the provider, nor does a key or token the
    /// client put in the query; the rest of the query goes as sent.
    @Test("no field mask, key or token in the query or a header reaches the provider")
    func noFieldMaskReachesTheProvider() throws {
        let query = "alt=sse&$fields=candidates&%24fields=candidates&fields=candidates&$key=AIzaClient&access_token=ya29.c&quotaUser=u"
        let sent = try Self.forwarded(path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?\(query)",
                                      headers: [("X-Goog-FieldMask", "candidates")])
        #expect(sent.target == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&quotaUser=u")
        #expect(!sent.headers.contains { $0.name.lowercased() == "x-goog-fieldmask" })
    }

    /// An allowed model goes through; a stream (`alt=sse`) gets no ceiling written (the guard watches it), a
    /// request without one gets the ceiling it reserved.
    @Test("an allowed path model goes through; only a non-streaming request gets the reserved ceiling", arguments: [
        ("?alt=sse", false), ("", true),
    ])
    func anAllowedModelGoesThrough(query: String, ceilingWritten: Bool) throws {
        let method = query.isEmpty ? "generateContent" : "streamGenerateContent"
        let request = try Self.forwarded(path: "/v1beta/models/gemini-2.5-flash:\(method)\(query)")
        let sent = String(decoding: request.body, as: UTF8.self)
        #expect(sent.contains("maxOutputTokens") == ceilingWritten, "\(sent)")
    }
}

/// Azure OpenAI runs the deployment its path names (`/openai/deployments/NAME/chat/completions`), whatever the
/// body's `model` says: that name is what the allowlist checks and the budget prices.
@Suite("Azure's path deployment")
struct AzureDeploymentTests {
    static func relay(_ upstream: ScriptedUpstream) throws -> RelayFixture {
        try GeminiPathModelTests.relay(upstream, provider: .azureOpenAI, prefix: "/openai/", model: "gpt-4o-mini")
    }

    @Test("a deployment the route does not allow is refused, whatever the body names; an allowed one goes through", arguments: [
        ("/openai/deployments/o1-prod/chat/completions?api-version=2024-10-21", #"{"model":"gpt-4o-mini","messages":[]}"#, 403),
        ("/openai/DEPLOYMENTS/o1-prod/chat/completions?api-version=2024-10-21", #"{"messages":[]}"#, 403),
        ("/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21", #"{"model":"o1","messages":[]}"#, 403),
        ("/openai/deployments/chat/completions", #"{"model":"gpt-4o-mini","messages":[]}"#, 403),
        ("/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21", #"{"messages":[]}"#, 200),
        ("/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21", #"{"model":"gpt-4o-mini","messages":[]}"#, 200),
        ("/openai/v1/chat/completions", #"{"model":"gpt-4o-mini","messages":[]}"#, 200),
        ("/openai/v1/chat/completions", #"{"model":"o1","messages":[]}"#, 403),
    ])
    func theAllowlistReadsTheDeployment(path: String, body: String, status: Int) throws {
        let upstream = try GeminiPathModelTests.emptyStream()
        let relay = try Self.relay(upstream)
        let client = try relay.client()
        try client.sendRequest(path: path, headers: UnreadOutputTests.auth, body: Array(body.utf8))
        let head = try client.readHead()
        let answer = String(decoding: try client.readBody(head: head), as: UTF8.self)
        #expect(head.status == status, "\(answer)")
        try relay.waitUntilIdle()
        if status == 403 {
            #expect(ClientAuthTests.code(answer) == "model_not_allowed", "\(answer)")
            #expect(upstream.requests.isEmpty)
        } else {
            try upstream.waitForScriptsToFinish()
        }
    }

    /// The deployment is the model the request is priced and logged by.
    @Test func theDeploymentIsTheRequestedModel() {
        #expect(Endpoint.azureDeployment("/openai/deployments/o1-prod/chat/completions?api-version=1") == .some("o1-prod"))
        #expect(Endpoint.azureDeployment("/x/OPENAI/DEPLOYMENTS/gpt-4o/completions") == .some("gpt-4o"))
        #expect(Endpoint.azureDeployment("/openai/deployments/o1-prod") == .some(nil), "no operation after the name")
        #expect(Endpoint.azureDeployment("/openai/v1/chat/completions") == nil)
        #expect(Endpoint.azureDeployment("/v1/deployments/x/chat/completions") == nil)
        let settings = RequestBodyPlan.Settings(endpoint: .openAIChat, policy: BodyPolicy(), injectsUsage: false,
                                                budgets: .init(routeMaxTokens: nil, defaultReserveTokens: 10))
        let plan = try? RequestBodyPlan.make(Array(#"{"model":"gpt-4o-mini","messages":[]}"#.utf8),
                                             path: "/openai/deployments/o1-prod/chat/completions", settings: settings).get()
        #expect(plan?.model == "o1-prod")
    }
}
