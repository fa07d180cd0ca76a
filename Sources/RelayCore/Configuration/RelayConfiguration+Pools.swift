import Support
import Usage

/// Key pools (`upstreams.NAME.keys`, `keyDisabledSeconds`) and fallback upstreams (`routes[].upstreams`,
/// `maxAttempts`): README, "Key pools and failover".
extension RelayConfiguration {
    /// One key of an upstream's pool. Its `label` (its position in `keys`, or its `id`) is what logs, metrics
    /// and `GET /upstreams` show; the secret never leaves the request header.
    package struct UpstreamKey: Sendable, Equatable {
        package var label: String
        package var secret: Secret
        /// Its share of the requests among the available keys (smooth weighted round robin).
        package var weight: Int
        package init(label: String, secret: Secret, weight: Int = 1) {
            self.label = label
            self.secret = secret
            self.weight = weight
        }
    }
}

extension RelayConfiguration.Upstream {
    /// The keys requests choose from: `keys`, or the single `key` as a pool of one labelled "0"; empty for an
    /// upstream without a key.
    package var pool: [RelayConfiguration.UpstreamKey] {
        if !keys.isEmpty { return keys }
        return key.map { [RelayConfiguration.UpstreamKey(label: "0", secret: $0)] } ?? []
    }
}

extension RelayConfiguration.Route {
    /// The upstreams tried in order: `upstreams`, or the one `upstream`.
    package var upstreamChain: [String] { upstreams.isEmpty ? [upstream] : upstreams }
}

extension ConfigReader {
    /// `upstreams.NAME.keys` and `keyDisabledSeconds`. `key` and `keys` exclude each other.
    mutating func readPool(_ u: [String: Any], _ path: String, into upstream: inout RelayConfiguration.Upstream) {
        if let v = seconds(u, "keyDisabledSeconds", "\(path).keyDisabledSeconds") { upstream.keyDisabledSeconds = v }
        guard let value = u["keys"] else { return }
        if u["key"] != nil { problem("\(path).keys", "give either key or keys, not both") }
        guard let list = value as? [Any], !list.isEmpty else {
            problem("\(path).keys", "must be a non-empty list of keys ({\"env\": …} or {\"file\": …}, with optional weight and id)")
            return
        }
        var labels = Set<String>()
        for (i, entry) in list.enumerated() {
            let keyPath = "\(path).keys[\(i)]"
            guard let object = entry as? [String: Any] else { problem(keyPath, "must be an object"); continue }
            checkKnown(object, ["env", "file", "weight", "id"], keyPath)
            var weight = 1
            if object["weight"] != nil {
                if let w = int(object, "weight", "\(keyPath).weight", min: 1, max: 1_000_000) { weight = w }
            }
            var label = String(i)
            if let id = string(object, "id", "\(keyPath).id") {
                if id.isEmpty || !id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
                    problem("\(keyPath).id", "must be printable ASCII without spaces or quotes")
                } else {
                    label = id
                }
            }
            if !labels.insert(label).inserted { problem("\(keyPath).id", "label \"\(label)\" is used twice in \(path).keys") }
            if let secret = providerKey(object.filter { $0.key == "env" || $0.key == "file" }, keyPath) {
                upstream.keys.append(.init(label: label, secret: secret, weight: weight))
            }
        }
        // `key` is the pool's first key: what a route without a choice (one upstream, one key) sends.
        upstream.key = upstream.keys.first?.secret
    }

    /// `routes[i].upstreams` (instead of `upstream`) and `maxAttempts`: every name configured, none twice, one
    /// provider preset for all (the relay does not translate between provider formats).
    mutating func readRouteUpstreams(_ route: [String: Any], _ path: String, upstreams: [String: RelayConfiguration.Upstream],
                                     upstreamNames: Set<String>, into result: inout RelayConfiguration.Route) {
        if let v = int(route, "maxAttempts", "\(path).maxAttempts", min: 1, max: 10) { result.maxAttempts = v }
        guard let value = route["upstreams"] else { return }
        guard let names = value as? [String], !names.isEmpty else {
            problem("\(path).upstreams", "must be a non-empty list of upstream names")
            return
        }
        var seen = Set<String>()
        for (i, name) in names.enumerated() {
            if upstreams[name] == nil && !upstreamNames.contains(name) {
                problem("\(path).upstreams[\(i)]", "names no upstream (\"\(name)\")")
            }
            if !seen.insert(name).inserted { problem("\(path).upstreams[\(i)]", "\"\(name)\" is listed twice") }
            if let first = upstreams[names[0]], let this = upstreams[name], this.provider != first.provider {
                problem("\(path).upstreams[\(i)]", "provider \"\(this.provider.rawValue)\" differs from \"\(first.provider.rawValue)\" of \(path).upstreams[0]: every upstream of a route must have the same provider")
            }
        }
        result.upstreams = names
        result.upstream = names[0]
    }
}
