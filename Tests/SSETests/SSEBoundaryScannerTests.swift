import SSE
import Testing
import TestSupportCore

/// The one scanner of line and event ends: every line-end style, each stream split at every position and fed one
/// byte at a time (the ends found must not depend on how the bytes arrive), and random bytes against a byte-by-byte
/// reading (the word-at-a-time search must neither miss a CR or LF nor see one in a near miss such as 0x8A or 0x0B).
@Suite("SSEBoundaryScanner")
struct SSEBoundaryScannerTests {
    /// Absolute stream offsets of every line end's `next`, and of those that end an event, for `bytes` delivered
    /// in `chunks` pieces cut at `cuts`.
    static func ends(_ bytes: [UInt8], cuts: [Int]) -> (lines: [Int], events: [Int], atBoundary: Bool) {
        var scanner = SSEBoundaryScanner()
        var lines: [Int] = [], events: [Int] = []
        var start = 0
        for end in cuts + [bytes.count] where end >= start {
            let scan = bytes[start..<end].withUnsafeBytes { scanner.scan($0) }
            for lineEnd in scan.lineEnds {
                lines.append(start + lineEnd.next)
                if lineEnd.endsEvent { events.append(start + lineEnd.next) }
            }
            start = end
        }
        return (lines, events, scanner.atEventBoundary)
    }

    /// Line ends by the standard, one byte at a time: where each line end's last byte is (a CR that a split keeps
    /// from its LF counts at the CR when fed whole it counts after the LF; compared after that rule).
    static func reference(_ bytes: [UInt8]) -> (lines: [Int], events: [Int]) {
        var lines: [Int] = [], events: [Int] = []
        var i = 0, lineStart = 0
        while i < bytes.count {
            let b = bytes[i]
            guard b == 0x0A || b == 0x0D else {
                i += 1
                continue
            }
            let empty = i == lineStart
            i += (b == 0x0D && i + 1 < bytes.count && bytes[i + 1] == 0x0A) ? 2 : 1
            lines.append(i)
            if empty { events.append(i) }
            lineStart = i
        }
        return (lines, events)
    }

    @Test func everyLineEndStyleWholeAndDripped() {
        for (stream, whole, dripped) in [("data: a\n\ndata: b", 9, 9), ("data: a\r\n\r\ndata: b", 11, 10),
                                         ("data: a\r\rdata: b", 9, 9), ("data: a\n\rdata: b", 9, 9),
                                         ("data: a\r\n\ndata: b", 10, 10), (": c\ndata: a\nid: 1\n\nx", 19, 19)] {
            let bytes = Array(stream.utf8)
            var all = SSEBoundaryScanner()
            #expect(all.atEventBoundary, "nothing sent is a boundary")
            #expect(all.scan(bytes).firstEventEnd == whole, "\(stream.debugDescription)")
            #expect(!all.atEventBoundary, "\(stream.debugDescription): the next event is under way")
            var one = SSEBoundaryScanner()
            var found: Int?
            for (i, byte) in bytes.enumerated() where found == nil {
                if one.scan([byte]).firstEventEnd != nil { found = i + 1 }
            }
            #expect(found == dripped, "\(stream.debugDescription) dripped")
            #expect(one.atEventBoundary)
            var short = SSEBoundaryScanner()
            _ = short.scan(Array(bytes[..<(dripped - 1)]))
            #expect(!short.atEventBoundary, "\(stream.debugDescription) one byte short")
        }
    }

    /// A CR ending one delivery and an LF starting the next are one line end: the next scan says it skips the LF.
    @Test func aCRAndItsLFInTwoDeliveries() {
        var scanner = SSEBoundaryScanner()
        let first = scanner.scan(Array("data: a\r".utf8))
        #expect(first.endsWithCR && first.lineEnds == [.init(end: 7, next: 8, endsEvent: false)])
        let second = scanner.scan(Array("\n\r".utf8))
        #expect(second.skipsLeadingLF && second.start == 1)
        #expect(second.lineEnds == [.init(end: 1, next: 2, endsEvent: true)] && second.endsWithCR)
        #expect(scanner.atEventBoundary)
        let third = scanner.scan(Array("\nx".utf8))
        #expect(third.skipsLeadingLF && third.lineEnds.isEmpty && !scanner.atEventBoundary)
        #expect(scanner.scans == 3 && scanner.bytesScanned == 12)
    }

    /// A boundary is settled unless the bytes end with a lone CR right after an LF (or as the stream's first byte):
    /// that CR's LF may come next. The same answer for every prefix of each stream, however the prefix was split.
    @Test func aSettledBoundaryIsNeverALoneCRAfterAnLF() {
        for stream in ["data: a\r\n\r\ndata: b\r\n\r\n", "data: a\n\r\ndata: b\n\r", "data: a\r\rdata: b\r\r", "\r\n: c\r\n\r\n"] {
            let bytes = Array(stream.utf8)
            for length in 0...bytes.count {
                for cut in 0...length {
                    var scanner = SSEBoundaryScanner()
                    _ = scanner.scan(Array(bytes[..<cut]))
                    _ = scanner.scan(Array(bytes[cut..<length]))
                    let loneCR = length > 0 && bytes[length - 1] == 0x0D && (length == 1 || bytes[length - 2] == 0x0A)
                    #expect(scanner.atSettledEventBoundary == (scanner.atEventBoundary && !loneCR),
                            "\(stream.debugDescription) to \(length), cut at \(cut)")
                }
            }
        }
    }

    @Test func splitAtEveryPositionFindsTheSameEnds() {
        let streams = ["data: {\"a\":1}\n\n", ": ping\r\n\r\ndata: x\r\rdata: y\n\r\n", "\n\n\r\r\r\n\r\n", "event: e\rdata: 0123456789abcdef\r\n\r\nid: 7\n\n"]
        for stream in streams {
            let bytes = Array(stream.utf8)
            let whole = Self.ends(bytes, cuts: [])
            let expected = Self.reference(bytes)
            #expect(whole.lines == expected.lines && whole.events == expected.events, "\(stream.debugDescription)")
            for cut in 0...bytes.count {
                let split = Self.ends(bytes, cuts: [cut])
                // Split between a CR and its LF, the line end is reported at the CR (the LF is skipped next time).
                let crlfSplit = cut > 0 && cut < bytes.count && bytes[cut - 1] == 0x0D && bytes[cut] == 0x0A
                let lines = crlfSplit ? expected.lines.map { $0 == cut + 1 ? cut : $0 } : expected.lines
                let events = crlfSplit ? expected.events.map { $0 == cut + 1 ? cut : $0 } : expected.events
                #expect(split.lines == lines && split.events == events, "\(stream.debugDescription) cut at \(cut)")
                #expect(split.atBoundary == whole.atBoundary)
            }
        }
    }

    /// Random bytes drawn mostly from CR, LF and their near misses, at every alignment of the word search.
    @Test func randomBytesMatchTheByteByByteReading() {
        var rng = SplitMix64(seed: 19)
        let alphabet: [UInt8] = [0x0A, 0x0D, 0x8A, 0x8D, 0x0B, 0x0C, 0x1A, 0x1D, 0x09, 0x00, 0xFF, 0x61, 0x20, 0x3A]
        for _ in 0..<400 {
            let count = Int(rng.next() % 40)
            let bytes = (0..<count).map { _ in rng.next() % 4 == 0 ? alphabet[Int(rng.next() % 2)] : alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            let found = Self.ends(bytes, cuts: [])
            let expected = Self.reference(bytes)
            #expect(found.lines == expected.lines && found.events == expected.events, "\(bytes)")
        }
    }

    /// The part of a scan that a cut stream forwards: the line ends up to the first event end.
    @Test func aPrefixKeepsTheLineEndsInIt() {
        var scanner = SSEBoundaryScanner()
        let scan = scanner.scan(Array("data: a\n\ndata: b\n\r".utf8))
        let end = scan.firstEventEnd!
        #expect(end == 9)
        let head = scan.prefix(end)
        #expect(head.lineEnds == Array(scan.lineEnds.prefix(2)) && !head.endsWithCR)
        #expect(scan.prefix(18) == scan && scan.endsWithCR)
    }
}
