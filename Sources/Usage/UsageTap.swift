import JSON
import SSE

/// Reads token usage from a copy of a response body as it streams past: bytes in (split anywhere), counts out.
/// It never sees the client's bytes, so it can neither alter nor delay them. A plain value, owned by whoever owns the
/// exchange (one serial queue); no I/O.
///
/// `text/event-stream` bodies run through `SSEParser` and each event goes to the provider's reader; JSON bodies are
/// buffered up to `maxJSONBytes` and read once, when `usage(estimatedPrompt:)` is asked; any other body is ignored.
/// What is read, per provider (see README, "Usage and cost"):
/// - OpenAI / Azure OpenAI chat completions: the chunk whose `usage` is an object (the last one, sent when the
///   request has `stream_options.include_usage`); Responses API: `response.completed` (also `.incomplete`,
///   `.failed`) → `response.usage`.
/// - Anthropic Messages: `message_start` → `message.usage` (input and cache counts), `message_delta` → `usage`
///   (`output_tokens`, final).
/// - Gemini: the last `usageMetadata`; final once it comes with a `finishReason`.
///
/// Reading only what is needed: events are told apart by their `event` name or a one-pass key scan that skips
/// string values whole; a chunk's JSON is walked (never decoded into objects) only when it carries usage. Gemini
/// repeats `usageMetadata` in every chunk, so only the latest such event is kept (the parser's own string, no copy)
/// and walked when usage is asked.
///
/// Content events: OpenAI chat chunks with a non-empty `content`, `refusal`, `arguments`, `reasoning_content` or
/// `reasoning` string; Responses API events named `….delta`; Anthropic `content_block_delta`; Gemini chunks with a
/// non-empty `text` or a `functionCall`. Content bytes: the bytes of those delta strings themselves, as written
/// between their quotes (never the JSON or event framing around them, which is tens of times larger): the chat
/// fields above; a Responses `delta` (but base64 audio); Anthropic's `text`, `partial_json`, `thinking`; Gemini's
/// `text`. The output estimate (`estimatedOutputTokens`) is the larger of the events (one is at least a token) and
/// the bytes / 4 (a token is about four bytes of English; Gemini chunks carry dozens of tokens, Anthropic deltas
/// several) plus the audio: conservative, within a small factor of the provider's count.
///
/// Audio is output too: OpenAI chat chunks' `delta.audio` (its `transcript` counts as text, its base64 `data` as
/// audio) and the Responses API's `response.audio.delta` (base64). Audio bytes count one token per
/// `audioBase64BytesPerToken`: streamed audio is 16-bit PCM at 24 kHz, 64 000 base64 bytes a second, which OpenAI
/// bills at about 20 tokens a second (one per 50 ms); 1 000 bytes a token counts 64 a second, so the estimate stays
/// above the bill even for a faster rate.
///
/// `finishSeen`: an OpenAI chat chunk carried a `finish_reason`; its usage chunk (when asked for) comes next.
///
/// Memory is bounded: one event (`maxEventBytes`) or the JSON body (`maxJSONBytes`). An event past its bound is
/// dropped and the events after it are read (a usage event after a huge image event still counts); a JSON body
/// past its bound is not read at all (`gaveUp`), and neither is a body of any other format (`unreadFormat`). Any of
/// these and `missedOutput` says the answer held output the tap did not see: without the provider's counts the
/// result is an estimate that cannot be trusted low, and the relay charges such an answer everything it reserved.
public struct UsageTap: Sendable {
    public static let defaultMaxJSONBytes = 1 << 20
    public static let defaultMaxEventBytes = 1 << 20

    /// How the body is read, from its content type.
    public enum Format: Sendable, Equatable {
        case eventStream
        case json
        case ignored

        /// Decided on the media type's bytes (before any `;`, spaces trimmed, ASCII case folded): once per
        /// response (and per request body the relay reads), on the hot path, so no String is built and the bytes
        /// are read in place (the generic walks over `Substring.UTF8View` cost about 1 000 instructions a call).
        public init(contentType: String?) {
            guard var type = contentType else {
                self = .ignored
                return
            }
            self = type.withUTF8 { Self.classify($0) }
        }

        private static func classify(_ b: UnsafeBufferPointer<UInt8>) -> Format {
            var end = 0
            while end < b.count && b[end] != UInt8(ascii: ";") { end += 1 }
            var start = 0
            while start < end && (b[start] == 0x20 || b[start] == 0x09) { start += 1 }
            while end > start && (b[end - 1] == 0x20 || b[end - 1] == 0x09) { end -= 1 }
            if matches(b, start, end, eventStreamType) { return .eventStream }
            if matches(b, start, end, jsonType) || (end - start > 5 && matches(b, end - 5, end, plusJSON)) { return .json }
            return .ignored
        }

        private static let eventStreamType = Array("text/event-stream".utf8)
        private static let jsonType = Array("application/json".utf8)
        private static let plusJSON = Array("+json".utf8)

        /// `b[from..<end]` is `lowercase` with ASCII letters in either case.
        @inline(__always)
        private static func matches(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ end: Int, _ lowercase: [UInt8]) -> Bool {
            guard end - from == lowercase.count else { return false }
            return lowercase.withUnsafeBufferPointer { l in
                for i in 0..<l.count {
                    let a = b[from + i], w = l[i]
                    if a != w && (a | 0x20 != w || w < 0x61 || w > 0x7A) { return false }
                }
                return true
            }
        }
    }

    public let provider: Provider
    public let format: Format
    public let maxJSONBytes: Int
    /// Content events seen so far (see the type's documentation).
    public var contentEvents: Int { reader.contentEvents }
    /// Bytes of content text seen so far (see the type's documentation).
    public var contentBytes: Int { reader.contentBytes }
    /// Base64 bytes of audio seen so far (see the type's documentation).
    public var audioBytes: Int { reader.audioBytes }
    /// An OpenAI chat chunk named its `finish_reason`: the answer is whole, the usage chunk may follow.
    public var finishSeen: Bool { reader.finishSeen }
    /// Audio is counted one token per this many base64 bytes (see the type's documentation).
    public static let audioBase64BytesPerToken = 1_000
    /// The output so far, in tokens, as the relay estimates it: what a budget guard watches, and the completion of
    /// an estimate.
    public var estimatedOutputTokens: Int { max(contentEvents, contentBytes / 4 + audioBytes / Self.audioBase64BytesPerToken) }
    /// A JSON body passed its bound; the tap stopped reading. (An event stream drops only the oversized event.)
    public private(set) var gaveUp = false
    /// The body is in a format the tap does not read (`Format.ignored`: protobuf, JSONP, media) and is not empty.
    public private(set) var unreadFormat = false
    /// Output went by unread: a JSON body past its bound, events past theirs, or a body in a format the tap does not
    /// read at all (a client can ask Google for protobuf, `$alt=proto` or an `Accept` field; see the type's
    /// documentation).
    public var missedOutput: Bool { gaveUp || unreadFormat || parser.skippedEvents > 0 }
    /// The model the provider says answered (`ReportedModel`), when it said; what prices follow.
    public var reportedModel: String? {
        if let streamModel { return streamModel }
        switch format {
        case .json where !body.isEmpty:
            return body.withUnsafeBufferPointer { ReportedModel.body(JSONPeek($0), provider: provider) }
        case .eventStream:
            guard var data = latestGeminiUsage else { return nil }
            return data.withUTF8 { ReportedModel.body(JSONPeek($0), provider: .gemini) }
        default:
            return nil
        }
    }
    private var streamModel: String? { reader.streamModel }
    private var counts: ProviderCounts { reader.counts }
    private var latestGeminiUsage: String? { reader.latestGeminiUsage }
    private var latestGeminiFinal: Bool { reader.latestGeminiFinal }

    private var parser: SSEParser
    private var reader: Reader
    private var body: [UInt8] = []

    public init(provider: Provider, contentType: String?, maxJSONBytes: Int = UsageTap.defaultMaxJSONBytes,
                maxEventBytes: Int = UsageTap.defaultMaxEventBytes) {
        self.provider = provider
        self.format = Format(contentType: contentType)
        self.maxJSONBytes = maxJSONBytes
        self.parser = SSEParser(maxEventBytes: maxEventBytes, skipsOversizedEvents: true)
        self.reader = Reader(provider: provider)
    }

    /// Feeds the next bytes of the response body, exactly as received.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        feed(bytes, scan: nil)
    }

    /// Feeds the next delivery with its line ends already found (`SSEBoundaryScanner`, once per delivery, shared
    /// with the usage-event filter and the budget cut). A stream is fed with scans or without, never both.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, scan: SSEBoundaryScanner.Scan?) {
        guard !gaveUp, !bytes.isEmpty else { return }
        switch format {
        case .ignored:
            unreadFormat = true
        case .json:
            guard body.count + bytes.count <= maxJSONBytes else {
                gaveUp = true
                body = []
                return
            }
            body.append(contentsOf: bytes)
        case .eventStream:
            // The parser and the reader are apart in `self`: the parser calls back into the reader in place.
            do {
                if let scan {
                    try parser.parse(bytes, scan: scan, onRawEvent: { event in reader.read(event) })
                } else {
                    try parser.parse(bytes, onRawEvent: { event in reader.read(event) })
                }
            } catch {
                gaveUp = true
            }
        }
    }

    /// Deliveries the tap's parser scanned for line ends itself (fed without scans).
    public var ownScans: Int { parser.ownScans }

    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The usage so far. `estimatedPrompt` (from `PromptEstimate`) stands in for the prompt count when the
    /// provider gave none. Complete provider counts are `.provider`; anything less is `.estimate`, with each
    /// missing count estimated (prompt: `estimatedPrompt`; completion: the larger of the provider's partial count
    /// and `estimatedOutputTokens`); with nothing at all to go on, `.none`.
    public func usage(estimatedPrompt: Int? = nil) -> Usage {
        var c = counts
        switch format {
        case .json where !body.isEmpty:
            body.withUnsafeBufferPointer { UsageReaders.body(JSONPeek($0), provider: provider, into: &c) }
        case .eventStream:
            if var data = latestGeminiUsage {
                data.withUTF8 { buffer in
                    let p = JSONPeek(buffer)
                    if let u = p.member("usageMetadata", inObjectAt: p.root) {
                        UsageReaders.gemini(p, usageAt: u, into: &c, final: latestGeminiFinal)
                    }
                }
            }
        default:
            break
        }
        return usage(from: c, estimatedPrompt: estimatedPrompt)
    }

    /// `usage()` and `reportedModel` together. An OpenAI or Anthropic JSON answer's top-level object is walked
    /// once for both its `usage` and its `model`, not once for each (about 4 000 instructions a request); the
    /// readers of each are the same.
    public func usageAndReportedModel() -> (usage: Usage, model: String?) {
        guard case .json = format, !body.isEmpty, streamModel == nil, provider != .gemini else {
            return (usage(), reportedModel)
        }
        var c = counts
        let model = body.withUnsafeBufferPointer { buffer -> String? in
            let p = JSONPeek(buffer)
            var usageAt: Int?, modelAt: Int?
            p.forEachMember(inObjectAt: p.root) { name, value in
                if JSONPeek.keyMatches("usage", name) { usageAt = value } else if JSONPeek.keyMatches("model", name) { modelAt = value }
            }
            if let u = usageAt {
                if provider == .anthropic {
                    UsageReaders.anthropic(p, usageAt: u, into: &c, final: true)
                } else {
                    UsageReaders.openAI(p, usageAt: u, into: &c)
                }
            }
            return modelAt.flatMap { p.shortString(at: $0) }
        }
        return (usage(from: c, estimatedPrompt: nil), model)
    }

    /// The usage `c` says: the provider's when its counts are complete, else an estimate (nothing at all when
    /// nothing was counted and nothing can be estimated).
    private func usage(from c: ProviderCounts, estimatedPrompt: Int?) -> Usage {
        if c.final, let prompt = c.prompt, let completion = c.completion {
            return Usage(prompt: prompt, completion: completion, cached: c.cached, reasoning: c.reasoning,
                         cacheCreation: c.cacheCreation, cacheCreationOneHour: c.cacheCreationOneHour, audioPrompt: c.audioPrompt,
                         audioCompletion: c.audioCompletion, imageCompletion: c.imageCompletion, source: .provider)
        }
        guard !c.isEmpty || contentEvents > 0 || estimatedPrompt != nil else { return .none }
        return Usage(prompt: c.prompt ?? estimatedPrompt ?? 0, completion: max(c.completion ?? 0, estimatedOutputTokens),
                     cached: c.cached, reasoning: c.reasoning, cacheCreation: c.cacheCreation,
                     cacheCreationOneHour: c.cacheCreationOneHour, audioPrompt: c.audioPrompt, audioCompletion: c.audioCompletion,
                     imageCompletion: c.imageCompletion, source: .estimate)
    }

    // MARK: Events

    /// OpenAI chat keys read per chunk: the delta's text fields (measured), `usage`, the audio transcript
    /// (measured), the audio object and the finish reason.
    private static let openAIChunkKeys = JSONPeek.KeySet(["content", "refusal", "arguments", "reasoning_content", "reasoning", "usage",
                                                          "transcript", "audio", "finish_reason"])
    private static let openAIUsageBit: UInt64 = 1 << 5
    private static let openAIAudioBit: UInt64 = 1 << 7
    private static let openAIFinishBit: UInt64 = 1 << 8
    private static let openAITextBits: UInt64 = 0b101_1111
    /// The base64 audio of a chat chunk's `delta.audio`.
    private static let openAIAudioDataKeys = JSONPeek.KeySet(["data"])
    /// The Responses API's delta text.
    private static let responsesDeltaKeys = JSONPeek.KeySet(["delta"])
    /// Anthropic's `content_block_delta` text: `text_delta`, `input_json_delta`, `thinking_delta`.
    private static let anthropicDeltaKeys = JSONPeek.KeySet(["text", "partial_json", "thinking"])
    /// Gemini keys read per chunk: content (`text`, `functionCall`), usage, and the end of the answer.
    private static let geminiKeys = JSONPeek.KeySet(["text", "functionCall", "usageMetadata", "finishReason"])

    /// What the events said so far: the state the parser's callback writes, apart from the parser itself, so that the
    /// parser runs in place (moving it out of the tap and back for every delivery cost six `memcpy` calls an event).
    struct Reader: Sendable {
        let provider: Provider
        var contentEvents = 0
        var contentBytes = 0
        var audioBytes = 0
        var finishSeen = false
        var streamModel: String?
        var chatChunksLookedAt = 0
        var counts = ProviderCounts()
        /// Gemini: the latest event that carries `usageMetadata`, and whether it had a `finishReason`.
        var latestGeminiUsage: String?
        var latestGeminiFinal = false

        init(provider: Provider) { self.provider = provider }

        /// One event, read on its bytes: no String is made for an event's data (a stream's every event passes here).
        mutating func read(_ event: SSEParser.RawEvent) {
            let data = event.data.bindMemory(to: UInt8.self)
            // An explicit `event: message` is the default type: the data's leading `type` member names the event then.
            let named = event.type.flatMap { $0 == "message" ? nil : $0 }
            switch provider {
            case .openai, .azureOpenAI:
                let type: String? = named ?? UsageTap.leadingType(JSONPeek(data))
                if let type, type.hasPrefix("response.") {
                    readResponsesEvent(type: type, data: data)
                } else {
                    readChatChunk(data)
                }
            case .anthropic:
                let type: String? = named ?? UsageTap.leadingType(JSONPeek(data))
                switch type {
                case "content_block_delta":
                    contentEvents += 1
                    contentBytes += JSONPeek(data).scanKeys(UsageTap.anthropicDeltaKeys, measuring: 0b111).measured
                case "message_start":
                    let p = JSONPeek(data)
                    if streamModel == nil { streamModel = p.path("message", "model", from: p.root).flatMap { p.shortString(at: $0) } }
                    if let u = p.path("message", "usage", from: p.root) {
                        UsageReaders.anthropic(p, usageAt: u, into: &counts, final: false)
                    }
                case "message_delta":
                    let p = JSONPeek(data)
                    if let u = p.member("usage", inObjectAt: p.root) {
                        UsageReaders.anthropic(p, usageAt: u, into: &counts, final: true)
                    }
                default:
                    break
                }
            case .gemini:
                let keys = JSONPeek(data).scanKeys(UsageTap.geminiKeys, measuring: 0b1)
                if keys.nonEmptyString & 0b1 != 0 || keys.present & 0b10 != 0 { contentEvents += 1 }
                contentBytes += keys.measured
                if keys.present & 0b100 != 0 {
                    latestGeminiUsage = String(decoding: data, as: UTF8.self)
                    latestGeminiFinal = keys.present & 0b1000 != 0
                }
            }
        }

        private static let done: StaticString = "[DONE]"

        private mutating func readChatChunk(_ data: UnsafeBufferPointer<UInt8>) {
            if data.count == Self.done.utf8CodeUnitCount,
               data.elementsEqual(UnsafeBufferPointer(start: Self.done.utf8Start, count: Self.done.utf8CodeUnitCount)) {
                return
            }
            let p = JSONPeek(data)
            let keys = p.scanKeys(UsageTap.openAIChunkKeys, measuring: UsageTap.openAITextBits)
            let audio = keys.object & UsageTap.openAIAudioBit != 0
            if keys.nonEmptyString & UsageTap.openAITextBits != 0 || audio { contentEvents += 1 }
            contentBytes += keys.measured
            if audio { audioBytes += p.scanKeys(UsageTap.openAIAudioDataKeys, measuring: 0b1).measured }
            if keys.nonEmptyString & UsageTap.openAIFinishBit != 0 { finishSeen = true }
            if streamModel == nil, chatChunksLookedAt < ReportedModel.maxChatChunks {
                chatChunksLookedAt += 1
                streamModel = p.member("model", inObjectAt: p.root).flatMap { p.shortString(at: $0) }
            }
            // `usage` is null on every chunk but the last when include_usage is on: walk the chunk only for an object.
            if keys.object & UsageTap.openAIUsageBit != 0, let u = p.member("usage", inObjectAt: p.root), p.isObject(at: u) {
                UsageReaders.openAI(p, usageAt: u, into: &counts)
            }
        }

        private mutating func readResponsesEvent(type: String, data: UnsafeBufferPointer<UInt8>) {
            if type.hasSuffix(".delta") {
                contentEvents += 1
                // `response.audio.delta` carries base64 audio, not text.
                let measured = JSONPeek(data).scanKeys(UsageTap.responsesDeltaKeys, measuring: 0b1).measured
                if type.hasSuffix("audio.delta") { audioBytes += measured } else { contentBytes += measured }
                return
            }
            guard type == "response.completed" || type == "response.incomplete" || type == "response.failed" else { return }
            let p = JSONPeek(data)
            if streamModel == nil { streamModel = p.path("response", "model", from: p.root).flatMap { p.shortString(at: $0) } }
            if let u = p.path("response", "usage", from: p.root), p.isObject(at: u) {
                UsageReaders.openAI(p, usageAt: u, into: &counts)
            }
        }
    }

    /// The `type` member when it is the object's first (OpenAI and Anthropic write it first): the event's name for
    /// streams that send no `event:` line, found without walking the object.
    static func leadingType(_ p: JSONPeek) -> String? {
        let open = p.root
        guard p.byte(at: open) == UInt8(ascii: "{") else { return nil }
        let key = p.skipWhitespace(open + 1)
        guard let keyEnd = p.endOfString(at: key), keyEnd - key == 6,
              "type".utf8.elementsEqual(UnsafeBufferPointer(rebasing: p.bytes[(key + 1)..<(keyEnd - 1)]))
        else { return nil }
        let colon = p.skipWhitespace(keyEnd)
        guard p.byte(at: colon) == UInt8(ascii: ":") else { return nil }
        let value = p.skipWhitespace(colon + 1)
        guard let valueEnd = p.endOfString(at: value) else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: p.bytes[(value + 1)..<(valueEnd - 1)]), as: UTF8.self)
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
