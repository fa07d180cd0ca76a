import Attestation
import AttestationTestSupport
import Foundation
import Testing

/// One byte changed anywhere in a real attestation object or assertion makes it fail, with one exception inside
/// Apple's receipt: the fields of its CMS envelope that no signature covers and that OpenSSL does not hold to a
/// value (the SignedData and SignerInfo versions, the digestAlgorithms set's parameters, the eContentType, the
/// tags of the BER content chunks, the SignerInfo's digest and signature algorithm identifiers). A full run finds
/// 36 such positions in the iOS 14.4 vector's 3 703-byte receipt and 35 in the Apple sample's 3 977, all of them
/// there; every other byte (CBOR framing, both certificates, authData, and the receipt's signed content, carried
/// certificates and signature) fails when changed. So the test asserts: nothing outside the receipt is accepted,
/// and at most 3 % of the receipt's flipped positions are (without the receipt's checks it is all of them).
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
        let positions = Self.positions(count: vector.object.count, denseTail: authDataLength + 16)
        let receipt = try #require(CBORReader.decode(vector.object)["attStmt"]?["receipt"]?.bytes)
        let receiptStart = try #require((0...(vector.object.count - receipt.count)).first { vector.object[$0..<($0 + receipt.count)].elementsEqual(receipt) })
        let inReceipt = receiptStart..<(receiptStart + receipt.count)
        var accepted: [Int] = []
        for index in positions {
            var copy = vector.object
            copy[index] ^= mask
            if (try? verifier.verifyAttestation(copy, keyId: vector.keyId, clientDataHash: vector.clientDataHash, atUnixSeconds: vector.at).get()) != nil {
                accepted.append(index)
            }
        }
        #expect(accepted.allSatisfy(inReceipt.contains), "\(name) verifies with a byte flipped outside the receipt: \(accepted.filter { !inReceipt.contains($0) })")
        let flippedInReceipt = positions.filter(inReceipt.contains).count
        #expect(accepted.count * 100 <= flippedInReceipt * 3,
                "\(name): \(accepted.count) of \(flippedInReceipt) flips inside the receipt verify, at \(accepted.map { $0 - receiptStart })")
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
