/// An address block such as `10.0.0.0/8` or `fd00::/8` (a bare address is a block of one).
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
    public let network: IPAddress
    public let prefixLength: Int

    /// Parses `address/length` or a bare address. Nil when malformed, or when bits beyond the prefix are set
    /// (`10.0.0.1/8` is more likely a typo for a single address than a wish to trust 16 million).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...bits).contains(n), parts[1].allSatisfy(\.isASCII),
                  parts[1].first != "+" else { return nil }
            length = n
        }
        guard CIDR.masked(address.bytes, length) == address.bytes else { return nil }
        network = address
        prefixLength = length
    }

    public func contains(_ address: IPAddress) -> Bool {
        let candidate = address.unmapped.bytes
        guard candidate.count == network.bytes.count else { return false }
        return CIDR.masked(candidate, prefixLength) == network.bytes
    }

    public var description: String { "\(network)/\(prefixLength)" }

    static func masked(_ bytes: [UInt8], _ length: Int) -> [UInt8] {
        var out = bytes
        for i in out.indices {
            let keep = min(8, max(0, length - i * 8))
            out[i] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        return out
    }
}

/// Where one request really came from, and what the provider is told about it.
public struct ClientAddress: Equatable, Sendable {
    /// The address logs show (and, through `limitKey`, what limits count on).
    public var address: String {
        didSet { limitKey = Self.limitKey(of: address) }
    }
    /// What per-address limits and address-keyed budgets count on: the address, but an IPv6 one's /64, the block
    /// one subscriber's link or one host is given. A client that owns a /64 can send from any of its 2⁶⁴ addresses;
    /// counted per /128 it would have as many buckets. An IPv4-mapped IPv6 address counts as its IPv4 address.
    public private(set) var limitKey: String
    /// The `X-Forwarded-For` value sent upstream: the hops the relay's trusted proxies vouched for, then the peer.
    public var forwardedFor: String
    /// The connection came from a trusted proxy, so its `X-Forwarded-Proto` is believed.
    public var viaTrustedProxy: Bool

    public init(address: String, forwardedFor: String, viaTrustedProxy: Bool) {
        self.address = address
        self.limitKey = Self.limitKey(of: address)
        self.forwardedFor = forwardedFor
        self.viaTrustedProxy = viaTrustedProxy
    }

    /// `limitKey` for `address`: `2001:db8:1:2::/64` for any address in that block, the text itself otherwise
    /// (IPv4, or anything that is not an address).
    public static func limitKey(of address: String) -> String {
        guard address.utf8.contains(UInt8(ascii: ":")), let ip = IPAddress(address) else { return address }
        guard case .v6(var bytes) = ip.unmapped else { return ip.unmapped.description }
        for i in 8..<16 { bytes[i] = 0 }
        return IPAddress.v6(bytes).description + "/64"
    }

    /// A client connected straight to the relay: its own forwarding headers count for nothing.
    public static func direct(_ peer: String) -> ClientAddress {
        ClientAddress(address: peer, forwardedFor: peer, viaTrustedProxy: false)
    }
}

/// Finds the client behind the relay's own reverse proxies, as nginx's `real_ip_recursive on` and Envoy's
/// `xff_num_trusted_hops` do. Pure: the peer address and the request's `X-Forwarded-For` lines in, the answer out.
///
/// - From an untrusted peer (or with no `trustedProxies`), the peer is the client. Whatever it wrote in
///   `X-Forwarded-For` (or `Forwarded`, `X-Real-IP`) is its own claim: ignored, and replaced upstream by the peer.
/// - From a trusted peer, the hops are read right to left (each proxy appends the address it saw) and the first one
///   that is not a trusted proxy is the client. Every hop left of it was written by the client and is dropped. If
///   every hop is trusted, the left-most one is the client.
/// - A hop that is not an IP address (`unknown`, a name, garbage) stops the walk: the client is the last valid hop
///   (or the peer), as nginx does. Nothing right of a trusted proxy can be forged, so the answer stays one a trusted
///   proxy vouched for. Ports (`1.2.3.4:5678`, `[2001:db8::1]:443`, as some balancers write) are ignored.
public struct ClientAddressResolver: Sendable {
    public let trustedProxies: [CIDR]

    public init(trustedProxies: [CIDR] = []) {
        self.trustedProxies = trustedProxies
    }

    public func isTrusted(_ address: IPAddress) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    public func isTrusted(_ text: String) -> Bool {
        guard !trustedProxies.isEmpty, let address = IPAddress(text) else { return false }
        return isTrusted(address)
    }

    /// `forwardedFor`: every `X-Forwarded-For` field line, in order (RFC 9110 §5.3: one comma-separated list).
    public func resolve(peer: String, forwardedFor: [String]) -> ClientAddress {
        guard isTrusted(peer) else { return .direct(peer) }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingSpaces() }
            .filter { !$0.isEmpty }
        var client = peer
        var vouched: [String] = []   // right to left
        for hop in hops.reversed() {
            guard let address = Self.hopAddress(hop) else { break }
            client = address.description
            vouched.append(client)
            if !isTrusted(address) { break }
        }
        return ClientAddress(address: client, forwardedFor: (vouched.reversed() + [peer]).joined(separator: ", "),
                             viaTrustedProxy: true)
    }

    /// One `X-Forwarded-For` element: an address, optionally with a port (`a.b.c.d:port`, `[v6]`, `[v6]:port`).
    static func hopAddress(_ hop: Substring) -> IPAddress? {
        if let address = IPAddress(hop) { return address }
        if hop.first == "[", let close = hop.firstIndex(of: "]") {
            let rest = hop[hop.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && isPort(rest.dropFirst())) else { return nil }
            return IPAddress(hop[hop.index(after: hop.startIndex)..<close])
        }
        if let colon = hop.lastIndex(of: ":"), isPort(hop[hop.index(after: colon)...]),
           let address = IPAddress(hop[..<colon]), case .v4 = address {
            return address
        }
        return nil
    }

    private static func isPort(_ s: Substring) -> Bool {
        (1...5).contains(s.count) && s.allSatisfy { $0.isASCII && $0.isNumber } && Int(s)! <= 65535
    }
}

extension Substring {
    /// Without optional whitespace (spaces and tabs, RFC 9110 §5.6.3) at either end.
    public func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
