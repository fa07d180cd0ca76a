// How often a relayed event stream is walked for its line and event ends: once per delivery, shared by the usage
// tap, the usage-event filter and the budget guard (issue 19, "one SSE boundary scanner").
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import JSON
import RelayTestSupport
import Testing
import Usage

extension RelayExchangeTests {
    /// A guarded stream on a route that injected the usage request, so all three readers run: deliveries holding
    /// two events, an event split in its middle, a CRLF split between its CR and LF. Each delivery is scanned
    /// exactly once, every byte once, and neither the tap nor the filter walks the bytes again on its own.
    @Test func eachDeliveryIsScannedOnceForTheTapTheFilterAndTheBudgetGuard() {
        let store = RecordingAdmissionStore(.byHand)
        let h = Self.admitting(store, usage: Self.openAIInjecting)
        Self.headAnswered(h, store, reserved: 4096 + 5)
        let stop = String(ChatStream.stop.dropLast(2)) + "\r\n\r\n"
        let world = ChatStream.world
        let split = world.index(world.startIndex, offsetBy: 60)
        let deliveries = [ChatStream.role + ChatStream.hello, String(world[..<split]), String(world[split...]),
                          String(decoding: stop.utf8.dropLast(), as: UTF8.self), "\n", ChatStream.usage, ChatStream.done]
        h.run {
            for delivery in deliveries { #expect(h.call.body(delivery)) }
            h.call.complete()
        }
        let expected = ChatStream.role + ChatStream.hello + world + stop + ChatStream.done
        #expect(String(decoding: h.writer.body, as: UTF8.self) == expected, "the usage event removed, nothing else")
        #expect(h.exchange.budgetGuard != nil, "the stream is guarded")
        let meter = h.exchange.meter
        #expect(meter.stripper?.removedUsageEvent == true)
        #expect(meter.tap?.usage().source == .provider, "the tap read the usage event")
        #expect(meter.events?.scans == deliveries.count)
        #expect(meter.events?.bytesScanned == deliveries.reduce(0) { $0 + $1.utf8.count })
        #expect(meter.tap?.ownScans == 0, "the tap walked deliveries again")
        #expect(meter.stripper?.ownScans == 0, "the filter walked deliveries again")
        #expect(store.settled.map(\.used) == [9 + 2])
    }
}

extension RelayExchangeTests {
    static let parseMarker = "body-read-count-19"

    /// One request through everything that reads a body: the model allowlist, a max-tokens clamp, the usage
    /// request, a budget reservation with its prompt estimate, and a stream that ends without the provider's counts,
    /// so the charge needs the prompt estimate again. The body is parsed once. A route that decides nothing from the
    /// body (read only for the access log's model and the estimate) parses it once too.
    @Test func theRequestBodyIsParsedOncePerRequest() {
        let request = #"{"model":"gpt-4o","stream":true,"user":"\#(Self.parseMarker)","max_tokens":50000,"messages":[{"role":"user","content":"How are you today?"}]}"#
        let strict = BodyPolicy(models: ["gpt-4o"], maxTokens: .init(limit: 1000, mode: .clamp))
        for (policy, budgets) in [(strict, Self.budgets as BudgetConfiguration?), (BodyPolicy(), nil)] {
            let store = RecordingAdmissionStore(.byHand)
            let h = Harness(policy: policy, usage: budgets == nil ? UsageMeter.Settings() : Self.openAIInjecting)
            h.run {
                h.exchange.admission = ExchangeAdmission(store: store, address: "198.51.100.7", identity: "app",
                                                         budgetKey: budgets == nil ? nil : "app", budgets: budgets,
                                                         routeMaxTokens: nil, wallClock: { 1_797_328_800 })
            }
            let counted = JSONParseCount.counting(marker: Self.parseMarker) {
                h.run {
                    h.exchange.requestBody(Array(request.utf8))
                    h.exchange.requestEnd()
                    store.admits.first?.answer(.admitted(AdmissionGrant(id: 1, reservedTokens: 1000 + 5)))
                    h.call.head(200)
                    for e in [ChatStream.role, ChatStream.hello, ChatStream.stop, ChatStream.done] { h.call.body(e) }
                    h.call.complete()
                }
            }
            #expect(counted.parses == 1, "strict: \(budgets != nil)")
            let sent = String(decoding: h.call.request.body ?? [], as: UTF8.self)
            #expect(sent.contains(#""max_tokens":1000"#) == (budgets != nil), "the plan's edits were applied")
            if budgets != nil {
                #expect(store.settled.count == 1 && h.exchange.meter.estimatedPrompt != nil, "charged with an estimate")
            }
        }
    }
}
