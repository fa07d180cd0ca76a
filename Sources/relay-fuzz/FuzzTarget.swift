/// Which fuzz target this run exercises: the HTTP request parser (the default) or, after `--cbor` as the first
/// argument, App Attest input.
enum FuzzTarget {
    case requestParser, attestation

    /// Set once from the command line before any input is run (by `Replay.main` or `relayFuzzMain`), read only
    /// afterwards, from libFuzzer's one thread.
    nonisolated(unsafe) static var selected = FuzzTarget.requestParser

    static func run(_ input: UnsafeRawBufferPointer) {
        switch selected {
        case .requestParser: RequestParserFuzzer.run(input)
        case .attestation: AttestationFuzzer.run(input)
        }
    }
}
