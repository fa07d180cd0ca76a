// How often a relayed event stream is walked for its line and event ends: once per delivery, shared by the usage
// tap, the usage-event filter and the budget guard (issue 19, "one SSE boundary scanner").
@testable import Relay
import Testing
import Usage

extension RelayExchangeTests {
    /// A guarded stream on a route that injected the usage request, so all three readers run: deliveries holding
    /// two events, an event split in its middle, a CRLF split between its CR and LF. Each delivery is scanned
    /// exactly once, every byte once, and neither the tap nor the filter walks the bytes again on its own.
    @Test func eachDeliveryIsScannedOnceForTheTapTheFilterAndTheBudgetGuard() {
        let store = FakeAdmissionStore()
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
