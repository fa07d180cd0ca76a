import Redis
import RelayCore
import Support
import Transport

/// The `AttestationStore` every replica shares, in the Redis of `state.redis`, on the admission store's connections
/// (one per event loop, owned by that loop's queue: `connection(loop)`), under the same key prefix.
///
/// Layout (under the prefix):
/// - `attest:challenge:C`: a string with Redis's own expiry (`SET … PX ttl NX`); redeemed with `DEL`, whose reply
///   (1 or 0) says whether this caller took it. One command each, atomic, and the TTL is Redis's clock, the one
///   clock every replica shares.
/// - `attest:key:K`: HASH {pk, app, env, receipt, counter, at, and `subject` once an account asserted with it}.
///   Registered by a script that writes only when the key id is new; the counter is raised by a script that
///   checks the account and compares and sets in one step (`raiseScript`), so two replicas handed the same
///   assertion at once raise it once and refuse the other, and two accounts racing for an unbound key bind one.
///
/// The two scripts are sent with EVAL every time (a few hundred bytes): Redis keeps the compiled script in its
/// cache after the first call, and nothing here has to survive a NOSCRIPT after a restart or a SCRIPT FLUSH.
/// Any error, timeout or lost connection is `.unavailable`. Every call is made on `loop`, whose connection it uses.
package final class RedisAttestationStore: AttestationStore {
    /// KEYS[1] the key's hash. ARGV: pk, app, env, receipt, at. 1 when stored, 0 when the id was taken.
    static let registerScript = """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        redis.call('HSET', KEYS[1], 'pk', ARGV[1], 'app', ARGV[2], 'env', ARGV[3], 'receipt', ARGV[4], 'counter', '0', 'at', ARGV[5])
        return 1
        """

    /// KEYS[1] the key's hash. ARGV[1] the assertion's counter (0 to 2^32-1: exact in Lua's doubles), ARGV[2]
    /// "1" with a subject in ARGV[3], else "0". 1 when raised, 0 when not strictly greater (a replay), -1 when the
    /// key is unknown, -2 when it is bound to another subject (then nothing changes).
    static let raiseScript = """
        local stored = redis.call('HGET', KEYS[1], 'counter')
        if not stored then return -1 end
        if ARGV[2] == '1' then
          local bound = redis.call('HGET', KEYS[1], 'subject')
          if bound and bound ~= ARGV[3] then return -2 end
        end
        if tonumber(ARGV[1]) > tonumber(stored) then
          redis.call('HSET', KEYS[1], 'counter', ARGV[1])
          if ARGV[2] == '1' then redis.call('HSETNX', KEYS[1], 'subject', ARGV[3]) end
          return 1
        end
        return 0
        """

    /// Prepended to every key (`state.redis.keyPrefix`).
    package let keyPrefix: String
    private let connection: @Sendable (any LoopScheduler) -> RedisClient
    private let logger: Logger

    /// - Parameter connection: the started client of a loop (the admission store's), called on that loop.
    package init(keyPrefix: String, connection: @escaping @Sendable (any LoopScheduler) -> RedisClient, logger: Logger) {
        self.keyPrefix = keyPrefix
        self.connection = connection
        self.logger = logger
    }

    package func issueChallenge(_ challenge: String, ttlSeconds: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        send(["SET", challengeKey(challenge), "1", "PX", String(ttlSeconds * 1000), "NX"], on: loop) { result in
            completion(result?.string == "OK")
        }
    }

    package func redeemChallenge(_ challenge: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void) {
        send(["DEL", challengeKey(challenge)], on: loop) { result in
            completion(Self.answer(result))
        }
    }

    package func register(_ key: RegisteredAppAttestKey, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void) {
        let command: [[UInt8]] = [Array("EVAL".utf8), Array(Self.registerScript.utf8), Array("1".utf8), Array(keyKey(key.keyID).utf8),
                                  key.publicKey, Array(key.appID.utf8), Array(key.environment.utf8), key.receipt,
                                  Array(String(key.registeredAt).utf8)]
        send(command, on: loop) { result in completion(Self.answer(result)) }
    }

    package func key(_ keyID: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreAnswer<RegisteredAppAttestKey>) -> Void) {
        send(["HMGET", keyKey(keyID), "pk", "app", "env", "counter", "at"], on: loop) { result in
            guard let result, let fields = result.array, fields.count == 5 else { return completion(.unavailable) }
            guard case .bulkString(let publicKey) = fields[0] else { return completion(.unknown) }
            guard let app = fields[1].string, let environment = fields[2].string,
                  let counter = fields[3].integer.flatMap(UInt32.init(exactly:)), let at = fields[4].integer else {
                return completion(.unavailable)
            }
            completion(.done(RegisteredAppAttestKey(keyID: keyID, publicKey: publicKey, appID: app, environment: environment,
                                                    receipt: [], counter: counter, registeredAt: at)))
        }
    }

    package func raiseCounter(_ keyID: String, to counter: UInt32, subject: String?, on loop: any LoopScheduler,
                              _ completion: @escaping @Sendable (CounterRaise) -> Void) {
        send(["EVAL", Self.raiseScript, "1", keyKey(keyID), String(counter), subject == nil ? "0" : "1", subject ?? ""],
             on: loop) { result in
            switch result?.integer {
            case 1: completion(.raised)
            case 0, -1: completion(.notAbove)
            case -2: completion(.otherSubject)
            default: completion(.unavailable)
            }
        }
    }

    /// An integer reply: 1 done, 0 or -1 unknown; anything else (no reply, an error) unavailable.
    private static func answer(_ result: RESPValue?) -> StoreOutcome {
        switch result?.integer {
        case 1: .done
        case 0, -1: .unknown
        default: .unavailable
        }
    }

    private func challengeKey(_ challenge: String) -> String { keyPrefix + "attest:challenge:" + challenge }
    private func keyKey(_ keyID: String) -> String { keyPrefix + "attest:key:" + keyID }

    // MARK: Redis

    /// Sends one command on `loop`'s connection; the reply, or nil when Redis did not answer or answered an error.
    private func send(_ arguments: [String], on loop: any LoopScheduler, _ completion: @escaping (RESPValue?) -> Void) {
        send(arguments.map { Array($0.utf8) }, on: loop, completion)
    }

    private func send(_ arguments: [[UInt8]], on loop: any LoopScheduler, _ completion: @escaping (RESPValue?) -> Void) {
        connection(loop).send(arguments) { [logger] result in
            switch result {
            case .success(.error(let message)), .failure(.server(let message)):
                logger.warning("redis attestation command failed", [("error", .string(message))])
                completion(nil)
            case .success(let value):
                completion(value)
            case .failure(let error):
                logger.debug("redis attestation store unavailable", [("error", .string("\(error)"))])
                completion(nil)
            }
        }
    }
}
