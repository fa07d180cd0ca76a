import Dispatch
import RelayCore
import RelayState
import Support

/// How many rejection log lines pass per reason per second; the rest are counted and summed up in one line
/// ("N similar rejections suppressed") at most once a second per reason. Pure: time comes in as `now`.
///
/// Why: a rejected request costs the attacker nothing but the relay a log line; a flood of bad tokens once wrote
/// 100 MB of log in 13 s. Metrics still count every rejection.
package struct LogThrottle: Sendable {
    package enum Decision: Equatable, Sendable {
        /// Write the line; `suppressedBefore` lines of this reason were dropped in the window that just ended.
        case log(suppressedBefore: Int)
        case suppress
    }

    struct Window: Sendable {
        var start: Instant
        var logged: Int
        var suppressed: Int
    }

    package let linesPerSecond: Int
    private var windows: [String: Window] = [:]

    package init(linesPerSecond: Int) { self.linesPerSecond = max(1, linesPerSecond) }

    package mutating func admit(_ reason: String, now: Instant) -> Decision {
        if var window = windows[reason], now.seconds(since: window.start) < 1 {
            if window.logged < linesPerSecond {
                window.logged += 1
                windows[reason] = window
                return .log(suppressedBefore: 0)
            }
            window.suppressed += 1
            windows[reason] = window
            return .suppress
        }
        let before = windows[reason]?.suppressed ?? 0
        windows[reason] = Window(start: now, logged: 1, suppressed: 0)
        return .log(suppressedBefore: before)
    }

    /// The counts of windows that ended with lines suppressed, for the periodic summary; those windows are
    /// forgotten (so a count is reported once, here or by the next `admit`).
    package mutating func flush(now: Instant) -> [(reason: String, suppressed: Int)] {
        var ended: [(String, Int)] = []
        for (reason, window) in windows where now.seconds(since: window.start) >= 1 {
            if window.suppressed > 0 { ended.append((reason, window.suppressed)) }
            windows[reason] = nil
        }
        return ended.sorted { $0.0 < $1.0 }
    }
}

/// The relay's rejection log lines, throttled per reason. Safe from any queue: the throttle is behind a lock,
/// taken once per rejection; a private timer writes the summaries of quiet reasons once a second.
final class RejectionLog: @unchecked Sendable {
    // Invariant: `timer` is set once in init and only activated and cancelled after (both thread-safe in
    // Dispatch); every other stored property is immutable or Sendable.
    private let throttle: Locked<LogThrottle>
    private let logger: Logger
    private let clock: any Clock
    private let timer: DispatchSourceTimer

    init(logger: Logger, clock: any Clock, linesPerSecond: Int = 10) {
        self.logger = logger
        self.clock = clock
        throttle = Locked(LogThrottle(linesPerSecond: linesPerSecond))
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "sse-relay.rejection-log"))
        timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(100))
        timer.setEventHandler { [throttle, logger, clock] in
            for (reason, count) in throttle.withLock({ $0.flush(now: clock.now()) }) {
                Self.summary(logger, reason: reason, count: count)
            }
        }
        timer.activate()
    }

    deinit { timer.cancel() }

    func stop() { timer.cancel() }

    /// Logs `fields` as an "exchange" line unless this reason is over its share of the current second.
    func log(reason: String, _ fields: @autoclosure () -> [(String, LogValue)]) {
        switch throttle.withLock({ $0.admit(reason, now: clock.now()) }) {
        case .suppress:
            return
        case .log(let before):
            if before > 0 { Self.summary(logger, reason: reason, count: before) }
            logger.info("exchange", fields())
        }
    }

    private static func summary(_ logger: Logger, reason: String, count: Int) {
        logger.info("\(count) similar rejections suppressed", [("reason", .string(reason)), ("suppressed", .int(count))])
    }
}
