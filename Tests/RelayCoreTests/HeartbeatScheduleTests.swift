// HeartbeatSchedule as a value: when a quiet stream gets ": keep-alive", and never inside an event.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Support
import Testing

private func at(_ seconds: Double) -> Instant { Instant(nanoseconds: 1_000_000_000).advanced(bySeconds: seconds) }

private extension HeartbeatSchedule {
    mutating func wrote(_ text: String) { Array(text.utf8).withUnsafeBytes { wrote($0) } }
}

@Suite struct HeartbeatScheduleTests {
    @Test func aSilentStreamGetsOneHeartbeatPerIntervalAndNoneEarly() {
        var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
        h.wrote("data: a\n\n")
        #expect(h.nextDue == at(1))
        let due0 = h.due(now: at(0.999), clientBackedUp: false)
        #expect(!due0)
        var beats = 0
        for step in 1...7 where h.due(now: at(Double(step) * 0.5), clientBackedUp: false) { beats += 1 }   // up to 3.5 s
        #expect(beats == 3)
        #expect(h.count == 3)
        #expect(h.nextDue == at(4))
    }

    @Test func aProviderDeliveryStartsTheSilenceAgain() {
        var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
        h.providerDelivered(now: at(0.9))
        h.wrote("data: a\n\n")
        let due1 = h.due(now: at(1.5), clientBackedUp: false)
        #expect(!due1)
        let due2 = h.due(now: at(1.9), clientBackedUp: false)
        #expect(due2)
    }

    @Test func theStartOfAStreamIsABoundary() {
        var h = HeartbeatSchedule(intervalSeconds: 2, now: at(0))
        let due3 = h.due(now: at(2), clientBackedUp: false)
        #expect(due3, "a model thinking before its first byte")
    }

    /// Every way an event can end, and every place a write can stop inside one.
    @Test(arguments: [
        ("data: a\n\n", true), ("data: a\r\n\r\n", true), ("data: a\r\r", true), ("data: a\n\r\n", true),
        ("data: a\r\r\n", true), (": c\n\n", true),
        ("data: a", false), ("data: a\n", false), ("data: a\r\n", false), ("data: a\r", false),
        ("data: a\r\n\r", false), ("data: a\n\r", false), ("data: a\n\ndata: b", false), ("event: x\n", false),
    ])
    func onlyWhereNoLaterByteCanChangeTheEvent(written: String, boundary: Bool) {
        // Whole, and split at every position: only the end matters.
        let bytes = Array(written.utf8)
        for cut in 0...bytes.count {
            var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
            bytes[..<cut].withUnsafeBytes { h.wrote($0) }
            bytes[cut...].withUnsafeBytes { h.wrote($0) }
            #expect(h.atHeartbeatBoundary == boundary, "\(written.debugDescription) cut at \(cut)")
            let due4 = h.due(now: at(5), clientBackedUp: false)
            #expect(due4 == boundary)
        }
        for cut in 0...bytes.count {   // one byte at a time
            var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
            for byte in bytes { [byte].withUnsafeBytes { h.wrote($0) } }
            #expect(h.atHeartbeatBoundary == boundary, "\(written.debugDescription) byte by byte (\(cut))")
        }
    }

    @Test func aPauseMidEventWaitsForTheEventsEnd() {
        var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
        h.wrote("data: a\n\ndata: par")
        #expect(h.nextDue == nil, "no timer while an event is half-sent")
        let due5 = h.due(now: at(10), clientBackedUp: false)
        #expect(!due5)
        h.providerDelivered(now: at(10))
        h.wrote("tial\n\n")
        #expect(h.nextDue == at(11))
        let due6 = h.due(now: at(11), clientBackedUp: false)
        #expect(due6)
    }

    @Test func aClientThatIsBehindGetsNoneAndIsAskedAgainAnIntervalLater() {
        var h = HeartbeatSchedule(intervalSeconds: 1, now: at(0))
        let due7 = h.due(now: at(1), clientBackedUp: true)
        #expect(!due7)
        #expect(h.nextDue == at(2), "not due again at once: no timer spin")
        let due8 = h.due(now: at(2), clientBackedUp: false)
        #expect(due8)
    }
}
