// Which requests may reach the provider twice: the safe methods only, whatever idempotency key the app sends.
import HTTP1
import Testing
import Upstream

@Suite struct UpstreamRequestTests {
    static func request(_ method: String, _ headers: [(String, String)] = [], body: [UInt8]? = nil) -> UpstreamRequest {
        var fields = HTTPHeaders()
        for (name, value) in headers { fields.add(name: name, value: value) }
        return UpstreamRequest(url: "http://127.0.0.1:1/v1/x", method: method, headers: fields, body: body)
    }

    @Test(arguments: ["GET", "HEAD", "OPTIONS", "TRACE"])
    func safeMethodsAreReplayable(_ method: String) {
        #expect(Self.request(method).isReplayable)
    }

    @Test(arguments: ["POST", "PUT", "PATCH", "DELETE", "CONNECT", "get", "Post"])
    func otherMethodsAreNot(_ method: String) {
        #expect(!Self.request(method, body: []).isReplayable)
    }

    /// Go's rule takes a request with an idempotency key for replayable; the key is the app's to send and LLM
    /// providers do not deduplicate on it, so here it changes nothing.
    @Test(arguments: ["Idempotency-Key", "idempotency-key", "X-Idempotency-Key", "x-idempotency-key"])
    func anIdempotencyKeyMakesNothingReplayable(_ name: String) {
        #expect(!Self.request("POST", [(name, "abc-123")], body: Array("{}".utf8)).isReplayable)
        #expect(!Self.request("DELETE", [(name, "")]).isReplayable)
    }

    @Test func similarHeadersDoNot() {
        #expect(!Self.request("POST", [("Idempotency", "1"), ("X-Request-Id", "r")], body: []).isReplayable)
    }

    @Test func defaultsKeepPooledConnectionsBelowCommonKeepAliveLimits() {
        #expect(Self.request("GET").idleConnectionSeconds == 30)
    }
}
