// Test harness: strict HTTP/1.1 reading (CRLF lines, heads, chunked framing) over a socket or in-memory bytes.
// Deliberately strict: it observes the relay, so anything a lenient client would forgive is an error here.
// Must not import the relay's modules.
import Dispatch
import TestSupportCore

/// One piece of a chunked body.
enum HarnessChunk: Sendable {
    case data([UInt8])
    /// The 0-size chunk was read, and its trailer section up to the final CRLF.
    case end(trailers: [(name: String, value: String)])
}

/// A buffered reader over a HarnessSocket (or fixed bytes, for `ChunkedReader.decode`).
/// End of input mid-message throws `.truncated` (FIN) or `.connectionReset` (RST), never `.timeout`.
struct HarnessByteReader: Sendable {
    static let maximumHeadBytes = 64 * 1024
    static let maximumChunkSize = 1 << 30

    let socket: HarnessSocket?
    private var buffer: [UInt8]
    private var position = 0
    /// Set once the peer's close (FIN/RST) was observed; no more bytes come after `buffer`.
    private(set) var peerClose: PeerClose?

    init(socket: HarnessSocket) {
        self.socket = socket
        buffer = []
    }

    /// Reads from `bytes` only; their end behaves like a FIN.
    init(bytes: [UInt8]) {
        socket = nil
        buffer = bytes
        peerClose = PeerClose(kind: .fin, atNanoseconds: DispatchTime.now().uptimeNanoseconds)
    }

    var available: Int { buffer.count - position }

    /// Bytes buffered and not consumed.
    var unconsumed: ArraySlice<UInt8> { buffer[position...] }

    /// Receives more bytes. Returns false when the peer has closed (and so no more bytes will come).
    mutating func fill(deadline: HarnessDeadline) throws -> Bool {
        if peerClose != nil { return false }
        guard let socket else { return false }
        switch try socket.receive(deadline: deadline) {
        case .bytes(let bytes):
            if position > 0 && position >= buffer.count / 2 {
                buffer.removeFirst(position)
                position = 0
            }
            buffer += bytes
            return true
        case .closed(let kind):
            peerClose = PeerClose(kind: kind, atNanoseconds: DispatchTime.now().uptimeNanoseconds)
            return false
        }
    }

    /// The error for input ending here: RST → `.connectionReset`; FIN mid-message → `.truncated`;
    /// FIN before a message started → `.connectionClosed`.
    func endError(midMessage: Bool) -> HarnessError {
        if peerClose?.kind == .reset { return .connectionReset }
        return midMessage ? .truncated : .connectionClosed
    }

    mutating func take(_ count: Int) -> [UInt8] {
        let bytes = Array(buffer[position..<(position + count)])
        position += count
        return bytes
    }

    mutating func takeAll() -> [UInt8] { take(available) }

    /// Exactly `count` bytes.
    mutating func readExact(_ count: Int, deadline: HarnessDeadline) throws -> [UInt8] {
        while available < count {
            guard try fill(deadline: deadline) else { throw endError(midMessage: true) }
        }
        return take(count)
    }

    /// One line ending in exactly CRLF, returned without it. A bare LF or CR is `.malformed`.
    mutating func readLine(deadline: HarnessDeadline, limit: Int, midMessage: Bool) throws -> [UInt8] {
        var scanned = 0
        while true {
            if let lf = buffer[(position + scanned)...].firstIndex(of: 10) {
                guard lf > position, buffer[lf - 1] == 13 else { throw HarnessError.malformed("bare LF in a line") }
                let line = Array(buffer[position..<(lf - 1)])
                if line.contains(13) { throw HarnessError.malformed("bare CR in a line") }
                position = lf + 1
                return line
            }
            scanned = available
            if scanned > limit { throw HarnessError.malformed("line longer than \(limit) bytes") }
            guard try fill(deadline: deadline) else { throw endError(midMessage: midMessage || available > 0) }
        }
    }

    /// A head: start line and field lines up to the empty line. Returns the exact raw bytes and the lines
    /// (lines[0] is the start line). An empty first line or a line starting with SP/HTAB (obs-fold) is malformed.
    mutating func readHead(deadline: HarnessDeadline) throws -> (raw: [UInt8], lines: [[UInt8]]) {
        var raw: [UInt8] = []
        var lines: [[UInt8]] = []
        while true {
            let line = try readLine(
                deadline: deadline, limit: Self.maximumHeadBytes, midMessage: !lines.isEmpty)
            raw += line
            raw += [13, 10]
            if raw.count > Self.maximumHeadBytes { throw HarnessError.malformed("head too large") }
            if line.isEmpty {
                if lines.isEmpty { throw HarnessError.malformed("empty line before the start line") }
                return (raw, lines)
            }
            if !lines.isEmpty, line[0] == 32 || line[0] == 9 {
                throw HarnessError.malformed("obsolete line folding")
            }
            lines.append(line)
        }
    }

    /// The next piece of a chunked body: `size-in-hex CRLF data CRLF`, or the 0-size chunk with its trailer
    /// section. No chunk extensions, no whitespace.
    mutating func readChunk(deadline: HarnessDeadline) throws -> HarnessChunk {
        let sizeLine = try readLine(deadline: deadline, limit: 1024, midMessage: true)
        let size = try ChunkedReader.parseSizeLine(sizeLine)
        if size == 0 {
            var trailers: [(name: String, value: String)] = []
            while true {
                let line = try readLine(deadline: deadline, limit: Self.maximumHeadBytes, midMessage: true)
                if line.isEmpty { return .end(trailers: trailers) }
                trailers.append(try HarnessHTTP.parseHeaderLine(line))
            }
        }
        let data = try readExact(size, deadline: deadline)
        let terminator = try readExact(2, deadline: deadline)
        guard terminator == [13, 10] else {
            throw HarnessError.malformed("chunk data of \(size) bytes not followed by CRLF")
        }
        return .data(data)
    }

    /// Everything until the peer closes (buffered bytes included), and how it closed.
    mutating func readUntilClose(deadline: HarnessDeadline) throws -> (bytes: [UInt8], kind: PeerCloseKind) {
        while try fill(deadline: deadline) {}
        return (takeAll(), peerClose?.kind ?? .fin)
    }
}

/// Pure helpers for chunked framing, usable on bytes captured by `readUntilClose` or `receivedBytes`.
package enum ChunkedReader {
    package struct Decoded: Sendable {
        package var chunks: [[UInt8]]
        package var body: [UInt8]
        package var trailers: [(name: String, value: String)]
        /// Bytes after the end of the chunked body.
        package var rest: [UInt8]
    }

    /// Strict chunk-size line: 1 to 16 hex digits (either case), nothing else (no extensions, no whitespace).
    package static func parseSizeLine(_ line: [UInt8]) throws -> Int {
        guard !line.isEmpty, line.count <= 16 else {
            throw HarnessError.malformed("chunk size line \(String(decoding: line, as: UTF8.self).debugDescription)")
        }
        var size = 0
        for byte in line {
            let digit: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(byte - UInt8(ascii: "A")) + 10
            default:
                throw HarnessError.malformed(
                    "chunk size line \(String(decoding: line, as: UTF8.self).debugDescription)")
            }
            size = size * 16 + digit
            if size > HarnessByteReader.maximumChunkSize {
                throw HarnessError.malformed("chunk size over \(HarnessByteReader.maximumChunkSize)")
            }
        }
        return size
    }

    /// Decodes a complete chunked body. Throws `.truncated` if `bytes` end before the last chunk's final CRLF,
    /// `.malformed` on bad framing.
    package static func decode(_ bytes: [UInt8]) throws -> Decoded {
        var reader = HarnessByteReader(bytes: bytes)
        let deadline = HarnessDeadline(seconds: 0)
        var chunks: [[UInt8]] = []
        while true {
            switch try reader.readChunk(deadline: deadline) {
            case .data(let data):
                chunks.append(data)
            case .end(let trailers):
                return Decoded(
                    chunks: chunks, body: chunks.flatMap { $0 }, trailers: trailers, rest: reader.takeAll())
            }
        }
    }

    /// `size CRLF bytes CRLF` (lowercase hex). `bytes` must not be empty (that would be the last chunk).
    package static func encodeChunk(_ bytes: [UInt8]) -> [UInt8] {
        Array(String(bytes.count, radix: 16).utf8) + [13, 10] + bytes + [13, 10]
    }

    /// The 0-size chunk, optional trailer fields, and the final CRLF.
    package static func encodeLastChunk(trailers: [(String, String)] = []) -> [UInt8] {
        var text = "0\r\n"
        for (name, value) in trailers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// A whole chunked body: each non-empty element as one chunk, then the last chunk.
    package static func encode(_ chunks: [[UInt8]], trailers: [(String, String)] = []) -> [UInt8] {
        chunks.filter { !$0.isEmpty }.flatMap(encodeChunk) + encodeLastChunk(trailers: trailers)
    }
}

/// Strict parsing of start lines and field lines, and message framing.
enum HarnessHTTP {
    enum Framing: Equatable {
        case none
        case chunked
        case length(Int)
        case untilClose
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// `name ":" OWS value OWS`; the name must be a token (so no whitespace before the colon), the value has no
    /// control characters other than HTAB.
    static func parseHeaderLine(_ line: [UInt8]) throws -> (name: String, value: String) {
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
            line[..<colon].allSatisfy(isTokenByte)
        else { throw HarnessError.malformed("field line \(text.debugDescription)") }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
        if value.contains(where: { ($0 < 32 && $0 != 9) || $0 == 127 }) {
            throw HarnessError.malformed("control character in field line \(text.debugDescription)")
        }
        return (String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private static func isVersion(_ bytes: ArraySlice<UInt8>) -> Bool {
        let version = Array(bytes)
        return version.count == 8 && Array(version[0..<5]) == Array("HTTP/".utf8)
            && (48...57).contains(version[5]) && version[6] == UInt8(ascii: ".") && (48...57).contains(version[7])
    }

    /// `HTTP/d.d SP ddd SP reason` (the second SP is required; the reason may be empty).
    static func parseStatusLine(_ line: [UInt8]) throws -> (version: String, status: Int, reason: String) {
        let text = String(decoding: line, as: UTF8.self)
        guard line.count >= 13, isVersion(line[0..<8]), line[8] == 32,
            line[9..<12].allSatisfy({ (48...57).contains($0) }), line[12] == 32,
            !line[13...].contains(where: { ($0 < 32 && $0 != 9) || $0 == 127 })
        else { throw HarnessError.malformed("status line \(text.debugDescription)") }
        return (
            String(decoding: line[0..<8], as: UTF8.self), Int(String(decoding: line[9..<12], as: UTF8.self))!,
            String(decoding: line[13...], as: UTF8.self)
        )
    }

    /// `method SP target SP HTTP/d.d`.
    static func parseRequestLine(_ line: [UInt8]) throws -> (method: String, target: String, version: String) {
        let parts = line.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte), !parts[1].isEmpty,
            parts[1].allSatisfy({ $0 > 32 && $0 != 127 }), isVersion(parts[2])
        else { throw HarnessError.malformed("request line \(String(decoding: line, as: UTF8.self).debugDescription)") }
        return (
            String(decoding: parts[0], as: UTF8.self), String(decoding: parts[1], as: UTF8.self),
            String(decoding: parts[2], as: UTF8.self)
        )
    }

    /// Body framing per RFC 9112 §6.3, strictly: Transfer-Encoding must be exactly `chunked` and must not come
    /// with Content-Length; Content-Length values must be digits and agree.
    static func framing(headers: [(name: String, value: String)], noBody: Bool, untilCloseAllowed: Bool) throws
        -> Framing
    {
        if noBody { return .none }
        let transferEncodings = headers.filter { $0.name.lowercased() == "transfer-encoding" }.map(\.value)
        let lengths = headers.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !transferEncodings.isEmpty {
            guard transferEncodings.count == 1, transferEncodings[0].lowercased() == "chunked" else {
                throw HarnessError.malformed("Transfer-Encoding \(transferEncodings)")
            }
            guard lengths.isEmpty else { throw HarnessError.malformed("both Transfer-Encoding and Content-Length") }
            return .chunked
        }
        if let first = lengths.first {
            guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.utf8.count <= 15,
                first.utf8.allSatisfy({ (48...57).contains($0) }), let count = Int(first)
            else { throw HarnessError.malformed("Content-Length \(lengths)") }
            return .length(count)
        }
        return untilCloseAllowed ? .untilClose : .none
    }

    /// Index just past the first occurrence of `marker` in `bytes` starting at `start`, or nil.
    static func endOfFirstMatch(of marker: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        if marker.isEmpty { return start }
        guard bytes.count - start >= marker.count else { return nil }
        for index in start...(bytes.count - marker.count)
        where bytes[index] == marker[0] && Array(bytes[index..<(index + marker.count)]) == marker {
            return index + marker.count
        }
        return nil
    }
}
