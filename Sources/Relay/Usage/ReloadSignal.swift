import Dispatch
import Foundation
import RelayCore
import RelayState
import Support

/// SIGHUP through a Dispatch signal source: reloads the price file (README, "Usage and cost"). Installed by the
/// command once the server runs; the handler runs on its own serial queue.
package enum ReloadSignal {
    /// Keeps the source alive for the process's life. Written once, by `install` on the main thread at start-up;
    /// never read.
    nonisolated(unsafe) static var source: (any DispatchSourceSignal)?

    package static func install(prices: PriceBook, logger: Logger) {
        let queue = DispatchQueue(label: "sse-relay.reload")
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
        source.setEventHandler { @Sendable in
            Self.reload(prices, logger: logger)
        }
        source.activate()
        Self.source = source
    }

    /// One reload, logged either way.
    package static func reload(_ prices: PriceBook, logger: Logger) {
        switch prices.reload() {
        case .success(let count):
            logger.info("prices reloaded", [("file", .string(prices.file ?? "")), ("models", .int(count))])
        case .failure(let error):
            logger.error("price file not reloaded; the previous prices stay in force",
                         [("file", .string(prices.file ?? "")), ("problems", .string(error.problems.joined(separator: "; ")))])
        }
    }
}
