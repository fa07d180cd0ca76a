import HTTP1

/// `trustedProxies` and `listen.proxyProtocol`: whose word the relay takes for a client's address.
extension ConfigReader {
    mutating func readTrustedProxies(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let value = object["trustedProxies"] {
            if let list = value as? [Any] {
                for (i, item) in list.enumerated() {
                    let path = "trustedProxies[\(i)]"
                    guard let text = item as? String else { problem(path, "must be a string such as \"10.0.0.0/8\""); continue }
                    guard let cidr = CIDR(text) else {
                        problem(path, "\"\(text)\" is not an IPv4 or IPv6 address or CIDR block with no bits set beyond the prefix (such as \"10.0.0.0/8\" or \"fd00::/8\")")
                        continue
                    }
                    config.trustedProxies.append(cidr)
                }
            } else {
                problem("trustedProxies", "must be a list of CIDR blocks such as [\"10.0.0.0/8\", \"fd00::/8\"]")
            }
        }
        if config.listen.proxyProtocol && config.trustedProxies.isEmpty {
            problem("listen.proxyProtocol", "requires trustedProxies to list the load balancers that send the PROXY header")
        }
    }
}
