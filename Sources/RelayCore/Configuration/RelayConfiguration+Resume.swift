/// `routes[].heartbeatSeconds`, `routes[].resume` and `limits.resumeBufferBytes` (README, "Heartbeats" and
/// "Resumable streams"). Read and validated here; `RelayExchange` and `ResumableStreams` apply them.
package struct RouteResume: Sendable, Equatable {
    package static let defaultWindowSeconds = 30.0
    package static let defaultMaxBufferBytes = 4 * 1024 * 1024

    /// How long a stream whose client left waits for a resume, and how long a finished stream's bytes stay.
    package var windowSeconds: Double
    /// A stream that writes more than this stops being resumable (a later resume gets 410).
    package var maxBufferBytes: Int

    package init(windowSeconds: Double = RouteResume.defaultWindowSeconds, maxBufferBytes: Int = RouteResume.defaultMaxBufferBytes) {
        self.windowSeconds = windowSeconds
        self.maxBufferBytes = maxBufferBytes
    }
}

extension RelayConfiguration.Route {
    /// The default of `routes[].heartbeatSeconds`: below the shortest idle cut-off met in the field (Azure Front
    /// Door, 30 s), with room for one lost heartbeat.
    package static let defaultHeartbeatSeconds = 15.0
}

extension RelayConfiguration.Limits {
    /// The default of `limits.resumeBufferBytes`: 256 MiB for every replay buffer together.
    package static let defaultResumeBufferBytes = 256 * 1024 * 1024
}

extension ConfigReader {
    /// `routes[i].heartbeatSeconds` (0 turns heartbeats off) and `routes[i].resume`.
    mutating func routeStreaming(_ route: [String: Any], _ path: String, into result: inout RelayConfiguration.Route) {
        if let value = route["heartbeatSeconds"] {
            if let seconds = ConfigReader.number(value), seconds == 0 || (seconds >= 0.1 && seconds <= 3600) {
                result.heartbeatSeconds = seconds
            } else {
                problem("\(path).heartbeatSeconds", "must be 0 (off) or a number of seconds from 0.1 to 3600")
            }
        }
        guard let value = route["resume"] else { return }
        guard let object = value as? [String: Any] else {
            problem("\(path).resume", "must be an object")
            return
        }
        checkKnown(object, ["windowSeconds", "maxBufferBytes"], "\(path).resume")
        var resume = RouteResume()
        if let w = object["windowSeconds"] {
            if let seconds = ConfigReader.number(w), seconds >= 1, seconds <= 3600 {
                resume.windowSeconds = seconds
            } else {
                problem("\(path).resume.windowSeconds", "must be a number of seconds from 1 to 3600")
            }
        }
        if let v = int(object, "maxBufferBytes", "\(path).resume.maxBufferBytes", min: 1024, max: 1 << 30) { resume.maxBufferBytes = v }
        result.resume = resume
    }

    /// `limits.resumeBufferBytes`.
    mutating func resumeLimits(_ limits: [String: Any], into config: inout RelayConfiguration) {
        if let v = int(limits, "resumeBufferBytes", "limits.resumeBufferBytes", min: 0, max: 1 << 40) { config.limits.resumeBufferBytes = v }
    }
}
