// App Attest public keys are built once and kept (issue 24: building one was 6 % of an asserted request). A kept
// key must change nothing about what verifies: the signature is checked every time, a key serves only its own
// bytes, bytes that are not a point are refused and not kept, and the cache stays within its bound.
@testable import Attestation
import AttestationTestSupport
import Testing

@Suite struct P256KeyCacheTests {
    private static let message = Array("authenticatorData and clientDataHash".utf8)

    @Test func aKeyIsBuiltOnceAndReused() throws {
        let cache = P256KeyCache(capacity: 4)
        let device = TestP256Key()
        let first = try #require(cache.key(x962: device.publicPoint))
        let second = try #require(cache.key(x962: device.publicPoint))
        #expect(first === second)
        #expect(cache.builds == 1)
        #expect(cache.count == 1)
    }

    @Test func everySignatureIsCheckedWithAKeptKey() {
        let cache = P256KeyCache(capacity: 4)
        let device = TestP256Key()
        let signature = device.signDER(Self.message)
        var tampered = signature
        tampered[tampered.count - 1] ^= 0x01
        var otherMessage = Self.message
        otherMessage[0] ^= 0x01
        for _ in 0..<2 {
            #expect(AttestationCrypto.verifyES256(publicKey: device.publicPoint, message: Self.message, derSignature: signature, keys: cache) == true)
            #expect(AttestationCrypto.verifyES256(publicKey: device.publicPoint, message: Self.message, derSignature: tampered, keys: cache) == false)
            #expect(AttestationCrypto.verifyES256(publicKey: device.publicPoint, message: otherMessage, derSignature: signature, keys: cache) == false)
        }
        #expect(cache.builds == 1)
    }

    @Test func aKeptKeyServesOnlyItsOwnBytes() throws {
        let cache = P256KeyCache(capacity: 4)
        let a = TestP256Key(), b = TestP256Key()
        let keyA = try #require(cache.key(x962: a.publicPoint))
        let keyB = try #require(cache.key(x962: b.publicPoint))
        #expect(keyA !== keyB)
        let signedByB = b.signDER(Self.message)
        #expect(AttestationCrypto.verifyES256(publicKey: a.publicPoint, message: Self.message, derSignature: signedByB, keys: cache) == false)
        #expect(AttestationCrypto.verifyES256(publicKey: b.publicPoint, message: Self.message, derSignature: signedByB, keys: cache) == true)
        #expect(cache.builds == 2)
    }

    @Test func bytesThatAreNotAPointAreRefusedAndNotKept() {
        let cache = P256KeyCache(capacity: 4)
        var offCurve = TestP256Key().publicPoint
        offCurve[64] ^= 0x01   // y changed: no longer on the curve
        var compressed = TestP256Key().publicPoint
        compressed[0] = 0x02
        for bytes in [offCurve, compressed, Array(offCurve.prefix(64)), []] {
            #expect(cache.key(x962: bytes) == nil)
            #expect(AttestationCrypto.verifyES256(publicKey: bytes, message: Self.message, derSignature: [0x30, 0x00], keys: cache) == nil)
        }
        #expect(cache.count == 0)
    }

    @Test func theCacheStaysWithinItsBound() throws {
        let cache = P256KeyCache(capacity: 4)
        let devices = (0..<5).map { _ in TestP256Key() }
        for device in devices { _ = try #require(cache.key(x962: device.publicPoint)) }
        #expect(cache.count <= 4)
        #expect(cache.builds == 5)
        // The oldest went first: asking for it builds it again; the newest is still kept.
        _ = try #require(cache.key(x962: devices[0].publicPoint))
        #expect(cache.builds == 6)
        _ = try #require(cache.key(x962: devices[4].publicPoint))
        #expect(cache.builds == 6)
    }
}
