import Attestation
import Support
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// `sse-relay --verify-app-attest` and `--verify-app-attest-assertion`: offline checks of what an iOS device sent
/// (a support ticket, a failed registration), with the relay's own verifier.
///
/// One JSON line on stdout; exit 0 when valid, 1 when not (`{"valid":false,"reason":"<step>"}`, the step names
/// of `AppAttestFailure`), 2 for bad arguments (usage on stderr). Pure apart from reading the files, the clock
/// (only when `--at` is absent) and printing: `evaluate` takes everything as values.
enum AppAttestCommand {
    static let usage = """
    Usage:
      sse-relay --verify-app-attest FILE --app-id TEAM.BUNDLE --key-id B64 --client-data-hash B64
                [--development] [--at RFC3339] [--root-ca PEM]
      sse-relay --verify-app-attest-assertion FILE --public-key B64 --app-id TEAM.BUNDLE --client-data-hash B64
                [--counter-above N]

      FILE                  the attestation object or assertion, as base64 or raw CBOR
      --app-id              "TEAMID.bundle.id" (repeat it to accept several apps when verifying an attestation)
      --key-id              the key id the app got from generateKey (base64)
      --client-data-hash    the exact bytes the app passed to attestKey / generateAssertion (base64)
      --development         the key comes from the development environment (default: production)
      --at                  check certificate validity at this time (2026-04-21T00:00:00Z) instead of now
      --root-ca             PEM file of the root to trust instead of Apple's (tests, private roots)
      --public-key          the key registered by the attestation: X9.62 uncompressed P-256 point (base64)
      --counter-above       the counter stored for the key: the assertion's must be greater

    Prints one JSON line; exit 0 when valid, 1 when not, 2 for bad arguments.
    """

    static let attestationFlag = "--verify-app-attest"
    static let assertionFlag = "--verify-app-attest-assertion"

    struct Outcome: Equatable {
        var exitCode: Int32
        var stdout: String
        var stderr: String
    }

    /// nil when `arguments` hold neither command (the relay's own command line goes on).
    static func run(_ arguments: [String]) -> Int32? {
        guard arguments.contains(attestationFlag) || arguments.contains(assertionFlag) else { return nil }
        let outcome = evaluate(Array(arguments.dropFirst()), readFile: readFile, now: { Int64(time(nil)) })
        if !outcome.stdout.isEmpty { FileDescriptorLogSink.standardOutput.write(line: outcome.stdout) }
        if !outcome.stderr.isEmpty { FileDescriptorLogSink.standardError.write(line: outcome.stderr) }
        return outcome.exitCode
    }

    // MARK: - Arguments

    private static let valueFlags: Set<String> = [
        attestationFlag, assertionFlag, "--app-id", "--key-id", "--client-data-hash", "--at", "--root-ca", "--public-key", "--counter-above",
    ]

    static func evaluate(_ arguments: [String], readFile: (String) -> [UInt8]?, now: () -> Int64) -> Outcome {
        var values: [String: [String]] = [:]
        var development = false
        var index = 0
        while index < arguments.count {
            let flag = arguments[index]
            if flag == "--development" {
                development = true
                index += 1
                continue
            }
            guard valueFlags.contains(flag) else { return badArguments("unknown argument \(flag)") }
            guard index + 1 < arguments.count else { return badArguments("\(flag) needs a value") }
            values[flag, default: []].append(arguments[index + 1])
            index += 2
        }
        for (flag, list) in values where list.count > 1 && flag != "--app-id" {
            return badArguments("\(flag) given twice")
        }
        func single(_ flag: String) -> String? { values[flag]?.first }

        let isAttestation = values[attestationFlag] != nil
        guard isAttestation != (values[assertionFlag] != nil) else {
            return badArguments("give one of \(attestationFlag) and \(assertionFlag)")
        }
        guard let path = single(isAttestation ? attestationFlag : assertionFlag), let contents = readFile(path) else {
            return badArguments("cannot read \(single(isAttestation ? attestationFlag : assertionFlag) ?? "the file")")
        }
        guard let appIds = values["--app-id"] else { return badArguments("--app-id is required") }
        // A team id and a bundle id: letters, digits, '-' and '.' (so the JSON output needs no escaping).
        guard appIds.allSatisfy(isAppId) else { return badArguments("--app-id must be TEAMID.bundle.id") }
        guard let clientDataHashText = single("--client-data-hash") else { return badArguments("--client-data-hash is required") }
        guard let clientDataHash = Base64.decode(clientDataHashText) else { return badArguments("--client-data-hash is not base64") }
        let object = Base64.decodeFileContents(contents)

        if isAttestation {
            for flag in ["--public-key", "--counter-above"] where values[flag] != nil {
                return badArguments("\(flag) belongs to \(assertionFlag)")
            }
            guard let keyIdText = single("--key-id") else { return badArguments("--key-id is required") }
            guard let keyId = Base64.decode(keyIdText) else { return badArguments("--key-id is not base64") }
            var at = now()
            if let text = single("--at") {
                guard let seconds = RFC3339.unixSeconds(text) else { return badArguments("--at must be RFC 3339, like 2026-04-21T00:00:00Z") }
                at = seconds
            }
            var rootPEM: [UInt8]?
            if let rootPath = single("--root-ca") {
                guard let pem = readFile(rootPath) else { return badArguments("cannot read \(rootPath)") }
                rootPEM = pem
            }
            let verifier: AppAttestVerifier
            do {
                verifier = try AppAttestVerifier(appIds: appIds, environment: development ? .development : .production, rootCAPEM: rootPEM)
            } catch {
                return badArguments(error.step == "root_ca" ? "--root-ca holds no certificate" : "bad --app-id")
            }
            switch verifier.verifyAttestation(object, keyId: keyId, clientDataHash: clientDataHash, atUnixSeconds: at) {
            case .success(let key):
                return Outcome(exitCode: 0, stdout: """
                    {"valid":true,"keyId":"\(Base64.encode(key.keyId))","appId":"\(key.appId)",\
                    "environment":"\(key.environment.rawValue)","counter":\(key.counter),"publicKey":"\(Base64.encode(key.publicKey))"}
                    """, stderr: "")
            case .failure(let failure):
                return invalid(failure.step)
            }
        }

        for flag in ["--key-id", "--at", "--root-ca"] where values[flag] != nil {
            return badArguments("\(flag) belongs to \(attestationFlag)")
        }
        guard !development else { return badArguments("--development belongs to \(attestationFlag)") }
        guard appIds.count == 1 else { return badArguments("an assertion is checked against one --app-id") }
        guard let publicKeyText = single("--public-key") else { return badArguments("--public-key is required") }
        guard let publicKey = Base64.decode(publicKeyText).map(x962Point) else { return badArguments("--public-key is not base64") }
        var floor: UInt32?
        if let text = single("--counter-above") {
            guard let value = UInt32(text) else { return badArguments("--counter-above must be a whole number from 0 to 4294967295") }
            floor = value
        }
        switch AppAttestVerifier.verifyAssertion(object, clientDataHash: clientDataHash, publicKey: publicKey, appId: appIds[0]) {
        case .success(let counter):
            if let floor, counter <= floor { return invalid("counter") }
            return Outcome(exitCode: 0, stdout: #"{"valid":true,"counter":\#(counter)}"#, stderr: "")
        case .failure(let failure):
            return invalid(failure.step)
        }
    }

    /// The key as given, or the point inside a P-256 SubjectPublicKeyInfo (DER), which is what a PEM public key
    /// holds: people paste either.
    static func x962Point(_ key: [UInt8]) -> [UInt8] {
        let header: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
                               0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]
        guard key.count == header.count + 65, key.starts(with: header) else { return key }
        return Array(key.suffix(65))
    }

    static func isAppId(_ text: String) -> Bool {
        text.contains(".") && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."): return true
            default: return false
            }
        }
    }

    /// `step` is one of AppAttestFailure's fixed names (lower case and '_'), so it needs no JSON escaping.
    private static func invalid(_ step: String) -> Outcome {
        Outcome(exitCode: 1, stdout: #"{"valid":false,"reason":"\#(step)"}"#, stderr: "")
    }

    private static func badArguments(_ message: String) -> Outcome {
        Outcome(exitCode: 2, stdout: "", stderr: "sse-relay: \(message)\n\n\(usage)")
    }

    /// A file's bytes, at most 1 MiB (a larger one is returned cut, and then fails as too large or malformed).
    private static func readFile(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        let count = bytes.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
        guard ferror(file) == 0 else { return nil }
        return Array(bytes.prefix(count))
    }
}

/// Base64 for the command line: the standard and the URL alphabet, padding optional, whitespace between
/// characters ignored (base64 pasted from a log or wrapped at 76 columns).
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0..<4 {
                out.append(position <= chunk.count ? alphabet[Int(value >> (18 - 6 * UInt32(position)) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? { decode(bytes: Array(text.utf8)) }

    static func decode(bytes: [UInt8]) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): continue
            case UInt8(ascii: "="): padding += 1; continue
            default: break
            }
            guard padding == 0, let value = sextet(byte) else { return nil } // nothing after padding
            values.append(value)
        }
        guard values.count % 4 != 1, padding <= 2, padding == 0 || (values.count + padding) % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for value in values {
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return out
    }

    /// A file holding base64 text is decoded; anything else (raw CBOR starts with a map byte, 0xA0-0xBF) is taken
    /// as it is.
    static func decodeFileContents(_ contents: [UInt8]) -> [UInt8] {
        guard let first = contents.first, first < 0x80, let decoded = decode(bytes: contents), !decoded.isEmpty else { return contents }
        return decoded
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"), UInt8(ascii: "-"): return 62
        case UInt8(ascii: "/"), UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}

/// RFC 3339 date-times (section 5.6): `2026-04-21T00:00:00Z`, fractional seconds ignored, `Z` or `±HH:MM`.
enum RFC3339 {
    static func unixSeconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= b.count else { return nil }
            var value: Int64 = 0
            for byte in b[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] | 0x20 == UInt8(ascii: "t"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour <= 23, minute <= 59, second <= 60 // a leap second counts as the next one
        else { return nil }
        var index = 19
        if b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[index]) { index += 1 }
            guard index > start else { return nil }
        }
        guard index < b.count else { return nil }
        var offset: Int64 = 0
        if b[index] | 0x20 == UInt8(ascii: "z") {
            index += 1
        } else {
            guard b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-"), index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"),
                  let hours = number((index + 1)..<(index + 3)), let minutes = number((index + 4)..<(index + 6)), hours <= 23, minutes <= 59
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        }
        guard index == b.count else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
