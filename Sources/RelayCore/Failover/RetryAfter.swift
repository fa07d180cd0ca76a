import HTTP1

/// How long a provider asks to be left alone, read from its answer's head: `retry-after-ms` (milliseconds, as
/// OpenAI and Azure send it) first, else `Retry-After` as delta-seconds or an HTTP-date (RFC 9110 §10.2.3, the
/// IMF-fixdate form). Nil when neither is there or readable; never negative.
package enum RetryAfter {
    package static func seconds(in headers: HTTPHeaders, wallClockSeconds: Double) -> Double? {
        if let ms = headers.first("retry-after-ms").flatMap({ Double(Substring($0).trimmingSpaces()) }), ms.isFinite, ms >= 0 {
            return ms / 1000
        }
        guard let value = headers.first("Retry-After").map({ String(Substring($0).trimmingSpaces()) }), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return value.utf8.count > 9 ? 999_999_999 : Double(value)
        }
        guard let date = httpDate(value) else { return nil }
        return max(0, date - wallClockSeconds)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` as Unix seconds.
    static func httpDate(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]),
              (1...31).contains(day), (1970...9999).contains(year) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let h = Int(time[0]), let m = Int(time[1]), let s = Int(time[2]),
              (0..<24).contains(h), (0..<60).contains(m), (0...60).contains(s) else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm), months counted from March.
        let y = month < 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let mp = (month + 10) % 12   // `month` counts from 0
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Double(days * 86_400 + h * 3600 + m * 60 + s)
    }
}
