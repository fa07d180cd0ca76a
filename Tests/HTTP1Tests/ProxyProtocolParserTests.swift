// ProxyProtocolParser: HAProxy's PROXY protocol v1 and v2, fed whole, one byte at a time and split at every
// position; the bytes after the header are never counted as the header's.
import HTTP1
import Testing

private let request = b("GET /v1/models HTTP/1.1\r\nHost: relay\r\n\r\n")
private let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

private func v2(command: UInt8 = 0x21, family: UInt8, body: [UInt8], declaredLength: Int? = nil) -> [UInt8] {
    let length = declaredLength ?? body.count
    return v2Signature + [command, family, UInt8(length >> 8), UInt8(length & 0xFF)] + body
}

private func proxied(_ source: String, _ sourcePort: Int, _ destination: String, _ destinationPort: Int) -> ProxyHeader {
    .proxied(source: IPAddress(source)!, sourcePort: sourcePort, destination: IPAddress(destination)!, destinationPort: destinationPort)
}

/// What feeding `pieces` in order gave: the header and the offset in the whole input where it ended, or the
/// offset of the byte at which the parser gave up, or nothing yet.
private enum Fed: Equatable {
    case header(ProxyHeader, endOffset: Int)
    case invalid(atOrBefore: Int)
    case needMore
}

private func feed(_ pieces: [[UInt8]]) -> Fed {
    var parser = ProxyProtocolParser(maxV2Length: 512)
    var offset = 0
    for piece in pieces {
        switch parser.parse(piece) {
        case .needMore: offset += piece.count
        case .header(let header, let consumed):
            #expect(consumed >= 0 && consumed <= piece.count)
            return .header(header, endOffset: offset + consumed)
        case .invalid: return .invalid(atOrBefore: offset + piece.count)
        }
    }
    return .needMore
}

/// Every way of cutting `input`: whole, byte by byte, and in two at each position.
private func splits(_ input: [UInt8]) -> [[[UInt8]]] {
    var all: [[[UInt8]]] = [[input], input.map { [$0] }]
    for cut in 1..<max(1, input.count) { all.append([Array(input[..<cut]), Array(input[cut...])]) }
    return all
}

@Suite struct ProxyProtocolParserTests {
    struct Good: Sendable, CustomTestStringConvertible {
        var name: String
        var header: [UInt8]
        var expected: ProxyHeader
        var testDescription: String { name }
    }

    static let tlvs: [UInt8] = [0x04, 0x00, 0x03, 0x61, 0x62, 0x63, 0xEA, 0x00, 0x02, 0x01, 0x02]   // NOOP "abc", AWS-style
    static let v4Addresses: [UInt8] = [203, 0, 113, 9, 10, 0, 0, 5, 0xC8, 0x22, 0x1F, 0x90]   // :51234 → :8080
    static let v6Addresses: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1]
        + [0xFD, 0] + [UInt8](repeating: 0, count: 13) + [5] + [0x01, 0xBB, 0x1F, 0x90]

    static let good: [Good] = [
        Good(name: "v1 TCP4", header: b("PROXY TCP4 203.0.113.9 10.0.0.5 51234 8080\r\n"),
             expected: proxied("203.0.113.9", 51234, "10.0.0.5", 8080)),
        Good(name: "v1 TCP6", header: b("PROXY TCP6 2001:db8::1 fd00::5 443 8080\r\n"),
             expected: proxied("2001:db8::1", 443, "fd00::5", 8080)),
        Good(name: "v1 long TCP6 line",
             header: b("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
             expected: proxied("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535)),
        Good(name: "v1 port 0", header: b("PROXY TCP4 1.2.3.4 5.6.7.8 0 80\r\n"), expected: proxied("1.2.3.4", 0, "5.6.7.8", 80)),
        Good(name: "v1 UNKNOWN", header: b("PROXY UNKNOWN\r\n"), expected: .local),
        Good(name: "v1 UNKNOWN with addresses", header: b("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), expected: .local),
        Good(name: "v2 PROXY TCP4", header: v2(family: 0x11, body: v4Addresses), expected: proxied("203.0.113.9", 51234, "10.0.0.5", 8080)),
        Good(name: "v2 PROXY TCP4 with TLVs", header: v2(family: 0x11, body: v4Addresses + tlvs),
             expected: proxied("203.0.113.9", 51234, "10.0.0.5", 8080)),
        Good(name: "v2 PROXY TCP6", header: v2(family: 0x21, body: v6Addresses), expected: proxied("2001:db8::1", 443, "fd00::5", 8080)),
        Good(name: "v2 LOCAL", header: v2(command: 0x20, family: 0x00, body: []), expected: .local),
        Good(name: "v2 LOCAL with addresses (ignored)", header: v2(command: 0x20, family: 0x11, body: v4Addresses), expected: .local),
        Good(name: "v2 LOCAL with a UDP family (discarded)", header: v2(command: 0x20, family: 0x12, body: v4Addresses), expected: .local),
        Good(name: "v2 PROXY UNSPEC", header: v2(family: 0x00, body: tlvs), expected: .local),
        Good(name: "v2 PROXY AF_UNIX", header: v2(family: 0x31, body: [UInt8](repeating: 0x2F, count: 216)), expected: .local),
    ]

    @Test(arguments: good)
    func readsTheHeaderAndLeavesTheRequest(_ c: Good) {
        for pieces in splits(c.header + request) {
            #expect(feed(pieces) == .header(c.expected, endOffset: c.header.count), "pieces \(pieces.map(\.count))")
        }
        // The header alone, nothing after it.
        for pieces in splits(c.header) {
            #expect(feed(pieces) == .header(c.expected, endOffset: c.header.count))
        }
    }

    @Test(arguments: good)
    func aTruncatedHeaderNeedsMore(_ c: Good) {
        for end in 0..<c.header.count {
            #expect(feed([Array(c.header[..<end])]) == .needMore, "first \(end) bytes")
        }
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        var name: String
        var input: [UInt8]
        /// The parser must give up once it has seen this many bytes.
        var decidedBy: Int
        var testDescription: String { name }
    }

    static let bad: [Bad] = [
        Bad(name: "plain HTTP", input: request, decidedBy: 1),
        Bad(name: "an empty line, then HTTP", input: b("\r\nGET / HTTP/1.1\r\n\r\n"), decidedBy: 3),
        Bad(name: "lowercase proxy", input: b("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), decidedBy: 1),
        Bad(name: "PROXZ", input: b("PROXZ TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), decidedBy: 5),
        Bad(name: "v1 unknown protocol", input: b("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n"), decidedBy: 32),
        Bad(name: "v1 bare LF", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n") + request, decidedBy: 31),
        Bad(name: "v1 no line end within 107 bytes", input: b("PROXY TCP4 " + String(repeating: "1", count: 120)), decidedBy: 107),
        Bad(name: "v1 IPv6 on TCP4", input: b("PROXY TCP4 ::1 ::2 1 2\r\n"), decidedBy: 24),
        Bad(name: "v1 IPv4 on TCP6", input: b("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n"), decidedBy: 32),
        Bad(name: "v1 mixed families", input: b("PROXY TCP4 1.2.3.4 ::1 1 2\r\n"), decidedBy: 28),
        Bad(name: "v1 port too large", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n"), decidedBy: 36),
        Bad(name: "v1 port with leading zero", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n"), decidedBy: 33),
        Bad(name: "v1 port not a number", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n"), decidedBy: 33),
        Bad(name: "v1 missing field", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"), decidedBy: 30),
        Bad(name: "v1 extra field", input: b("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n"), decidedBy: 34),
        Bad(name: "v1 double space", input: b("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n"), decidedBy: 33),
        Bad(name: "v1 name instead of address", input: b("PROXY TCP4 evil.example 5.6.7.8 1 2\r\n"), decidedBy: 37),
        Bad(name: "v2 signature broken at its end", input: Array(v2Signature.dropLast()) + [0x0B], decidedBy: 12),
        Bad(name: "v2 version 1", input: v2(command: 0x11, family: 0x11, body: v4Addresses), decidedBy: 13),
        Bad(name: "v2 command 2", input: v2(command: 0x22, family: 0x11, body: v4Addresses), decidedBy: 13),
        Bad(name: "v2 UDP over IPv4", input: v2(family: 0x12, body: v4Addresses), decidedBy: 14),
        Bad(name: "v2 unknown family", input: v2(family: 0x41, body: v4Addresses), decidedBy: 14),
        Bad(name: "v2 longer than allowed", input: v2(family: 0x11, body: v4Addresses, declaredLength: 513), decidedBy: 16),
        Bad(name: "v2 TCP4 block too short", input: v2(family: 0x11, body: Array(v4Addresses.prefix(11))), decidedBy: 16),
        Bad(name: "v2 TCP6 block too short", input: v2(family: 0x21, body: v4Addresses), decidedBy: 16),
    ]

    @Test(arguments: bad)
    func refusesAsSoonAsItCan(_ c: Bad) {
        for pieces in splits(c.input) {
            let fed = feed(pieces)
            guard case .invalid(let at) = fed else {
                Issue.record("pieces \(pieces.map(\.count)): \(fed)")
                continue
            }
            // Fed byte by byte, the offset is exactly where it decided.
            if pieces.allSatisfy({ $0.count == 1 }) { #expect(at <= c.decidedBy, "decided at \(at)") }
        }
    }

    @Test func doesNotTakeMoreThanTheBound() {
        var parser = ProxyProtocolParser(maxV2Length: 64)
        let header = v2(family: 0x00, body: [UInt8](repeating: 0, count: 64))
        #expect(parser.parse(header + request) == .header(.local, consumed: header.count))
        var again = parser
        #expect(again.parse(request) == .invalid("the PROXY header was already read"))
        var tooLong = ProxyProtocolParser(maxV2Length: 64)
        #expect(tooLong.parse(v2(family: 0x00, body: [], declaredLength: 65)) != .needMore)
    }
}
