// ErrorEventSniffer: the first event of a 2xx stream, whole or split at every byte.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

@Suite("Error event sniffer")
struct ErrorEventSnifferTests {
    func verdict(_ text: String, split: Int? = nil) -> ErrorEventSniffer.Verdict {
        var sniffer = ErrorEventSniffer()
        let bytes = Array(text.utf8)
        let cut = split ?? bytes.count
        bytes[..<cut].withUnsafeBytes { sniffer.feed($0) }
        bytes[cut...].withUnsafeBytes { sniffer.feed($0) }
        return sniffer.verdict
    }

    @Test func errorFirst() {
        let text = "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"
        for split in 0...text.utf8.count { #expect(verdict(text, split: split) == .errorEvent) }
        #expect(verdict("event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\r\n\r\n") == .errorEvent)
    }

    @Test func contentFirst() {
        #expect(verdict("data: {\"choices\":[{\"delta\":{\"content\":\"error\"}}]}\n\n") == .content)
        #expect(verdict(": keep-alive\n\n") == .content)
        #expect(verdict("data: {\"error\"") == .undecided)
        #expect(verdict("data: " + String(repeating: "x", count: 5000)) == .content)
    }

    /// Provider output is read as JSON reads it: an escaped member name is still `error`, a name given twice
    /// does not hide it, and what is not one JSON object is content.
    @Test func readAsJSON() {
        #expect(verdict("data: {\"\\u0065rror\":{\"message\":\"x\"}}\n\n") == .errorEvent)
        #expect(verdict("data: {\"id\":1,\"id\":2,\"error\":{}}\n\n") == .errorEvent)
        #expect(verdict("data: {\"error\":1}\ndata: \n\n") == .errorEvent, "data lines joined with a newline")
        #expect(verdict("data: {\"error\":1} trailing\n\n") == .content)
        #expect(verdict("data: {\"message\":{\"error\":1}}\n\n") == .content, "only a top-level member counts")
    }
}
