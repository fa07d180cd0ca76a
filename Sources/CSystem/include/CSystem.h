// System headers Glibc's Swift module does not export (epoll), for the event loops' poller.
#ifndef SSE_RELAY_CSYSTEM_H
#define SSE_RELAY_CSYSTEM_H
#ifdef __linux__
#include <sys/epoll.h>
#endif
#endif
