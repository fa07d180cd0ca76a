import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing

/// The access log: one JSON line per exchange with every field, and no secret.
@Suite("Access log")
struct AccessLogTests {
    @Test("the access log has one JSON line per exchange with every field, and no secret")
    func accessLog() throws {
        let upstream = try oneEventUpstream()
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions?x=1", headers: [("Authorization", "Bearer \(RelayFixture.clientToken)"),
                                                                      ("X-Request-Id", "app-req-42")], body: chatBody)
        _ = try client.readBody(head: try client.readHead())
        try relay.waitUntilIdle()
        let line = try #require(relay.logs.lines.first { $0.contains(#""message":"exchange""#) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["request_id"] as? String == "app-req-42")
        #expect(object["client_ip"] as? String == "127.0.0.1")
        #expect(object["method"] as? String == "POST")
        #expect(object["path"] as? String == "/v1/chat/completions")
        #expect(object["route"] as? String == "/v1/")
        #expect(object["upstream"] as? String == "test")
        #expect(object["status"] as? Int == 200)
        #expect(object["bytes_in"] as? Int == chatBody.count)
        #expect(object["bytes_out"] as? Int == 9)
        #expect(object["outcome"] as? String == "completed")
        for field in ["time", "level", "upstream_head_ms", "first_byte_ms", "duration_ms"] {
            #expect(object[field] != nil, "missing \(field)")
        }
        relay.assertNoSecretLeaks(clients: [client])
    }
}
