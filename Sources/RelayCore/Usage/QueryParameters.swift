/// Edits of a request's query string that keep every other byte as the client sent it.
package enum QueryParameters {
    /// `query` (without the `?`) minus every parameter named `name`, compared after percent-decoding and ignoring
    /// ASCII case (`key`, `KEY`, `%6Bey` all go: the point is that no client-chosen key reaches the provider or a
    /// log line). Parameters are separated by `&` only (WHATWG URL, "application/x-www-form-urlencoded parsing");
    /// the kept ones, empty ones included, are joined by `&` exactly as they were.
    package static func removing(_ name: String, from query: String) -> String {
        removing([name.lowercased()], from: query)
    }

    /// `query` minus every parameter named any of `names` (lowercase), by `removing(_:from:)`'s rules.
    package static func removing(_ names: [String], from query: String) -> String {
        removing(Names(names), from: query)
    }

    /// Parameter names to remove (lowercase ASCII), made once: their bytes, and the bytes a name can start with
    /// (either case, or `%`) as a mask, so a parameter that cannot be one of them costs one test.
    package struct Names: Sendable {
        let names: [[UInt8]]
        /// Bit c of `starts.0` (c < 64) or `starts.1` (c - 64): some name can start with byte c.
        let starts: (UInt64, UInt64)

        package init(_ names: [String]) {
            self.names = names.map { Array($0.utf8) }
            var starts: (UInt64, UInt64) = (1 << UInt64(UInt8(ascii: "%")), 0)
            for name in self.names {
                guard let first = name.first, first < 128 else { continue }
                let upper = first >= UInt8(ascii: "a") && first <= UInt8(ascii: "z") ? first - 0x20 : first
                for c in [first, upper] {
                    if c < 64 { starts.0 |= 1 << UInt64(c) } else { starts.1 |= 1 << UInt64(c - 64) }
                }
            }
            self.starts = starts
        }

        @inline(__always)
        func mayStart(with c: UInt8) -> Bool {
            c < 64 ? starts.0 >> UInt64(c) & 1 != 0 : c < 128 && starts.1 >> UInt64(c - 64) & 1 != 0
        }
    }

    /// `removing(_:from:)` with the names made once by the caller. A query that has none of them (nearly every one)
    /// is looked at in place and returned as it is, with nothing allocated.
    package static func removing(_ names: Names, from query: String) -> String {
        var query = query
        let hasAny = query.withUTF8 { q in
            var start = 0
            while start < q.count {
                var end = start
                while end < q.count && q[end] != UInt8(ascii: "&") { end += 1 }
                if names.mayStart(with: q[start]) {
                    var nameEnd = start
                    while nameEnd < end && q[nameEnd] != UInt8(ascii: "=") { nameEnd += 1 }
                    for name in names.names where decodedName(q, start, nameEnd, equals: name) { return true }
                }
                start = end + 1
            }
            return false
        }
        guard hasAny else { return query }
        var kept: [Substring] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: false) {
            let rawName = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if let decoded = percentDecoded(rawName.utf8).map({ $0.map(lowercased) }), names.names.contains(decoded) { continue }
            kept.append(piece)
        }
        return kept.joined(separator: "&")
    }

    /// `q[start..<end]`, percent-decoded and ASCII-lowercased, is `name` (a malformed escape matches nothing).
    private static func decodedName(_ q: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, equals name: [UInt8]) -> Bool {
        var i = start, k = 0
        while i < end {
            var c = q[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < end, let hi = hex(q[i + 1]), let lo = hex(q[i + 2]) else { return false }
                c = hi << 4 | lo
                i += 3
            } else {
                i += 1
            }
            guard k < name.count, lowercased(c) == name[k] else { return false }
            k += 1
        }
        return k == name.count
    }

    /// The values of every parameter named any of `names` (lowercase; names compared as `removing` compares them),
    /// percent-decoded, in order. A value with a malformed escape comes back empty (it matches no word); `+` is not
    /// read as a space.
    package static func values(named names: [String], in query: String) -> [[UInt8]] {
        let targets = names.map { Array($0.utf8) }
        var out: [[UInt8]] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: false) {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0].utf8).map({ $0.map(lowercased) }), targets.contains(name) else { continue }
            out.append(parts.count > 1 ? percentDecoded(parts[1].utf8) ?? [] : [])
        }
        return out
    }

    /// Bytes with `%XX` decoded; nil when an escape is malformed (then the name cannot be `key` for any server).
    package static func percentDecoded(_ bytes: Substring.UTF8View) -> [UInt8]? {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "%") {
                let h = bytes.index(after: i)
                guard h != bytes.endIndex, bytes.index(after: h) != bytes.endIndex,
                      let hi = hex(bytes[h]), let lo = hex(bytes[bytes.index(after: h)]) else { return nil }
                out.append(hi << 4 | lo)
                i = bytes.index(h, offsetBy: 2)
            } else {
                out.append(c)
                i = bytes.index(after: i)
            }
        }
        return out
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func lowercased(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 0x20 : c
    }
}
