import Support

/// The keys of one upstream and which of them may be used now: smooth weighted round robin (nginx's
/// `ngx_http_upstream_get_peer`) over the keys that are neither cooling down (a 429) nor disabled (a 401 that
/// another key's answer showed was the key's fault, `FailoverPlan.headReceived`).
/// A plain value with no clock of its own: every call carries `now`. Holds labels and weights, never a key.
///
/// Shared by every exchange of the process through `UpstreamPools`, which owns it under its lock.
package struct KeyPool: Sendable, Equatable {
    package enum State: String, Sendable, Equatable {
        case available, coolingDown = "cooling_down", disabled
    }

    package struct Key: Sendable, Equatable {
        package var label: String
        package var weight: Int
        /// Smooth weighted round robin's running weight.
        var current = 0
        /// Unavailable until then (a cooldown or a disabled key); nil when available.
        package var until: Instant?
        package var disabled = false
    }

    package private(set) var keys: [Key]

    package init(labels: [String], weights: [Int]) {
        keys = zip(labels, weights).map { Key(label: $0, weight: max(1, $1)) }
    }

    package func state(of index: Int, now: Instant) -> State {
        guard let until = keys[index].until, now < until else { return .available }
        return keys[index].disabled ? .disabled : .coolingDown
    }

    package func isAvailable(_ index: Int, now: Instant) -> Bool { state(of: index, now: now) == .available }

    /// The next key among the available ones not in `excluding` (the keys this request already tried), or nil
    /// when there is none. Each pick adds every candidate's weight to its running weight and takes the largest
    /// (the first on a tie), which then gives up the candidates' total: weights 2:1 give A B A A B A…, never A A B.
    package mutating func pick(now: Instant, excluding: Set<Int> = []) -> Int? {
        var best: Int?
        var total = 0
        for i in keys.indices where isAvailable(i, now: now) && !excluding.contains(i) {
            keys[i].current += keys[i].weight
            total += keys[i].weight
            if best == nil || keys[i].current > keys[best!].current { best = i }
        }
        if let best { keys[best].current -= total }
        return best
    }

    /// Key `index` may not be used before `until`. A later end wins over an earlier one; a disabled key stays
    /// disabled until its end. Returns true when the key was available before (so a rejection is logged once).
    @discardableResult
    package mutating func markUnavailable(_ index: Int, until: Instant, disabled: Bool, now: Instant) -> Bool {
        let wasAvailable = isAvailable(index, now: now), wasDisabled = !wasAvailable && keys[index].disabled
        if wasAvailable || until > keys[index].until! {
            keys[index].until = until
            keys[index].disabled = disabled || wasDisabled
        }
        return wasAvailable || (disabled && !wasDisabled)
    }

    /// When the first unavailable key comes back, or nil when one is available now (or the pool is empty).
    package func soonestReturn(now: Instant) -> Instant? {
        guard !keys.isEmpty, !keys.indices.contains(where: { isAvailable($0, now: now) }) else { return nil }
        return keys.compactMap(\.until).min()
    }
}
