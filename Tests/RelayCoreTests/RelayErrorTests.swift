// RelayError's JSON body (what every SDK parses) and the JSON-line encoder it shares with the logger.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

/// Parses `bytes` as the OpenAI error envelope and returns its three fields.
private func envelope(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
    let root = try JSONSerialization.jsonObject(with: Data(bytes))
    let object = try #require(root as? [String: Any], sourceLocation: sourceLocation)
    #expect(Set(object.keys) == ["error"], sourceLocation: sourceLocation)
    let error = try #require(object["error"] as? [String: Any], sourceLocation: sourceLocation)
    #expect(Set(error.keys) == ["message", "type", "code"], sourceLocation: sourceLocation)
    var out: [String: String] = [:]
    for (k, v) in error { out[k] = try #require(v as? String, sourceLocation: sourceLocation) }
    return out
}

@Suite struct RelayErrorTests {
    @Test func bodyIsTheExactOpenAIEnvelope() throws {
        let e = RelayError(status: 400, type: "invalid_request_error", code: "bad_request", message: "Bad.")
        #expect(String(decoding: e.jsonBody, as: UTF8.self)
            == #"{"error":{"message":"Bad.","type":"invalid_request_error","code":"bad_request"}}"#)
        #expect(try envelope(e.jsonBody) == ["message": "Bad.", "type": "invalid_request_error", "code": "bad_request"])
    }

    @Test(arguments: [
        RelayError.upstreamTimeout, RelayError.shuttingDown, RelayError.notFound(path: "/v9/x"),
        RelayError.badRequest(HTTPParseError(kind: .badRequest, message: "Malformed request line.")),
    ])
    func predefinedErrorsAreValidJSON(_ e: RelayError) throws {
        let fields = try envelope(e.jsonBody)
        #expect(fields["message"] == e.message)
        #expect(fields["type"] == e.type)
        #expect(fields["code"] == e.code)
    }

    @Test(arguments: [
        "say \"hi\"", #"back\slash"#, "line1\nline2", "cr\rlf", "tab\there", "nul\u{0}", "bell\u{7}", "esc\u{1B}[31m",
        "\u{1F}unit", "del\u{7F}", "emoji 🛰️ and ü", "</script><script>", "line\u{2028}sep", "",
        "all \" \\ \n \r \t \u{1} \u{8} \u{C} together",
    ])
    func awkwardMessagesAreEscapedAndRoundTrip(_ message: String) throws {
        let e = RelayError(status: 502, type: "upstream_error", code: "c\"x", message: message)
        let body = e.jsonBody
        #expect(!body.contains { $0 < 0x20 }, "raw control byte in \(String(decoding: body, as: UTF8.self))")
        let fields = try envelope(body)
        #expect(fields["message"] == message)
        #expect(fields["code"] == "c\"x")
    }

    @Test func notFoundDoesNotEchoThePath() {
        let e = RelayError.notFound(path: "/v1/x?key=sk-leak")
        #expect(e.status == 404)
        #expect(e.code == "route_not_found")
        #expect(!String(decoding: e.jsonBody, as: UTF8.self).contains("sk-leak"))
    }

    @Test(arguments: [
        (HTTPParseError.Kind.headTooLarge, 431, "request_header_too_large"),
        (.tooManyHeaders, 431, "too_many_headers"), (.uriTooLong, 414, "uri_too_long"),
        (.bodyTooLarge, 413, "request_body_too_large"), (.badRequest, 400, "bad_request"),
        (.versionNotSupported, 505, "http_version_not_supported"),
    ])
    func parseErrorsMapToStatusAndCode(kind: HTTPParseError.Kind, status: Int, code: String) {
        let e = RelayError.badRequest(HTTPParseError(kind: kind, message: "m"))
        #expect(e.status == status)
        #expect(e.code == code)
        #expect(e.type == "invalid_request_error")
        #expect(e.message == "m")
    }

    @Test func predefinedStatuses() {
        #expect(RelayError.upstreamTimeout.status == 504)
        #expect(RelayError.upstreamTimeout.type == "upstream_error")
        #expect(RelayError.shuttingDown.status == 503)
        #expect(RelayError.shuttingDown.code == "shutting_down")
    }

    @Test func connectionResetSaysTheRequestMayHaveBeenProcessed() {
        let e = RelayError.upstreamConnectionReset
        #expect(e.status == 502)
        #expect(e.code == "upstream_connection_reset")
        #expect(e.message == "the provider closed the connection before answering; the request may have been processed")
        #expect(RelayError.bodyNotAllowed.status == 400)
        #expect(RelayError.bodyNotAllowed.code == "invalid_request")
    }

    @Test func equalityIncludesExtraHeaders() {
        let a = RelayError(status: 429, type: "t", code: "c", message: "m", extraHeaders: [("Retry-After", "1")])
        var b = a
        #expect(a == b)
        b.extraHeaders = [("Retry-After", "2")]
        #expect(a != b)
        b.extraHeaders = []
        #expect(a != b)
    }
}

@Suite struct JSONLineTests {
    @Test func encodesEveryValueShape() {
        let line = JSONLine.encode([
            ("s", .string("x\"y")), ("n", .int(-3)), ("d", .double(1.5)), ("inf", .double(.infinity)),
            ("nan", .double(.nan)), ("t", .bool(true)), ("f", .bool(false)), ("k\n", .int(0)),
        ])
        #expect(line == #"{"s":"x\"y","n":-3,"d":1.500,"inf":null,"nan":null,"t":true,"f":false,"k\n":0}"#)
    }

    @Test func anEmptyLineIsAnEmptyObject() {
        #expect(JSONLine.encode([]) == "{}")
    }

    @Test(arguments: [("\u{0}", #""\u0000""#), ("\u{1F}", #""\u001f""#), ("\u{8}", #""\u0008""#), ("é", "\"é\"")])
    func quoteEscapesControlCharacters(_ input: String, _ expected: String) {
        #expect(JSONLine.quote(input) == expected)
    }

    @Test func aLoggerLineIsOneParsableJSONObject() throws {
        let sink = MemoryLogSink()
        let logger = Logger(label: "relay.test", level: .info, sink: sink)
        logger.info("stream \"done\"\n", [("status", .int(200)), ("outcome", .string("completed"))])
        let line = try #require(sink.lines.first)
        #expect(sink.lines.count == 1)
        #expect(!line.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "info")
        #expect(object["logger"] as? String == "relay.test")
        #expect(object["message"] as? String == "stream \"done\"\n")
        #expect(object["status"] as? Int == 200)
        #expect(object["outcome"] as? String == "completed")
        #expect((object["time"] as? String)?.hasSuffix("Z") == true)
    }

    @Test func linesBelowTheLevelAreNotEvenBuilt() {
        let sink = MemoryLogSink()
        let logger = Logger(label: "x", level: .warning, sink: sink)
        var built = 0
        func message() -> String { built += 1; return "m" }
        logger.debug(message())
        logger.info(message())
        #expect(built == 0)
        #expect(sink.lines.isEmpty)
        logger.error(message())
        #expect(built == 1)
        #expect(sink.lines.count == 1)
    }

    @Test(arguments: [("debug", LogLevel.debug), ("INFO", .info), ("Warning", .warning), ("error", .error)])
    func logLevelNames(_ name: String, _ level: LogLevel) {
        #expect(LogLevel(name: name) == level)
        #expect(LogLevel(name: level.name) == level)
    }

    @Test(arguments: ["", "warn", "verbose", "trace"])
    func unknownLogLevelNames(_ name: String) {
        #expect(LogLevel(name: name) == nil)
    }
}
