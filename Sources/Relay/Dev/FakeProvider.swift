import Foundation
import HTTP1
import HTTPServer
import Support
import Transport

/// A built-in OpenAI-compatible provider for local work (`sse-relay --dev`): it streams a deterministic answer
/// token by token at a set pace, answers non-streaming requests, and checks that the relay injected its key.
/// It runs on its own event loop and listener on 127.0.0.1, and the relay reaches it through libcurl like any
/// real provider, so dev mode exercises the whole path.
public final class FakeProvider: @unchecked Sendable {
    // Invariant: `listener` is set once in `start()`; connections live on the provider's own loop.
    public static let devKey = "dev-key-not-secret"
    public static let answer = "Hello! This answer comes from SSE Relay's built-in fake provider, streamed token by token through the relay."

    public let paceSeconds: Double
    private let group = EventLoopGroup(count: 1)
    private var listener: Listener?
    private let logger: Logger
    private let connections = LoopBox<[ObjectIdentifier: ServerConnection]>([:])

    public init(paceSeconds: Double, logger: Logger) {
        self.paceSeconds = paceSeconds
        self.logger = logger
    }

    public var baseURL: String { "http://127.0.0.1:\(listener?.port ?? 0)" }

    public func start() throws {
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

    public func shutdown() {
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

    func handle(_ head: RequestHead, writer: ServerConnection) -> (any RequestResponder)? {
        guard head.headers.first("Authorization") == "Bearer \(FakeProvider.devKey)" else {
            writer.respond(error: RelayError(status: 401, type: "invalid_request_error", code: "invalid_api_key",
                                             message: "The fake provider did not receive the relay's key."),
                           keepAlive: head.keepAlive)
            return nil
        }
        switch (head.method, head.path) {
        case ("POST", "/v1/chat/completions"):
            return FakeCompletion(head: head, writer: writer, paceSeconds: paceSeconds)
        case ("GET", "/v1/models"):
            let body = Array(#"{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","owned_by":"sse-relay-dev"}]}"#.utf8)
            FakeCompletion.sendJSON(body, status: 200, writer: writer, keepAlive: head.keepAlive)
            return FinishedResponder()
        default:
            writer.respond(error: RelayError(status: 404, type: "invalid_request_error", code: "unknown_url",
                                             message: "The fake provider knows /v1/chat/completions and /v1/models."),
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

/// One fake chat completion: reads the JSON body, then answers (streaming or not). Owned by the provider's loop.
final class FakeCompletion: RequestResponder, @unchecked Sendable {
    // Invariant: touched on the writer's loop queue only.
    private let head: RequestHead
    private let writer: ServerConnection
    private let paceSeconds: Double
    private var body: [UInt8] = []
    private var tokens: [String] = []
    private var next = 0
    private var timer: LoopTimer?
    private var model = "gpt-4o-mini"
    private let created = Int(Date().timeIntervalSince1970)
    private let id = "chatcmpl-dev\(UInt32.random(in: 0...UInt32.max))"

    init(head: RequestHead, writer: ServerConnection, paceSeconds: Double) {
        self.head = head
        self.writer = writer
        self.paceSeconds = paceSeconds
    }

    func requestBody(_ bytes: [UInt8]) { body.append(contentsOf: bytes) }

    func requestEnd() {
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        guard let json else {
            writer.respond(error: RelayError(status: 400, type: "invalid_request_error", code: "invalid_json",
                                             message: "The request body is not a JSON object."), keepAlive: head.keepAlive)
            return
        }
        if let m = json["model"] as? String { model = m }
        tokens = Self.tokenize(FakeProvider.answer)
        if json["stream"] as? Bool == true {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Transfer-Encoding", value: "chunked")
            writer.sendHead(ResponseHead(status: 200, headers: headers), mode: .chunked)
            tick()
        } else {
            let text = JSONLine.quote(FakeProvider.answer)
            let body = #"{"id":"\#(id)","object":"chat.completion","created":\#(created),"model":\#(JSONLine.quote(model)),"choices":[{"index":0,"message":{"role":"assistant","content":\#(text)},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":\#(tokens.count),"total_tokens":\#(tokens.count + 5)}}"#
            Self.sendJSON(Array(body.utf8), status: 200, writer: writer, keepAlive: head.keepAlive)
        }
    }

    private func tick() {
        if next < tokens.count {
            let delta = next == 0 ? #"{"role":"assistant","content":\#(JSONLine.quote(tokens[next]))}"# : #"{"content":\#(JSONLine.quote(tokens[next]))}"#
            send(#"{"id":"\#(id)","object":"chat.completion.chunk","created":\#(created),"model":\#(JSONLine.quote(model)),"choices":[{"index":0,"delta":\#(delta),"finish_reason":null}]}"#)
            next += 1
            timer = writer.loop.schedule(afterSeconds: paceSeconds) { [weak self] in self?.tick() }
        } else {
            send(#"{"id":"\#(id)","object":"chat.completion.chunk","created":\#(created),"model":\#(JSONLine.quote(model)),"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#)
            let done = Array("data: [DONE]\n\n".utf8)
            done.withUnsafeBytes { _ = writer.sendBody($0) }
            writer.finish(keepAlive: head.keepAlive)
        }
    }

    private func send(_ json: String) {
        let event = Array("data: \(json)\n\n".utf8)
        event.withUnsafeBytes { _ = writer.sendBody($0) }
    }

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

    static func sendJSON(_ body: [UInt8], status: Int, writer: ServerConnection, keepAlive: Bool) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        writer.sendHead(ResponseHead(status: status, headers: headers), mode: .contentLength(body.count))
        body.withUnsafeBytes { _ = writer.sendBody($0) }
        writer.finish(keepAlive: keepAlive)
    }
}
