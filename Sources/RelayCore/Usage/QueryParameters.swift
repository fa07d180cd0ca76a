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
        removing(names.map { Array($0.utf8) }, from: query)
    }

    /// `removing(_:from:)` with the names as lowercase bytes, made once by the caller. A query that has none of
    /// them (nearly every one) is looked at in place and returned as it is, with nothing allocated.
    package static func removing(_ names: [[UInt8]], from query: String) -> String {
        var query = query
        let hasAny = query.withUTF8 { q in
            var start = 0
            while start <= q.count {
                var end = start
                while end < q.count && q[end] != UInt8(ascii: "&") { end += 1 }
                var nameEnd = start
                while nameEnd < end && q[nameEnd] != UInt8(ascii: "=") { nameEnd += 1 }
                if names.contains(where: { decodedName(q, start, nameEnd, equals: $0) }) { return true }
                start = end + 1
            }
            return false
        }
        guard hasAny else { return query }
        var kept: [Substring] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: false) {
            let rawName = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if let decoded = percentDecoded(rawName.utf8).map({ $0.map(lowercased) }), names.contains(decoded) { continue }
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
