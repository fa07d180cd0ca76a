import Foundation
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// An exchange is freed once it ends, with the real response writer (`ServerConnection`) and the real upstream
/// (curl's `Transfer`), however it ends. What could hold it: the loop's table of live exchanges (emptied by
/// `onEnd`, which captures the server and the loop's state, never the exchange), the connection's responder
/// (cleared when the response is over) and the transfer (whose delegate reference is weak). A cycle among them
/// would keep each exchange, its record and its buffers for the life of the process.
@Suite("Exchange lifetime")
struct ExchangeLifetimeTests {
    enum End: String, CaseIterable, Sendable {
        /// The provider finishes; the client keeps its connection open for the next request.
        case completed
        /// The client closes its connection mid-stream.
        case clientLeft
        /// The provider's connection breaks mid-stream.
        case upstreamFailed
    }

    final class WeakExchange: @unchecked Sendable {
        // Invariant: written once in `init`, before the reference is shared.
        weak var exchange: RelayExchange?
        init(_ exchange: RelayExchange) { self.exchange = exchange }
    }

    /// The exchanges alive on the relay's loops now, held weakly.
    static func liveExchanges(_ relay: RelayFixture) -> [WeakExchange] {
        var found: [WeakExchange] = []
        for state in relay.server.loopStates {
            state.loop.queue.sync {
                for exchange in state.exchanges.values { found.append(WeakExchange(exchange)) }
            }
        }
        return found
    }

    @Test("an ended exchange is freed", arguments: End.allCases)
    func anEndedExchangeIsFreed(end: End) throws {
        let streaming = Gate()
        let finish = Gate()
        let upstream = try ScriptedUpstream { connection in
            _ = try connection.readRequest()
            try connection.writeHead(status: 200, headers: sseHead)
            try connection.writeChunk("data: one\n\n")
            streaming.signal()
            switch end {
            case .completed:
                try finish.wait()
                try connection.writeLastChunk()
            case .clientLeft:
                _ = try connection.waitForPeerClose(timeout: 5)
            case .upstreamFailed:
                try finish.wait()
                connection.reset()
            }
        }
        let relay = try RelayFixture(upstream: upstream)
        let client = try relay.client()
        try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
        try streaming.wait()
        _ = try client.readHead()
        _ = try client.readChunkedBody(until: "data: one\n\n")
        let live = Self.liveExchanges(relay)
        #expect(live.count == 1)
        #expect(live.allSatisfy { $0.exchange != nil })

        switch end {
        case .completed:
            finish.signal()
            while try client.readChunk() != nil {}
        case .clientLeft:
            client.close()
        case .upstreamFailed:
            finish.signal()
        }
        try relay.waitUntilIdle()
        try eventually("every ended exchange freed", timeout: 2) { live.allSatisfy { $0.exchange == nil } }
        if end == .completed { #expect(relay.server.liveCounts().connections == 1, "the kept-alive connection is open") }
    }
}
