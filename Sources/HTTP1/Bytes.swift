#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Byte constants and classifiers shared by the parser and the serializers. Kept internal: they are
// implementation details, and the compiler inlines them into the scanning loops.

@usableFromInline let LF: UInt8 = 0x0A
@usableFromInline let CR: UInt8 = 0x0D
@usableFromInline let SP: UInt8 = 0x20
@usableFromInline let HTAB: UInt8 = 0x09
@usableFromInline let COLON: UInt8 = 0x3A

/// RFC 9110 §5.6.2 tchar: "!#$%&'*+-.^_`|~" / DIGIT / ALPHA.
/// Two 64-bit masks instead of a table so the check needs no global initialisation or memory load.
@inline(__always)
func isTchar(_ b: UInt8) -> Bool {
    // Bits set for tchar in 0x00-0x3F: ! # $ % & ' * + - . 0-9
    let low: UInt64 = 0x03FF_6CFA_0000_0000
    // Bits set for tchar in 0x40-0x7F: A-Z ^ _ ` a-z | ~
    let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE
    if b < 64 { return (low >> UInt64(b)) & 1 == 1 }
    if b < 128 { return (high >> UInt64(b &- 64)) & 1 == 1 }
    return false
}

@inline(__always)
func isOWS(_ b: UInt8) -> Bool { b == SP || b == HTAB }

@inline(__always)
@usableFromInline
func asciiLower(_ b: UInt8) -> UInt8 { (b &- 0x41) < 26 ? b | 0x20 : b }

@inline(__always)
func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 0x30...0x39: return Int(b &- 0x30)
    case 0x41...0x46: return Int(b &- 0x41 &+ 10)
    case 0x61...0x66: return Int(b &- 0x61 &+ 10)
    default: return nil
    }
}

/// Offset of the first `byte` in `p[from..<to]`, or nil. memchr is vectorised by libc, which matters because
/// bodies and long header values are scanned for line ends on every read.
@inline(__always)
func findByte(_ byte: UInt8, in p: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> Int? {
    guard from < to, let base = p.baseAddress else { return nil }
    #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
    guard let hit = memchr(base + from, Int32(byte), to - from) else { return nil }
    return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
    #else
    var i = from
    while i < to {
        if p[i] == byte { return i }
        i += 1
    }
    return nil
    #endif
}

/// ASCII case-insensitive equality of a byte range with a lowercase ASCII literal (field names we act on).
@inline(__always)
func equalsLowercase(_ p: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int, _ lower: StaticString) -> Bool {
    let n = lower.utf8CodeUnitCount
    guard to - from == n else { return false }
    let l = lower.utf8Start
    for k in 0..<n where asciiLower(p[from + k]) != l[k] {
        return false
    }
    return true
}

/// Field values are bytes; RFC 9110 §5.5 allows obs-text (0x80-0xFF). Valid UTF-8 is kept as is, anything else is
/// read as Latin-1 so that hostile bytes can never make decoding fail.
func decodeFieldValue(_ bytes: UnsafeBufferPointer<UInt8>, hasHighBytes: Bool) -> String {
    if !hasHighBytes { return String(decoding: bytes, as: UTF8.self) }
    if let s = validatedUTF8String(bytes) { return s }
    var scalars = String.UnicodeScalarView()
    for b in bytes { scalars.append(Unicode.Scalar(b)) }
    return String(scalars)
}

/// The bytes as a string if they are well-formed UTF-8 (no overlong forms, surrogates or scalars past U+10FFFF),
/// else nil: what `String(validating:as:)` does, which needs macOS 15 / iOS 18 (the package's floor is macOS 13).
public func validatedUTF8String<Bytes: Collection>(_ bytes: Bytes) -> String? where Bytes.Element == UInt8 {
    var iterator = bytes.makeIterator()
    var decoder = Unicode.UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return String(decoding: bytes, as: UTF8.self)
        case .error: return nil
        }
    }
}

/// RFC 3986 §3.2 authority bytes a request-target or Host may carry (host, port, IP literal): unreserved,
/// sub-delims, pct-encoded, ":" and the IP-literal brackets. "@" is left out on purpose: userinfo in an http(s)
/// URI is an error for a recipient (RFC 9110 §4.2.4).
@inline(__always)
func isAuthorityByte(_ b: UInt8) -> Bool {
    switch b {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true          // DIGIT ALPHA
    case 0x2D, 0x2E, 0x5F, 0x7E: return true                         // - . _ ~
    case 0x21, 0x24, 0x26...0x2C, 0x3B, 0x3D: return true            // ! $ & ' ( ) * + , ; =
    case 0x25, 0x3A, 0x5B, 0x5D: return true                         // % : [ ]
    default: return false
    }
}
