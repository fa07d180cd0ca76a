// The pure parts of resumable streams across replicas: the record kept in Redis, and what a reader on another
// replica does after a poll.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing

@Suite struct StreamMetaTests {
    static let meta = StreamMeta(owner: "replicaA", identityHash: StreamMeta.identityHash("static:app-a"), routeIndex: 2,
                                 written: 1234, state: .running)

    @Test func everyStateSurvivesEncodeAndDecode() {
        for state in StreamMeta.State.allCases {
            var m = Self.meta
            m.state = state
            #expect(StreamMeta.decode(m.encoded()) == m)
        }
        #expect(StreamMeta.decode(StreamMeta(owner: "o", identityHash: "-", routeIndex: 0, written: 0, state: .completed).encoded())?
            .identityHash == "-")
    }

    @Test func anythingElseDecodesToNil() {
        let good = Self.meta.encoded()
        for bad in ["", "v1", good + " extra", "v2" + good.dropFirst(2),
                    "v1 o h 0 -5 running", "v1 o h -1 5 running", "v1 o h 0 5 paused", "v1  h 0 5 running",
                    "v1 o h x 5 running", "v1 o h 0 99999999999999999999999 running"] {
            #expect(StreamMeta.decode(bad) == nil, "\(bad)")
        }
    }

    @Test func theIdentityIsAHashNeverTheKey() {
        let hash = StreamMeta.identityHash("static:app-a")
        #expect(hash.count == 64 && !hash.contains("app-a"))
        #expect(hash != StreamMeta.identityHash("static:app-b"))
        #expect(StreamMeta.identityHash(nil) == "-")
        #expect(!Self.meta.encoded().contains("app-a"))
    }

    @Test func offsetsFollowTheMemoryRule() {
        var m = Self.meta
        #expect(m.position(0) == .replay(0))
        #expect(m.position(1234) == .replay(1234))
        #expect(m.position(1235) == .beyondWritten)
        m.state = .overflowed
        #expect(m.position(10) == .expired)
        // The owner went on counting after the copy stopped: an offset past the record's count is the owner's 410.
        #expect(m.position(1235) == .expired)
        #expect(m.position(1_000_000) == .expired)
    }
}

@Suite struct RemoteFollowTests {
    static func meta(_ written: Int, _ state: StreamMeta.State) -> StreamMeta {
        StreamMeta(owner: "a", identityHash: "-", routeIndex: 0, written: written, state: state)
    }

    @Test func bytesAreWrittenOnlyUpToWhatTheRecordSays() {
        #expect(RemoteFollow.step(meta: Self.meta(10, .running), stopped: false, claimed: true, offset: 4, fetched: 6) == .write(6))
        // The body ran ahead of the record (an append after the record was read): only what the record names.
        #expect(RemoteFollow.step(meta: Self.meta(10, .running), stopped: false, claimed: true, offset: 4, fetched: 9) == .write(6))
        #expect(RemoteFollow.step(meta: Self.meta(10, .completed), stopped: false, claimed: true, offset: 8, fetched: 2) == .write(2))
    }

    @Test func caughtUpWaitsWhileRunningAndEndsAsTheStreamEnded() {
        #expect(RemoteFollow.step(meta: Self.meta(10, .running), stopped: false, claimed: true, offset: 10, fetched: 0) == .wait)
        #expect(RemoteFollow.step(meta: Self.meta(10, .completed), stopped: false, claimed: true, offset: 10, fetched: 0) == .end(clean: true))
        #expect(RemoteFollow.step(meta: Self.meta(10, .broken), stopped: false, claimed: true, offset: 10, fetched: 0) == .end(clean: false))
        // Ended, bytes unread, and the body no longer has them: nothing can follow.
        #expect(RemoteFollow.step(meta: Self.meta(10, .completed), stopped: false, claimed: true, offset: 4, fetched: 0) == .copyLost)
        #expect(RemoteFollow.step(meta: Self.meta(10, .broken), stopped: false, claimed: true, offset: 4, fetched: 0) == .copyLost)
    }

    @Test func aStopATakeoverAnOverflowALostCopyOrAGoneRecordClose() {
        #expect(RemoteFollow.step(meta: Self.meta(10, .running), stopped: true, claimed: true, offset: 4, fetched: 6) == .takenOver)
        #expect(RemoteFollow.step(meta: Self.meta(10, .running), stopped: false, claimed: false, offset: 4, fetched: 6) == .takenOver)
        // A stop or a takeover comes first, whatever the copy's state.
        #expect(RemoteFollow.step(meta: Self.meta(10, .ownerOnly), stopped: true, claimed: true, offset: 4, fetched: 6) == .takenOver)
        #expect(RemoteFollow.step(meta: nil, stopped: false, claimed: false, offset: 4, fetched: 6) == .takenOver)
        #expect(RemoteFollow.step(meta: Self.meta(10, .overflowed), stopped: false, claimed: true, offset: 4, fetched: 0) == .copyLost)
        #expect(RemoteFollow.step(meta: nil, stopped: false, claimed: true, offset: 4, fetched: 6) == .copyLost)
        // The copy lost bytes while a reader followed it: bytes the poll still returned are not written (they may
        // sit after a hole), and the reader closes; its client asks again and gets 503 until it reaches the owner.
        #expect(RemoteFollow.step(meta: Self.meta(10, .ownerOnly), stopped: false, claimed: true, offset: 4, fetched: 6) == .copyLost)
    }
}
