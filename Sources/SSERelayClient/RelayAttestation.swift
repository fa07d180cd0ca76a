import Foundation
import RelayWire
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Proves to the relay that a request comes from the genuine app (README, "Genuine app"). Before each attempt the
/// client asks it for headers, given the request's method, path with query and exact body; when the relay answers
/// 401 `attestation_invalid`, `assertion_replayed` or `attestation_required`, the client tells it
/// (`proofRefused`) and, if it says so, sends the request once more with fresh headers. The relay answers those
/// before calling the provider, so the retry never pays twice.
///
/// `AppAttestProvider` (Apple platforms, App Attest) and `AppCheckProvider` (Firebase App Check) implement it.
public protocol RelayAttestationProvider: Sendable {
    /// The headers that prove `request` (for App Attest: the key id and an assertion over `request.clientData`).
    func headers(for request: AttestedRequest) async throws -> [String: String]

    /// The relay refused the proof with 401 `code`. Return true to send the request once more with new headers
    /// (register again, refresh a token), false to let the error through.
    func proofRefused(code: String) async -> Bool
}

extension RelayAttestationProvider {
    public func proofRefused(code: String) async -> Bool { false }
}

/// What a proof covers: the request as the relay will see it.
public struct AttestedRequest: Sendable, Equatable {
    public var method: String
    /// The request target as it goes on the wire: the URL's percent-encoded path, and `?query` when it has one.
    public var pathWithQuery: String
    /// The exact body bytes (empty for none).
    public var body: [UInt8]

    public init(method: String, pathWithQuery: String, body: [UInt8]) {
        self.method = method
        self.pathWithQuery = pathWithQuery
        self.body = body
    }

    /// The request of `urlRequest`. Its body must be `httpBody` (a body stream cannot be signed before it is sent).
    public init(_ urlRequest: URLRequest) {
        method = urlRequest.httpMethod ?? "GET"
        pathWithQuery = urlRequest.url.map(Self.pathWithQuery(of:)) ?? "/"
        body = urlRequest.httpBody.map { [UInt8]($0) } ?? []
    }

    /// The bytes an App Attest assertion signs (their SHA-256 is the `clientDataHash`): method, space, path with
    /// query, LF, body. The relay checks with the very same function (`AttestationWire.clientData`).
    public var clientData: [UInt8] { AttestationWire.clientData(method: method, pathWithQuery: pathWithQuery, body: body) }

    /// The origin-form request target URLSession sends for `url`.
    public static func pathWithQuery(of url: URL) -> String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        var path = components?.percentEncodedPath ?? "/"
        if path.isEmpty { path = "/" }
        if let query = components?.percentEncodedQuery { path += "?" + query }
        return path
    }
}

extension RelayAPIError {
    /// A 401 about the proof of the genuine app, which a `RelayAttestationProvider` may fix by itself.
    var isAttestationRefusal: Bool {
        status == 401 && ["attestation_invalid", "assertion_replayed", "attestation_required"].contains(code ?? "")
    }
}

/// Firebase App Check: the token closure's token in `X-Firebase-AppCheck`. After the relay refused a token, the
/// next call asks the closure with `forceRefresh: true` (Firebase: `AppCheck.appCheck().token(forcingRefresh:)`).
///
/// An App Check token proves the app and can be replayed by whoever copies it until it expires (30 minutes to 7
/// days, the project's setting): keep the lifetime short.
public actor AppCheckProvider: RelayAttestationProvider {
    public typealias TokenSource = @Sendable (_ forceRefresh: Bool) async throws -> String

    private let token: TokenSource
    private var refreshNext = false

    public init(token: @escaping TokenSource) {
        self.token = token
    }

    public func headers(for request: AttestedRequest) async throws -> [String: String] {
        let refresh = refreshNext
        refreshNext = false
        return [AttestationWire.appCheckHeader: try await token(refresh)]
    }

    public func proofRefused(code: String) async -> Bool {
        guard code == "attestation_invalid" else { return false }
        refreshNext = true
        return true
    }
}
