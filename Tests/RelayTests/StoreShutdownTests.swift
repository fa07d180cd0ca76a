import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import Transport

/// `RelayServer.shutdown()` tells whatever admission store it was given to stop (`AdmissionStore.shutdown()`),
/// not only the Redis store it knows by name: a store of another kind (a key store, a failover wrapper) must get
/// the call too, once, after the server stopped.
@Suite("Store shutdown")
struct StoreShutdownTests {
    final class CountingStore: AdmissionStore {
        let inner: any AdmissionStore
        let shutdowns = Locked(0)

        init(_ inner: any AdmissionStore) { self.inner = inner }

        func admit(_ request: AdmissionRequest, on loop: EventLoop, _ completion: @escaping @Sendable (AdmissionDecision) -> Void) {
            inner.admit(request, on: loop, completion)
        }
        func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: EventLoop, _ completion: @escaping @Sendable (Bool) -> Void) {
            inner.extend(grant, byTokens: tokens, on: loop, completion)
        }
        func settle(_ grant: AdmissionGrant, usedTokens: Int) { inner.settle(grant, usedTokens: usedTokens) }
        func usageReport(identity: String, wallClockSeconds: Int64, on loop: EventLoop,
                         _ completion: @escaping @Sendable (BudgetReport?) -> Void) {
            inner.usageReport(identity: identity, wallClockSeconds: wallClockSeconds, on: loop, completion)
        }
        func shutdown() { shutdowns.withLock { $0 += 1 } }
    }

    @Test func theServerShutsDownTheStoreItWasGiven() throws {
        var configuration = RelayConfiguration()
        configuration.listen = .init(host: "127.0.0.1", port: 0)
        configuration.workers = 1
        let made = Locked<CountingStore?>(nil)
        let server = try RelayServer(configuration: configuration, logger: Logger(label: "test", level: .error, sink: MemoryLogSink()),
                                     makeStore: { configuration, environment in
            let store = CountingStore(try RelayServer.defaultStore(configuration, environment: environment))
            made.withLock { $0 = store }
            return store
        })
        try server.start()
        let store = try #require(made.withLock { $0 })
        #expect(store.shutdowns.withLock { $0 } == 0)
        server.shutdown()
        #expect(store.shutdowns.withLock { $0 } == 1)
    }
}
