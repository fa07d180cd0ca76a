import Foundation
import HTTP1
import HTTPServer
import Support
import Transport
import Usage

/// A built-in provider for local work (`sse-relay --dev`): it streams a deterministic answer token by token at a set
/// pace, answers non-streaming requests, and checks that the relay injected its key. It speaks OpenAI's chat
/// completions (`/v1/chat/completions`, with the usage chunk when `stream_options.include_usage` asks for it) and
/// Anthropic's Messages (`/v1/messages`: `message_start` with input usage, `content_block_delta` events,
/// `message_delta` with `output_tokens`), so dev mode shows both usage shapes. Prompt tokens are
/// `PromptEstimate`'s count of the request; completion tokens the number of streamed tokens.
/// It runs on its own event loop and listener on 127.0.0.1, and the relay reaches it through libcurl like any
/// real provider, so dev mode exercises the whole path.
package final class FakeProvider: @unchecked Sendable {
    // Invariant: `listener` is set once in `start()`; connections live on the provider's own loop.
    package static let devKey = "dev-key-not-secret"
    package static let answer = "Hello! This answer comes from SSE Relay's built-in fake provider, streamed token by token through the relay."

    package let paceSeconds: Double
    private let group = EventLoopGroup(count: 1)
    private var listener: Listener?
    private let logger: Logger
    private let connections = LoopBox<[ObjectIdentifier: ServerConnection]>([:])

    package init(paceSeconds: Double, logger: Logger) {
        self.paceSeconds = paceSeconds
        self.logger = logger
    }

    package var baseURL: String { "http://127.0.0.1:\(port)" }
    package var port: Int { listener?.port ?? 0 }

    package func start() throws {
        let connections = self.connections
        let settings = ServerSettings(timeouts: ConnectionDeadlines.Settings(headerReadSeconds: 10, bodyReadSeconds: 30,
                                                                             keepAliveIdleSeconds: 75, clientWriteStallSeconds: 60))
        let listener = try serve(host: "127.0.0.1", port: 0, group: group, settings: settings,
                                 handler: FakeProviderHandler(paceSeconds: paceSeconds), logger: logger,
                                 onOpen: { connections.value[ObjectIdentifier($0)] = $0 },
                                 onClose: { connections.value[ObjectIdentifier($0)] = nil })
        self.listener = listener
        listener.start()
    }

    package func shutdown() {
        listener?.stop()
        group.loops[0].queue.sync {
            for server in Array(connections.value.values) { server.connection.close() }
        }
    }
}

/// A mutable value owned by one loop queue.
final class LoopBox<Value>: @unchecked Sendable {
    // Invariant: read and written on one loop's queue only.
    var value: Value
    init(_ value: Value) { self.value = value }
}

struct FakeProviderHandler: RequestHandler {
    let paceSeconds: Double

    func handle(_ head: RequestHead, writer: any ResponseWriter) -> (any RequestResponder)? {
        let anthropic = head.path == "/v1/messages"
        let authorized = anthropic
            ? head.headers.first("x-api-key") == FakeProvider.devKey && head.headers.contains("anthropic-version")
            : head.headers.first("Authorization") == "Bearer \(FakeProvider.devKey)"
        guard authorized else {
            writer.respond(error: ErrorResponse(status: 401, type: "invalid_request_error", code: "invalid_api_key",
                                             message: "The fake provider did not receive the relay's key."), requestID: nil,
                           keepAlive: head.keepAlive)
            return nil
        }
        switch (head.method, head.path) {
        case ("POST", "/v1/chat/completions"):
            return FakeCompletion(head: head, writer: writer, paceSeconds: paceSeconds, style: .openAI)
        case ("POST", "/v1/messages"):
            return FakeCompletion(head: head, writer: writer, paceSeconds: paceSeconds, style: .anthropic)
        case ("GET", "/v1/models"):
            let body = Array(#"{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","owned_by":"sse-relay-dev"}]}"#.utf8)
            FakeCompletion.sendJSON(body, status: 200, writer: writer, keepAlive: head.keepAlive)
            return FinishedResponder()
        default:
            writer.respond(error: ErrorResponse(status: 404, type: "invalid_request_error", code: "unknown_url",
                                             message: "The fake provider knows /v1/chat/completions, /v1/messages and /v1/models."), requestID: nil,
                           keepAlive: head.keepAlive)
            return nil
        }
    }
}

final class FinishedResponder: RequestResponder {
    func requestBody(_ bytes: [UInt8]) {}
    func requestEnd() {}
    func clientClosed() {}
    func clientDrained() {}
}

/// One fake chat completion or message: reads the JSON body, then answers (streaming or not) in the style of the
/// API it was asked on. Owned by the provider's loop.
final class FakeCompletion: RequestResponder, @unchecked Sendable {
    // Invariant: touched on the writer's loop queue only.
    enum Style {
        case openAI, anthropic
    }

    private let head: RequestHead
    private let writer: any ResponseWriter
    private let paceSeconds: Double
    private let style: Style
    private var body: [UInt8] = []
    private var tokens: [String] = []
    private var next = 0
    private var timer: LoopTimer?
    private var model: String
    private var promptTokens = 0
    private var includeUsage = false
    private let created = Int(Date().timeIntervalSince1970)
    private let id: String

    init(head: RequestHead, writer: any ResponseWriter, paceSeconds: Double, style: Style) {
        self.head = head
        self.writer = writer
        self.paceSeconds = paceSeconds
        self.style = style
        let n = UInt32.random(in: 0...UInt32.max)
        switch style {
        case .openAI:
            model = "gpt-4o-mini"
            id = "chatcmpl-dev\(n)"
        case .anthropic:
            model = "claude-sonnet-4-5"
            id = "msg_dev\(n)"
        }
    }

    func requestBody(_ bytes: [UInt8]) { body.append(contentsOf: bytes) }

    func requestEnd() {
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        guard let json else {
            writer.respond(error: ErrorResponse(status: 400, type: "invalid_request_error", code: "invalid_json",
                                             message: "The request body is not a JSON object."), requestID: nil, keepAlive: head.keepAlive)
            return
        }
        if let m = json["model"] as? String { model = m }
        tokens = Self.tokenize(FakeProvider.answer)
        promptTokens = PromptEstimate.tokens(requestBody: body) ?? 0
        includeUsage = (json["stream_options"] as? [String: Any])?["include_usage"] as? Bool == true
        if json["stream"] as? Bool == true {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Transfer-Encoding", value: "chunked")
            writer.sendHead(ResponseHead(status: 200, headers: headers), mode: .chunked)
            tick()
            return
        }
        let text = JSONLine.quote(FakeProvider.answer)
        let body: String
        switch style {
        case .openAI:
            body = #"{"id":"\#(id)","object":"chat.completion","created":\#(created),"model":\#(JSONLine.quote(model)),"choices":[{"index":0,"message":{"role":"assistant","content":\#(text)},"finish_reason":"stop"}],"usage":{"prompt_tokens":\#(promptTokens),"completion_tokens":\#(tokens.count),"total_tokens":\#(tokens.count + promptTokens)}}"#
        case .anthropic:
            body = #"{"id":"\#(id)","type":"message","role":"assistant","content":[{"type":"text","text":\#(text)}],"model":\#(JSONLine.quote(model)),"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":\#(promptTokens),"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":\#(tokens.count)}}"#
        }
        Self.sendJSON(Array(body.utf8), status: 200, writer: writer, keepAlive: head.keepAlive)
    }

    /// One delivery per tick, as a provider flushes: the events of one step leave in one write.
    private func tick() {
        var out = ""
        switch style {
        case .openAI:
            let chunkHead = #""id":"\#(id)","object":"chat.completion.chunk","created":\#(created),"model":\#(JSONLine.quote(model))"#
            if next < tokens.count {
                let delta = next == 0 ? #"{"role":"assistant","content":\#(JSONLine.quote(tokens[next]))}"# : #"{"content":\#(JSONLine.quote(tokens[next]))}"#
                out = data(#"{\#(chunkHead),"choices":[{"index":0,"delta":\#(delta),"finish_reason":null}]}"#)
            } else {
                out = data(#"{\#(chunkHead),"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#)
                if includeUsage {
                    out += data(#"{\#(chunkHead),"choices":[],"usage":{"prompt_tokens":\#(promptTokens),"completion_tokens":\#(tokens.count),"total_tokens":\#(promptTokens + tokens.count)}}"#)
                }
                out += "data: [DONE]\n\n"
            }
        case .anthropic:
            if next == 0 {
                out = event("message_start", #"{"type":"message_start","message":{"id":"\#(id)","type":"message","role":"assistant","content":[],"model":\#(JSONLine.quote(model)),"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":\#(promptTokens),"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}"#)
                out += event("content_block_start", #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#)
            }
            if next < tokens.count {
                out += event("content_block_delta", #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":\#(JSONLine.quote(tokens[next]))}}"#)
            } else {
                out += event("content_block_stop", #"{"type":"content_block_stop","index":0}"#)
                out += event("message_delta", #"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":\#(tokens.count)}}"#)
                out += event("message_stop", #"{"type":"message_stop"}"#)
            }
        }
        let bytes = Array(out.utf8)
        bytes.withUnsafeBytes { _ = writer.sendBody($0) }
        if next < tokens.count {
            next += 1
            timer = writer.scheduler.schedule(afterSeconds: paceSeconds) { [weak self] in self?.tick() }
        } else {
            writer.finish(keepAlive: head.keepAlive)
        }
    }

    private func data(_ json: String) -> String { "data: \(json)\n\n" }
    private func event(_ name: String, _ json: String) -> String { "event: \(name)\ndata: \(json)\n\n" }

    func clientClosed() {
        timer?.cancel()
        timer = nil
    }

    func clientDrained() {}

    /// Words with their leading space, the way model tokens usually look.
    static func tokenize(_ text: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        for ch in text {
            if ch == " " && !current.isEmpty {
                tokens.append(current)
                current = ""
            }
            current.append(ch)
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }

    static func sendJSON(_ body: [UInt8], status: Int, writer: any ResponseWriter, keepAlive: Bool) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        writer.sendHead(ResponseHead(status: status, headers: headers), mode: .contentLength(body.count))
        body.withUnsafeBytes { _ = writer.sendBody($0) }
        writer.finish(keepAlive: keepAlive)
    }
}
