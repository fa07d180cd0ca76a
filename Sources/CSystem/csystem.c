#ifdef __linux__
#define _GNU_SOURCE
#endif
#include "CSystem.h"

#ifdef __linux__
int csystem_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif
