import Attestation
import HTTP1
import HTTPServer
import RelayCore
import RelayState
import Support
import Transport
import Upstream

/// Everything attestation needs at run time, built once at start-up from `attestation` (README, "Genuine app"):
/// the offline App Attest verifier with its challenge and key store (`state.backend`: memory, or the shared
/// Redis), the App Check verifier with its JWKS refresher, the per-address bucket of the challenge and register
/// endpoints, and the metrics. Shared by every loop; safe from any thread (the verifiers are immutable or locked,
/// the refresher is owned by its loop).
final class AttestationService: Sendable {
    let configuration: AttestationConfiguration
    /// Set when `attestation.apple` is configured.
    let verifier: AppAttestVerifier?
    let store: (any AttestationStore)?
    /// Set when `attestation.firebase` is configured.
    let appCheck: AppCheckVerifier?
    /// Requests to the challenge and register endpoints per client address: the limits of failed authentications
    /// (`rateLimits.authFailuresPerAddress`), in a bucket of their own, kept per replica.
    let limiter: RateLimiter
    let metrics: RelayMetrics
    let logger: Logger
    let rejectionLog: RejectionLog
    let wallClock: @Sendable () -> Double
    private let refresher = Locked<JWKSRefresher?>(nil)

    /// nil when `attestation` configures neither proof.
    static func make(_ configuration: RelayConfiguration, admissionStore: any AdmissionStore, metrics: RelayMetrics, logger: Logger,
                     rejectionLog: RejectionLog, wallClock: @escaping @Sendable () -> Double) throws -> AttestationService? {
        let attestation = configuration.attestation
        guard !attestation.isEmpty else { return nil }
        var verifier: AppAttestVerifier?
        var store: (any AttestationStore)?
        if let apple = attestation.apple {
            verifier = try apple.makeVerifier()
            switch configuration.state.backend {
            case .memory:
                store = MemoryAttestationStore()
            case .redis(let redis):
                // Keys and counters every replica must share: never quietly this process's memory instead.
                guard let shared = admissionStore as? RedisAdmissionStore else {
                    throw ConfigurationError(problems: ["attestation.apple: state.backend is \"redis\" but the admission store is not Redis's"])
                }
                store = RedisAttestationStore(keyPrefix: redis.keyPrefix, connection: { shared.client(for: $0) }, logger: logger)
            }
        }
        let skew = configuration.clients.jwt?.settings.skewSeconds ?? 60
        let appCheck = try attestation.firebase.map { try AppCheckVerifier(configuration: $0, skewSeconds: skew) }
        return AttestationService(configuration: attestation, verifier: verifier, store: store, appCheck: appCheck,
                                  limiter: RateLimiter(limits: configuration.rateLimits.authFailuresPerAddress),
                                  metrics: metrics, logger: logger, rejectionLog: rejectionLog, wallClock: wallClock)
    }

    private init(configuration: AttestationConfiguration, verifier: AppAttestVerifier?, store: (any AttestationStore)?,
                 appCheck: AppCheckVerifier?, limiter: RateLimiter, metrics: RelayMetrics, logger: Logger, rejectionLog: RejectionLog,
                 wallClock: @escaping @Sendable () -> Double) {
        self.configuration = configuration
        self.verifier = verifier
        self.store = store
        self.appCheck = appCheck
        self.limiter = limiter
        self.metrics = metrics
        self.logger = logger
        self.rejectionLog = rejectionLog
        self.wallClock = wallClock
    }

    /// Starts refreshing the App Check keys from `attestation.firebase.jwksURL`, on `loop`.
    func start(loop: EventLoop, driver: CurlDriver) {
        guard let appCheck, let firebase = configuration.firebase, let url = firebase.jwksURL else { return }
        let refresher = JWKSRefresher(url: url, refreshSeconds: firebase.jwksRefreshSeconds, loop: loop, driver: driver,
                                      authenticator: appCheck, fileKeys: firebase.keys, logger: logger)
        self.refresher.withLock { $0 = refresher }
        refresher.start()
    }

    /// Stops the refresher (the Redis store's connections are the admission store's, closed with it).
    func shutdown() {
        refresher.withLock { $0 }?.stop()
    }

    /// The gate of a request on `route`, or nil when the route asks for no proof.
    func gate(route: RelayConfiguration.Route, head: RequestHead) -> AttestationGate? {
        guard route.attestation != .off else { return nil }
        let presented = AttestationPresentation.read(head.headers, appAttest: configuration.apple != nil, appCheck: appCheck != nil)
        return AttestationGate(service: self, mode: route.attestation, presented: presented, method: head.method, target: head.target)
    }

    func checkAppCheck(_ token: String) -> ProofResult {
        guard let appCheck else { return .invalid(step: "app_check_not_configured") }
        switch appCheck.verify(token, now: wallClock()) {
        case .success(let app): return .valid(identity: app)
        case .failure(let refusal): return .invalid(step: refusal.reason)
        }
    }

    /// `sse_relay_attestations_total{kind,result}`.
    func count(_ verdict: AttestationVerdict) {
        let labels = verdict.labels
        metrics.attestation(kind: labels.kind, result: labels.result)
    }
}
