/// Edits of a request's query string that keep every other byte as the client sent it.
package enum QueryParameters {
    /// `query` (without the `?`) minus every parameter named `name`, compared after percent-decoding and ignoring
    /// ASCII case (`key`, `KEY`, `%6Bey` all go: the point is that no client-chosen key reaches the provider or a
    /// log line). Parameters are separated by `&` only (WHATWG URL, "application/x-www-form-urlencoded parsing");
    /// the kept ones, empty ones included, are joined by `&` exactly as they were.
    package static func removing(_ name: String, from query: String) -> String {
        let target = Array(name.lowercased().utf8)
        var kept: [Substring] = []
        var removedAny = false
        for piece in query.split(separator: "&", omittingEmptySubsequences: false) {
            let rawName = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if let decoded = percentDecoded(rawName.utf8), decoded.map(lowercased) == target {
                removedAny = true
            } else {
                kept.append(piece)
            }
        }
        return removedAny ? kept.joined(separator: "&") : query
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
