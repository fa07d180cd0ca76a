// Test harness: loopback addresses for tests that need an upstream that is not there or never answers.
// Must not import the relay's modules.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A port on 127.0.0.1 with nothing listening: bound, then closed, so a connect gets ECONNREFUSED.
public func closedPort() throws -> Int {
    let fd = socket(AF_INET, HarnessPOSIX.streamType, 0)
    if fd < 0 { throw HarnessError.socket(HarnessPOSIX.errorString("socket")) }
    defer { HarnessPOSIX.closeFD(fd) }
    var address = HarnessPOSIX.loopback(port: 0)
    guard HarnessPOSIX.bind(fd, &address) == 0 else { throw HarnessError.socket(HarnessPOSIX.errorString("bind")) }
    return HarnessPOSIX.boundPort(fd, &address)
}

/// A listening socket on 127.0.0.1 that never accepts, with its accept queue already full: a connect to it
/// stays in progress (the SYN goes unanswered) for as long as the test wants.
public final class FullBacklogListener {
    public let port: Int
    private let fd: Int32
    private var fillers: [Int32] = []
    private var isClosed = false

    public init() throws {
        let fd = socket(AF_INET, HarnessPOSIX.streamType, 0)
        if fd < 0 { throw HarnessError.socket(HarnessPOSIX.errorString("socket")) }
        self.fd = fd
        var address = HarnessPOSIX.loopback(port: 0)
        guard HarnessPOSIX.bind(fd, &address) == 0, listen(fd, 0) == 0 else {
            let message = HarnessPOSIX.errorString("bind/listen")
            HarnessPOSIX.closeFD(fd)
            throw HarnessError.socket(message)
        }
        port = HarnessPOSIX.boundPort(fd, &address)
        // Linux admits backlog + 1 connections to the accept queue: the fillers take those places, so the SYNs
        // of later connects are dropped and those connects stay in progress.
        for _ in 0..<4 {
            let filler = socket(AF_INET, HarnessPOSIX.streamType, 0)
            HarnessPOSIX.setBlocking(filler, false)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            fillers.append(filler)
        }
    }

    /// Closes the listener and the fillers. Idempotent.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        for filler in fillers { HarnessPOSIX.closeFD(filler) }
        fillers = []
        HarnessPOSIX.closeFD(fd)
    }
}
