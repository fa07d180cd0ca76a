import HTTP1

/// Fuzz target for the request parser and its chunked-body decoder (libFuzzer, `make fuzz`).
///
/// Each input is parsed twice, whole and one byte at a time; both runs must give the same events (bodies
/// compared as concatenated bytes) and the same error, and no run may crash, hang or hold more than the limits
/// allow. A second pass puts the input behind a chunked request head, so the chunked decoder sees arbitrary
/// bytes too. A mismatch is a crash on purpose: that is how libFuzzer reports a finding.
enum RequestParserFuzzer {
    static let limits = RequestLimits(maxHeadBytes: 4096, maxHeaderCount: 32, maxURIBytes: 1024, maxBodyBytes: 65536)
    static let chunkedHead = Array("POST /v1/x HTTP/1.1\r\nHost: f\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)

    static func run(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        check(bytes)
        check(chunkedHead + bytes)
    }

    static func check(_ bytes: [UInt8]) {
        let whole = parse(bytes, step: bytes.count)
        let dripped = parse(bytes, step: 1)
        precondition(whole == dripped, "whole and one-byte feeding disagree")
    }

    struct Outcome: Equatable {
        var heads: [RequestHead] = []
        var bodies: [[UInt8]] = []
        var ends = 0
        var error: HTTPParseError?
    }

    static func parse(_ bytes: [UInt8], step: Int) -> Outcome {
        var parser = RequestParser(limits: limits)
        var outcome = Outcome()
        var offset = 0
        var events = 0
        repeat {
            let end = min(bytes.count, offset + max(1, step))
            if offset < end { parser.append(Array(bytes[offset..<end])) }
            offset = end
            while true {
                do {
                    guard let event = try parser.next() else { break }
                    events += 1
                    precondition(events < 1_000_000, "parser produced events without consuming input")
                    switch event {
                    case .head(let head):
                        outcome.heads.append(head)
                        outcome.bodies.append([])
                    case .body(let body):
                        precondition(!body.isEmpty, "empty body event")
                        precondition(!outcome.bodies.isEmpty, "body before head")
                        outcome.bodies[outcome.bodies.count - 1] += body
                        precondition(outcome.bodies[outcome.bodies.count - 1].count <= limits.maxBodyBytes, "body over the limit")
                    case .end:
                        outcome.ends += 1
                    }
                } catch {
                    outcome.error = error
                    return outcome
                }
            }
            precondition(parser.bufferedByteCount <= bytes.count, "parser holds more than it was given")
        } while offset < bytes.count
        return outcome
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

#if FUZZING
// SwiftPM links an executable's entry point as `<target>_main`; under libFuzzer that entry hands control to
// libFuzzer's own driver (LLVMFuzzerRunDriver, the documented way to fuzz from a program with its own main).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

@_cdecl("relay_fuzz_main")
public func relayFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    // `--cbor` first selects the App Attest target; libFuzzer must not see it (it would take it for an input).
    if argc > 1, let argv1 = argv?[1], String(cString: argv1) == "--cbor" {
        FuzzTarget.selected = .attestation
        argv![1] = argv![0]
        argv = argv! + 1
        argc -= 1
    }
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzerTestOneInput(data, size) }
}
#endif
