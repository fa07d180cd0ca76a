import HTTP1
import HTTPServer
import Transport

/// A client side that records what was asked of it (an exchange, a stream endpoint), for tests without sockets;
/// `isAboveHighWater` is the test's to set.
package final class FakeResponseWriter: ResponseWriter, @unchecked Sendable {
    // Invariant: touched on `loop.queue` only (every test step runs there).
    package enum Event: Equatable {
        case head(Int, ResponseBodyMode)
        case body([UInt8])
        case finish(keepAlive: Bool)
        case abort
        case error(status: Int, code: String)
    }

    package let scheduler: any LoopScheduler
    package var clientAddress = "198.51.100.7"
    package var client: ClientAddress { ClientAddress(address: clientAddress, forwardedFor: clientAddress, viaTrustedProxy: false) }
    package var peerAddress: String { clientAddress }
    package var pendingByteCount = 0
    package var isAboveHighWater = false
    package private(set) var events: [Event] = []

    package init(scheduler: any LoopScheduler) { self.scheduler = scheduler }

    package func sendHead(_ head: ResponseHead, mode: ResponseBodyMode) { events.append(.head(head.status, mode)) }
    /// Runs inside `sendBody`, after the write is recorded; its answer is `sendBody`'s (a test that plays a write
    /// failing the way the server's does calls the exchange's `clientClosed` here and answers false).
    package var onSendBody: ((UnsafeRawBufferPointer) -> Bool)?

    package func sendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        events.append(.body(Array(bytes)))
        return onSendBody?(bytes) ?? true
    }
    package func finish(keepAlive: Bool) { events.append(.finish(keepAlive: keepAlive)) }
    package func abort() { events.append(.abort) }
    package func respond(error: ErrorResponse, requestID: String?, keepAlive: Bool) {
        events.append(.error(status: error.status, code: error.code))
    }
    package func respond(status: Int, headers: HTTPHeaders, body: [UInt8], keepAlive: Bool) {
        events.append(.head(status, .contentLength(body.count)))
        events.append(.body(body))
        events.append(.finish(keepAlive: keepAlive))
    }

    /// Every body byte sent, in order.
    package var body: [UInt8] {
        var bytes: [UInt8] = []
        for case .body(let chunk) in events { bytes += chunk }
        return bytes
    }
}
