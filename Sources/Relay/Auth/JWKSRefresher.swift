import Auth
import Foundation
import HTTP1
import RelayCore
import RelayState
import Support
import Transport
import Upstream

/// Keeps the JWT key set fresh from a JWKS URL: fetches through libcurl on one event loop, lets `JWKSCache`
/// (pure) decide when, and hands each good key set to its sink (the client authenticator, or the App Check
/// verifier). A failed or garbage refresh keeps the last good keys. Owned by `loop.queue`.
final class JWKSRefresher: TransferDelegate, @unchecked Sendable {
    // Invariant: all mutable state is touched on `loop.queue` only.
    private let url: String
    private let loop: EventLoop
    private let driver: CurlDriver
    private let authenticator: any JWKSKeySink
    private let logger: Logger
    private var cache: JWKSCache
    private var transfer: Transfer?
    private var status = 0
    private var maxAge: Double?
    private var body: [UInt8] = []
    private var timer: LoopTimer?
    private var stopped = false
    static let maxDocumentBytes = 1 << 20
    private let fileKeys: JWKSet

    /// `fileKeys`: the keys read from a `jwksFile` given with the URL; each refresh installs them with the URL's.
    init(url: String, refreshSeconds: Double, loop: EventLoop, driver: CurlDriver, authenticator: any JWKSKeySink,
         fileKeys: JWKSet = .empty, logger: Logger) {
        self.url = url
        self.fileKeys = fileKeys
        self.loop = loop
        self.driver = driver
        self.authenticator = authenticator
        self.logger = logger
        // Retries back off from 5 s to 5 min, never beyond the refresh interval itself (short in tests).
        let retry = min(5, refreshSeconds)
        self.cache = JWKSCache(policy: .init(refreshInterval: refreshSeconds, minimumInterval: min(60, refreshSeconds),
                                             retryDelay: retry, maxRetryDelay: max(retry, min(300, refreshSeconds))),
                               now: loop.clock.now())
    }

    func start() {
        authenticator.setUnknownKeyHandler { [weak self] in
            guard let self, !self.keyNotFoundPending.exchange(true, ordering: .relaxed) else { return }
            self.loop.execute { self.keyNotFound() }
        }
        loop.execute { self.poll() }
    }

    func stop() {
        loop.queue.sync {
            stopped = true
            timer?.cancel()
            transfer?.cancel()
        }
    }

    private func keyNotFound() {
        keyNotFoundPending.store(false, ordering: .relaxed)
        let before = cache.nextFetch
        cache.keyNotFound(now: loop.clock.now())
        // Tokens with random kids must not churn timers: only a fetch that moved earlier needs a new poll.
        if cache.nextFetch < before { poll() }
    }

    /// Coalesces the hops to this loop when many tokens name unknown keys at once.
    private let keyNotFoundPending = Locked(false)

    private func poll() {
        guard !stopped else { return }
        timer?.cancel()
        timer = nil
        switch cache.poll(now: loop.clock.now()) {
        case .fetch:
            fetch()
            // The cache counts an unreported fetch as failed after its timeout: poll again then.
            timer = loop.schedule(afterSeconds: cache.policy.fetchTimeout) { [weak self] in self?.poll() }
        case .wait(let until):
            timer = loop.schedule(at: until) { [weak self] in self?.poll() }
        }
    }

    private func fetch() {
        transfer?.cancel()
        status = 0
        maxAge = nil
        body = []
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        transfer = driver.start(UpstreamRequest(url: url, method: "GET", headers: headers, connectTimeoutSeconds: 10), delegate: self)
    }

    func transfer(_ transfer: any UpstreamCall, didReceiveHead status: Int, headers: HTTPHeaders) {
        self.status = status
        if let cc = headers.first("Cache-Control"), let range = cc.range(of: "max-age=") {
            maxAge = Double(cc[range.upperBound...].prefix { $0.isNumber })
        }
    }

    func transfer(_ transfer: any UpstreamCall, didReceiveBody bytes: UnsafeRawBufferPointer) -> Bool {
        if body.count + bytes.count > Self.maxDocumentBytes { transfer.cancel(); finish(ok: false); return true }
        body.append(contentsOf: bytes)
        return true
    }


    func transfer(_ transfer: any UpstreamCall, didCompleteWith result: Result<Void, UpstreamFailure>) {
        if case .success = result, status == 200 { finish(ok: true) } else { finish(ok: false) }
    }

    private func finish(ok: Bool) {
        let now = loop.clock.now()
        transfer = nil
        if ok {
            switch cache.receive(document: Data(body), maxAge: maxAge, now: now) {
            case .replaced(let summary):
                authenticator.replaceKeys(fileKeys.adding(cache.currentKeys))
                logger.info("JWKS refreshed", [("keys", .int(summary.keyIDs.count)), ("skipped", .int(summary.skipped.count))])
            case .rejected(let error):
                logger.warning("JWKS refresh rejected; keeping the last good keys", [("reason", .string("\(error)"))])
            }
        } else {
            cache.fetchFailed(now: now)
            logger.warning("JWKS refresh failed; keeping the last good keys", [("status", .int(status)),
                                                                               ("failures", .int(cache.consecutiveFailures))])
        }
        // On a later turn: this may run inside a curl callback, where starting a transfer is not allowed.
        loop.execute { self.poll() }
    }
}
