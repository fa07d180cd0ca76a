/// SHA-256 (FIPS 180-4) through OpenSSL, for modules that hash without linking OpenSSL themselves (the relay's
/// attestation checks hash client data and challenges).
package enum Digest {
    package static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] { Crypto.sha256(bytes) }
}
