// C helpers for the relay-bench executable (fake upstream and load client): epoll, timerfd, accept4 and
// socket set-up that Glibc's Swift module does not export, plus a CLOCK_MONOTONIC reader. Linux only.
#ifndef SSE_RELAY_CBENCHSUPPORT_H
#define SSE_RELAY_CBENCHSUPPORT_H

#include <stdint.h>
#include <stddef.h>

#ifdef __linux__
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

/// CLOCK_MONOTONIC in nanoseconds (shared by every process on the machine).
static inline uint64_t cbs_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

/// A non-blocking listening TCP socket on host:port (port 0 picks one), or -1 (errno set).
int cbs_listen(const char *host, int port, int backlog);
/// The local port a socket is bound to, or -1.
int cbs_local_port(int fd);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC and TCP_NODELAY set; -1 with errno on failure.
int cbs_accept(int listen_fd);
/// A non-blocking connect to an IPv4 host:port with TCP_NODELAY; returns the fd (connect may be in progress)
/// or -1 (errno set).
int cbs_connect(const char *host, int port);
/// SO_ERROR of a socket (0 once a non-blocking connect succeeded).
int cbs_socket_error(int fd);
/// A non-blocking CLOCK_MONOTONIC timerfd, or -1.
int cbs_timer_create(void);
/// Arms the timerfd to fire once at the absolute CLOCK_MONOTONIC time `at_ns` (0 disarms).
int cbs_timer_set(int tfd, uint64_t at_ns);
/// Closes with SO_LINGER 0 (sends RST).
void cbs_close_reset(int fd);
/// Raises RLIMIT_NOFILE's soft limit to at most `want` (bounded by the hard limit); returns the new soft limit.
long cbs_raise_nofile(long want);

#endif
