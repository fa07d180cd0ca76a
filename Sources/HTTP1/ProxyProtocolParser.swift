/// What a PROXY protocol header said about the connection.
public enum ProxyHeader: Equatable, Sendable {
    /// The balancer relayed a client's TCP connection: its source is the client.
    case proxied(source: IPAddress, sourcePort: Int, destination: IPAddress, destinationPort: Int)
    /// No client address to take: a v2 `LOCAL` command (the balancer's own health check), v1 `UNKNOWN`, or a v2
    /// `UNSPEC`/`AF_UNIX` family. The connection's real peer stands.
    case local
}

/// Incremental parser of the PROXY protocol header (HAProxy's spec, versions 1 and 2) that an L4 load balancer
/// sends before the first byte of the client's own stream. Pure: bytes in, a decision out, no sockets.
///
/// Fed as bytes arrive, it answers `.needMore`, `.header(_, consumed:)` with how many bytes of *that* input belong
/// to the header (the rest is the client's HTTP request), or `.invalid`. It decides at the first byte that cannot
/// start a header, so a client speaking plain HTTP to a port that requires the header is refused on its first byte.
/// The header is bounded: v1 by the spec's 107 bytes, v2 by `maxV2Length` (TLVs included).
public struct ProxyProtocolParser: Sendable {
    public enum Result: Equatable, Sendable {
        case needMore
        case header(ProxyHeader, consumed: Int)
        case invalid(String)
    }

    /// "PROXY " (v1) and the 12-byte v2 signature (spec §2.2).
    static let v1Prefix: [UInt8] = Array("PROXY ".utf8)
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// Spec §2.1: "a receiver ... must not try to read more than 107 characters" (the longest TCP6 line).
    static let v1MaxLength = 107

    /// Most address bytes plus TLVs accepted after the 16-byte v2 preamble. Balancers add a few TLVs (AWS's VPC
    /// endpoint id, Azure's link id, a unique id), tens of bytes; a limit keeps a hostile peer's header bounded.
    public let maxV2Length: Int
    private var buffer: [UInt8] = []
    private var finished = false

    public init(maxV2Length: Int = 2048) {
        self.maxV2Length = maxV2Length
        buffer.reserveCapacity(Self.v1MaxLength)
    }

    /// Feeds the next bytes of the connection. After a `.header` or `.invalid` answer the parser is done: feeding
    /// it again is a programming error, answered `.invalid`.
    public mutating func parse(_ bytes: UnsafeRawBufferPointer) -> Result {
        guard !finished else { return .invalid("the PROXY header was already read") }
        let before = buffer.count
        // Take only as much as the longest header could still need, so `consumed` never counts request bytes.
        let room = max(0, 16 + maxV2Length - before)
        buffer.append(contentsOf: bytes.prefix(room))
        let result = evaluate()
        switch result {
        case .needMore:
            if bytes.count > room { finished = true; return .invalid("PROXY header too long") }
            return .needMore
        case .header(let header, let length):
            finished = true
            return .header(header, consumed: length - before)
        case .invalid:
            finished = true
            return result
        }
    }

    public mutating func parse(_ bytes: [UInt8]) -> Result {
        bytes.withUnsafeBytes { parse($0) }
    }

    /// Looks at everything buffered; `.header`'s count here is the header's total length.
    private func evaluate() -> Result {
        guard let first = buffer.first else { return .needMore }
        let signature = first == Self.v1Prefix[0] ? Self.v1Prefix : Self.v2Signature
        let shared = min(buffer.count, signature.count)
        guard buffer[0..<shared].elementsEqual(signature[0..<shared]) else {
            return .invalid("the connection does not start with a PROXY protocol header")
        }
        if buffer.count < signature.count { return .needMore }
        return signature == Self.v1Prefix ? evaluateV1() : evaluateV2()
    }

    /// Spec §2.1: `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n`, or `PROXY UNKNOWN<anything>\r\n`.
    private func evaluateV1() -> Result {
        let searched = buffer.prefix(Self.v1MaxLength)
        guard let lf = searched.firstIndex(of: 0x0A) else {
            return buffer.count >= Self.v1MaxLength ? .invalid("PROXY v1 line longer than 107 bytes") : .needMore
        }
        guard lf > 0, buffer[lf - 1] == 0x0D else { return .invalid("PROXY v1 line does not end in CRLF") }
        let line = buffer[Self.v1Prefix.count..<(lf - 1)]
        let fields = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard let proto = fields.first else { return .invalid("PROXY v1 line without a protocol") }
        if proto.elementsEqual("UNKNOWN".utf8) { return .header(.local, consumed: lf + 1) }
        let family: Int
        if proto.elementsEqual("TCP4".utf8) { family = 4 } else if proto.elementsEqual("TCP6".utf8) { family = 6 } else {
            return .invalid("PROXY v1 protocol is not TCP4, TCP6 or UNKNOWN")
        }
        guard fields.count == 5,
              let source = IPAddress(String(decoding: fields[1], as: UTF8.self)),
              let destination = IPAddress(String(decoding: fields[2], as: UTF8.self)),
              let sourcePort = Self.port(fields[3]), let destinationPort = Self.port(fields[4])
        else { return .invalid("PROXY v1 line is malformed") }
        func isV4(_ a: IPAddress) -> Bool { if case .v4 = a { true } else { false } }
        guard isV4(source) == (family == 4), isV4(destination) == (family == 4) else {
            return .invalid("PROXY v1 addresses do not match the protocol")
        }
        return .header(.proxied(source: source, sourcePort: sourcePort, destination: destination, destinationPort: destinationPort),
                       consumed: lf + 1)
    }

    /// Spec §2.2: signature, version/command, family/transport, length (big-endian), addresses, TLVs.
    private func evaluateV2() -> Result {
        // Each field is judged as soon as it arrives, so a hostile header is refused as early as possible.
        guard buffer.count > 12 else { return .needMore }
        let versionCommand = buffer[12]
        guard versionCommand >> 4 == 2 else { return .invalid("PROXY v2 version is not 2") }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid("PROXY v2 command is neither LOCAL nor PROXY") }
        guard buffer.count > 13 else { return .needMore }
        let familyTransport = buffer[13]
        let addressLength: Int
        switch familyTransport {
        case 0x11: addressLength = 12   // TCP over IPv4
        case 0x21: addressLength = 36   // TCP over IPv6
        case 0x00, 0x31, 0x32: addressLength = 0   // UNSPEC, AF_UNIX: no IP to take
        default:
            // UDP (0x12, 0x22) is not a TCP connection's header; other values are undefined. LOCAL discards the
            // family whatever it is (below).
            guard command == 0 else {
                return .invalid("PROXY v2 family/transport 0x\(String(familyTransport, radix: 16)) is not supported")
            }
            addressLength = 0
        }
        guard buffer.count >= 16 else { return .needMore }
        let length = Int(buffer[14]) << 8 | Int(buffer[15])
        guard length <= maxV2Length else { return .invalid("PROXY v2 header longer than \(maxV2Length) bytes") }
        if command == 1 && length < addressLength { return .invalid("PROXY v2 address block is too short") }
        guard buffer.count >= 16 + length else { return .needMore }
        let total = 16 + length
        // LOCAL (spec: "the receiver must accept this connection as valid and must use the real connection
        // endpoints and discard the protocol block including the family"), and families without an IP address.
        if command == 0 || addressLength == 0 { return .header(.local, consumed: total) }
        let a = buffer[16...]
        let size = addressLength == 12 ? 4 : 16
        let base = a.startIndex
        let source = IPAddress(bytes: a[base..<(base + size)])!
        let destination = IPAddress(bytes: a[(base + size)..<(base + 2 * size)])!
        let ports = base + 2 * size
        let sourcePort = Int(a[ports]) << 8 | Int(a[ports + 1])
        let destinationPort = Int(a[ports + 2]) << 8 | Int(a[ports + 3])
        return .header(.proxied(source: source, sourcePort: sourcePort, destination: destination, destinationPort: destinationPort),
                       consumed: total)
    }

    /// A v1 port: 1 to 5 decimal digits, no leading zero, at most 65535.
    static func port(_ field: ArraySlice<UInt8>) -> Int? {
        guard (1...5).contains(field.count), field.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              field.count == 1 || field.first != 0x30 else { return nil }
        let n = field.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        return n <= 65535 ? n : nil
    }
}
