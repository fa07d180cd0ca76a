import HTTP1

/// Where the operational endpoints may be reached. `/metrics` tells anyone who can fetch it the routes, the
/// traffic and the error rates (and `/usage`, `/upstreams` each identity's spend and the key pools), so it is only
/// served where the operator chose to expose it: on the `admin` listener when there is one, else on the public
/// listener only while that one is loopback and no proxy stands in front of it.
extension RelayConfiguration {
    /// The public listener answers `/metrics`: there is no admin listener, the public one is loopback, and
    /// `trustedProxies` is empty, so nothing beyond this host can read it. A relay on 0.0.0.0 without an `admin`
    /// block serves no metrics; nor does a loopback one with trusted proxies: a proxy on this host (nginx, a
    /// sidecar) hands it every client the proxy serves, and loopback then says nothing about who asks.
    package var publicListenerServesMetrics: Bool { admin == nil && listen.isLoopback && trustedProxies.isEmpty }

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

extension RelayConfiguration {
    /// `url` is `http://` to a host other than this one (a loopback address or `localhost`, with no user info):
    /// what it sends, anyone on the network path can read, and what it receives, anyone there can write.
    package static func isClearTextBeyondThisHost(_ url: String) -> Bool {
        guard url.lowercased().hasPrefix("http://") else { return false }
        let authority = url.dropFirst(7).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var host = Substring(authority)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return authority.contains("@") || !Listen(host: String(host), port: 0).isLoopback
    }

    /// Upstreams whose key would cross the network in clear text (`http://` to another host), by name: warned
    /// about at start-up. A provider on a private network may be reached so on purpose (a self-hosted model server
    /// inside the cluster), so it is not refused.
    package var upstreamsSendingKeysInClearText: [String] {
        upstreams.values.filter { upstream in
            (upstream.key != nil || !upstream.keys.isEmpty) && Self.isClearTextBeyondThisHost(upstream.baseURL)
        }.map(\.name).sorted()
    }
}
