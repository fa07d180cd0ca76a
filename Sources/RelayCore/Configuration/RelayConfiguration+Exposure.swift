import HTTP1

/// Where the operational endpoints may be reached. `/metrics` tells anyone who can fetch it the routes, the
/// traffic and the error rates, so it is only served where the operator chose to expose it: on the `admin`
/// listener when there is one, else on the public listener only while that one is loopback.
extension RelayConfiguration {
    /// The public listener answers `/metrics`: there is no admin listener and the public one is loopback, so
    /// nothing beyond this host can read it. A relay on 0.0.0.0 without an `admin` block serves no metrics.
    package var publicListenerServesMetrics: Bool { admin == nil && listen.isLoopback }

    /// The admin listener `SSE_RELAY_ADMIN_PORT` creates when the file has no `admin` block: on the public
    /// listener's host if that is loopback, else on 127.0.0.1. A port alone never opens an interface the
    /// operator did not name; an `admin.host` in the file is kept.
    static func adminListen(port: Int, existing: Listen?, publicListen: Listen) -> Listen {
        if let existing { return Listen(host: existing.host, port: port) }
        return Listen(host: publicListen.isLoopback ? publicListen.host : "127.0.0.1", port: port)
    }
}

extension RelayConfiguration.Listen {
    /// The host is a loopback address: `localhost`, 127.0.0.0/8, `::1`, or 127.0.0.0/8 mapped into IPv6.
    /// Anything else, names included, counts as reachable from outside (the safe reading).
    package var isLoopback: Bool {
        if host.lowercased() == "localhost" { return true }
        switch IPAddress(host) {
        case .v4(let n)?: return n >> 24 == 127
        case .v6(let bytes)?:
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }                 // ::1
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF  // ::ffff:a.b.c.d
            return mapped && bytes[12] == 127
        case nil: return false
        }
    }
}
