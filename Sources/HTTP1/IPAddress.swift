/// An IPv4 or IPv6 address as bytes, parsed from and printed to text without the C library, so forwarded
/// addresses (`X-Forwarded-For` hops, a PROXY protocol header) can be checked and compared as values.
///
/// Text forms read: dotted-quad IPv4 (RFC 3986 `IPv4address`: four decimal octets, no leading zeros, so "010.1.1.1"
/// is rejected rather than read as octal, as some stacks do), and IPv6 per RFC 4291 §2.2 (`::` compression, an
/// embedded IPv4 tail). Printed: RFC 5952 (lowercase, longest zero run compressed, IPv4-mapped as `::ffff:a.b.c.d`),
/// the same text `inet_ntop` gives, so one address always has one spelling (one rate-limit key).
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    case v6([UInt8])

    /// Parses an address; nil for anything else (names, ports, zone ids, CIDR suffixes).
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        if let v4 = IPAddress.parseV4(bytes[...]) {
            self = .v4(v4)
        } else if let v6 = IPAddress.parseV6(bytes[...]) {
            self = .v6(v6)
        } else {
            return nil
        }
    }

    /// From 4 (IPv4) or 16 (IPv6) network-order bytes.
    public init?(bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        switch b.count {
        case 4: self = .v4(b.reduce(0) { $0 << 8 | UInt32($1) })
        case 16: self = .v6(b)
        default: return nil
        }
    }

    /// Network-order bytes: 4 for IPv4, 16 for IPv6.
    public var bytes: [UInt8] {
        switch self {
        case .v4(let n): return [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
        case .v6(let b): return b
        }
    }

    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack socket reports for an IPv4 peer) as the
    /// IPv4 address it stands for; every other address unchanged. CIDR matching uses this, so `10.0.0.0/8`
    /// matches a peer seen as `::ffff:10.1.2.3`.
    public var unmapped: IPAddress {
        if case .v6(let b) = self, b[0..<10].allSatisfy({ $0 == 0 }), b[10] == 0xFF, b[11] == 0xFF {
            return IPAddress(bytes: b[12..<16])!
        }
        return self
    }

    public var description: String {
        switch self {
        case .v4(let n):
            return "\(n >> 24).\((n >> 16) & 0xFF).\((n >> 8) & 0xFF).\(n & 0xFF)"
        case .v6(let b):
            var groups: [Int] = []
            for i in stride(from: 0, to: 16, by: 2) { groups.append(Int(b[i]) << 8 | Int(b[i + 1])) }
            if groups[0..<5].allSatisfy({ $0 == 0 }) && groups[5] == 0xFFFF {
                return "::ffff:\(b[12]).\(b[13]).\(b[14]).\(b[15])"
            }
            // RFC 5952 §4.2: the longest run of two or more zero groups (the first if tied) becomes "::".
            var bestStart = -1, bestLength = 0, i = 0
            while i < 8 {
                guard groups[i] == 0 else { i += 1; continue }
                var j = i
                while j < 8 && groups[j] == 0 { j += 1 }
                if j - i > bestLength && j - i >= 2 { (bestStart, bestLength) = (i, j - i) }
                i = j
            }
            func hex(_ range: Range<Int>) -> String {
                groups[range].map { String($0, radix: 16) }.joined(separator: ":")
            }
            if bestStart < 0 { return hex(0..<8) }
            return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
        }
    }

    static func parseV4(_ s: ArraySlice<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        var parts = 0
        var index = s.startIndex
        while parts < 4 {
            var octet = 0, digits = 0
            while index < s.endIndex, s[index] >= 0x30, s[index] <= 0x39 {
                if digits == 1 && octet == 0 { return nil }   // leading zero
                octet = octet * 10 + Int(s[index] - 0x30)
                digits += 1
                index += 1
                if octet > 255 { return nil }
            }
            if digits == 0 { return nil }
            value = value << 8 | UInt32(octet)
            parts += 1
            if parts < 4 {
                guard index < s.endIndex, s[index] == 0x2E else { return nil }
                index += 1
            }
        }
        return index == s.endIndex ? value : nil
    }

    static func parseV6(_ s: ArraySlice<UInt8>) -> [UInt8]? {
        guard s.count >= 2, s.count <= 45 else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        var index = s.startIndex
        if s[index] == 0x3A {
            guard s[index + 1] == 0x3A else { return nil }
            sawGap = true
            index += 2
        }
        while index < s.endIndex {
            // An IPv4 tail ("::ffff:1.2.3.4") fills the last two groups.
            if let dot = s[index...].firstIndex(of: 0x2E), !s[index..<dot].contains(0x3A) {
                guard let v4 = parseV4(s[index...]) else { return nil }
                let groups = [UInt16(v4 >> 16), UInt16(truncatingIfNeeded: v4)]
                if sawGap { tail += groups } else { head += groups }
                index = s.endIndex
                break
            }
            var group = 0, digits = 0
            while index < s.endIndex, let h = hexValue(s[index]) {
                group = group << 4 | h
                digits += 1
                index += 1
                if digits > 4 { return nil }
            }
            if digits == 0 { return nil }
            if sawGap { tail.append(UInt16(group)) } else { head.append(UInt16(group)) }
            if index == s.endIndex { break }
            guard s[index] == 0x3A, index + 1 < s.endIndex else { return nil }
            index += 1
            if s[index] == 0x3A {
                if sawGap { return nil }
                sawGap = true
                index += 1
            }
        }
        let count = head.count + tail.count
        if sawGap ? count > 7 : count != 8 { return nil }
        let groups = head + [UInt16](repeating: 0, count: 8 - count) + tail
        return groups.flatMap { [UInt8($0 >> 8), UInt8(truncatingIfNeeded: $0)] }
    }
}
