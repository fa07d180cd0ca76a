// System headers and calls Glibc's Swift module does not export (epoll, accept4), for the event loops; and the
// async-signal-safe half of the signal pipe, which must not be Swift.
#ifndef SSE_RELAY_CSYSTEM_H
#define SSE_RELAY_CSYSTEM_H
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/socket.h>

// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: the accepted socket is ready for the poller in one call.
int csystem_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length);
#endif

// The signal pipe's read end (non-blocking, close-on-exec), made on the first call; -1 with errno when the pipe
// cannot be made. Every caught signal writes its number, one byte, to the write end.
int csystem_signal_pipe(void);

// Catches `signo` for the whole process (sigaction, SA_RESTART): its handler, on whichever thread the kernel picks,
// only writes the signal's number to the pipe (errno kept; a full pipe drops the byte). 0, or -1 with errno.
// Call csystem_signal_pipe first.
int csystem_catch_signal(int signo);

#include <stdint.h>
// Sequentially consistent loads and stores of a 64-bit word shared by two threads (the poller's waiting thread
// and its loop's queue). `static inline`, so Swift inlines them: Swift's own `Atomic` needs macOS 15, newer than
// the package's floor.
static inline uint64_t csystem_atomic_load(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }
static inline void csystem_atomic_store(uint64_t *word, uint64_t value) { __atomic_store_n(word, value, __ATOMIC_SEQ_CST); }
#endif
