import Attestation
import Auth
import Foundation

/// `attestation`: proof that a request comes from the genuine app on a real device (README, "Genuine app").
/// `apple` turns on App Attest (the challenge and register endpoints, and assertions on every request);
/// `firebase` turns on Firebase App Check tokens. Which routes ask for a proof is each route's `attestation`.
package struct AttestationConfiguration: Sendable {
    /// Which App Attest environment the app's keys come from: the aaguid of a key's attestation says it.
    package enum Environment: String, Sendable, Equatable, CaseIterable {
        case production, development
    }

    /// `attestation.apple`.
    package struct Apple: Sendable, Equatable {
        /// `TEAMID.bundle.id` of each app allowed to register keys (their SHA-256 is the rpIdHash).
        package var appIds: [String]
        package var environment: Environment
        /// The PEM of `rootCAFile`, read at start-up; nil: Apple's App Attestation Root CA, built into the binary.
        package var rootCAPEM: [UInt8]?
        /// How long a challenge can be redeemed (`challengeTTLSeconds`, 300 by default).
        package var challengeTTLSeconds: Int

        package init(appIds: [String], environment: Environment = .production, rootCAPEM: [UInt8]? = nil,
                    challengeTTLSeconds: Int = 300) {
            self.appIds = appIds
            self.environment = environment
            self.rootCAPEM = rootCAPEM
            self.challengeTTLSeconds = challengeTTLSeconds
        }
    }

    /// `attestation.firebase`.
    package struct Firebase: Sendable {
        package static let defaultJWKSURL = "https://firebaseappcheck.googleapis.com/v1/jwks"
        /// App Check tokens live 30 minutes to 7 days (the project's setting); `exp - iat` above this is refused.
        package static let maxTokenLifetimeSeconds: Double = 7 * 86_400

        /// The Firebase project number (digits): the token's `iss` and `aud` name it.
        package var projectNumber: String
        /// Firebase app ids (`1:1234567890:ios:0a1b…`) whose tokens are accepted: the token's `sub`.
        package var appIds: [String]
        /// Refreshed in the background like `clients.jwt.jwksURL`; nil when only `jwksFile` is used.
        package var jwksURL: String?
        /// Keys read from `jwksFile` at start-up.
        package var keys: JWKSet
        package var jwksRefreshSeconds: Double

        package init(projectNumber: String, appIds: [String], jwksURL: String? = Firebase.defaultJWKSURL, keys: JWKSet = .empty,
                    jwksRefreshSeconds: Double = 3600) {
            self.projectNumber = projectNumber
            self.appIds = appIds
            self.jwksURL = jwksURL
            self.keys = keys
            self.jwksRefreshSeconds = jwksRefreshSeconds
        }

        /// `iss` of the project's tokens.
        package var issuer: String { "https://firebaseappcheck.googleapis.com/" + projectNumber }
        /// The member of `aud` that names the project.
        package var audience: String { "projects/" + projectNumber }
    }

    package var apple: Apple?
    package var firebase: Firebase?

    package init(apple: Apple? = nil, firebase: Firebase? = nil) {
        self.apple = apple
        self.firebase = firebase
    }

    /// Neither proof is configured.
    package var isEmpty: Bool { apple == nil && firebase == nil }
}

/// `routes[].attestation`: whether a route asks for a proof of the genuine app.
package enum RouteAttestation: String, Sendable, Equatable, CaseIterable {
    /// No proof is looked at (the default).
    case off
    /// A valid App Attest assertion or App Check token, else 401 `attestation_required`.
    case required
    /// Checked when presented (a bad one is refused), accepted without one: for a rollout.
    case optional
}

extension ConfigReader {
    /// `routes[i].attestation`; `.off` when absent.
    mutating func routeAttestation(_ route: [String: Any], _ path: String) -> RouteAttestation {
        guard let value = route["attestation"] else { return .off }
        guard let name = value as? String, let mode = RouteAttestation(rawValue: name) else {
            problem("\(path).attestation", #"must be "off", "required" or "optional""#)
            return .off
        }
        return mode
    }

    /// `attestation`, and the routes that ask for it. Runs after `clients` (App Check reuses its skew).
    mutating func readAttestation(_ object: [String: Any], into config: inout RelayConfiguration) {
        if let value = object["attestation"] {
            if let a = value as? [String: Any] {
                checkKnown(a, ["apple", "firebase"], "attestation")
                if let apple = a["apple"] { config.attestation.apple = readApple(apple) }
                if let firebase = a["firebase"] { config.attestation.firebase = readFirebase(firebase) }
                if a.isEmpty { problem("attestation", "configures nothing: give attestation.apple or attestation.firebase") }
            } else {
                problem("attestation", "must be an object")
            }
        }
        for (i, route) in config.routes.enumerated() where route.attestation != .off && config.attestation.isEmpty {
            problem("routes[\(i)].attestation", #"is "\#(route.attestation.rawValue)" but neither attestation.apple nor attestation.firebase is configured"#)
        }
    }

    /// `attestation.apple`.
    mutating func readApple(_ value: Any) -> AttestationConfiguration.Apple? {
        let path = "attestation.apple"
        guard let a = value as? [String: Any] else { problem(path, "must be an object"); return nil }
        checkKnown(a, ["appIds", "environment", "rootCAFile", "challengeTTLSeconds"], path)
        let appIds = a["appIds"] as? [String] ?? []
        if appIds.isEmpty || !appIds.allSatisfy(Self.isAppleAppID) {
            problem("\(path).appIds", #"must be a non-empty list of "TEAMID.bundle.id" (a 10-character team id, a dot, the bundle id)"#)
        }
        var apple = AttestationConfiguration.Apple(appIds: appIds)
        if let name = string(a, "environment", "\(path).environment") {
            if let environment = AttestationConfiguration.Environment(rawValue: name) {
                apple.environment = environment
            } else {
                problem("\(path).environment", #"must be "production" or "development""#)
            }
        }
        if let file = string(a, "rootCAFile", "\(path).rootCAFile") {
            if let pem = sources.readFile(file), pem.contains("-----BEGIN CERTIFICATE-----") {
                apple.rootCAPEM = Array(pem.utf8)
            } else {
                problem("\(path).rootCAFile", "cannot read a PEM certificate from \"\(file)\"")
            }
        }
        if let v = int(a, "challengeTTLSeconds", "\(path).challengeTTLSeconds", min: 1, max: 3600) { apple.challengeTTLSeconds = v }
        if !appIds.isEmpty, problems.allSatisfy({ !$0.hasPrefix(path) }) {
            // The verifier parses the root now, so a bad file stops start-up instead of every registration.
            if let failure = apple.verifierProblem { problem(apple.rootCAPEM == nil ? path : "\(path).rootCAFile", failure) }
        }
        return apple
    }

    /// `TEAMID.bundle.id`: ten upper-case letters or digits, a dot, a bundle id.
    static func isAppleAppID(_ id: String) -> Bool {
        let parts = id.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 10, !parts[1].isEmpty else { return false }
        let upperOrDigit = parts[0].utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }
        let bundle = parts[1].utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x2D }
        return upperOrDigit && bundle
    }

    /// `attestation.firebase`.
    mutating func readFirebase(_ value: Any) -> AttestationConfiguration.Firebase? {
        let path = "attestation.firebase"
        guard let f = value as? [String: Any] else { problem(path, "must be an object"); return nil }
        checkKnown(f, ["projectNumber", "appIds", "jwksURL", "jwksFile", "jwksRefreshSeconds"], path)
        var projectNumber: String?
        switch f["projectNumber"] {
        case let text as String where !text.isEmpty && text.utf8.count <= 20 && text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }):
            projectNumber = text
        case let v? where ConfigReader.number(v).map({ $0 >= 1 && $0 < 1e15 && $0 == $0.rounded() }) == true:
            projectNumber = String(Int64(ConfigReader.number(v)!))
        default:
            problem("\(path).projectNumber", "must be the project number (digits), e.g. \"123456789012\"")
        }
        let appIds = f["appIds"] as? [String] ?? []
        if appIds.isEmpty || appIds.contains(where: \.isEmpty) {
            problem("\(path).appIds", #"must be a non-empty list of Firebase app ids ("1:123456789012:ios:0a1b2c…")"#)
        }
        var keys = JWKSet.empty
        let file = string(f, "jwksFile", "\(path).jwksFile")
        if let file {
            if let text = sources.readFile(file) {
                do { keys = try JWKSet(json: Data(text.utf8)) } catch { problem("\(path).jwksFile", "\(file): \(error)") }
            } else {
                problem("\(path).jwksFile", "cannot read \(file)")
            }
        }
        // The default URL applies unless a key file is given alone (a private set, or tests).
        var url = string(f, "jwksURL", "\(path).jwksURL")
        if let url { checkJWKSURL(url, "\(path).jwksURL") }
        if url == nil && file == nil { url = AttestationConfiguration.Firebase.defaultJWKSURL }
        var refresh = 3600.0
        if let v = seconds(f, "jwksRefreshSeconds", "\(path).jwksRefreshSeconds") {
            // Google publishes the keys with a 6 h max-age: refreshing less often than that could miss a rotation.
            if v <= 21_600 { refresh = v } else { problem("\(path).jwksRefreshSeconds", "must be at most 21600 (6 h)") }
        }
        guard let projectNumber else { return nil }
        return .init(projectNumber: projectNumber, appIds: appIds, jwksURL: url, keys: keys, jwksRefreshSeconds: refresh)
    }
}

extension AttestationConfiguration.Apple {
    package func makeVerifier() throws(AppAttestFailure) -> AppAttestVerifier {
        try AppAttestVerifier(appIds: appIds, environment: environment == .production ? .production : .development, rootCAPEM: rootCAPEM)
    }

    /// What the configuration reader says when the verifier cannot be built (an unreadable root, say); nil when it can.
    var verifierProblem: String? {
        do {
            _ = try makeVerifier()
            return nil
        } catch {
            return "the App Attest verifier cannot start (\(error.step))"
        }
    }
}
