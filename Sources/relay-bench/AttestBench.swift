#if os(Linux)
import Attestation
import AttestationTestSupport
import Auth
import Glibc
import HTTP1
import RelayCore
import RelayState
import RelayWire

/// `relay-bench attest`: the CPU an App Attest assertion adds to one request, the target of issue 24's row
/// (under 100 µs). It runs the relay's own steps for an asserted request, as `AttestationGate` chains them, on
/// requests a software device signed beforehand (not timed): read the two headers (`AttestationPresentation`,
/// base64), hash the client data (method, path, body), look the key up in the memory store, verify the assertion
/// (CBOR, SHA-256, ECDSA P-256 with OpenSSL), raise the counter, decide the verdict. Not included: the HTTP request
/// around it (S3 measures that) and a Redis store's round trips (two per request, on the store's connection).
/// Process CPU time (`CLOCK_PROCESS_CPUTIME_ID`), so other load on the machine does not count.
enum AttestBench {
    static func run(requests: Int, bodyBytes: Int) -> String {
        let appID = "ABCDE12345.com.example.relay"
        var device = SoftwareAppAttestDevice(appId: appID)
        let keyID = Base64URL.encode(device.keyId)
        let store = MemoryAttestationStore()
        _ = store.register(RegisteredAppAttestKey(keyID: keyID, publicKey: device.publicKey, appID: appID,
                                                  environment: "production", receipt: [], counter: 0, registeredAt: 0))
        let apple = AttestationConfiguration.Apple(appIds: [appID])
        let path = "/v1/chat/completions"
        let body = Array(("{\"model\":\"gpt-4o-mini\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\""
            + String(repeating: "x", count: max(0, bodyBytes - 80)) + "\"}]}").utf8)
        let keyHeader = Base64URL.encode(device.keyId)
        var requestHeaders: [HTTPHeaders] = []
        for _ in 0..<requests {
            let hash = Digest.sha256(AttestationWire.clientData(method: "POST", pathWithQuery: path, body: body))
            requestHeaders.append(HTTPHeaders([(AttestationWire.keyIDHeader, keyHeader),
                                               (AttestationWire.assertionHeader, Base64URL.encode(device.assertion(clientDataHash: hash)))]))
        }
        var valid = 0
        var verifyNanoseconds = 0
        let start = cpuNanoseconds()
        for headers in requestHeaders {
            let presented = AttestationPresentation.read(headers, appAttest: true, appCheck: false)
            guard let assertion = presented.appAttest else { continue }
            let hash = Digest.sha256(AttestationWire.clientData(method: "POST", pathWithQuery: path, body: body))
            let id = assertion.keyIDText
            let answer: StoreAnswer<RegisteredAppAttestKey> = store.key(id).map { .done($0) } ?? .unknown
            let verifyStart = cpuNanoseconds()
            let next = AssertionCheck.afterLookup(answer, assertion: assertion.assertion, clientDataHash: hash, apple: apple)
            verifyNanoseconds += cpuNanoseconds() - verifyStart
            guard case .raise(let counter) = next else { continue }
            let result = AssertionCheck.afterRaise(store.raiseCounter(id, to: counter), keyID: id)
            if case .pass = AttestationVerdict.decide(.required, presented: presented, appAttest: result, appCheck: nil) { valid += 1 }
        }
        let total = cpuNanoseconds() - start
        let perRequest = Double(total) / Double(max(1, requests)) / 1000
        let verify = Double(verifyNanoseconds) / Double(max(1, requests)) / 1000
        return "RESULT scenario=ATTEST title=one_asserted_request,_\(body.count)-byte_body target=relay requests=\(requests) valid=\(valid) body_bytes=\(body.count) "
            + "cpu_us_per_request=\(format(perRequest)) verify_us_per_request=\(format(verify))"
    }

    private static func format(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }

    private static func cpuNanoseconds() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }
}
#endif
