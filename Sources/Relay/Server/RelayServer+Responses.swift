import HTTP1
import HTTPServer
import RelayCore
import RelayState

extension ResponseWriter {
    /// Answers `error` as the server's `ErrorResponse` (same status, fields and body bytes).
    func respond(error: RelayError, requestID: String? = nil, keepAlive: Bool = true) {
        respond(error: error.response, requestID: requestID, keepAlive: keepAlive)
    }
}

extension RelayServer {
    /// An exchange's cost into the metrics; an unpriced model is warned about once per model and process.
    func costEnded(_ cost: ExchangeCost, record r: ExchangeRecord) {
        if let nano = cost.nanoUSD {
            metrics.cost(route: r.route, model: r.modelLabel, source: cost.source.rawValue, nanoUSD: nano)
        } else if let usage = r.usage, usage.source != .none, prices.firstWarning(for: cost.model) {
            logger.warning("model has no price: its cost is unknown (cost_source none); add it to pricing",
                           [("model", .string(cost.model ?? "")), ("route", .string(r.route))])
        }
    }
}
