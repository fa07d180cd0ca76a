import Foundation
import RelayTestSupport
import SSERelayClient
import TestHarness
import Testing

/// The request body: the modelled fields, and the ones the library does not model passed through byte for byte.
@Suite("Chat request body")
struct ChatRequestTests {
    static let question = [ChatMessage.user("hi")]
    /// Spacing, number forms and key order a re-encoding would change.
    static let tools = #"[ {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}} ]"#
    static let providerExtra = #"{"scale":1.50,"tags":["a","\u00e9"],"nested":{"z":null,"a":true}}"#

    static func withExtras() throws -> ChatRequest {
        ChatRequest(model: "gpt-4o-mini", messages: question, additionalFields: [
            "tools": try RawJSON(tools),
            "tool_choice": try RawJSON(#""auto""#),
            "response_format": try RawJSON(#"{ "type" : "json_object" }"#),
            "seed": try RawJSON("7"),
            "x_provider": try RawJSON(providerExtra),
        ])
    }

    static let expectedBody = #"{"messages":[{"content":"hi","role":"user"}],"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"response_format":{ "type" : "json_object" },"seed":7,"tool_choice":"auto","tools":\#(tools),"x_provider":\#(providerExtra)}"#

    @Test("fields the library does not model reach the provider through the relay byte for byte")
    func additionalFieldsReachTheProviderUnchanged() async throws {
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk(ClientThroughRelayTests.chunk("ok", finish: "stop"))
            try connection.writeChunk("data: [DONE]\n\n")
            try connection.writeLastChunk()
        }
        let relay = try RelayFixture(upstream: upstream)
        var text = ""
        for try await event in ClientThroughRelayTests.client(relay.port).chat(try Self.withExtras()) {
            if case .chunk(let chunk) = event { text += chunk.text ?? "" }
        }
        #expect(text == "ok")
        let body = try #require(upstream.requests.first).body
        #expect(String(decoding: body, as: UTF8.self) == Self.expectedBody)
    }

    @Test("without additional fields the body is the modelled fields only")
    func modelledFieldsOnly() throws {
        let body = try ChatRequest(model: "m", messages: Self.question, temperature: 0.5, maxTokens: 50, includeUsage: false).jsonBody()
        #expect(String(decoding: body, as: UTF8.self)
                == #"{"max_tokens":50,"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"temperature":0.5}"#)
    }

    @Test("a field the type models cannot come in as an additional field", arguments: Array(ChatRequest.modelledFields))
    func modelledNamesAreRefused(_ name: String) throws {
        let request = ChatRequest(model: "m", messages: Self.question, additionalFields: [name: try RawJSON("true")])
        #expect(throws: EncodingError.self) { try request.jsonBody() }
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(request) }
    }

    /// (A trailing comma is not among them: Foundation's parser on Linux accepts one.)
    @Test("RawJSON takes exactly one JSON value", arguments: ["", " ", "{", #"{"a":}"#, "nope", "1 2", "'x'", "NaN", "01"])
    func rawJSONRefusesWhatIsNotOneValue(_ text: String) {
        #expect(throws: DecodingError.self) { try RawJSON(text) }
    }

    @Test("encoding with an Encoder keeps the additional fields' values (their form may change)")
    func encodableKeepsTheValues() throws {
        let encoded = try JSONEncoder().encode(try Self.withExtras())
        let viaEncoder = try #require(try JSONSerialization.jsonObject(with: encoded) as? NSDictionary)
        let exact = try #require(try JSONSerialization.jsonObject(with: Data(Self.expectedBody.utf8)) as? NSDictionary)
        #expect(viaEncoder == exact)
    }
}
