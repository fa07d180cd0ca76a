import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import Support
import Testing
import Transport

/// `RelayServer.shutdown()` tells whatever admission store it was given to stop (`AdmissionStore.shutdown()`),
/// not only the Redis store it knows by name: a store of another kind (a key store, a failover wrapper) must get
/// the call too, once, after the server stopped.
@Suite("Store shutdown")
struct StoreShutdownTests {
    @Test func theServerShutsDownTheStoreItWasGiven() throws {
        var configuration = RelayConfiguration()
        configuration.listen = .init(host: "127.0.0.1", port: 0)
        configuration.workers = 1
        let made = Locked<RecordingAdmissionStore?>(nil)
        let server = try RelayServer(configuration: configuration, logger: Logger(label: "test", level: .error, sink: MemoryLogSink()),
                                     makeStore: { configuration, environment in
            let store = RecordingAdmissionStore(.forward(to: try RelayServer.defaultStore(configuration, environment: environment)))
            made.withLock { $0 = store }
            return store
        })
        try server.start()
        let store = try #require(made.withLock { $0 })
        #expect(store.shutdowns == 0)
        server.shutdown()
        #expect(store.shutdowns == 1)
    }
}
