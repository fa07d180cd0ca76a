// IPAddress: one spelling per address (RFC 5952), and nothing but an address parses.
import HTTP1
import Testing

@Suite struct IPAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "0.0.0.0"), ("255.255.255.255", "255.255.255.255"),
        ("::", "::"), ("::1", "::1"), ("1::", "1::"), ("2001:DB8::1", "2001:db8::1"), ("2001:db8:0:0:0:0:0:1", "2001:db8::1"),
        ("2001:0db8:0000:0000:0001:0000:0000:0001", "2001:db8::1:0:0:1"), ("fe80:0:0:1::", "fe80:0:0:1::"),
        ("1:0:0:2:0:0:0:3", "1:0:0:2::3"), ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"), ("1:0:3:4:5:6:7:8", "1:0:3:4:5:6:7:8"),
        ("::ffff:10.1.2.3", "::ffff:10.1.2.3"), ("::FFFF:0a01:0203", "::ffff:10.1.2.3"), ("fd00::", "fd00::"),
        ("1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304"),
    ])
    func parsesAndPrints(_ text: String, _ printed: String) throws {
        #expect(try #require(IPAddress(text)).description == printed)
    }

    @Test(arguments: [
        "", "1", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4", "1..2.3",
        ":", ":::", "1:2", "1::2::3", ":1", "1:", "12345::", "g::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::",
        "::1.2.3", "::1.2.3.4:1", "fe80::1%eth0", "[::1]", "1.2.3.4:80", "localhost", "unknown", "::ffff:256.0.0.1",
    ])
    func rejects(_ text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func bytesRoundTrip() {
        #expect(IPAddress(bytes: [10, 0, 0, 1]) == IPAddress("10.0.0.1"))
        #expect(IPAddress(bytes: [UInt8](repeating: 0, count: 15) + [1]) == IPAddress("::1"))
        #expect(IPAddress(bytes: [1, 2, 3]) == nil)
        #expect(IPAddress("::ffff:192.0.2.1")!.unmapped == IPAddress("192.0.2.1"))
        #expect(IPAddress("::1")!.unmapped == IPAddress("::1"))
    }
}
