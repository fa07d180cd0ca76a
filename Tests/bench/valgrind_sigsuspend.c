// Preloaded into the relay when Tests/bench/run.sh counts its instructions under valgrind (BENCH_INSTRUCTIONS).
// libdispatch parks the main thread with sigsuspend() on a mask in read-only memory, and valgrind 3.19's
// rt_sigsuspend wrapper writes into that mask (to keep its own signal out of it) and dies with SIGSEGV. Handing
// the kernel a writable copy changes nothing else. Not part of the relay.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
