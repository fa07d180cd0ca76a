// RetryAfter: delta-seconds, HTTP-date and retry-after-ms.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

@Suite("Retry-After")
struct RetryAfterTests {
    func seconds(_ fields: [(String, String)], now: Double = 784_111_777) -> Double? {
        RetryAfter.seconds(in: HTTPHeaders(fields), wallClockSeconds: now)
    }

    @Test func forms() {
        #expect(seconds([("Retry-After", "2")]) == 2)
        #expect(seconds([("Retry-After", " 120 ")]) == 120)
        #expect(seconds([("Retry-After", "\t7\t")]) == 7)
        #expect(seconds([("retry-after-ms", " 250\t")]) == 0.25)
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
        #expect(seconds([("Retry-After", "Sun, 06 Nov 1994 08:49:47 GMT")]) == 10)
        #expect(seconds([("Retry-After", "Sun, 06 Nov 1994 08:49:27 GMT")]) == 0)
        #expect(seconds([("retry-after-ms", "1500"), ("Retry-After", "9")]) == 1.5)
        #expect(seconds([("Retry-After", "soon")]) == nil)
        #expect(seconds([("Retry-After", "-3")]) == nil)
        #expect(seconds([("Retry-After", "Sun, 06 Nov 1994 25:49:47 GMT")]) == nil)
        #expect(seconds([]) == nil)
        #expect(seconds([("Retry-After", "99999999999999999999")]) == 999_999_999)
    }
}
