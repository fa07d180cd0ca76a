import Foundation
import RelayCore
import RelayState

/// The process's environment and file system: the sources the command line reads a configuration with. The core
/// (`RelayConfiguration.load(json:sources:)`) takes them as a value and does no I/O of its own.
extension ConfigurationSources {
    package static var system: ConfigurationSources {
        ConfigurationSources(environment: ProcessInfo.processInfo.environment, readFile: { path in
            readBytes(path).map { String(decoding: $0, as: UTF8.self) }
        })
    }

    /// A whole file's bytes; nil when it cannot be read.
    package static func readBytes(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }
}

extension RelayConfiguration {
    /// Reads and checks the configuration file at `path`. Throws `ConfigurationError` listing every problem.
    package static func load(path: String, sources: ConfigurationSources = .system) throws -> RelayConfiguration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(problems: ["cannot read configuration file \(path)"])
        }
        return try load(json: data, sources: sources)
    }
}
