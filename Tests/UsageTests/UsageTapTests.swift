import Testing
@testable import Usage

/// The tap against golden bodies in every provider's shape: fed whole, one byte at a time, and split at every
/// position, it must read the same counts.
@Suite("UsageTap")
struct UsageTapTests {
    static func provider(_ name: ProviderName) -> Provider {
        switch name {
        case .openai: .openai
        case .anthropic: .anthropic
        case .gemini: .gemini
        case .azure: .azureOpenAI
        }
    }

    static func read(_ golden: Golden, chunks: [ArraySlice<UInt8>], estimatedPrompt: Int? = nil) -> ExpectedUsage {
        var tap = UsageTap(provider: provider(golden.provider), contentType: golden.contentType)
        for chunk in chunks { chunk.withUnsafeBytes { tap.feed($0) } }
        let u = tap.usage(estimatedPrompt: estimatedPrompt)
        return ExpectedUsage(prompt: u.prompt, completion: u.completion, cached: u.cached, reasoning: u.reasoning,
                             cacheCreation: u.cacheCreation, source: u.source.rawValue, contentEvents: tap.contentEvents)
    }

    @Test(arguments: GoldenStreams.all)
    func whole(_ golden: Golden) {
        #expect(Self.read(golden, chunks: [golden.body[...]]) == golden.expected)
    }

    @Test(arguments: GoldenStreams.all)
    func oneByteAtATime(_ golden: Golden) {
        let chunks = golden.body.indices.map { golden.body[$0..<($0 + 1)] }
        #expect(Self.read(golden, chunks: chunks) == golden.expected)
    }

    @Test(arguments: GoldenStreams.all)
    func everySplit(_ golden: Golden) {
        for split in 0...golden.body.count {
            let got = Self.read(golden, chunks: [golden.body[..<split], golden.body[split...]])
            #expect(got == golden.expected, "split at \(split)")
            if got != golden.expected { return }
        }
    }

    @Test func estimatedPromptFillsOnlyAMissingPromptCount() {
        let noUsage = GoldenStreams.all.first { $0.name.hasPrefix("OpenAI chat, no usage") }!
        let withUsage = GoldenStreams.all.first { $0.name == "OpenAI chat, include_usage (LF)" }!
        #expect(Self.read(noUsage, chunks: [noUsage.body[...]], estimatedPrompt: 40).prompt == 40)
        #expect(Self.read(noUsage, chunks: [noUsage.body[...]], estimatedPrompt: 40).source == "estimate")
        #expect(Self.read(withUsage, chunks: [withUsage.body[...]], estimatedPrompt: 40).prompt == 19)
        #expect(Self.read(withUsage, chunks: [withUsage.body[...]], estimatedPrompt: 40).source == "provider")
    }

    @Test func nothingReadButAPromptEstimateIsAnEstimate() {
        let tap = UsageTap(provider: .openai, contentType: "text/event-stream")
        #expect(tap.usage(estimatedPrompt: nil) == .none)
        #expect(tap.usage(estimatedPrompt: 12) == Usage(prompt: 12, completion: 0, source: .estimate))
    }

    /// An event past the bound is dropped, and the events after it are read: the provider's counts at the end
    /// still count, and the tap says it missed output.
    @Test func eventLargerThanTheBoundIsSkippedAndTheRestRead() {
        var tap = UsageTap(provider: .anthropic, contentType: "text/event-stream", maxEventBytes: 4096)
        tap.feed(GoldenStreams.sse(Array(GoldenStreams.anthropicEvents.prefix(4))))
        #expect(!tap.missedOutput)
        tap.feed(Array("data: ".utf8) + [UInt8](repeating: 0x61, count: 5000))
        #expect(tap.missedOutput)
        #expect(!tap.gaveUp)
        tap.feed(Array("aaaa\n\n".utf8))   // the dropped event's end
        tap.feed(GoldenStreams.sse(Array(GoldenStreams.anthropicEvents.suffix(5))))
        let u = tap.usage()
        #expect(u.source == .provider)
        #expect(u.prompt == 2125)
        #expect(tap.contentEvents == 3)   // every content event of the golden stream
    }

    /// An OpenAI-shaped usage whose `total_tokens` is above prompt and completion (a compatible server that left
    /// billed thinking out of `completion_tokens`): the rest counts as output, never free. A total that only adds
    /// up, or none, changes nothing.
    @Test(arguments: [
        (#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":515}"#, 505),
        (#"{"input_tokens":10,"output_tokens":5,"total_tokens":515}"#, 505),
        (#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}"#, 5),
        (#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":3}"#, 5),
        (#"{"prompt_tokens":10,"completion_tokens":5}"#, 5),
    ])
    func anOpenAITotalAboveThePartsCountsAsOutput(usage: String, completion: Int) {
        var stream = UsageTap(provider: .openai, contentType: "text/event-stream")
        stream.feed(Array(("data: {\"choices\":[],\"usage\":\(usage)}\n\n").utf8))
        #expect(stream.usage().completion == completion)
        #expect(stream.usage().prompt == 10)
        var body = UsageTap(provider: .openai, contentType: "application/json")
        body.feed(Array(#"{"model":"m","usage":\#(usage)}"#.utf8))
        #expect(body.usageAndReportedModel().usage.completion == completion)
    }

    /// A 2xx body in a format the tap does not read (protobuf, which a client can ask Google for; JSONP; no type at
    /// all) is output the tap did not see, so its estimate is never trusted low; an empty one holds no output.
    @Test(arguments: ["application/x-protobuf", "text/javascript", "application/octet-stream", nil] as [String?])
    func aBodyInAFormatTheTapDoesNotReadIsMissedOutput(_ contentType: String?) {
        var tap = UsageTap(provider: .gemini, contentType: contentType)
        #expect(tap.format == .ignored)
        tap.feed([])
        #expect(!tap.missedOutput)
        tap.feed(Array("\u{0A}\u{12}candidates".utf8))
        #expect(tap.missedOutput)
        #expect(tap.usage(estimatedPrompt: 20).source == .estimate)
    }

    /// The one event that carries the counts is the one too large (a Responses `response.completed` holding a
    /// generated image): the result is an estimate, and the tap says it missed output.
    @Test func theCountsInsideAnOversizedEventAreMissedAndSaidSo() {
        var tap = UsageTap(provider: .openai, contentType: "text/event-stream", maxEventBytes: 1024)
        let image = String(repeating: "A", count: 4000)
        tap.feed(Array(("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Here\"}\n\n"
            + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":\"\(image)\","
            + "\"usage\":{\"input_tokens\":20,\"output_tokens\":5000,\"total_tokens\":5020}}}\n\n").utf8))
        #expect(tap.missedOutput)
        #expect(tap.usage(estimatedPrompt: 20).source == .estimate)
    }

    /// Gemini bills what its tools fetched (URL context, search, code execution) as input; a total above the
    /// parts it names counts the rest as output, so a count it adds later is never free.
    @Test(arguments: [
        (#""promptTokenCount":10,"candidatesTokenCount":5,"toolUsePromptTokenCount":200,"totalTokenCount":215"#, 210, 5),
        (#""promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":20,"totalTokenCount":335"#, 10, 325),
        (#""promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15"#, 10, 5),
        (#""promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":5,"candidatesTokenCount":1"#, Int.max, 1),
    ])
    func geminiCountsToolInputAndTheTotal(_ metadata: String, prompt: Int, completion: Int) {
        var tap = UsageTap(provider: .gemini, contentType: "application/json")
        tap.feed(Array(#"{"candidates":[{"content":{"parts":[{"text":"ok"}]},"finishReason":"STOP"}],"usageMetadata":{\#(metadata)}}"#.utf8))
        let u = tap.usage()
        #expect(u.source == .provider)
        #expect(u.prompt == prompt)
        #expect(u.completion == completion)
    }

    @Test func jsonBodyLargerThanTheBoundIsNotRead() {
        var tap = UsageTap(provider: .openai, contentType: "application/json", maxJSONBytes: 64)
        tap.feed(Array(GoldenStreams.chatBody.utf8))
        #expect(tap.gaveUp)
        #expect(tap.usage() == .none)
    }

    @Test func usageNullOnEveryChunkIsNotUsage() {
        var tap = UsageTap(provider: .openai, contentType: "text/event-stream")
        tap.feed(GoldenStreams.sse([GoldenStreams.chatDelta("a"), GoldenStreams.chatFinish]))
        #expect(tap.usage().source == .estimate)
        #expect(tap.usage().completion == 1)
    }

    @Test func responsesEventsWithoutEventLinesAreReadFromTheirType() {
        // Some OpenAI-compatible servers send the Responses stream without `event:` lines.
        let events = GoldenStreams.responsesEvents.map { String($0.split(separator: "\n", maxSplits: 1)[1]) }
        var tap = UsageTap(provider: .openai, contentType: "text/event-stream")
        tap.feed(GoldenStreams.sse(events))
        #expect(tap.usage() == Usage(prompt: 36, completion: 87, cached: 8, reasoning: 21, source: .provider))
        #expect(tap.contentEvents == 2)
    }

    @Test func anthropicMessageDeltaWithCumulativeInputCountsUpdatesThePrompt() {
        var events = GoldenStreams.anthropicEvents
        events[7] = "event: message_delta\n" + #"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":30,"cache_read_input_tokens":2000,"output_tokens":16}}"#
        var tap = UsageTap(provider: .anthropic, contentType: "text/event-stream")
        tap.feed(GoldenStreams.sse(events))
        #expect(tap.usage() == Usage(prompt: 2130, completion: 16, cached: 2000, cacheCreation: 100, source: .provider))
    }

    /// The content bytes are the delta text itself, per provider, never the framing around it; fed one byte at a
    /// time they are the same.
    @Test(arguments: [
        (Provider.openai, [GoldenStreams.chatFirst, GoldenStreams.chatDelta("Hello"), GoldenStreams.chatDelta(" world"), GoldenStreams.chatFinish, GoldenStreams.done], 11),
        (.openai, [#"data: {"choices":[{"delta":{"reasoning_content":"Think","tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}"#], 5 + 9),
        (.openai, ["event: response.output_text.delta\n" + #"data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi there"}"#,
                   "event: response.audio.delta\n" + #"data: {"type":"response.audio.delta","delta":"UklGRiQAAABXQVZFZm10IBAAAAABAAEA"}"#], 8),
        (.anthropic, ["event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello!"}}"#,
                      "event: content_block_delta\n" + #"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}"#,
                      "event: ping\n" + #"data: {"type":"ping","text":"not content"}"#], 6 + 11),
        (.gemini, [#"data: {"candidates":[{"content":{"parts":[{"text":"The quick brown fox"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4}}"#], 19),
    ])
    func contentBytesAreTheDeltaTextOnly(_ provider: Provider, _ events: [String], _ bytes: Int) {
        var whole = UsageTap(provider: provider, contentType: "text/event-stream")
        whole.feed(GoldenStreams.sse(events))
        #expect(whole.contentBytes == bytes)
        var dripped = UsageTap(provider: provider, contentType: "text/event-stream")
        for byte in GoldenStreams.sse(events) { dripped.feed([byte]) }
        #expect(dripped.contentBytes == bytes)
        #expect(whole.estimatedOutputTokens == max(whole.contentEvents, bytes / 4))
    }

    /// Audio is output (issue 18 §4): a chat chunk's `delta.audio` counts its transcript as text and its base64
    /// `data` at `audioBase64BytesPerToken`; so does the Responses API's `response.audio.delta`.
    @Test func audioDeltasCountAsOutput() {
        let audio = String(repeating: "UklGRiQA", count: 1_000)   // 8 000 base64 bytes
        var chat = UsageTap(provider: .openai, contentType: "text/event-stream")
        chat.feed(GoldenStreams.sse([
            #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"audio":{"id":"audio_1","data":"\#(audio)","transcript":"Hello there"}},"finish_reason":null}]}"#,
            #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"audio":{"data":"\#(audio)"}},"finish_reason":null}]}"#,
        ]))
        #expect(chat.contentEvents == 2)
        #expect(chat.contentBytes == 11)
        #expect(chat.audioBytes == 16_000)
        #expect(chat.estimatedOutputTokens == 11 / 4 + 16)
        #expect(chat.usage(estimatedPrompt: 3) == Usage(prompt: 3, completion: 18, source: .estimate))

        var responses = UsageTap(provider: .openai, contentType: "text/event-stream")
        responses.feed(GoldenStreams.sse([
            "event: response.audio.delta\n" + #"data: {"type":"response.audio.delta","response_id":"r1","item_id":"i1","output_index":0,"content_index":0,"delta":"\#(audio)"}"#,
            "event: response.audio.transcript.delta\n" + #"data: {"type":"response.audio.transcript.delta","delta":"Hello there"}"#,
        ]))
        #expect(responses.audioBytes == 8_000)
        #expect(responses.contentBytes == 11)
        #expect(responses.estimatedOutputTokens == 11 / 4 + 8)
    }

    @Test func theFinishChunkIsSeen() {
        var tap = UsageTap(provider: .openai, contentType: "text/event-stream")
        tap.feed(GoldenStreams.sse([GoldenStreams.chatFirst, GoldenStreams.chatDelta("Hi")]))
        #expect(!tap.finishSeen, "finish_reason null is no finish")
        tap.feed(GoldenStreams.sse([GoldenStreams.chatFinish]))
        #expect(tap.finishSeen)
        #expect(tap.contentEvents == 1, "the finish chunk is not content")
    }

    @Test func geminiFunctionCallCountsAsContent() {
        var tap = UsageTap(provider: .gemini, contentType: "text/event-stream")
        tap.feed(GoldenStreams.sse([#"data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}"#]))
        #expect(tap.contentEvents == 1)
    }

    @Test(arguments: [
        ("text/event-stream", UsageTap.Format.eventStream), ("Text/Event-Stream ; charset=utf-8", .eventStream),
        ("application/json", .json), ("application/problem+json", .json), ("text/plain", .ignored),
        ("", .ignored), ("text/event-streamx", .ignored), (" APPLICATION/JSON;charset=utf-8", .json),
        ("+json", .ignored), ("text\u{2F}event-stream", .eventStream), ("text-event-stream", .ignored),
        ("application/jsoN\t", .json), ("tExt/event_stream", .ignored), ("application/json5", .ignored),
    ])
    func contentTypes(_ c: (String, UsageTap.Format)) {
        #expect(UsageTap.Format(contentType: c.0) == c.1)
    }
}
