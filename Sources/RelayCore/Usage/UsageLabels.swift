/// Label values for `sse_relay_tokens_total{route,model,kind,source}` and the access log's `model`, kept bounded.
package enum UsageLabels {
    /// The `model` label: the requested model when it is in the route's allowlist (`routes[].models`), else
    /// `other`. Without an allowlist every model is `other`: a label whose values clients choose would let them
    /// grow the metrics without bound.
    package static func model(_ requested: String?, allowlist: [String]?) -> String {
        guard let requested, let allowlist, allowlist.contains(where: { $0.utf8.elementsEqual(requested.utf8) }) else {
            return "other"
        }
        return requested
    }

    /// The model a Gemini path names (`models/NAME:method`), for the access log when the body names none (the
    /// body's top-level `"model"` comes from `RequestBodyPlan`). nil when there is none. Log it only through the
    /// logger's escaping, it is client text.
    package static func requestedModel(path: String) -> String? {
        let bare = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard let range = bare.range(of: "/models/") else { return nil }
        let rest = bare[range.upperBound...]
        let name = rest.prefix { $0 != ":" && $0 != "/" }
        return name.isEmpty ? nil : String(name)
    }
}
