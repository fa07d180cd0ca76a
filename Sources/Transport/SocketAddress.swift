#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a host has no address: `getaddrinfo`'s message.
public struct ResolveError: Error, Sendable, Equatable {
    public var message: String
    public init(message: String) { self.message = message }
}

/// An IPv4 or IPv6 address and port, in the form `Syscall.connect` takes. An address literal is read where it is
/// written (`init(numericHost:port:)`); only a name needs `resolve`, which can block.
public struct SocketAddress: Sendable {
    public var family: Int32
    public var storage: sockaddr_storage
    public var length: socklen_t

    /// `host` written as an IPv4 or IPv6 address (`127.0.0.1`, `::1`), read with `inet_pton`: no resolver, no
    /// system call, so it may run on an event loop. Nil for a name, and for what only `getaddrinfo` reads (an IPv6
    /// zone such as `fe80::1%eth0`, the short IPv4 forms such as `127.1`).
    public init?(numericHost host: String, port: Int) {
        guard let port = UInt16(exactly: port) else { return nil }
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(port.bigEndian)
            address.sin_addr = v4
            self.init(address, family: AF_INET)
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(port.bigEndian)
            address.sin6_addr = v6
            self.init(address, family: AF_INET6)
        } else {
            return nil
        }
    }

    /// `address` (a `sockaddr_in` or `sockaddr_in6`) in a `sockaddr_storage`, with its length (on Darwin also in
    /// its first byte, which the kernel reads there).
    private init<Address>(_ address: Address, family: Int32) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            withUnsafeBytes(of: address) { raw.copyMemory(from: $0) }
        }
        #if canImport(Darwin)
        storage.ss_len = UInt8(MemoryLayout<Address>.size)
        #endif
        self.init(family: family, storage: storage, length: socklen_t(MemoryLayout<Address>.size))
    }

    public init(family: Int32, storage: sockaddr_storage, length: socklen_t) {
        self.family = family
        self.storage = storage
        self.length = length
    }

    /// The port, in host byte order.
    public var port: Int { Listener.port(of: storage) }

    /// The address as text ("127.0.0.1", "::1").
    public var host: String { Listener.address(of: storage) }

    /// The first TCP address `getaddrinfo` gives for `host:port`. Blocks for as long as the system resolver takes
    /// for a name (DNS, with resolv.conf's timeouts and attempts): never call it on an event loop.
    public static func resolve(host: String, port: Int) -> Result<SocketAddress, ResolveError> {
        var hints = Syscall.streamAddressHints()
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(ResolveError(message: "cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(list) }
        var storage = sockaddr_storage()
        let length = first.pointee.ai_addrlen
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(length)))
        }
        return .success(SocketAddress(family: first.pointee.ai_family, storage: storage, length: length))
    }
}
