// Test support shared by every test target: no sockets, no relay modules.

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in these bytes (an empty needle always does): for scanning captured traffic and
    /// logs for secrets or markers.
    package func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
