import HTTP1
import RelayCore
import RelayState
import Support
import Transport

/// What one exchange keeps for heartbeats and a resumable stream (README, "Heartbeats", "Resumable streams").
/// Set up by the handler; used on the exchange's loop only, like the exchange.
struct StreamKeeping {
    /// `routes[].heartbeatSeconds`; 0: none.
    var heartbeatSeconds = 0.0
    /// `routes[].resume` and the registry; nil resume: not resumable. Who started the request is the record's
    /// identity when the stream opens (after the proof of the genuine app: `appattest:<keyId>` on `auth: "none"`).
    var resume: RouteResume?
    var registry: ResumableStreams?
    var route: RelayConfiguration.Route?
    /// Made at the head of a 2xx event stream.
    var heartbeat: HeartbeatSchedule?
    var stream: ResumableStream?
    /// The original client's connection is gone (or was taken over): its backpressure no longer counts.
    var originalGone = false

}

extension RelayExchange: StreamOwner {
    var ownerLoop: any LoopScheduler { writer.scheduler }

    /// At the provider's head: a 2xx event stream gets heartbeats (if the route has them) and, on a resumable route
    /// with room under `limits.resumeBufferBytes`, an id in `X-Relay-Stream`. A provider's own `X-Relay-Stream` never
    /// reaches the client: the header is the relay's.
    func streamHead(status: Int, headers: inout HTTPHeaders, now: Instant) {
        headers.remove("X-Relay-Stream")
        let isEventStream = headers.first("Content-Type").map { $0.lowercased().hasPrefix("text/event-stream") } ?? false
        guard isEventStream, (200..<300).contains(status), status != 204, machine.settings.requestMethod != "HEAD" else { return }
        if keeping.heartbeatSeconds > 0 {
            keeping.heartbeat = HeartbeatSchedule(intervalSeconds: keeping.heartbeatSeconds, now: now)
        }
        if let resume = keeping.resume, let registry = keeping.registry, let route = keeping.route,
           let stream = registry.open(identity: record.identity, route: route, resume: resume, owner: self) {
            keeping.stream = stream
            headers.add(name: "X-Relay-Stream", value: stream.id)
        }
    }

    /// A provider delivery came (at `now`, the delivery's own clock read): the silence starts again.
    func streamDelivered(now: Instant) {
        keeping.heartbeat?.providerDelivered(now: now)
    }

    /// Body bytes written (or, detached, that would have been): noted for the heartbeat's boundary and kept for
    /// resumes. The heartbeat's deadline is armed once the bytes end an event (none while one is half-sent). Per
    /// write that is one comparison with the armed timer: the deadline only moves later as the provider delivers,
    /// so a timer armed for it still covers it; only the exchange's whole timer logic (`armTimer`) runs when none
    /// does (the timer fired while an event was half-sent).
    func streamWrote(_ bytes: UnsafeRawBufferPointer) {
        if keeping.heartbeat != nil {
            keeping.heartbeat!.wrote(bytes)
            if let due = keeping.heartbeat!.nextDue, !isEnded { armTimer(covering: due) }
        }
        guard let stream = keeping.stream, stream.append(bytes) else { return }
        // Inside a delivery's write the tap has not read the delivery yet: the exchange ends after it has
        // (`forwardThenObserve`), so its usage and its decision (drain after a finish chunk) count these bytes.
        if writingDelivery { abandonedDuringWrite = true } else { abandon() }
    }

    /// The abandon `streamWrote` held back during a delivery's write, once the tap has read the delivery.
    func abandonIfAbandonedDuringWrite() {
        guard abandonedDuringWrite else { return }
        abandonedDuringWrite = false
        abandon()
    }

    /// The exchange's timer fired: a heartbeat due, or a detach window over.
    func streamTimer(now: Instant) {
        guard machine.phase == .streaming else { return }
        if let window = machine.detachDeadline, now >= window {
            if keeping.stream?.abandonIfUnread() == true { return abandon() }
            closeDetachWindow()   // a resume attached (its notice is on its way here): no deadline left to spin on
        }
        let backedUp = (!keeping.originalGone && writer.isAboveHighWater) || machine.upstreamPaused
        if keeping.heartbeat?.due(now: now, clientBackedUp: backedUp) == true {
            record.heartbeats += 1
            HeartbeatSchedule.comment.withUnsafeBytes { bytes in
                keeping.stream.map { _ = $0.append(bytes) }   // kept before it is sent, as `send` does
                writer.sendBody(bytes)   // one write: the chunk's framing and the comment
            }
        }
    }

    /// The original client left. On a resumable stream under way, the upstream runs on for the window (true);
    /// otherwise the exchange handles it as before (false).
    func streamClientClosed() -> Bool {
        guard let stream = keeping.stream, machine.phase == .streaming else { return false }
        keeping.originalGone = true
        switch stream.originalLeft() {
        case .unresumable: return false
        case .stillRead: return true
        case .detached:
            perform(machine.detached(now: clock.now(), windowSeconds: stream.windowSeconds))   // arms the window's end
            return true
        }
    }

    /// Nobody reads the stream and nobody can or did in time: cancelled, as if the client had just left.
    private func abandon() {
        closeDetachWindow()
        keeping.stream.map { keeping.registry?.remove($0) }
        clientLeft()
    }

    private func closeDetachWindow() {
        machine.reattached(now: clock.now())
    }

    // MARK: StreamOwner (on this loop)

    func readerAttached() {
        closeDetachWindow()
        if machine.upstreamPaused { perform(machine.clientDrained(now: clock.now())) }
    }

    func readerLeft() {
        guard machine.phase == .streaming, machine.detachedSince == nil, let stream = keeping.stream else { return }
        if stream.isOverflowed { return abandon() }
        perform(machine.detached(now: clock.now(), windowSeconds: stream.windowSeconds))   // arms the window's end
    }

    /// A notice taken while the stream ran can arrive after the exchange ended: its response is over then, and the
    /// writer is its connection's, which may be answering its next request (maybe another user's, through a
    /// balancer's kept-alive connection). An ended exchange leaves it alone.
    func originalTakenOver() {
        keeping.originalGone = true
        guard !isEnded else { return }
        writer.abort()
    }

    func stopRequested() {
        closeDetachWindow()
        guard !isEnded else { return }   // as `originalTakenOver`
        if !keeping.originalGone { writer.abort() }
        keeping.originalGone = true
        perform(machine.clientClosed(now: nil))   // no drain: a stop cancels at once
    }

    /// The exchange ended: the stream's readers get the end; its bytes stay `windowSeconds` (a stream cut because
    /// nobody read it is forgotten now).
    func streamEnded() {
        closeDetachWindow()
        record.detachedMs = keeping.stream == nil ? nil : machine.detachedSeconds * 1000
        guard let stream = keeping.stream, let registry = keeping.registry else { return }
        let clean = machine.outcome == .completed || machine.outcome == .budgetExhausted
        record.resumes = stream.finish(clean ? .completed : .broken)
        writer.scheduler.schedule(afterSeconds: stream.windowSeconds) { registry.remove(stream) }
    }
}
