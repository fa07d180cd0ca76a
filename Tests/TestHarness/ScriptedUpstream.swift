// Test harness: a scripted HTTP/1.1 upstream on 127.0.0.1:0. Each accepted connection runs the script on its own
// Foundation Thread, so a script may block freely (every harness wait still has a safety timeout).
// Must not import the relay's modules.
import Dispatch
import Foundation
import TestSupportCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

package enum PeerCloseKind: Sendable, Equatable {
    case fin
    case reset
}

package struct PeerClose: Sendable, Equatable {
    package var kind: PeerCloseKind
    /// When it was observed: DispatchTime.now().uptimeNanoseconds (monotonic).
    package var atNanoseconds: UInt64
}

/// What `waitForBytesOrClose` saw first.
package enum PeerActivity: Sendable, Equatable {
    case bytes([UInt8])
    case closed(PeerClose)
}

package struct RecordedRequest: Sendable, ReceivedHeaders {
    package var method: String
    package var target: String
    package var version: String
    /// As received: order and case kept.
    package var headers: [(name: String, value: String)]
    /// Exact bytes of the request head, request line through the empty line's CRLF.
    package var rawHead: [UInt8]
    /// Decoded (Content-Length or chunked).
    package var body: [UInt8]
    /// Index (accept order, from 0) of the connection it came on.
    package var connection: Int
    /// Trailer fields of a chunked body.
    package var trailers: [(name: String, value: String)] = []
}

/// One accepted connection, handed to the script. Writes are immediate (TCP_NODELAY, one send loop per call).
/// Reads (readRequest, waitForPeerClose, waitForBytesOrClose) are serialised; close()/reset() may come from any
/// thread and wake a blocked read.
package final class UpstreamConnection: Sendable {
    /// Accept order, from 0.
    package let index: Int
    private let socket: HarnessSocket
    private let reader: HarnessMonitor<HarnessByteReader>
    private let record: @Sendable (RecordedRequest) -> Void

    init(index: Int, socket: HarnessSocket, record: @escaping @Sendable (RecordedRequest) -> Void) {
        self.index = index
        self.socket = socket
        self.record = record
        reader = HarnessMonitor(HarnessByteReader(socket: socket))
    }

    /// Reads the next request (keep-alive: call again for the next one) and records it in the upstream's
    /// `requests`. With `autoContinue`, a request with `Expect: 100-continue` and a body gets
    /// `HTTP/1.1 100 Continue` before its body is read. Throws `.connectionClosed` if the peer closed before
    /// a new request started.
    package func readRequest(timeout: Double = 5, autoContinue: Bool = true) throws -> RecordedRequest {
        let deadline = HarnessDeadline(seconds: timeout)
        let request = try reader.withLock { reader in
            let (raw, lines) = try reader.readHead(deadline: deadline)
            let (method, target, version) = try HarnessHTTP.parseRequestLine(lines[0])
            let headers = try lines.dropFirst().map(HarnessHTTP.parseHeaderLine)
            var request = RecordedRequest(
                method: method, target: target, version: version, headers: headers, rawHead: raw, body: [],
                connection: index)
            let framing = try HarnessHTTP.framing(headers: headers, noBody: false, untilCloseAllowed: false)
            if autoContinue, framing != .none, framing != .length(0),
                request.header("expect")?.lowercased() == "100-continue"
            {
                try socket.sendAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8), deadline: deadline)
            }
            switch framing {
            case .none, .untilClose:
                break
            case .length(let count):
                request.body = try reader.readExact(count, deadline: deadline)
            case .chunked:
                reading: while true {
                    switch try reader.readChunk(deadline: deadline) {
                    case .data(let bytes): request.body += bytes
                    case .end(let trailers):
                        request.trailers = trailers
                        break reading
                    }
                }
            }
            return request
        }
        record(request)
        return request
    }

    /// Sends all of `bytes` now (one send() loop). Throws `.brokenPipe`/`.connectionReset` if the peer is gone.
    package func write(_ bytes: [UInt8], timeout: Double = 5) throws {
        try socket.sendAll(bytes, deadline: HarnessDeadline(seconds: timeout))
    }

    package func write(_ string: String, timeout: Double = 5) throws {
        try write(Array(string.utf8), timeout: timeout)
    }

    /// Bytes written that the relay has not acknowledged yet: at 0 all of them wait in its socket (or were read).
    package func unacknowledgedBytes() throws -> Int { try socket.unacknowledgedBytes() }

    /// `size CRLF bytes CRLF` in one write. An empty chunk would be the last chunk, so it throws `.malformed`.
    package func writeChunk(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { throw HarnessError.malformed("writeChunk([]): use writeLastChunk()") }
        try write(ChunkedReader.encodeChunk(bytes))
    }

    package func writeChunk(_ string: String) throws {
        try writeChunk(Array(string.utf8))
    }

    /// `0 CRLF [trailers] CRLF` in one write.
    package func writeLastChunk(trailers: [(String, String)] = []) throws {
        try write(ChunkedReader.encodeLastChunk(trailers: trailers))
    }

    /// `HTTP/1.1 <status> <reason>` CRLF, each header CRLF, CRLF, in one write. Nothing is added
    /// (no Content-Length, no Transfer-Encoding: the script decides the framing).
    package func writeHead(status: Int, reason: String? = nil, headers: [(String, String)]) throws {
        var text = "HTTP/1.1 \(status) \(reason ?? Self.reasonPhrase(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try write(text)
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }

    /// Waits until the peer closes: recv() == 0 → `.fin`, ECONNRESET → `.reset`. Bytes that arrive meanwhile
    /// (and unread buffered ones) are discarded. If the close was already observed, returns it at once.
    package func waitForPeerClose(timeout: Double = 5) throws -> PeerClose {
        let deadline = HarnessDeadline(seconds: timeout)
        return try reader.withLock { reader in
            while true {
                _ = reader.takeAll()
                if let close = reader.peerClose { return close }
                _ = try reader.fill(deadline: deadline)
            }
        }
    }

    /// Waits until bytes arrive (returns and consumes all buffered ones) or the peer closes; useful to detect a
    /// cancel while the script is silent without losing data.
    package func waitForBytesOrClose(timeout: Double = 5) throws -> PeerActivity {
        let deadline = HarnessDeadline(seconds: timeout)
        return try reader.withLock { reader in
            while true {
                if reader.available > 0 { return .bytes(reader.takeAll()) }
                if let close = reader.peerClose { return .closed(close) }
                _ = try reader.fill(deadline: deadline)
            }
        }
    }

    /// Every raw byte received on this connection.
    package var receivedBytes: [UInt8] { socket.receivedBytes }

    /// FIN (idempotent; also done when the script returns).
    package func close() { socket.close(reset: false) }

    /// SO_LINGER {1, 0} then close: RST.
    package func reset() { socket.close(reset: true) }
}

/// A scripted upstream on 127.0.0.1:0. Each accepted connection runs `script` on its own Thread; when the script
/// returns (or throws) the connection is closed with FIN unless the script already closed/reset it.
/// Script errors are recorded in `scriptErrors` (except those after shutdown()), never crash the process.
package final class ScriptedUpstream: Sendable {
    package let port: Int
    private let core: ScriptedUpstreamCore

    package init(script: @escaping @Sendable (UpstreamConnection) throws -> Void) throws {
        core = try ScriptedUpstreamCore(script: script)
        port = core.port
        let core = core
        let acceptThread = Thread { core.acceptLoop() }
        acceptThread.name = "ScriptedUpstream.accept:\(port)"
        acceptThread.start()
    }

    deinit { core.shutdown() }

    package var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Every request read by any connection's readRequest(), in the order they were read.
    package var requests: [RecordedRequest] { core.state.withLock { $0.requests } }

    package var acceptedConnections: Int { core.state.withLock { $0.accepted } }

    /// Scripts that returned or threw.
    package var finishedScripts: Int { core.state.withLock { $0.finished } }

    /// "connection #i: <error>" for each script that threw.
    package var scriptErrors: [String] { core.state.withLock { $0.errors } }

    /// Blocks until `n` connections were accepted (or throws `.timeout`).
    package func waitForConnections(_ n: Int, timeout: Double = 5) throws {
        try core.state.wait(timeout: timeout) { $0.accepted >= n ? true : nil }
    }

    /// Blocks until every script of the connections accepted so far has returned (or throws `.timeout`).
    package func waitForScriptsToFinish(timeout: Double = 5) throws {
        try core.state.wait(timeout: timeout) { $0.finished >= $0.accepted ? true : nil }
    }

    /// Closes the listener and every connection (FIN), waking scripts blocked on a socket read. Waits at most
    /// 2 s for the accept thread to release the port; never joins script threads (one blocked on a Gate keeps
    /// running until its own timeout). Idempotent.
    package func shutdown() { core.shutdown() }
}

/// The part shared with the accept and script threads (so ScriptedUpstream's deinit can shut it down).
final class ScriptedUpstreamCore: Sendable {
    struct State: Sendable {
        var accepted = 0
        var finished = 0
        var requests: [RecordedRequest] = []
        var errors: [String] = []
        var open: [UpstreamConnection] = []
        var isShutdown = false
        var acceptLoopExited = false
    }

    let state = HarnessMonitor(State())
    let port: Int
    private let script: @Sendable (UpstreamConnection) throws -> Void
    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    init(script: @escaping @Sendable (UpstreamConnection) throws -> Void) throws {
        _ = HarnessPOSIX.ignoreSIGPIPE
        self.script = script
        let (fd, address) = try HarnessPOSIX.listenOnLoopback(backlog: 128)
        port = Int(UInt16(bigEndian: address.sin_port))
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            let message = HarnessPOSIX.errorString("pipe")
            HarnessPOSIX.closeFD(fd)
            throw HarnessError.socket(message)
        }
        listenFD = fd
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    func acceptLoop() {
        while !state.withLock({ $0.isShutdown }) {
            var descriptors = [
                pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            // The wake pipe ends this wait at shutdown; the 1 s bound only re-checks the flag.
            let ready = poll(&descriptors, 2, 1000)
            if ready <= 0 || descriptors[1].revents != 0 { continue }
            guard descriptors[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 { continue }
            HarnessPOSIX.configureConnected(fd)
            let socket = HarnessSocket(fd: fd)
            let connection: UpstreamConnection? = state.withLock { state in
                if state.isShutdown { return nil }
                let connection = UpstreamConnection(index: state.accepted, socket: socket) { [weak self] request in
                    self?.state.withLock { $0.requests.append(request) }
                }
                state.accepted += 1
                state.open.append(connection)
                return connection
            }
            guard let connection else {
                socket.close(reset: false)
                break
            }
            let thread = Thread { [self] in run(connection) }
            thread.name = "ScriptedUpstream:\(port)#\(connection.index)"
            thread.start()
        }
        state.withLock { state in
            state.acceptLoopExited = true
            HarnessPOSIX.closeFD(listenFD)
            HarnessPOSIX.closeFD(wakeRead)
            HarnessPOSIX.closeFD(wakeWrite)
        }
    }

    private func run(_ connection: UpstreamConnection) {
        var failure: String?
        do {
            try script(connection)
        } catch {
            failure = "connection #\(connection.index): \(error)"
        }
        connection.close()
        state.withLock { state in
            if let failure, !state.isShutdown { state.errors.append(failure) }
            state.finished += 1
            state.open.removeAll { $0 === connection }
        }
    }

    func shutdown() {
        let connections: [UpstreamConnection] = state.withLock { state in
            if state.isShutdown { return [] }
            state.isShutdown = true
            if !state.acceptLoopExited {
                var byte: UInt8 = 1
                _ = write(wakeWrite, &byte, 1)
            }
            let open = state.open
            state.open = []
            return open
        }
        for connection in connections { connection.close() }
        _ = try? state.wait(timeout: 2) { $0.acceptLoopExited ? true : nil }
    }
}
