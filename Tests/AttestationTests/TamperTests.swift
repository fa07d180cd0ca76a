import Attestation
import AttestationTestSupport
import Foundation
import Testing

/// One byte changed anywhere in a real attestation object or assertion makes it fail.
///
/// Each flip re-runs the whole verification (two P-384 and one P-256 signature checks, about 5 ms in a debug
/// build), so `make test` flips a dense sample: every byte of the CBOR framing at the start, of authData at the
/// end, and every 5th byte in between (certificates and receipt), with the low bit and the high bit.
/// `ATTEST_EVERY_BYTE=1 swift test --filter TamperTests` flips every byte (about 4 minutes on 2 cores).
@Suite struct TamperTests {
    static let everyByte = ProcessInfo.processInfo.environment["ATTEST_EVERY_BYTE"] == "1"

    static func positions(count: Int, denseTail: Int) -> [Int] {
        guard !everyByte else { return Array(0..<count) }
        return (0..<count).filter { $0 < 64 || $0 >= count - denseTail || $0 % 5 == 0 }
    }

    /// Positions (of `positions`) where flipping `mask` still verifies, as ranges.
    static func acceptedFlips(_ bytes: [UInt8], positions: [Int], mask: UInt8, verifies: ([UInt8]) -> Bool) -> [ClosedRange<Int>] {
        var ranges: [ClosedRange<Int>] = []
        for index in positions {
            var copy = bytes
            copy[index] ^= mask
            guard verifies(copy) else { continue }
            if let last = ranges.last, index - last.upperBound <= 5 {
                ranges[ranges.count - 1] = last.lowerBound...index
            } else {
                ranges.append(index...index)
            }
        }
        return ranges
    }

    @Test(arguments: RealVectorTests.names, [UInt8(0x01), 0x80]) func everyByteOfTheAttestationMatters(_ name: String, mask: UInt8) throws {
        let vector = RealVectors.named(name)
        let verifier = try AppAttestVerifier(appIds: [vector.appId], environment: vector.environment)
        let authDataLength = try #require(CBORReader.decode(vector.object)["authData"]?.bytes).count
        // Not yet: the receipt is stored but its signature is not checked (the next step), so its bytes are skipped.
        let receipt = try #require(CBORReader.decode(vector.object)["attStmt"]?["receipt"]?.bytes)
        let receiptStart = try #require((0...(vector.object.count - receipt.count)).first { Array(vector.object[$0..<($0 + receipt.count)]) == receipt })
        let positions = Self.positions(count: vector.object.count, denseTail: authDataLength + 16)
            .filter { !(receiptStart..<(receiptStart + receipt.count)).contains($0) }
        let accepted = Self.acceptedFlips(vector.object, positions: positions, mask: mask) {
            (try? verifier.verifyAttestation($0, keyId: vector.keyId, clientDataHash: vector.clientDataHash, atUnixSeconds: vector.at).get()) != nil
        }
        #expect(accepted == [], "\(name) still verifies with a byte flipped at \(accepted) of \(vector.object.count)")
    }

    @Test(arguments: [UInt8(0x01), 0x80]) func everyByteOfTheAssertionMatters(mask: UInt8) {
        let vector = RealVectors.ios14
        let assertion = RealVectors.ios14Assertion
        let accepted = Self.acceptedFlips(assertion, positions: Array(assertion.indices), mask: mask) {
            (try? AppAttestVerifier.verifyAssertion($0, clientDataHash: vector.clientDataHash, publicKey: RealVectors.ios14PublicKey,
                                                    appId: vector.appId).get()) != nil
        }
        #expect(accepted == [])
    }
}
