import Auth
import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Support
import Transport

/// `GET /v1/relay/streams/<id>?offset=N` and `DELETE /v1/relay/streams/<id>` (README, "Resumable streams"). A
/// resume answers 200 `text/event-stream` whose body continues the stream at byte N: the kept bytes first, then
/// live ones as the owner appends them, then the stream's own end (a terminal chunk after a clean end, a close
/// without one after a broken one). It reads the stream's buffer at its own pace (its connection's high-water
/// mark), so a slow resumed reader never pauses the provider; the buffer's bound (`maxBufferBytes`) is what it
/// may fall behind by. A stop answers 204 and the owner cancels the upstream.
///
/// Credentials are checked with the stream's route's `auth` and, on a route that asks for proof of the genuine
/// app, with that proof too (an App Attest assertion over this request; on `auth: "none"` the device's key is the
/// identity, as when the stream started). The identity must be the one that started it; otherwise 404, as for an
/// id never issued, so ids cannot be probed. Every request takes a token of its address's failed-authentication
/// bucket on arrival and gets it back once it proves the stream its own: a miss keeps it, however it ends.
///
/// A stream this replica does not hold is looked up in Redis (`state.backend: "redis"`, `RedisStreamMirror`): the
/// same identity rule and offset edges, against the owner's record; a resume then polls the copy every
/// `remotePollSeconds` while it has caught up, and a stop sets the flag the owner polls for.
///
/// Owned by its connection's loop queue; `wake` and `takenOver` come from any loop and hop there.
final class StreamEndpoint: RequestResponder, StreamReader, @unchecked Sendable {
    // Invariant: every stored `var` is touched on `writer.scheduler.queue` only.
    private let head: RequestHead
    private let requestID: String
    private let writer: any ResponseWriter
    private let server: RelayServer
    private let startedAt: Instant
    private var stream: ResumableStream?
    private var offset = 0
    private var resumeOffset: Int?
    private var status = 0
    private var result = ""
    /// The failed check of a refused proof of the genuine app, for the log line.
    private var attestationStep: String?
    /// This request's JWT as checked before the lookup (`expiredTokenFirst`): the route's check reuses it.
    private var checkedJWT: Result<Identity?, AuthError>?
    /// The failed-authentication token this request took from its address on arrival (its lease names the bucket
    /// it came from), not yet given back.
    private var charge: RateLimiterState.Lease?
    /// The id the request names, once parsed (the key of `RelayServer.resumeLimiter`).
    private var streamID: String?
    private var bytesOut = 0
    /// The response is over (finished, aborted, taken over) or the client left.
    private var done = false
    /// A stream owned by another replica, read from Redis.
    private var remote: RemoteCursor?

    struct RemoteCursor {
        let id: String
        /// This reader's token in the stream's reader key.
        let token: String
        let mirror: RedisStreamMirror
        /// A poll is in flight or its wait is armed.
        var busy = false
        /// A refresh of the token is armed while the client is behind (`keepClaimWhileBehind`).
        var keepArmed = false
    }

    /// How long a caught-up reader of another replica's stream waits before polling Redis again.
    static let remotePollSeconds = 0.025

    /// How often a reader whose client is behind refreshes its token: well inside the token's expiry.
    static let keepSeconds = RedisStreamMirror.keepSeconds

    /// The most a resumed reader takes from the buffer per write.
    static let readLimit = 64 * 1024

    static func serves(_ path: String) -> Bool { path.hasPrefix(StreamRequest.pathPrefix) }

    init(head: RequestHead, requestID: String, writer: any ResponseWriter, server: RelayServer) {
        self.head = head
        self.requestID = requestID
        self.writer = writer
        self.server = server
        self.startedAt = writer.scheduler.clock.now()
    }

    func requestBody(_ bytes: [UInt8]) {}
    func clientDrained() { pump() }

    func clientClosed() {
        guard !done else { return }
        done = true
        if let stream { stream.readerLeft(self) }
        log(outcome: "client_cancelled")
    }

    func requestEnd() {
        let request = StreamRequest.parse(method: head.method, path: head.path, query: head.query)
        let id: String
        switch request {
        case .invalid(let error, let result): return refuse(error, result: result)
        case .resume(let i, _), .stop(let i): id = i
        }
        streamID = id
        let now = writer.scheduler.clock.now()
        let address = writer.client.limitKey
        // Every request pays a failed-authentication token on arrival, before any lookup, and gets it back once it
        // proves the stream its own (or the relay fails it): so a miss is paid for however the request ends
        // (closed while it waits included), and many at once cannot all get past a bucket with a few tokens left.
        switch server.authFailureLimiter.acquire(key: address, now: now) {
        case .allowed(let lease):
            server.authFailureLimiter.release(lease)
            charge = lease
        case .limited(let retryAfter, _):
            return refuse(.rateLimited(retryAfterSeconds: retryAfter), result: "rate_limited")
        }
        // An expired token is a property of the token, not of the stream: 401 `token_expired` before any lookup,
        // so the answer says nothing about the id, and the app resumes with a fresh token (a 404 would end an
        // answer that is still there). Only where every resumable route takes JWTs: elsewhere a stream may not
        // need the token at all, and a 401 for some ids but not others would tell them apart. The JWT check
        // reaches the expiry only after the signature holds, so a forged token gets nothing here. Like any
        // refused credential, it costs a failed-authentication token.
        if server.streams?.everyRouteTakesJWTs == true {
            let checked = server.authenticator.authenticate(.jwt, headers: head.headers, now: server.wallClock())
            checkedJWT = checked
            if case .failure(.expired) = checked { return refuse(AuthError.expired.relayError, result: "token_expired") }
        }
        let local = server.streams?.lookup(id)
        if local == nil, let mirror = server.streams?.mirror {
            return lookUpRemote(id: id, request: request, mirror: mirror)
        }
        guard let stream = local else { return notFound() }
        prove(route: stream.route) { proof in
            self.proven(proof, owns: { $0 == stream.identity }, miss: { self.localMiss(id) }) {
                self.serveUnlessStoppedElsewhere(stream, request: request)
            }
        }
    }

    /// With Redis, a stream held here may have been stopped at another replica after it ended (the owner's poll
    /// looks for stops only while the upstream runs, or a resume here reads it) or in the moments before the next poll: Redis is asked first,
    /// and such a stream is gone here too. When Redis does not answer, this replica's memory serves.
    private func serveUnlessStoppedElsewhere(_ stream: ResumableStream, request: StreamRequest) {
        guard let mirror = server.streams?.mirror else { return serve(stream, request: request) }
        mirror.stopAsked(stream.id, on: writer.scheduler) { asked in
            guard !self.done else { return }
            guard asked == true else { return self.serve(stream, request: request) }
            stream.stopAndForget()
            self.notFound()
        }
    }

    /// A resume or a stop of a stream held here, by the identity that started it.
    private func serve(_ stream: ResumableStream, request: StreamRequest) {
        guard case .resume(_, let offset) = request else {
            stream.stop()
            server.streams?.remove(stream)
            guard let mirror = server.streams?.mirror else { return answerStopped() }
            // The 204 once Redis holds the stop: a resume elsewhere right after it must not find the stream.
            // Stopped here whatever Redis answers.
            return mirror.requestStop(stream.id, windowSeconds: stream.windowSeconds, on: writer.scheduler) { _ in
                guard !self.done else { return }
                self.answerStopped()
            }
        }
        resumeOffset = offset
        switch stream.attach(self, offset: offset) {
        case .gone: return notFound()
        case .brokenAtEnd: return refuse(StreamRequest.streamBroken, result: "broken")
        case .failed(.beyondWritten): return refuse(StreamRequest.offsetOutOfRange, result: "out_of_range")
        case .failed: return refuse(StreamRequest.streamExpired, result: "expired")
        case .attached: break
        }
        self.stream = stream
        self.offset = offset
        sendResumedHead(id: stream.id)
        pump()
    }

    /// 404 `stream_not_found` (its failed-authentication token kept). With Redis, answered `copyLagSeconds` after
    /// the request (`ResumableStreams.copyLagSeconds`), at one deadline whatever the miss.
    private func notFound() {
        guard server.streams?.mirror != nil else { return refuse(StreamRequest.streamNotFound, result: "not_found") }
        _ = writer.scheduler.schedule(at: startedAt.advanced(bySeconds: copyLagSeconds)) {
            guard !self.done else { return }
            self.refuse(StreamRequest.streamNotFound, result: "not_found")
        }
    }

    /// The request proved the stream its own, or the relay failed it: its arrival's token goes back.
    private func refundCharge() {
        guard let lease = charge else { return }
        charge = nil
        server.authFailureLimiter.refund(lease, now: writer.scheduler.clock.now())
    }

    /// Whether another look at Redis may still find what the owner has sent but not yet copied, and come back
    /// before the 404's time (`notFound`): a look starts a poll interval after this check, and the last one leaves
    /// two (50 ms, Redis's default `timeoutMs`) for its round trip.
    private var withinRemoteLag: Bool {
        writer.scheduler.clock.now().seconds(since: startedAt) + 3 * Self.remotePollSeconds <= copyLagSeconds
    }

    private var copyLagSeconds: Double { server.streams?.copyLagSeconds ?? 0 }

    private func answerStopped() {
        status = 204
        result = "stopped"
        server.metrics.streamResume(result: result)
        var headers = HTTPHeaders()
        headers.add(name: "X-Request-Id", value: requestID)
        writer.respond(status: 204, headers: headers, body: [], keepAlive: head.keepAlive)
        log(outcome: "completed")
    }

    private func sendResumedHead(id: String) {
        result = "resumed"
        server.metrics.streamResume(result: result)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "X-Relay-Stream", value: id)
        let (response, mode, _) = ResponseRewriter.clientHead(
            status: 200, upstreamHeaders: headers, requestMethod: head.method, clientVersion: head.version,
            keepAlive: head.keepAlive && !server.isDraining, requestID: requestID)
        status = 200
        writer.sendHead(response, mode: mode)
    }

    // MARK: A stream owned by another replica (its copy in Redis)

    /// The stream's record in Redis; none yet is looked for again while the copy may trail (`copyLagSeconds`).
    /// An address whose failure bucket is empty gets no second look: many requests at once cannot each look
    /// several times.
    private func lookUpRemote(id: String, request: StreamRequest, mirror: RedisStreamMirror) {
        mirror.lookup(id, on: writer.scheduler) { found in
            guard !self.done else { return }
            guard found == .missing, self.withinRemoteLag,
                  self.server.authFailureLimiter.retryAfterIfEmpty(key: self.writer.client.limitKey, now: self.writer.scheduler.clock.now()) == nil else {
                return self.remoteLookedUp(found, id: id, request: request, mirror: mirror)
            }
            _ = self.writer.scheduler.schedule(afterSeconds: Self.remotePollSeconds) {
                guard !self.done else { return }
                self.lookUpRemote(id: id, request: request, mirror: mirror)
            }
        }
    }

    private func remoteLookedUp(_ found: RedisStreamMirror.Lookup, id: String, request: StreamRequest, mirror: RedisStreamMirror) {
        guard !done else { return }
        guard case .found(let meta) = found, let routes = server.streams?.routes, meta.routeIndex < routes.count,
              let resume = routes[meta.routeIndex].resume else {
            if found == .unavailable {
                // The relay's failure, and the same for every id: 503, retry. Its token is kept: nothing was proven, so
                // an outage is no time for free probes.
                server.logger.warning("redis unavailable: a stream not held by this replica cannot be found", [("request_id", .string(requestID))])
                return refuse(.stateUnavailable, result: "unavailable")
            }
            return notFound()
        }
        // Against the owner's record, which holds a hash of the identity's key.
        prove(route: routes[meta.routeIndex]) { proof in
            self.proven(proof, owns: { StreamMeta.identityHash($0) == meta.identityHash }) {
                self.serveRemote(meta, resume: resume, id: id, request: request, mirror: mirror)
            }
        }
    }

    /// A resume or a stop of a stream held by another replica, by the identity that started it.
    private func serveRemote(_ meta: StreamMeta, resume: RouteResume, id: String, request: StreamRequest, mirror: RedisStreamMirror) {
        guard case .resume(_, let offset) = request else {
            return mirror.requestStop(id, windowSeconds: resume.windowSeconds, on: writer.scheduler) { stored in
                guard !self.done else { return }
                if stored { self.answerStopped() } else { self.refuse(.stateUnavailable, result: "unavailable") }
            }
        }
        resumeOffset = offset
        // The record names this replica, which does not hold the stream: it forgot it (the gone mark may not have
        // reached Redis). Gone here, as it would be from memory.
        if meta.owner == mirror.replicaID { return notFound() }
        // The copy lost bytes: only the owner serves the stream. 503, retry: the stream is there, and the next
        // request may reach the owner (a 404 would end the answer).
        if meta.state == .ownerOnly { return refuse(.stateUnavailable, result: "owner_only") }
        switch meta.position(offset) {
        case .beyondWritten where meta.state == .running && withinRemoteLag:
            // The client may have received bytes the copy does not hold yet: the record again, shortly. Proven
            // already (an App Attest assertion is single-use): only the record is read again, for the same identity.
            _ = writer.scheduler.schedule(afterSeconds: Self.remotePollSeconds) {
                guard !self.done else { return }
                mirror.lookup(id, on: self.writer.scheduler) { found in
                    guard !self.done else { return }
                    // Proven already: Redis not answering is the relay's failure (retry), not the caller's.
                    if found == .unavailable { return self.refuse(.stateUnavailable, result: "unavailable") }
                    guard case .found(let again) = found, again.identityHash == meta.identityHash, again.routeIndex == meta.routeIndex else {
                        return self.remoteLookedUp(.missing, id: id, request: request, mirror: mirror)
                    }
                    self.serveRemote(again, resume: resume, id: id, request: request, mirror: mirror)
                }
            }
            return
        case .beyondWritten: return refuse(StreamRequest.offsetOutOfRange, result: "out_of_range")
        case .expired: return refuse(StreamRequest.streamExpired, result: "expired")
        case .replay: break
        }
        if meta.state == .broken && offset == meta.written { return refuse(StreamRequest.streamBroken, result: "broken") }
        let token = StreamIDs.make()
        mirror.claim(id, token: token, on: writer.scheduler)
        remote = RemoteCursor(id: id, token: token, mirror: mirror)
        self.offset = offset
        sendResumedHead(id: id)
        pollRemote()
    }

    /// One poll of the copy while the client keeps up: bytes written, a wait, or the end.
    private func pollRemote() {
        guard !done, let cursor = remote, !cursor.busy else { return }
        guard !writer.isAboveHighWater else { return keepClaimWhileBehind() }
        remote?.busy = true
        cursor.mirror.poll(cursor.id, token: cursor.token, from: offset, limit: Self.readLimit, on: writer.scheduler) { poll in
            guard !self.done else { return }
            let step = poll.map {
                RemoteFollow.step(meta: $0.meta, stopped: $0.stopped, claimed: $0.claimed, offset: self.offset, fetched: $0.bytes.count)
            } ?? .wait   // Redis did not answer: try again (the owner's stream runs on regardless)
            switch step {
            case .write(let count):
                self.remote?.busy = false
                self.offset += count
                self.bytesOut += count
                self.server.metrics.bytesToClients.wrappingAdd(count, ordering: .relaxed)
                poll!.bytes.withUnsafeBytes { _ = self.writer.sendBody(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                self.pollRemote()
            case .wait:
                _ = self.writer.scheduler.schedule(afterSeconds: Self.remotePollSeconds) {
                    self.remote?.busy = false
                    self.pollRemote()
                }
            case .end(let clean):
                self.done = true
                if clean {
                    self.writer.finish(keepAlive: self.head.keepAlive && !self.server.isDraining)
                    self.log(outcome: "completed")
                } else {
                    self.writer.abort()
                    self.log(outcome: "upstream_error")
                }
            case .takenOver:
                self.endWithoutCleanEnd(outcome: "taken_over")
            case .copyLost:
                self.endWithoutCleanEnd(outcome: "copy_lost")
            }
        }
    }

    /// Another reader took the stream (`taken_over`), or the copy this reader follows is lost (`copy_lost`): this
    /// client's response ends without a clean end, and its client resumes.
    private func endWithoutCleanEnd(outcome: String) {
        done = true
        writer.abort()
        log(outcome: outcome)
    }

    /// While its client is behind (above the high-water mark) this reader takes no bytes, but it keeps its token
    /// alive: left to expire, the owner would take the stream for detached and could end it at the window's end
    /// while this client still reads. One refresh every `keepSeconds`; a reader that finds its token taken
    /// meanwhile ends as taken over, as a poll would. A client that has taken some bytes but not yet enough to
    /// reach the low-water mark (which calls `clientDrained`) has room again: the reader polls, which refreshes
    /// the token too and writes what fits.
    private func keepClaimWhileBehind() {
        guard let cursor = remote, !cursor.keepArmed else { return }
        remote?.keepArmed = true
        _ = writer.scheduler.schedule(afterSeconds: Self.keepSeconds) {
            self.remote?.keepArmed = false
            guard !self.done else { return }
            guard self.writer.isAboveHighWater else { return self.pollRemote() }
            cursor.mirror.keep(cursor.id, token: cursor.token, on: self.writer.scheduler) { claimed in
                guard !self.done else { return }
                if claimed == false { return self.endWithoutCleanEnd(outcome: "taken_over") }
                self.keepClaimWhileBehind()   // still this reader's, or Redis did not answer: refresh again
            }
        }
    }

    /// What a resume or a stop proved on its stream's route.
    enum Proof: Equatable, Sendable {
        /// The identity it proves; nil: none (an open route).
        case identity(String?)
        /// Its credentials or its proof of the genuine app were refused; `step`, the proof's failed check.
        case refused(step: String?)
        /// The attestation store did not answer, so its App Attest proof could not be checked.
        case unavailable
    }

    /// What this request proves on the stream's `route`, as an exchange on that route would take it: its
    /// credentials as the route checks them, then the route's proof of the genuine app over this request (its
    /// method, target and empty body), whose App Attest key is the identity on `auth: "none"`. Calls `completion`
    /// on this connection's loop, possibly at once.
    private func prove(route: RelayConfiguration.Route, _ completion: @escaping @Sendable (Proof) -> Void) {
        let checked = route.auth == .jwt ? checkedJWT : nil
        guard case .success(let identity) = checked ?? server.authenticator.authenticate(route.auth, headers: head.headers,
                                                                                        now: server.wallClock()) else { return completion(.refused(step: nil)) }
        guard var gate = server.attestation?.gate(route: route, head: head) else { return completion(.identity(identity?.key)) }
        gate.subject = identity?.key
        gate.check(body: [], on: writer.scheduler) { verdict in
            switch verdict {
            case .pass(_, let keyID): completion(.identity(identity?.key ?? keyID.map { "appattest:" + $0 }))
            case .refuse(let error, _, let step):
                completion(error.code == RelayError.stateUnavailable.code ? .unavailable : .refused(step: step))
            }
        }
    }

    /// Goes on with `serve` when `proof` names the identity that `owns` the stream. A store that could not check
    /// the proof is 503 `state_unavailable` (README, "Genuine app": never a proof accepted without its store, and
    /// never the caller's failure); anything else is the miss an unknown id gets (its arrival's token kept).
    private func proven(_ proof: Proof, owns: (String?) -> Bool, miss: (() -> Void)? = nil, serve: () -> Void) {
        guard !done else { return }
        switch proof {
        case .identity(let identity) where owns(identity):
            refundCharge()
            // A resume counts against its stream's bucket (a stop never does: it saves the provider's cost).
            if head.method == "GET", let streamID {
                switch server.resumeLimiter.acquire(key: streamID, now: writer.scheduler.clock.now()) {
                case .allowed(let lease): server.resumeLimiter.release(lease)
                case .limited(let retryAfter, _): return refuse(.rateLimited(retryAfterSeconds: retryAfter), result: "resume_limited")
                }
            }
            serve()
        case .unavailable:
            refundCharge()
            refuse(.stateUnavailable, result: "unavailable")
        case .identity:
            (miss ?? notFound)()
        case .refused(let step):
            // Answered as an unknown id is (no oracle for someone else's stream); the log says which check failed.
            attestationStep = step
            (miss ?? notFound)()
        }
    }

    /// Another identity's stream held here: answered as an unknown id is, which with Redis means a look there
    /// first. An unknown id's look can find Redis gone (503), so this one asks too, and answers the same.
    private func localMiss(_ id: String) {
        guard let mirror = server.streams?.mirror else { return notFound() }
        mirror.lookup(id, on: writer.scheduler) { found in
            guard !self.done else { return }
            if found == .unavailable { return self.refuse(.stateUnavailable, result: "unavailable") }
            self.notFound()
        }
    }

    private func refuse(_ error: RelayError, result: String) {
        status = error.status
        self.result = result
        server.metrics.streamResume(result: result)
        writer.respond(error: error.response, requestID: requestID, keepAlive: head.keepAlive)
        log(outcome: "rejected")
    }

    /// Takes what the buffer has past `offset`, one write per read, while the client keeps up; then the end.
    private func pump() {
        if remote != nil { return pollRemote() }
        guard !done, let stream else { return }
        while !writer.isAboveHighWater {
            let (bytes, end, current) = stream.read(self, from: offset, limit: Self.readLimit)
            guard current else { return }
            if !bytes.isEmpty {
                offset += bytes.count
                bytesOut += bytes.count
                server.metrics.bytesToClients.wrappingAdd(bytes.count, ordering: .relaxed)
                bytes.withUnsafeBytes { _ = writer.sendBody($0) }
                continue
            }
            guard let end else { return }   // caught up: `wake` brings more
            done = true
            stream.readerLeft(self)
            if end == .completed {
                writer.finish(keepAlive: head.keepAlive && !server.isDraining)
                log(outcome: "completed")
            } else {
                writer.abort()
                log(outcome: end == .stopped ? "client_cancelled" : "upstream_error")
            }
            return
        }
    }

    func wake() {
        writer.scheduler.execute { self.pump() }
    }

    func takenOver() {
        writer.scheduler.execute {
            guard !self.done else { return }
            self.endWithoutCleanEnd(outcome: "taken_over")
        }
    }

    private func log(outcome: String) {
        var fields: [(String, LogValue)] = [
            ("request_id", .string(requestID)), ("client_ip", .string(writer.clientAddress)), ("method", .string(head.method)),
            ("path", .string(StreamRequest.pathPrefix + "…")), ("status", .int(status)), ("bytes_out", .int(bytesOut)),
            ("outcome", .string(outcome)), ("result", .string(result)),
            ("duration_ms", .double(writer.scheduler.clock.now().seconds(since: startedAt) * 1000)),
        ]
        if let resumeOffset { fields.append(("resume_offset", .int(resumeOffset))) }
        if let attestationStep { fields.append(("attestation_step", .string(attestationStep))) }
        if remote != nil { fields.append(("from_redis", .bool(true))) }
        if let identity = stream?.identity { fields.append(("identity", .string(identity))) }
        server.logger.info("stream", fields)
    }
}

extension RelayServer {
    /// Runs the timers due on every loop at the clock's present time: for tests on a `ManualClock`, whose
    /// deadlines the loops' wake-ups would only reach in real time.
    package func runDueTimers() {
        for state in loopStates { state.loop.queue.sync { state.loop.runDueTimers() } }
    }

    /// Exchanges whose stream nobody reads now (client gone, no resume yet): a sync point for tests.
    package func detachedStreamCount() -> Int {
        loopStates.reduce(0) { total, state in
            total + state.loop.queue.sync { state.exchanges.values.filter { $0.machine.detachedSince != nil }.count }
        }
    }

    /// Resumable streams kept, and the bytes their buffers hold together.
    package var resumableStreamCounts: (streams: Int, bytes: Int) {
        (streams?.count ?? 0, streams?.totalHeldBytes ?? 0)
    }
}
