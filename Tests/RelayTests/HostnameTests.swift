import Foundation
import RelayTestSupport
import TestHarness
import Testing

/// A provider reached by host name goes through curl's threaded resolver, whose internal socket is closed by
/// curl itself; the next socket curl opens often gets the same descriptor number. The relay's watch on curl's
/// sockets must not be fooled by that reuse.
@Suite("Host names")
struct HostnameTests {
    /// This machine's own host name, if it resolves to loopback (it does on the CI machines: /etc/hosts).
    static let loopbackHostName: String? = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var hints = addrinfo()
        hints.ai_family = AF_INET
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &result) == 0, let info = result else { return nil }
        defer { freeaddrinfo(result) }
        let isLoopback = info.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
            UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127
        }
        return isLoopback && name != "localhost" ? name : nil
    }()

    @Test("requests to an upstream named by host name complete", .enabled(if: loopbackHostName != nil))
    func viaResolver() throws {
        let upstream = try ScriptedUpstream { connection in
            while true {
                _ = try connection.readRequest()
                try connection.writeHead(status: 200, headers: sseHead)
                try connection.writeChunk("data: hello\n\n")
                try connection.writeLastChunk()
            }
        }
        let relay = try RelayFixture(upstream: upstream, baseURL: "http://\(Self.loopbackHostName!):\(upstream.port)") {
            $0.workers = 1
        }
        for _ in 0..<5 {
            let client = try relay.client()
            try client.sendRequest(path: "/v1/chat/completions", body: chatBody)
            let head = try client.readHead(timeout: 3)
            #expect(head.status == 200)
            #expect(try client.readBody(head: head, timeout: 3) == Array("data: hello\n\n".utf8))
        }
    }
}
