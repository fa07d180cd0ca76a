import Usage

/// A route's usage accounting options. Read and validated here; the exchange applies them.
package struct RouteUsage: Sendable, Equatable {
    /// What happens to the upstream transfer when the client leaves mid-stream.
    package enum ClientCancel: String, Sendable, Equatable, CaseIterable {
        /// Cancel it at once (tokens not yet generated are not paid for); usage is then an estimate.
        case cancel
        /// Keep reading it, bytes discarded and nothing written to the departed client, until the provider's usage
        /// arrives or `drainMaxSeconds` pass: exact accounting at the price of the rest of the answer.
        case drain
    }

    package static let defaultDrainMaxSeconds = 30.0

    /// `usage.inject`: add `stream_options.include_usage` to streaming chat requests that lack it. nil: the
    /// provider's default (`Provider.injectsUsageByDefault`: on for openai and azure-openai).
    package var inject: Bool?
    package var onClientCancel: ClientCancel
    /// The longest a drain may read after the client left (`drainMaxSeconds`).
    package var drainMaxSeconds: Double

    package init(inject: Bool? = nil, onClientCancel: ClientCancel = .cancel,
                drainMaxSeconds: Double = RouteUsage.defaultDrainMaxSeconds) {
        self.inject = inject
        self.onClientCancel = onClientCancel
        self.drainMaxSeconds = drainMaxSeconds
    }
}

extension ConfigReader {
    /// `upstreams.NAME.provider`; openai when absent.
    mutating func provider(_ u: [String: Any], _ path: String) -> Provider {
        guard let name = string(u, "provider", "\(path).provider") else { return .openai }
        guard let provider = Provider(rawValue: name) else {
            problem("\(path).provider", "must be one of \(Provider.allCases.map(\.rawValue).joined(separator: ", "))")
            return .openai
        }
        return provider
    }

    /// `routes[i].usage`, `routes[i].onClientCancel`, `routes[i].drainMaxSeconds`.
    mutating func routeUsage(_ route: [String: Any], _ path: String, provider: Provider) -> RouteUsage {
        var usage = RouteUsage()
        if let u = route["usage"] {
            if let object = u as? [String: Any] {
                checkKnown(object, ["inject"], "\(path).usage")
                usage.inject = bool(object, "inject", "\(path).usage.inject")
                if usage.inject == true && !provider.speaksOpenAI {
                    problem("\(path).usage.inject", "applies only to openai and azure-openai upstreams (\(provider.rawValue) always sends usage)")
                }
            } else {
                problem("\(path).usage", "must be an object")
            }
        }
        if let name = string(route, "onClientCancel", "\(path).onClientCancel") {
            if let mode = RouteUsage.ClientCancel(rawValue: name) {
                usage.onClientCancel = mode
            } else {
                problem("\(path).onClientCancel", "must be \"cancel\" or \"drain\"")
            }
        }
        if route["drainMaxSeconds"] != nil {
            if let d = ConfigReader.number(route["drainMaxSeconds"]!), d > 0, d <= 3600 {
                usage.drainMaxSeconds = d
            } else {
                problem("\(path).drainMaxSeconds", "must be a number of seconds above 0, at most 3600")
            }
        }
        return usage
    }
}
