// System headers and calls Glibc's Swift module does not export (epoll, accept4), for the event loops.
#ifndef SSE_RELAY_CSYSTEM_H
#define SSE_RELAY_CSYSTEM_H
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/socket.h>

// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: the accepted socket is ready for the poller in one call.
int csystem_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length);
#endif
#endif
