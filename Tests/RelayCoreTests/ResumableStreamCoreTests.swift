// The pure parts of resumable streams: the replay buffer's offsets and bounds, the request's id and offset.
@testable import Relay
import Testing

private extension ReplayBuffer {
    mutating func append(_ text: String) -> Int { Array(text.utf8).withUnsafeBytes { append($0) } }
}

@Suite struct ReplayBufferTests {
    @Test func everyOffsetUpToWhatWasWrittenReplaysTheRest() {
        var b = ReplayBuffer(maxBytes: 1024)
        #expect(b.append("data: é\n\n") == 10)
        #expect(b.append(": keep-alive\n\n") == 14)
        let all = Array("data: é\n\n: keep-alive\n\n".utf8)
        for offset in 0...all.count {
            #expect(b.position(offset) == .replay(offset))
            #expect(Array(b.read(from: offset, limit: 1 << 20)) == Array(all[offset...]))
        }
        #expect(b.position(all.count + 1) == .beyondWritten)
        #expect(Array(b.read(from: 3, limit: 4)) == Array(all[3..<7]))
    }

    @Test func outgrowingTheBufferDropsItAndEveryResumeIsExpired() {
        var b = ReplayBuffer(maxBytes: 10)
        #expect(b.append("12345678") == 8)
        #expect(b.append("abc") == -8, "the bytes held are freed")
        #expect(b.overflowed && b.heldBytes == 0 && b.written == 11)
        #expect(b.append("more") == 0)
        #expect(b.position(0) == .expired)
        #expect(b.position(15) == .expired)
        #expect(b.position(16) == .beyondWritten)
        #expect(b.read(from: 0, limit: 100).isEmpty)
    }
}

@Suite struct StreamRequestTests {
    static let id = StreamIDs.make()

    @Test func idsAre128RandomBitsInBase64URL() {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = StreamIDs.make()
            #expect(id.utf8.count == 22)
            #expect(StreamIDs.isWellFormed(Substring(id)))
            #expect(id.utf8.allSatisfy { b in (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || b == 0x2D || b == 0x5F })
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    @Test func aResumeAndAStop() {
        let path = StreamRequest.pathPrefix + Self.id
        #expect(StreamRequest.parse(method: "GET", path: path, query: "offset=0") == .resume(id: Self.id, offset: 0))
        #expect(StreamRequest.parse(method: "GET", path: path, query: "x=1&offset=123456789012345") == .resume(id: Self.id, offset: 123_456_789_012_345))
        #expect(StreamRequest.parse(method: "DELETE", path: path, query: nil) == .stop(id: Self.id))
    }

    @Test(arguments: ["", "abc", String(repeating: "A", count: 21), String(repeating: "A", count: 23),
                      String(repeating: "A", count: 21) + "+", String(repeating: "A", count: 21) + "=",
                      String(repeating: "A", count: 21) + "/", String(repeating: "A", count: 20) + "%41",
                      "AAAAAAAAAAAAAAAAAAAAAB", "../../../../etc/passwd", "AAAAAAAAAAAAAAAAAAAAA\u{e9}"])
    func idsNotSpelledAsIdsAreNotFound(id: String) {
        #expect(StreamRequest.parse(method: "GET", path: StreamRequest.pathPrefix + id, query: "offset=0")
                == .invalid(StreamRequest.streamNotFound, result: "not_found"))
        #expect(StreamRequest.parse(method: "DELETE", path: StreamRequest.pathPrefix + id, query: nil)
                == .invalid(StreamRequest.streamNotFound, result: "not_found"))
    }

    @Test(arguments: [nil, "", "offset=", "offset=-1", "offset=+1", "offset=1e3", "offset=%31", "offset= 1", "offset=0x10",
                      "offset=1234567890123456", "offset=99999999999999999999999", "offset=1&offset=1", "Offset=1", "offset"])
    func offsetsNotSpelledAsDecimalDigitsAreRefused(query: String?) {
        #expect(StreamRequest.parse(method: "GET", path: StreamRequest.pathPrefix + Self.id, query: query)
                == .invalid(StreamRequest.invalidOffset, result: "invalid"))
    }

    @Test func otherMethodsGet405() {
        let r = StreamRequest.parse(method: "POST", path: StreamRequest.pathPrefix + Self.id, query: "offset=0")
        guard case .invalid(let error, _) = r else { Issue.record("\(r)"); return }
        #expect(error.status == 405)
    }
}
