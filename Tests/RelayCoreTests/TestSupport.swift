// Shared helpers for the pure-core tests: fixed instants, header literals, machine builders.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import TestSupportCore
import Upstream


func headers(_ pairs: [(String, String)]) -> HTTPHeaders { HTTPHeaders(pairs) }

/// The fields as "Name: value" lines, in order and spelling, for readable failure messages.
func lines(_ h: HTTPHeaders) -> [String] { h.map { "\($0.name): \($0.value)" } }

let sseHeaders = headers([("Content-Type", "text/event-stream")])
let jsonHeaders = headers([("Content-Type", "application/json"), ("Content-Length", "42")])

let firstByteSeconds: UInt64 = 10
let idleSeconds: UInt64 = 30

func exchangeSettings(
    method: String = "POST", version: HTTPVersion = .http1_1, keepAlive: Bool = true, requestID: String = "req-1"
) -> ExchangeStateMachine.Settings {
    ExchangeStateMachine.Settings(
        requestMethod: method, clientVersion: version, keepAlive: keepAlive, requestID: requestID,
        firstByteTimeoutSeconds: Double(firstByteSeconds), idleTimeoutSeconds: Double(idleSeconds))
}

/// A machine whose request was read whole and admitted at `now`, its provider being called (`calling`), unless
/// `requestComplete` is false (`awaitingBody`: its body is still arriving).
func newMachine(
    method: String = "POST", version: HTTPVersion = .http1_1, keepAlive: Bool = true, now: Support.Instant = t0,
    requestComplete: Bool = true
) -> ExchangeStateMachine {
    var m = ExchangeStateMachine(settings: exchangeSettings(method: method, version: version, keepAlive: keepAlive), now: now)
    if requestComplete {
        m.requestBodyComplete(now: now)
        m.calling(now: now)
    }
    return m
}

/// A machine that has received an SSE head at `t0 + 1 s` and is streaming.
func streamingMachine(keepAlive: Bool = true, upstreamHeaders: HTTPHeaders = sseHeaders) -> ExchangeStateMachine {
    var m = newMachine(keepAlive: keepAlive)
    let actions = m.upstreamHead(status: 200, headers: upstreamHeaders, now: at(1))
    precondition(actions.count == 1 && m.phase == .streaming)
    return m
}

extension ExchangeStateMachine.Action {
    var isFinishResponse: Bool {
        if case .finishResponse = self { return true }
        return false
    }
    var relayError: RelayError? {
        if case .respondError(let e, _) = self { return e }
        return nil
    }
}

/// The problems a configuration step is refused with; records an issue when the step succeeds or throws
/// something other than a `ConfigurationError`, whose description must be its problems, one a line.
func configurationProblems(sourceLocation: SourceLocation = #_sourceLocation, _ step: () throws -> Void) -> [String] {
    do {
        try step()
        Issue.record("expected the configuration to be refused", sourceLocation: sourceLocation)
        return []
    } catch let error as ConfigurationError {
        #expect(error.description == error.problems.joined(separator: "\n"), sourceLocation: sourceLocation)
        return error.problems
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        return []
    }
}
