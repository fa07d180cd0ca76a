// `make sanitize` builds this with AddressSanitizer, together with Sources/COpenSSL/shim.c, and runs it.
//
// A thread that used OpenSSL and ends while the process exits must not leave its OpenSSL state behind. Each
// thread's error queue (ERR_STATE, 904 bytes) and random generators live in thread-local storage, freed by a
// thread-exit destructor. OpenSSL's exit-time cleanup (OPENSSL_cleanup, an atexit handler registered on its first
// use) deletes that destructor's key: a thread ending after it leaks its state. In the relay's test process that
// thread is a Dispatch worker that ran curl's TLS for an event loop, and ends when idle for 5 s; LeakSanitizer
// once reported two such queues (1 808 bytes, stack cut at CRYPTO_zalloc). The shim turns the exit-time cleanup
// off (OPENSSL_INIT_NO_ATEXIT) before main.
//
// Here the thread ends in an atexit handler registered before any OpenSSL call of main, so after OpenSSL's own
// would run, and LeakSanitizer checks right then. Without the shim's constructor: "904 byte(s) leaked", exit 1.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/err.h>
#include <sanitizer/lsan_interface.h>
#include "COpenSSL.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int stage = 0; // 1: the worker used OpenSSL; 2: the worker may end
static pthread_t worker;

static void *work(void *unused) {
    uint8_t digest[32];
    (void)unused;
    ERR_clear_error(); // makes this thread's error queue
    if (!cossl_sha256((const uint8_t *)"relay", 5, digest)) abort();
    pthread_mutex_lock(&lock);
    stage = 1;
    pthread_cond_broadcast(&changed);
    while (stage != 2) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void end_worker_then_check(void) {
    pthread_mutex_lock(&lock);
    stage = 2;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(worker, NULL);
    __lsan_do_leak_check(); // exits with an error when something leaked
    fprintf(stderr, "openssl_exit_thread: no leak\n");
}

int main(void) {
    if (atexit(end_worker_then_check) != 0 || pthread_create(&worker, NULL, work, NULL) != 0) return 2;
    pthread_mutex_lock(&lock);
    while (stage != 1) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    return 0;
}
