import Relay
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

// The offline App Attest checks first (AppAttestCommand.swift); everything else is the relay's command line.
if let code = AppAttestCommand.run(CommandLine.arguments) { exit(code) }
exit(RelayCommand.main(CommandLine.arguments))
