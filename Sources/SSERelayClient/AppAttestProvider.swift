#if canImport(DeviceCheck)
import CryptoKit
@preconcurrency import DeviceCheck
import Foundation
import RelayWire
import Security

/// Apple App Attest for every request through the relay (README, "Genuine app"). On first use it generates a key
/// in the Secure Enclave, fetches a challenge from the relay (`POST /v1/relay/attest/challenge`), has Apple attest
/// the key over SHA-256 of the challenge, and registers it (`POST /v1/relay/attest/apple`); the key id is kept in
/// the Keychain (this device only), so this happens once per install, as Apple advises (attestation calls
/// Apple's servers and is rate-limited). Every request then carries an assertion over SHA-256 of its clientData.
///
/// It registers again when the key is gone (`DCError.invalidKey`: restored backup, reinstalled app) or the relay
/// answers 401 `attestation_invalid` (its store lost the key, or the key was registered for another environment);
/// after 401 `assertion_replayed` (two requests signed in one order and arriving in the other) a fresh assertion
/// goes with the retry. Concurrent first requests share one registration.
///
/// Not built or run here: the package's tests run on Linux, where DeviceCheck does not exist; the same protocol is
/// exercised there by a software device against the real relay.
public actor AppAttestProvider: RelayAttestationProvider {
    public enum Failure: Error, Sendable, Equatable {
        /// `DCAppAttestService.isSupported` is false (the simulator, older devices, some Macs).
        case unsupported
        /// The relay's challenge answer was not `{"challenge": …}`.
        case badChallenge
    }

    private let relayBaseURL: URL
    private let keychainService: String
    private let session: URLSession
    /// The registered key's id, once known (from the Keychain or a registration).
    private var keyID: String?
    private var registration: Task<String, any Error>?

    /// - Parameters:
    ///   - relayBaseURL: the relay (the same base URL as the `SSERelayClient`).
    ///   - keychainService: the Keychain item's service; its account is the relay's host, so one app can use several relays.
    public init(relayBaseURL: URL, keychainService: String = "SSERelayClient.AppAttest", session: URLSession = .shared) {
        self.relayBaseURL = relayBaseURL
        self.keychainService = keychainService
        self.session = session
    }

    public func headers(for request: AttestedRequest) async throws -> [String: String] {
        guard DCAppAttestService.shared.isSupported else { throw Failure.unsupported }
        let clientDataHash = Data(SHA256.hash(data: Data(request.clientData)))
        var id = try await registeredKeyID()
        let assertion: Data
        do {
            assertion = try await DCAppAttestService.shared.generateAssertion(id, clientDataHash: clientDataHash)
        } catch let error as DCError where error.code == .invalidKey {
            forget(id)
            id = try await registeredKeyID()
            assertion = try await DCAppAttestService.shared.generateAssertion(id, clientDataHash: clientDataHash)
        }
        return [AttestationWire.keyIDHeader: id, AttestationWire.assertionHeader: assertion.base64EncodedString()]
    }

    public func proofRefused(code: String) async -> Bool {
        switch code {
        case "attestation_invalid":
            if let keyID { forget(keyID) }
            return true
        case "assertion_replayed":
            return true
        default:
            return false
        }
    }

    // MARK: Registration

    private func registeredKeyID() async throws -> String {
        if let keyID { return keyID }
        if let stored = readKeychain() {
            keyID = stored
            return stored
        }
        if let registration { return try await registration.value }
        let task = Task { try await self.register() }
        registration = task
        defer { registration = nil }
        let id = try await task.value
        keyID = id
        return id
    }

    private func register() async throws -> String {
        let service = DCAppAttestService.shared
        let id = try await service.generateKey()
        let challenge = try await fetchChallenge()
        let attestation = try await service.attestKey(id, clientDataHash: Data(SHA256.hash(data: Data(challenge.utf8))))
        let body = try JSONSerialization.data(withJSONObject: ["keyId": id, "attestation": attestation.base64EncodedString(),
                                                               "challenge": challenge])
        let (data, response) = try await post(AttestationWire.registerPath, body: body)
        // 409: registered already (an earlier registration whose answer was lost): the key is good.
        guard response.statusCode == 201 || response.statusCode == 409 else { throw relayError(response, data) }
        writeKeychain(id)
        return id
    }

    private func fetchChallenge() async throws -> String {
        let (data, response) = try await post(AttestationWire.challengePath, body: Data())
        guard response.statusCode == 200 else { throw relayError(response, data) }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let challenge = object["challenge"] as? String else { throw Failure.badChallenge }
        return challenge
    }

    private func post(_ path: String, body: Data) async throws -> (Data, HTTPURLResponse) {
        var base = relayBaseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (data, http)
    }

    private func relayError(_ response: HTTPURLResponse, _ data: Data) -> RelayAPIError {
        RelayAPIError.response(status: response.statusCode, headers: response.allHeaderFields, body: [UInt8](data), requestID: nil)
    }

    // MARK: Keychain (this device only: a restored backup must register a key of its own)

    private var keychainQuery: [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: keychainService,
         kSecAttrAccount as String: relayBaseURL.host ?? relayBaseURL.absoluteString]
    }

    private func readKeychain() -> String? {
        var query = keychainQuery
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        guard SecItemCopyMatching(query as CFDictionary, &item) == errSecSuccess, let data = item as? Data else { return nil }
        return String(data: data, encoding: .utf8)
    }

    private func writeKeychain(_ id: String) {
        SecItemDelete(keychainQuery as CFDictionary)
        var item = keychainQuery
        item[kSecValueData as String] = Data(id.utf8)
        item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        SecItemAdd(item as CFDictionary, nil)
    }

    private func forget(_ id: String) {
        guard keyID == id || keyID == nil else { return }
        keyID = nil
        SecItemDelete(keychainQuery as CFDictionary)
    }
}
#endif
