import Foundation
import RelayCore
import RelayState
import Support

/// SIGHUP's work: reloads the price file (README, "Usage and cost"). The command catches SIGHUP through
/// `SignalPipe` when a price file is configured and calls `reload` on its signal queue.
package enum ReloadSignal {
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
