// The connection-level RelayErrors: 405 with Allow, 408 request timeout, 503 too many connections.
import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

/// Extra headers as "Name: value" lines (the tuple array is not Equatable).
private func headerLines(_ e: RelayError) -> [String] { e.extraHeaders.map { "\($0.0): \($0.1)" } }

/// The three fields of the error envelope, parsed.
private func fields(_ e: RelayError, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: String] {
    let root = try #require(try JSONSerialization.jsonObject(with: Data(e.jsonBody)) as? [String: Any], sourceLocation: sourceLocation)
    let error = try #require(root["error"] as? [String: Any], sourceLocation: sourceLocation)
    return error.compactMapValues { $0 as? String }
}

@Suite struct RelayErrorConnectionTests {
    @Test func methodNotAllowedIs405WithAnAllowHeaderListingTheMethods() throws {
        let e = RelayError.methodNotAllowed(allowed: ["GET", "POST"])
        #expect(e.status == 405)
        #expect(e.type == "invalid_request_error")
        #expect(e.code == "method_not_allowed")
        #expect(e.message == "This method is not allowed on this path.")
        #expect(headerLines(e) == ["Allow: GET, POST"])
        #expect(String(decoding: e.jsonBody, as: UTF8.self)
            == #"{"error":{"message":"This method is not allowed on this path.","type":"invalid_request_error","code":"method_not_allowed"}}"#)
        #expect(try fields(e) == ["message": e.message, "type": "invalid_request_error", "code": "method_not_allowed"])
    }

    @Test(arguments: [
        (["POST"], "POST"),
        (["GET", "HEAD"], "GET, HEAD"),
        (RelayConfigurationRoute.defaultMethods, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
    ])
    func theAllowValueKeepsTheConfiguredOrder(_ methods: [String], _ allow: String) {
        let e = RelayError.methodNotAllowed(allowed: methods)
        #expect(e.extraHeaders.count == 1)
        #expect(e.extraHeaders.first?.0 == "Allow")
        #expect(e.extraHeaders.first?.1 == allow)
    }

    @Test func theAllowListIsPartOfEquality() {
        #expect(RelayError.methodNotAllowed(allowed: ["GET"]) == RelayError.methodNotAllowed(allowed: ["GET"]))
        #expect(RelayError.methodNotAllowed(allowed: ["GET"]) != RelayError.methodNotAllowed(allowed: ["POST"]))
        #expect(RelayError.methodNotAllowed(allowed: ["GET", "POST"]) != RelayError.methodNotAllowed(allowed: ["POST", "GET"]))
    }

    @Test func requestTimeoutIs408() throws {
        let e = RelayError.requestTimeout
        #expect(e.status == 408)
        #expect(e.type == "invalid_request_error")
        #expect(e.code == "request_timeout")
        #expect(e.message == "The request was not received in time.")
        #expect(e.extraHeaders.isEmpty)
        #expect(try fields(e) == ["message": e.message, "type": "invalid_request_error", "code": "request_timeout"])
    }

    @Test func tooManyConnectionsIs503() throws {
        let e = RelayError.tooManyConnections
        #expect(e.status == 503)
        #expect(e.type == "server_error")
        #expect(e.code == "too_many_connections")
        #expect(e.message == "The relay is at its connection limit; retry later.")
        #expect(e.extraHeaders.isEmpty)
        #expect(try fields(e) == ["message": e.message, "type": "server_error", "code": "too_many_connections"])
        #expect(e != RelayError.shuttingDown, "both 503, told apart by code")
    }
}

private typealias RelayConfigurationRoute = RelayConfiguration.Route
