import Relay
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

exit(RelayCommand.main(CommandLine.arguments))
