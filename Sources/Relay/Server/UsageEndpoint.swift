import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Support
import Transport

/// `GET /usage?identity=ID` on the admin listener: one identity's spend in the current budget windows and its open
/// streams, as the admission store reports them (with Redis, every replica's). The store may answer later (a round
/// trip to Redis), so this is a responder that answers when the request has ended and the report is in; a client
/// gone meanwhile gets nothing. Owned by the connection's loop queue.
final class UsageEndpoint: RequestResponder, @unchecked Sendable {
    // Invariant: touched on `writer.scheduler.queue` only (the store answers there).
    private let writer: any ResponseWriter
    private let store: any AdmissionStore
    private let identity: String?
    private let wallClockSeconds: Int64
    private let keepAlive: Bool
    private var gone = false

    init(head: RequestHead, writer: any ResponseWriter, store: any AdmissionStore, wallClockSeconds: Int64) {
        self.writer = writer
        self.store = store
        self.identity = head.query.flatMap { Self.parameter("identity", in: $0) }
        self.wallClockSeconds = wallClockSeconds
        self.keepAlive = head.keepAlive
    }

    func requestBody(_ bytes: [UInt8]) {}
    func clientClosed() { gone = true }
    func clientDrained() {}

    func requestEnd() {
        guard let identity, !identity.isEmpty else {
            writer.respond(error: Self.missingIdentity.response, requestID: nil, keepAlive: keepAlive)
            return
        }
        store.usageReport(identity: identity, wallClockSeconds: wallClockSeconds, on: writer.scheduler) { report in
            self.answer(report)
        }
    }

    private func answer(_ report: BudgetReport?) {
        guard !gone else { return }
        guard let report else {
            writer.respond(error: RelayError.stateUnavailable.response, requestID: nil, keepAlive: keepAlive)
            return
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        writer.respond(status: 200, headers: headers, body: Array(Self.json(report).utf8), keepAlive: keepAlive)
    }

    static let missingIdentity = RelayError(status: 400, type: "invalid_request_error", code: "missing_identity",
                                            message: "Name the identity: GET /usage?identity=ID.")

    /// `{"identity":…,"openStreams":…,"windows":[{"window":"day","period":"2026-12-01","used":…,"reserved":…,
    /// "limit":…|null,"usedUSD":"0.001200000","reservedUSD":"…","limitUSD":"…"|null,"resetsIn":…},…]}`: tokens, and
    /// dollars beside them as decimal strings (exact: nano-dollars).
    static func json(_ report: BudgetReport) -> String {
        func usd(_ nano: Int) -> String { JSONLine.quote(Cost.decimalString(nanoUSD: nano)) }
        let windows = report.windows.map { w in
            "{\"window\":\(JSONLine.quote(w.name)),\"period\":\(JSONLine.quote(w.period)),\"used\":\(w.usedTokens),"
                + "\"reserved\":\(w.reservedTokens),\"limit\":\(w.limitTokens.map(String.init) ?? "null"),"
                + "\"usedUSD\":\(usd(w.usedNanoUSD)),\"reservedUSD\":\(usd(w.reservedNanoUSD)),\"limitUSD\":\(w.limitNanoUSD.map(usd) ?? "null"),"
                + "\"resetsIn\":\(w.resetsInSeconds)}"
        }
        return "{\"identity\":\(JSONLine.quote(report.identity)),\"openStreams\":\(report.openStreams),\"windows\":[\(windows.joined(separator: ","))]}\n"
    }

    /// The first `name` parameter of a query, percent-decoded (`+` is a space, as in form encoding); nil when
    /// absent or not UTF-8.
    static func parameter(_ name: String, in query: String) -> String? {
        for piece in query.split(separator: "&") {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts[0] == name else { continue }
            let raw = parts.count > 1 ? parts[1].replacingOccurrences(of: "+", with: " ") : ""
            guard let bytes = QueryParameters.percentDecoded(Substring(raw).utf8) else { return nil }
            return validatedUTF8String(bytes)
        }
        return nil
    }
}
