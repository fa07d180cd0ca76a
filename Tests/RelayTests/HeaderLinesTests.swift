// The header list handed to curl (CURLOPT_HTTPHEADER) is built in one allocation: every node linked in order,
// every line NUL-terminated, the empty-value and suppression spellings curl expects.
import CCurl
import HTTP1
import Testing
@testable import Upstream

@Suite struct HeaderLinesTests {
    private func lines(_ list: HeaderLines) -> [String] {
        var result: [String] = []
        var node = list.first
        while let current = node {
            result.append(String(cString: current.pointee.data))
            node = current.pointee.next
        }
        return result
    }

    @Test func linesInOrderThenCurlsOwnHeadersSuppressed() {
        let headers = HTTPHeaders([("Content-Type", "application/json"), ("X-Empty", ""), ("Authorization", "Bearer k"),
                                   ("X-Ünïcode", "välue")])
        let list = HeaderLines(headers, suppressing: Transfer.curlDefaultHeaders)
        defer { list.deallocate() }
        #expect(lines(list) == ["Content-Type: application/json", "X-Empty;", "Authorization: Bearer k", "X-Ünïcode: välue",
                                "Expect:", "Accept:", "Transfer-Encoding:"])
    }

    @Test func noHeadersAtAll() {
        let list = HeaderLines(HTTPHeaders(), suppressing: [])
        defer { list.deallocate() }
        #expect(list.first == nil)
    }

    @Test func aClientHeaderCurlWouldAddIsSentAsTheClientSentIt() {
        let list = HeaderLines(HTTPHeaders([("accept", "text/event-stream")]), suppressing: Transfer.curlDefaultHeaders)
        defer { list.deallocate() }
        #expect(lines(list) == ["accept: text/event-stream", "Expect:", "Content-Type:", "Transfer-Encoding:"])
    }
}
