// Test support shared by every test target: no sockets, no relay modules.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How many times slower than a normal debug build this process may run: 10 under a sanitizer (ThreadSanitizer alone
/// is 5 to 15 times slower, and `make sanitize` runs every suite at once on a busy machine), else 1. The wall-clock
/// bounds of waits and of checks that time work are multiplied by it; the checks stay.
package let sanitizerSlowdown: Double = {
    let process = dlopen(nil, RTLD_NOW)
    defer { if let process { dlclose(process) } }
    return dlsym(process, "__tsan_init") != nil || dlsym(process, "__asan_init") != nil ? 10 : 1
}()
