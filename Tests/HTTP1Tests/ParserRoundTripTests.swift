import HTTP1
import Testing
import TestSupportCore

/// Random valid requests, serialised, cut at random points and parsed back: the parser must reproduce them exactly.
@Suite("Randomized round trip")
struct ParserRoundTripTests {
    private struct Generated {
        var wire: [UInt8]
        var events: [RequestEvent]
    }

    private static let tokenChars = b("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~")
    private static let targetChars = b("abcdefghijklmnopqrstuvwxyz0123456789-._~/%=&+:@!$'()*,;")
    private static let hostChars = b("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]%")
    private static let valueChars = b("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \t\"(),/:;<=>?@[\\]{}!#$%&'*+-.^_`|~")

    private static func pick(_ chars: [UInt8], _ count: Int, _ rng: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in chars[Int.random(in: 0..<chars.count, using: &rng)] }
    }

    private static func generate(_ rng: inout SplitMix64) -> Generated {
        func eol(_ rng: inout SplitMix64) -> [UInt8] { Int.random(in: 0..<8, using: &rng) == 0 ? b("\n") : b("\r\n") }
        let version: HTTPVersion = Int.random(in: 0..<5, using: &rng) == 0 ? .http1_0 : .http1_1
        let method = String(decoding: pick(tokenChars, Int.random(in: 1...10, using: &rng), &rng), as: UTF8.self)
        var target = "/" + String(decoding: pick(targetChars, Int.random(in: 0...60, using: &rng), &rng), as: UTF8.self)
        if Int.random(in: 0..<3, using: &rng) == 0 { target += "?" + String(decoding: pick(targetChars, Int.random(in: 0...30, using: &rng), &rng), as: UTF8.self) }

        var wire: [UInt8] = []
        if Int.random(in: 0..<10, using: &rng) == 0 { wire += eol(&rng) }
        wire += b("\(method) \(target) \(version == .http1_1 ? "HTTP/1.1" : "HTTP/1.0")") + eol(&rng)

        var fields: [(String, String)] = []
        // RFC 9112 §3.2: Host is required on 1.1 and optional on 1.0.
        if version == .http1_1 || Bool.random(using: &rng) {
            let value = String(decoding: pick(hostChars, Int.random(in: 0...20, using: &rng), &rng), as: UTF8.self)
            fields.append(("Host", value))
            wire += b("Host: \(value)") + eol(&rng)
        }
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            let name = "X-" + String(decoding: pick(tokenChars, Int.random(in: 1...12, using: &rng), &rng), as: UTF8.self)
            var valueBytes = pick(valueChars, Int.random(in: 0...40, using: &rng), &rng)
            while let first = valueBytes.first, first == 0x20 || first == 0x09 { valueBytes.removeFirst() }
            while let last = valueBytes.last, last == 0x20 || last == 0x09 { valueBytes.removeLast() }
            var value = String(decoding: valueBytes, as: UTF8.self)
            if Int.random(in: 0..<10, using: &rng) == 0 { value += "\u{E9}\u{2603}" }
            fields.append((name, value))
            let ows = pick(b(" \t"), Int.random(in: 0...2, using: &rng), &rng)
            wire += b(name) + b(":") + ows + b(value) + ows + eol(&rng)
        }

        let bodyKind = Int.random(in: 0..<3, using: &rng)
        var body: [UInt8] = []
        var framing = BodyFraming.none
        var bodyWire: [UInt8] = []
        if bodyKind == 1 || (bodyKind == 2 && version == .http1_0) {
            body = (0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            framing = .contentLength(body.count)
            fields.append(("Content-Length", "\(body.count)"))
            wire += b("Content-Length: \(body.count)") + eol(&rng)
            bodyWire = body
        } else if bodyKind == 2 {
            framing = .chunked
            fields.append(("Transfer-Encoding", "chunked"))
            wire += b("Transfer-Encoding: chunked") + eol(&rng)
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                let chunk = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                body += chunk
                var sizeLine: [UInt8] = []
                ChunkedEncoding.appendSizeLine(chunk.count, to: &sizeLine)
                sizeLine.removeLast(2)
                if Int.random(in: 0..<2, using: &rng) == 0 { sizeLine = b(String(decoding: sizeLine, as: UTF8.self).uppercased()) }
                if Int.random(in: 0..<3, using: &rng) == 0 { sizeLine += b(" ;ext=") + pick(tokenChars, Int.random(in: 0...10, using: &rng), &rng) }
                // Chunked framing is CRLF only (RFC 9112 §7.1); bare LF is tolerated in the head alone.
                bodyWire += sizeLine + b("\r\n") + chunk + b("\r\n")
            }
            bodyWire += b("0\r\n")
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                bodyWire += b("X-Trailer-") + pick(tokenChars, 4, &rng) + b(": ") + pick(valueChars, 5, &rng) + b("z\r\n")
            }
            bodyWire += b("\r\n")
        }
        wire += eol(&rng) + bodyWire

        let head = RequestHead(method: method, target: target, version: version, headers: HTTPHeaders(fields),
                               framing: framing, keepAlive: version == .http1_1, expectsContinue: false)
        return Generated(wire: wire, events: [.head(head)] + (body.isEmpty ? [] : [.body(body)]) + [.end])
    }

    @Test("300 pipelined batches of random requests cut at random points", arguments: [0x5EED_0001 as UInt64, 0x5EED_0002, 0x5EED_0003])
    func roundTrip(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        for batch in 0..<100 {
            var wire: [UInt8] = []
            var expected: [RequestEvent] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let g = Self.generate(&rng)
                wire += g.wire
                expected += g.events
            }
            var pieces: [[UInt8]] = []
            var i = 0
            while i < wire.count {
                // Mostly tiny pieces (the interesting boundaries), sometimes big ones.
                let n = Int.random(in: 0..<4, using: &rng) == 0 ? Int.random(in: 1...512, using: &rng) : Int.random(in: 1...8, using: &rng)
                pieces.append(Array(wire[i..<min(wire.count, i + n)]))
                i += n
            }
            let outcome = run(pieces)
            #expect(outcome == Outcome(events: expected, error: nil), "seed \(seed) batch \(batch)")
            #expect(run([wire]) == outcome, "seed \(seed) batch \(batch) all at once")
        }
    }
}
