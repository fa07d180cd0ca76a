import Foundation
import RelayTestSupport
import TestHarness
import Testing

/// A provider (or gateway) that echoes the key it received in an error body must not hand it to the app: every
/// non-2xx body has the key masked, wherever the provider's writes split it. 2xx bodies stay byte-exact.
@Suite("Echoed key")
struct KeyEchoTests {
    static let key = Array(RelayFixture.providerKey.utf8)
    static let mask = Array("sk-".utf8) + Array(repeating: UInt8(ascii: "*"), count: key.count - 3)
    static let before = Array(#"{"error":{"message":"Incorrect API key provided: Bearer "#.utf8)
    static let after = Array(#"","type":"invalid_request_error","code":"invalid_api_key"}}"#.utf8)

    /// The upstream answers 401 (chunked) with the key split between two writes at `X-Split`; the second write
    /// waits until the client has read what the relay could already release, so the two really arrive apart.
    @Test("the key is masked when split at every position between two upstream writes")
    func maskedAtEverySplit() throws {
        let released = Gate()
        let upstream = try ScriptedUpstream { connection in
            while true {
                let request = try connection.readRequest(timeout: 5)
                let split = Int(request.header("X-Split") ?? "0")!
                let body = Self.before + Self.key + Self.after
                let cut = Self.before.count + split
                try connection.writeHead(status: 401, headers: [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])
                try connection.writeChunk(Array(body[..<cut]))
                try released.wait()
                try connection.writeChunk(Array(body[cut...]))
                try connection.writeLastChunk()
            }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        for split in 0...Self.key.count {
            try client.sendRequest(path: "/v1/chat/completions", headers: [("X-Split", "\(split)")], body: Array("{}".utf8))
            let head = try client.readHead()
            #expect(head.status == 401)
            // What the relay may release before the second write: everything up to the key's possible start.
            let first = try #require(try client.readChunk())
            #expect(Self.before.starts(with: first) || first.starts(with: Self.before), "split \(split)")
            released.signal()
            var rest: [UInt8] = []
            while let chunk = try client.readChunk() { rest += chunk }
            #expect(first + rest == Self.before + Self.mask + Self.after, "split \(split)")
        }
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("a Content-Length error body keeps its length, with the key masked")
    func maskedWithContentLength() throws {
        let body = Array(#"{"error":{"message":"key "#.utf8) + Self.key + Array(#" and again "#.utf8) + Self.key + Array(#""}}"#.utf8)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 5)
            try connection.writeHead(status: 403, headers: [("Content-Type", "application/json"), ("Content-Length", "\(body.count)")])
            try connection.write(Array(body[..<30]))
            try connection.write(Array(body[30...]))
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/models", headers: [], body: Array("{}".utf8))
        let head = try client.readHead()
        #expect(head.status == 403)
        #expect(head.header("Content-Length") == "\(body.count)")
        let received = try client.readBody(head: head)
        #expect(received == Array(#"{"error":{"message":"key "#.utf8) + Self.mask + Array(#" and again "#.utf8) + Self.mask + Array(#""}}"#.utf8))
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("a header echoing the key is masked, whatever the status", arguments: [200, 401])
    func headersAreMasked(status: Int) throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 5)
            try connection.writeHead(status: status, headers: [("Content-Type", "application/json"), ("Content-Length", "2"),
                                                               ("X-Debug-Authorization", "Bearer \(RelayFixture.providerKey)")])
            try connection.write("{}")
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/models", body: Array("{}".utf8))
        let head = try client.readHead()
        #expect(head.status == status)
        #expect(head.header("X-Debug-Authorization") == "Bearer " + String(decoding: Self.mask, as: UTF8.self))
        _ = try client.readBody(head: head)
        relay.assertNoSecretLeaks(clients: [client])
    }

    /// The relay asks for `identity`; a provider that compresses an error anyway could hide an echoed key from the
    /// masker (it reads bytes, not gzip). Such a body is replaced; the status, and the client's keep-alive, stay.
    /// The body here is the plain key under a `gzip` label: what the relay does must not depend on decoding it.
    @Test("an error body under a Content-Encoding is replaced by the relay's own, the status kept",
          arguments: ["gzip", "br", "GZIP", "identity, gzip"])
    func anEncodedErrorBodyIsReplaced(encoding: String) throws {
        let body = Self.before + Self.key + Self.after
        let upstream = try ScriptedUpstream { connection in
            while let _ = try? connection.readRequest(timeout: 5) {
                try connection.writeHead(status: 401, headers: [("Content-Type", "application/json"), ("Content-Encoding", encoding),
                                                                ("Content-Length", "\(body.count)"), ("Retry-After", "7")])
                try connection.write(body)
            }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        for _ in 0..<2 {   // the second request on the same connection: the first answer's framing was right
            try client.sendRequest(path: "/v1/chat/completions", body: Array("{}".utf8))
            let head = try client.readHead()
            #expect(head.status == 401)
            #expect(head.header("Content-Encoding") == nil)
            #expect(head.header("Content-Type") == "application/json")
            #expect(head.header("Retry-After") == "7")
            let received = String(decoding: try client.readBody(head: head), as: UTF8.self)
            #expect(received.contains(#""code":"upstream_error_encoded""#), "\(received)")
        }
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("an error body marked identity is masked, not replaced")
    func anIdentityErrorBodyIsMasked() throws {
        let body = Self.before + Self.key + Self.after
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 5)
            try connection.writeHead(status: 401, headers: [("Content-Type", "application/json"), ("Content-Encoding", "identity"),
                                                            ("Content-Length", "\(body.count)")])
            try connection.write(body)
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: Array("{}".utf8))
        let head = try client.readHead()
        #expect(head.status == 401)
        #expect(try client.readBody(head: head) == Self.before + Self.mask + Self.after)
        relay.assertNoSecretLeaks(clients: [client])
    }

    @Test("a 2xx body is relayed byte-exact, whatever it contains")
    func successBodiesAreUntouched() throws {
        let body = Array("data: {\"echo\":\"".utf8) + Self.key + Array("\"}\n\n".utf8)
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest(timeout: 5)
            try connection.writeHead(status: 200, headers: [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
            try connection.writeChunk(body)
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: Array("{}".utf8))
        let head = try client.readHead()
        #expect(head.status == 200)
        #expect(try client.readBody(head: head) == body)
    }
}
