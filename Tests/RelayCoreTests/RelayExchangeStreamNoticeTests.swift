// A resumable stream's notices to its owner (`StreamOwner`) hop to the owner's loop: a stop or a takeover taken
// while the stream ran can arrive after the exchange has ended. By then the writer is its client connection's, and
// that connection may be answering its next request (a kept-alive connection, maybe a load balancer's carrying
// another user's request): the late notice must not touch it.
import HTTP1
@testable import Relay
@testable import RelayCore
import RelayTestSupport
import Testing

extension RelayExchangeTests {
    /// A stream whose first event went out; `ended`: the provider completed it too.
    static func streamed(ended: Bool) -> Harness {
        let h = Harness()
        h.run {
            h.exchange.requestEnd()
            h.call.head(200)
            h.call.body("data: a\n\n")
            if ended { h.call.complete() }
        }
        return h
    }

    @Test func aStopArrivingAfterTheStreamEndedLeavesTheConnectionAlone() {
        let h = Self.streamed(ended: true)
        let answered = h.writer.events
        #expect(answered.last == .finish(keepAlive: true))
        h.run { h.exchange.stopRequested() }
        #expect(h.writer.events == answered, "a late stop aborted the connection's next response")
        #expect(h.call.cancelled == 0)
        #expect(h.ended == 1)
    }

    @Test func aTakeoverArrivingAfterTheStreamEndedLeavesTheConnectionAlone() {
        let h = Self.streamed(ended: true)
        let answered = h.writer.events
        h.run { h.exchange.originalTakenOver() }
        #expect(h.writer.events == answered, "a late takeover aborted the connection's next response")
    }

    @Test func aStopWhileTheStreamRunsAbortsItsClientAndCancels() {
        let h = Self.streamed(ended: false)
        h.run { h.exchange.stopRequested() }
        #expect(h.writer.events.last == .abort)
        #expect(h.call.cancelled == 1)
        #expect(h.ended == 1)
    }
}
