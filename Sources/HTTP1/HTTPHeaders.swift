/// One field line: a name and its value, both as received or as they will be sent.
/// RFC 9110 §5 defines fields; the name is kept in its original case so relayed headers are not rewritten.
public struct HTTPField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An ordered list of fields that looks names up case-insensitively (ASCII) and keeps duplicates in order.
/// RFC 9110 §5.1 makes field names case-insensitive and §5.3 makes the order of same-named lines significant,
/// so this is a list rather than a dictionary. `==` compares the exact lists (order and spelling).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    private var fields: [HTTPField]

    public init() {
        fields = []
    }

    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { HTTPField(name: $0.0, value: $0.1) }
    }

    init(fields: [HTTPField]) {
        self.fields = fields
    }

    public var count: Int { fields.count }

    public var underestimatedCount: Int { fields.count }

    public mutating func add(name: String, value: String) {
        // Room for a typical head at once: grown one field at a time the list was reallocated three or four times.
        if fields.capacity == 0 { fields.reserveCapacity(Self.initialCapacity) }
        fields.append(HTTPField(name: name, value: value))
    }

    /// Makes room for `minimumCapacity` fields (and the list its own, unshared): one allocation for a list that
    /// is about to be edited and grown.
    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        fields.reserveCapacity(minimumCapacity)
    }

    /// Fields a list gets room for when its first is added (a request or response head has about this many).
    static let initialCapacity = 8

    public func first(_ name: String) -> String? {
        for field in fields where Self.namesEqual(field.name, name) {
            return field.value
        }
        return nil
    }

    public func values(_ name: String) -> [String] {
        fields.compactMap { Self.namesEqual($0.name, name) ? $0.value : nil }
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { Self.namesEqual($0.name, name) }
    }

    /// Removes every occurrence. Looks first: `Array.removeAll(where:)` makes the storage unique before it
    /// scans, so on a list shared with a copy it copied the whole list even when nothing matched.
    public mutating func remove(_ name: String) {
        guard contains(name) else { return }
        fields.removeAll { Self.namesEqual($0.name, name) }
    }

    /// Removes all occurrences, then adds one at the end.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name)
        add(name: name, value: value)
    }

    public mutating func removeAll(where shouldRemove: (HTTPField) -> Bool) {
        guard fields.contains(where: shouldRemove) else { return }   // as `remove`: no copy when nothing matches
        fields.removeAll(where: shouldRemove)
    }

    /// Comma-separated list values over all occurrences, trimmed, lowercased, empties dropped (Connection, TE...).
    /// RFC 9110 §5.3 lets a list be split across lines or joined with commas; both spellings mean the same.
    public func tokens(_ name: String) -> [String] {
        var result: [String] = []
        for field in fields where Self.namesEqual(field.name, name) {
            for element in field.value.utf8.split(separator: 0x2C, omittingEmptySubsequences: true) {
                var lo = element.startIndex
                var hi = element.endIndex
                while lo < hi, isOWS(element[lo]) { lo = element.index(after: lo) }
                while lo < hi, isOWS(element[element.index(before: hi)]) { hi = element.index(before: hi) }
                if lo == hi { continue }
                result.append(String(decoding: element[lo..<hi].lazy.map(asciiLower), as: UTF8.self))
            }
        }
        return result
    }

    public func makeIterator() -> IndexingIterator<[HTTPField]> {
        fields.makeIterator()
    }

    /// ASCII-only folding on purpose: Unicode case mapping would let distinct byte names collide.
    static func namesEqual(_ a: String, _ b: String) -> Bool {
        asciiCaseInsensitiveEqual(a, b)
    }
}

/// Whether two strings are the same bytes up to ASCII case: how field names compare (RFC 9110 §5.1). Works on
/// the strings' own storage (native strings are contiguous UTF-8), so a lookup costs no allocation.
@inlinable
public func asciiCaseInsensitiveEqual(_ a: String, _ b: String) -> Bool {
    guard a.utf8.count == b.utf8.count else { return false }
    let fast = a.utf8.withContiguousStorageIfAvailable { x in
        b.utf8.withContiguousStorageIfAvailable { y in
            for i in 0..<x.count where x[i] != y[i] {
                guard (x[i] | 0x20) == (y[i] | 0x20), ((x[i] | 0x20) &- 0x61) < 26 else { return false }
            }
            return true
        }
    }
    if let fast, let result = fast { return result }
    return a.utf8.elementsEqual(b.utf8) { asciiLower($0) == asciiLower($1) }
}

/// Whether `s` starts with `prefix` up to ASCII case (`prefix` given in lowercase), without lowercasing `s`.
public func asciiCaseInsensitiveHasPrefix(_ s: String, lowercasePrefix prefix: String) -> Bool {
    let x = s.utf8, y = prefix.utf8
    guard x.count >= y.count else { return false }
    // On the strings' own bytes when both are native: zip over two UTF8Views cost about 150 instructions a byte.
    let fast = x.withContiguousStorageIfAvailable { a in
        y.withContiguousStorageIfAvailable { b in
            for i in 0..<b.count where asciiLower(a[i]) != b[i] { return false }
            return true
        }
    }
    if let fast, let result = fast { return result }
    return zip(x, y).allSatisfy { asciiLower($0) == $1 }
}
