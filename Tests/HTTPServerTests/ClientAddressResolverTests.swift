// ClientAddressResolver and CIDR: whose X-Forwarded-For is believed, and which hop is the client.
import HTTP1
import HTTPServer
import Testing

private func resolver(_ blocks: [String]) -> ClientAddressResolver {
    ClientAddressResolver(trustedProxies: blocks.map { CIDR($0)! })
}

@Suite struct CIDRTests {
    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0/8"), ("10.1.2.3", "10.1.2.3/32"), ("0.0.0.0/0", "0.0.0.0/0"),
        ("192.168.0.0/16", "192.168.0.0/16"), ("fd00::/8", "fd00::/8"), ("::1", "::1/128"), ("::/0", "::/0"),
        ("2001:DB8::/32", "2001:db8::/32"), ("172.16.0.0/12", "172.16.0.0/12"), ("127.0.0.1/32", "127.0.0.1/32"),
    ])
    func parses(_ text: String, _ printed: String) throws {
        #expect(try #require(CIDR(text)).description == printed)
    }

    @Test(arguments: [
        "", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.1/8", "fd00::1/8", "fd00::/129",
        "10.0.0/8", "10.0.0.0/8/8", "localhost", "10.0.0.0 /8", "::/x", "010.0.0.0/8", "1.2.3.4:80",
    ])
    func rejects(_ text: String) {
        #expect(CIDR(text) == nil)
    }

    @Test func containment() throws {
        let ten = try #require(CIDR("10.0.0.0/8"))
        #expect(ten.contains(IPAddress("10.255.255.255")!))
        #expect(!ten.contains(IPAddress("11.0.0.0")!))
        #expect(ten.contains(IPAddress("::ffff:10.1.2.3")!), "a dual-stack socket's IPv4-mapped peer")
        #expect(!ten.contains(IPAddress("fd00::1")!))
        let ula = try #require(CIDR("fd00::/8"))
        #expect(ula.contains(IPAddress("fd12:3456::1")!))
        #expect(!ula.contains(IPAddress("fe80::1")!))
        #expect(!ula.contains(IPAddress("10.0.0.1")!))
        let odd = try #require(CIDR("192.168.4.0/23"))
        #expect(odd.contains(IPAddress("192.168.5.200")!))
        #expect(!odd.contains(IPAddress("192.168.6.0")!))
        #expect(try #require(CIDR("0.0.0.0/0")).contains(IPAddress("203.0.113.1")!))
    }
}

@Suite struct ClientAddressResolverTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var trusted: [String]
        var peer: String
        var xff: [String]
        var client: String
        var upstream: String
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // Untrusted peers: every forwarding claim is ignored and replaced.
        Case(name: "no trusted proxies: the peer", trusted: [], peer: "203.0.113.9", xff: ["1.2.3.4"],
             client: "203.0.113.9", upstream: "203.0.113.9"),
        Case(name: "untrusted peer with a spoofed chain", trusted: ["10.0.0.0/8"], peer: "203.0.113.9",
             xff: ["10.0.0.1, 1.2.3.4"], client: "203.0.113.9", upstream: "203.0.113.9"),
        Case(name: "untrusted peer, garbage", trusted: ["10.0.0.0/8"], peer: "198.51.100.1", xff: ["<script>"],
             client: "198.51.100.1", upstream: "198.51.100.1"),
        // Trusted peer: right-most untrusted hop.
        Case(name: "ingress with one hop", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["203.0.113.9"],
             client: "203.0.113.9", upstream: "203.0.113.9, 10.0.0.2"),
        Case(name: "client-written hops left of the client are dropped", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["6.6.6.6, 7.7.7.7, 203.0.113.9"], client: "203.0.113.9", upstream: "203.0.113.9, 10.0.0.2"),
        Case(name: "trusted hops are skipped (real_ip_recursive)", trusted: ["10.0.0.0/8", "192.168.0.0/16"], peer: "10.0.0.2",
             xff: ["6.6.6.6, 203.0.113.9, 192.168.1.1, 10.9.9.9"], client: "203.0.113.9",
             upstream: "203.0.113.9, 192.168.1.1, 10.9.9.9, 10.0.0.2"),
        Case(name: "all hops trusted: the left-most", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["10.1.1.1, 10.2.2.2"], client: "10.1.1.1", upstream: "10.1.1.1, 10.2.2.2, 10.0.0.2"),
        Case(name: "no header: the trusted peer itself", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: [],
             client: "10.0.0.2", upstream: "10.0.0.2"),
        Case(name: "empty header", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: [" , "], client: "10.0.0.2",
             upstream: "10.0.0.2"),
        Case(name: "several lines are one list (RFC 9110 §5.3)", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["6.6.6.6, 203.0.113.9", "10.3.3.3"], client: "203.0.113.9", upstream: "203.0.113.9, 10.3.3.3, 10.0.0.2"),
        Case(name: "spaces, tabs and empty elements", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["  203.0.113.9 ,,\t10.3.3.3\t"], client: "203.0.113.9", upstream: "203.0.113.9, 10.3.3.3, 10.0.0.2"),
        // Malformed hops stop the walk at the last valid one.
        Case(name: "malformed right-most hop: the peer", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["203.0.113.9, unknown"],
             client: "10.0.0.2", upstream: "10.0.0.2"),
        Case(name: "malformed behind a trusted hop: that hop", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["203.0.113.9, bogus, 10.3.3.3"], client: "10.3.3.3", upstream: "10.3.3.3, 10.0.0.2"),
        Case(name: "malformed left of the client does not matter", trusted: ["10.0.0.0/8"], peer: "10.0.0.2",
             xff: ["x\"y, 203.0.113.9"], client: "203.0.113.9", upstream: "203.0.113.9, 10.0.0.2"),
        Case(name: "a name is not an address", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["evil.example"],
             client: "10.0.0.2", upstream: "10.0.0.2"),
        Case(name: "octal-looking IPv4 is malformed", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["010.0.0.1"],
             client: "10.0.0.2", upstream: "10.0.0.2"),
        // Ports and IPv6.
        Case(name: "IPv4 with a port", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["203.0.113.9:51234"],
             client: "203.0.113.9", upstream: "203.0.113.9, 10.0.0.2"),
        Case(name: "bracketed IPv6 with a port", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["[2001:DB8::1]:443"],
             client: "2001:db8::1", upstream: "2001:db8::1, 10.0.0.2"),
        Case(name: "bare IPv6, normalised", trusted: ["fd00::/8"], peer: "fd00::2", xff: ["2001:db8:0:0::0:1, fd00::9"],
             client: "2001:db8::1", upstream: "2001:db8::1, fd00::9, fd00::2"),
        Case(name: "IPv4-mapped trusted peer", trusted: ["10.0.0.0/8"], peer: "::ffff:10.0.0.2", xff: ["203.0.113.9"],
             client: "203.0.113.9", upstream: "203.0.113.9, ::ffff:10.0.0.2"),
        Case(name: "a port out of range is malformed", trusted: ["10.0.0.0/8"], peer: "10.0.0.2", xff: ["203.0.113.9:70000"],
             client: "10.0.0.2", upstream: "10.0.0.2"),
    ]

    @Test(arguments: cases)
    func resolves(_ c: Case) {
        let result = resolver(c.trusted).resolve(peer: c.peer, forwardedFor: c.xff)
        #expect(result.address == c.client)
        #expect(result.forwardedFor == c.upstream)
        #expect(result.viaTrustedProxy == (c.trusted.contains { CIDR($0)!.contains(IPAddress(c.peer)!) }))
    }

    @Test func isTrustedNeedsAnAddress() {
        let r = resolver(["0.0.0.0/0"])
        #expect(r.isTrusted("1.2.3.4"))
        #expect(!r.isTrusted("not-an-address"))
        #expect(!resolver([]).isTrusted("127.0.0.1"))
    }
}

/// What limits count on: an IPv6 client's /64, so rotating through the addresses of its own block gains nothing.
@Suite struct ClientLimitKeyTests {
    @Test(arguments: [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2::a", "2001:db8:1:2::/64"), ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2:3:4:5:6", "2001:db8:1:2::/64"), ("2001:db8:1:3::a", "2001:db8:1:3::/64"),
        ("::1", "::/64"), ("fe80::1", "fe80::/64"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("not-an-address", "not-an-address"), ("unix:socket", "unix:socket"),
    ])
    func limitKey(_ address: String, _ key: String) {
        #expect(ClientAddress.limitKey(of: address) == key)
        #expect(ClientAddress.direct(address).limitKey == key)
    }

    @Test func followsTheAddress() {
        var client = ClientAddress.direct("2001:db8::1")
        client.address = "2001:db8:0:1::1"
        #expect(client.limitKey == "2001:db8:0:1::/64")
        #expect(resolver(["127.0.0.1/32"]).resolve(peer: "127.0.0.1", forwardedFor: ["2001:db8:5:6:7::9"]).limitKey == "2001:db8:5:6::/64")
    }
}
