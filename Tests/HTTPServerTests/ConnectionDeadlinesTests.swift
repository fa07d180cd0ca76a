// ConnectionDeadlines: every row of its table at the exact boundary (one nanosecond before → nil, at the deadline
// → the expiry), slowloris from accept, keep-alive idle, body progress, and the write-stall clock.
import HTTP1
import HTTPServer
import Support
import Testing
import TestSupportCore

/// Distinct, co-prime values so no two rows can be confused with each other.
private let headerRead: UInt64 = 7
private let bodyRead: UInt64 = 13
private let keepAliveIdle: UInt64 = 41
private let writeStall: UInt64 = 23

private let settings = ConnectionDeadlines.Settings(
    headerReadSeconds: Double(headerRead), bodyReadSeconds: Double(bodyRead),
    keepAliveIdleSeconds: Double(keepAliveIdle), clientWriteStallSeconds: Double(writeStall))

/// A connection accepted at `t0`.
private func accepted() -> ConnectionDeadlines { ConnectionDeadlines(settings: settings, acceptedAt: t0) }

/// `next` as an Equatable value (the tuple is not).
private struct Due: Equatable, CustomStringConvertible {
    var deadline: Support.Instant
    var expiry: ConnectionDeadlines.Expiry
    var description: String {
        let s = Double(Int64(deadline.nanoseconds) - Int64(t0.nanoseconds)) / 1e9
        return "t0+\(s)s → \(expiry)"
    }
}

private func due(_ d: ConnectionDeadlines) -> Due? { d.next.map { Due(deadline: $0.deadline, expiry: $0.expiry) } }

/// The deadline is exactly `t0 + seconds`: nothing is due a nanosecond before, `expiry` is due at it and after.
private func expectBoundary(
    _ d: ConnectionDeadlines, at seconds: UInt64, _ expiry: ConnectionDeadlines.Expiry,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(due(d) == Due(deadline: at(seconds), expiry: expiry), sourceLocation: sourceLocation)
    #expect(d.expired(now: justBefore(seconds)) == nil, sourceLocation: sourceLocation)
    #expect(d.expired(now: at(seconds)) == expiry, sourceLocation: sourceLocation)
    #expect(d.expired(now: at(seconds + 1000)) == expiry, "a late timer still finds it due", sourceLocation: sourceLocation)
}

@Suite struct ConnectionDeadlinesTests {
    // MARK: the table, row by row

    @Test func waitingForAFirstRequestClosesQuietlyHeaderReadSecondsAfterAccept() {
        let d = accepted()
        #expect(d.phase == .awaitingFirstRequest(since: t0))
        #expect(d.writeStalledSince == nil)
        expectBoundary(d, at: headerRead, .closeQuietly)
        #expect(d.expired(now: t0) == nil)
    }

    @Test func idleKeepAliveClosesQuietlyKeepAliveIdleSecondsAfterTheResponse() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: false)
        d.responseComplete(now: at(5))
        #expect(d.phase == .idle(since: at(5)))
        expectBoundary(d, at: 5 + keepAliveIdle, .closeQuietly)
    }

    @Test func readingTheFirstHeadIs408AtHeaderReadSecondsFromAccept() {
        var d = accepted()
        d.headBytesArrived(now: at(3))
        #expect(d.phase == .readingHead(since: t0), "the first request's head clock starts at accept")
        expectBoundary(d, at: headerRead, .requestTimeout)
    }

    @Test func readingALaterHeadIs408AtHeaderReadSecondsFromItsFirstByte() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(1), hasBody: false)
        d.responseComplete(now: at(5))
        d.headBytesArrived(now: at(20))
        #expect(d.phase == .readingHead(since: at(20)))
        expectBoundary(d, at: 20 + headerRead, .requestTimeout)
    }

    @Test func readingABodyIs408AtBodyReadSecondsFromTheHead() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: true)
        #expect(d.phase == .readingBody(lastProgress: at(2)))
        expectBoundary(d, at: 2 + bodyRead, .requestTimeout)
    }

    @Test func respondingHasNoDeadlineOfItsOwn() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: false)
        #expect(d.phase == .responding)
        #expect(due(d) == nil)
        #expect(d.expired(now: at(2)) == nil)
        #expect(d.expired(now: at(1_000_000)) == nil)
    }

    @Test func respondingAfterABodyHasNoDeadlineEither() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: true)
        d.bodyComplete()
        #expect(d.phase == .responding)
        #expect(due(d) == nil)
        #expect(d.expired(now: at(1_000_000)) == nil)
    }

    @Test func aClientNotReadingIsAWriteStallClientWriteStallSecondsAfterTheBufferFilled() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: false)
        d.writeBufferFull(now: at(4))
        #expect(d.writeStalledSince == at(4))
        expectBoundary(d, at: 4 + writeStall, .writeStall)
    }

    // MARK: slowloris and the head clock

    @Test func aClientTricklingOneBytePerSecondGetsNoMoreThanHeaderReadSecondsFromAccept() {
        var d = accepted()
        for second in 1..<headerRead {
            d.headBytesArrived(now: at(second))
            #expect(due(d) == Due(deadline: at(headerRead), expiry: .requestTimeout), "after the byte at \(second) s")
            #expect(d.expired(now: at(second)) == nil)
        }
        #expect(d.expired(now: justBefore(headerRead)) == nil)
        #expect(d.expired(now: at(headerRead)) == .requestTimeout)
    }

    @Test func aFirstByteJustBeforeTheDeadlineDoesNotBuyMoreTime() {
        var d = accepted()
        d.headBytesArrived(now: justBefore(headerRead))
        expectBoundary(d, at: headerRead, .requestTimeout)
    }

    @Test func theFirstByteTurnsAQuietCloseInto408WithTheSameDeadline() {
        var d = accepted()
        #expect(due(d) == Due(deadline: at(headerRead), expiry: .closeQuietly))
        d.headBytesArrived(now: at(6))
        #expect(due(d) == Due(deadline: at(headerRead), expiry: .requestTimeout))
    }

    @Test func aTricklingSecondRequestIsLimitedFromItsOwnFirstByte() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(1), hasBody: false)
        d.responseComplete(now: at(10))
        d.headBytesArrived(now: at(30))
        for second in UInt64(31)..<(30 + headerRead) {
            d.headBytesArrived(now: at(second))
            #expect(due(d) == Due(deadline: at(30 + headerRead), expiry: .requestTimeout))
        }
        expectBoundary(d, at: 30 + headerRead, .requestTimeout)
    }

    @Test func aNewRequestAfterIdleReplacesTheIdleDeadline() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: true)
        d.bodyProgress(now: at(5))
        d.bodyComplete()
        d.responseComplete(now: at(10))
        expectBoundary(d, at: 10 + keepAliveIdle, .closeQuietly)
        // A byte one second before the idle limit: the head now has headerRead seconds from that byte.
        d.headBytesArrived(now: at(10 + keepAliveIdle - 1))
        #expect(d.expired(now: at(10 + keepAliveIdle)) == nil, "the idle deadline no longer applies")
        expectBoundary(d, at: 10 + keepAliveIdle - 1 + headerRead, .requestTimeout)
    }

    @Test func headBytesWhileReadingABodyOrRespondingChangeNothing() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: true)
        d.headBytesArrived(now: at(3))
        #expect(d.phase == .readingBody(lastProgress: at(2)))
        d.bodyComplete()
        d.headBytesArrived(now: at(4))
        #expect(d.phase == .responding)
        #expect(due(d) == nil)
    }

    // MARK: body progress

    @Test func bodyProgressMovesTheBodyDeadline() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: true)
        d.bodyProgress(now: at(10))
        #expect(d.phase == .readingBody(lastProgress: at(10)))
        #expect(d.expired(now: at(2 + bodyRead)) == nil, "the old deadline is gone")
        expectBoundary(d, at: 10 + bodyRead, .requestTimeout)
        d.bodyProgress(now: at(22))
        expectBoundary(d, at: 22 + bodyRead, .requestTimeout)
    }

    @Test func bodyProgressOutsideABodyIsIgnored() {
        var d = accepted()
        d.bodyProgress(now: at(5))
        #expect(d.phase == .awaitingFirstRequest(since: t0))
        d.headBytesArrived(now: at(1))
        d.bodyProgress(now: at(5))
        #expect(d.phase == .readingHead(since: t0))
        d.headComplete(now: at(6), hasBody: false)
        d.bodyProgress(now: at(7))
        #expect(d.phase == .responding)
        d.bodyComplete()
        #expect(d.phase == .responding)
        d.responseComplete(now: at(8))
        d.bodyProgress(now: at(9))
        d.bodyComplete()
        #expect(d.phase == .idle(since: at(8)))
    }

    // MARK: write stall

    @Test func aSecondWriteBufferFullDoesNotRestartTheStallClock() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: false)
        d.writeBufferFull(now: at(4))
        d.writeBufferFull(now: at(15))
        #expect(d.writeStalledSince == at(4))
        expectBoundary(d, at: 4 + writeStall, .writeStall)
    }

    @Test func writeBufferDrainedClearsTheStallAndANewFullRestartsIt() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(2), hasBody: false)
        d.writeBufferFull(now: at(4))
        d.writeBufferDrained()
        #expect(d.writeStalledSince == nil)
        #expect(due(d) == nil)
        #expect(d.expired(now: at(4 + writeStall)) == nil)
        d.writeBufferFull(now: at(30))
        #expect(d.writeStalledSince == at(30))
        expectBoundary(d, at: 30 + writeStall, .writeStall)
    }

    @Test func theEarlierOfAPhaseDeadlineAndAStallDeadlineWins() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(1), hasBody: true)   // body deadline 1 + 13 = 14
        d.writeBufferFull(now: at(1))               // stall deadline 1 + 23 = 24
        expectBoundary(d, at: 1 + bodyRead, .requestTimeout)
        d.bodyProgress(now: at(12))                 // body deadline 25, stall still 24
        expectBoundary(d, at: 1 + writeStall, .writeStall)
        d.writeBufferDrained()                      // only the body deadline remains
        expectBoundary(d, at: 12 + bodyRead, .requestTimeout)
    }

    @Test func aStallThatBeganDuringAResponseGoesOnAfterIt() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(1), hasBody: false)
        d.writeBufferFull(now: at(2))
        d.responseComplete(now: at(5))              // the answer is still unread
        #expect(d.writeStalledSince == at(2))
        d.writeBufferFull(now: at(6))
        expectBoundary(d, at: 2 + writeStall, .writeStall)
        d.writeBufferDrained()
        expectBoundary(d, at: 5 + keepAliveIdle, .closeQuietly)
    }

    @Test func aStallWhileIdleBeatsTheLongerIdleDeadline() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.headComplete(now: at(1), hasBody: false)
        d.responseComplete(now: at(5))              // idle deadline 5 + 41 = 46
        d.writeBufferFull(now: at(6))               // stall deadline 6 + 23 = 29
        expectBoundary(d, at: 6 + writeStall, .writeStall)
        d.writeBufferDrained()
        expectBoundary(d, at: 5 + keepAliveIdle, .closeQuietly)
    }

    @Test func aStallLaterThanTheHeadDeadlineLosesToIt() {
        var d = accepted()
        d.writeBufferFull(now: at(0))               // stall 23, first-request deadline 7
        expectBoundary(d, at: headerRead, .closeQuietly)
    }

    @Test func headCompleteKeepsAStallThatStartedEarlier() {
        var d = accepted()
        d.headBytesArrived(now: at(1))
        d.writeBufferFull(now: at(2))
        d.headComplete(now: at(3), hasBody: false)
        #expect(d.writeStalledSince == at(2))
        expectBoundary(d, at: 2 + writeStall, .writeStall)
    }

    // MARK: fractional settings

    @Test func fractionalSecondsAreExactToTheNanosecond() {
        let s = ConnectionDeadlines.Settings(headerReadSeconds: 0.25, bodyReadSeconds: 1.5,
                                             keepAliveIdleSeconds: 2.75, clientWriteStallSeconds: 0.5)
        var d = ConnectionDeadlines(settings: s, acceptedAt: t0)
        #expect(due(d) == Due(deadline: at(0, plusNanoseconds: 250_000_000), expiry: .closeQuietly))
        #expect(d.expired(now: at(0, plusNanoseconds: 249_999_999)) == nil)
        #expect(d.expired(now: at(0, plusNanoseconds: 250_000_000)) == .closeQuietly)
        d.headBytesArrived(now: at(0, plusNanoseconds: 100))
        d.headComplete(now: at(0, plusNanoseconds: 200_000_000), hasBody: true)
        #expect(due(d) == Due(deadline: at(1, plusNanoseconds: 700_000_000), expiry: .requestTimeout))
        d.bodyComplete()
        d.writeBufferFull(now: at(2))
        #expect(due(d) == Due(deadline: at(2, plusNanoseconds: 500_000_000), expiry: .writeStall))
        d.responseComplete(now: at(3))
        #expect(due(d) == Due(deadline: at(2, plusNanoseconds: 500_000_000), expiry: .writeStall))
        d.writeBufferDrained()
        #expect(due(d) == Due(deadline: at(5, plusNanoseconds: 750_000_000), expiry: .closeQuietly))
    }
}
