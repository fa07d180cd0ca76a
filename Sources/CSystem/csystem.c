#ifdef __linux__
#define _GNU_SOURCE
#endif
#include "CSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#ifdef __linux__
int csystem_accept_nonblocking(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif

// Written once under the lock, before any handler that reads them is installed.
static pthread_mutex_t signal_pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static int signal_pipe_read = -1;
static int signal_pipe_write = -1;

static int set_flags(int fd) {
    int status = fcntl(fd, F_GETFL);
    if (status < 0 || fcntl(fd, F_SETFL, status | O_NONBLOCK) < 0) return -1;
    int descriptor = fcntl(fd, F_GETFD);
    if (descriptor < 0 || fcntl(fd, F_SETFD, descriptor | FD_CLOEXEC) < 0) return -1;
    return 0;
}

int csystem_signal_pipe(void) {
    pthread_mutex_lock(&signal_pipe_lock);
    if (signal_pipe_read < 0) {
        int ends[2];
#ifdef __linux__
        // Both flags at once: no window in which a fork and exec elsewhere inherits the pipe.
        int made = pipe2(ends, O_CLOEXEC | O_NONBLOCK);
#else
        int made = pipe(ends);
#endif
        if (made == 0) {
            if (set_flags(ends[0]) == 0 && set_flags(ends[1]) == 0) {
                signal_pipe_read = ends[0];
                signal_pipe_write = ends[1];
            } else {
                int saved = errno;
                close(ends[0]);
                close(ends[1]);
                errno = saved;
            }
        }
    }
    int result = signal_pipe_read;
    pthread_mutex_unlock(&signal_pipe_lock);
    return result;
}

static void write_signal_number(int signo) {
    int saved = errno;
    unsigned char byte = (unsigned char)signo;
    ssize_t written = write(signal_pipe_write, &byte, 1);
    (void)written;
    errno = saved;
}

int csystem_catch_signal(int signo) {
    pthread_mutex_lock(&signal_pipe_lock);
    int ready = signal_pipe_write >= 0;
    pthread_mutex_unlock(&signal_pipe_lock);
    if (!ready) {
        errno = EBADF;
        return -1;
    }
    struct sigaction action = {0};
    action.sa_handler = write_signal_number;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(signo, &action, NULL);
}
