// Test harness: loopback addresses for tests that need an upstream that is not there or never answers, and the
// kernel's view of TCP sockets for leak and exposure checks. Must not import the relay's modules.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A port on 127.0.0.1 with nothing listening: bound, then closed, so a connect gets ECONNREFUSED until something
/// else binds it (a server the test starts there, or another test: `RefusingPort` keeps it refusing).
package func closedPort() throws -> Int {
    let (fd, address) = try HarnessPOSIX.listenOnLoopback(backlog: 1)
    HarnessPOSIX.closeFD(fd)
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A port on 127.0.0.1 that refuses every connection for as long as this lives: bound (without SO_REUSEADDR) and
/// never listening, so no other process or test can take it meanwhile, as one could a port `closedPort` released.
package final class RefusingPort: Sendable {
    package let port: Int
    private let fd: Int32

    package init() throws {
        let fd = socket(AF_INET, HarnessPOSIX.streamType, 0)
        if fd < 0 { throw HarnessError.socket(HarnessPOSIX.errorString("socket")) }
        var address = HarnessPOSIX.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            let message = HarnessPOSIX.errorString("bind")
            HarnessPOSIX.closeFD(fd)
            throw HarnessError.socket(message)
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { HarnessPOSIX.closeFD(fd) }
}

/// A listening socket on 127.0.0.1 that never accepts, with its accept queue already full: a connect to it
/// stays in progress (the SYN goes unanswered) for as long as the test wants.
package final class FullBacklogListener {
    package let port: Int
    private let fd: Int32
    private var fillers: [Int32] = []
    private var isClosed = false

    package init() throws {
        let listening = try HarnessPOSIX.listenOnLoopback(backlog: 0)
        fd = listening.fd
        var address = listening.address
        port = Int(UInt16(bigEndian: address.sin_port))
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
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        for filler in fillers { HarnessPOSIX.closeFD(filler) }
        fillers = []
        HarnessPOSIX.closeFD(fd)
    }
}

/// One row of the kernel's TCP socket tables.
package struct TCPSocketEntry: Sendable {
    /// The local address in hex, as the kernel prints it (127.0.0.1 is "0100007F").
    package var localAddress: String
    package var localPort: Int
    package var remotePort: Int
    package var isListening: Bool
    /// Whether a descriptor of this test process refers to the socket (other rows belong to other processes, or
    /// to sockets this process already closed).
    package var isOpenInThisProcess: Bool
}

/// Every IPv4 and IPv6 TCP socket of this network namespace, from /proc/self/net/tcp and tcp6; nil where there
/// is no /proc (not Linux), so a test can skip the check.
package func tcpSocketTable() -> [TCPSocketEntry]? {
    let fdDirectory = "/proc/self/fd"
    guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: fdDirectory) else { return nil }
    var inodes = Set<Substring>()
    for name in descriptors {
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDirectory)/\(name)"),
           target.hasPrefix("socket:[") {
            inodes.insert(Substring(target.dropFirst(8).dropLast()))
        }
    }
    var entries: [TCPSocketEntry] = []
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        // /proc files report size 0: read to the end rather than by the reported size.
        guard let handle = FileHandle(forReadingAtPath: table) else { continue }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        handle.closeFile()
        for line in text.split(separator: "\n").dropFirst() {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9 else { continue }
            let local = fields[1].split(separator: ":"), remote = fields[2].split(separator: ":")
            guard local.count == 2, remote.count == 2 else { continue }
            entries.append(TCPSocketEntry(
                localAddress: String(local[0]), localPort: Int(local[1], radix: 16) ?? -1,
                remotePort: Int(remote[1], radix: 16) ?? -1, isListening: fields[3] == "0A",
                isOpenInThisProcess: inodes.contains(fields[9])))
        }
    }
    return entries
}
