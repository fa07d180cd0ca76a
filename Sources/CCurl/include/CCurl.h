// Typed wrappers around libcurl's variadic entry points, which Swift cannot call,
// and constants defined as macro expressions, which Swift does not import.
#ifndef SSE_RELAY_CCURL_H
#define SSE_RELAY_CCURL_H

#include <curl/curl.h>

typedef size_t (*ccurl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*ccurl_seek_callback)(void *userp, curl_off_t offset, int origin);
typedef int (*ccurl_prereq_callback)(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port);
typedef int (*ccurl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp);
typedef int (*ccurl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);
typedef curl_socket_t (*ccurl_opensocket_callback)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
typedef int (*ccurl_closesocket_callback)(void *clientp, curl_socket_t item);

CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode ccurl_easy_setopt_ptr(CURL *handle, CURLoption option, void *value);
CURLcode ccurl_easy_setopt_str(CURL *handle, CURLoption option, const char *value);
CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode ccurl_easy_setopt_data_callback(CURL *handle, CURLoption option, ccurl_data_callback callback);
CURLcode ccurl_easy_setopt_seek_callback(CURL *handle, ccurl_seek_callback callback);
CURLcode ccurl_easy_setopt_prereq_callback(CURL *handle, ccurl_prereq_callback callback);
CURLcode ccurl_easy_setopt_opensocket_callback(CURL *handle, ccurl_opensocket_callback callback);
CURLcode ccurl_easy_setopt_closesocket_callback(CURL *handle, ccurl_closesocket_callback callback);

CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode ccurl_easy_getinfo_str(CURL *handle, CURLINFO info, char **value);
/// The OpenSSL `SSL *` of the connection the handle uses now (CURLINFO_TLS_SSL_PTR), or NULL: no TLS, or another
/// TLS backend.
void *ccurl_easy_openssl_ssl(CURL *handle);

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLSHcode ccurl_share_setopt_long(CURLSH *share, CURLSHoption option, long value);
CURLMcode ccurl_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value);
CURLMcode ccurl_multi_setopt_socket_callback(CURLM *multi, ccurl_socket_callback callback);
CURLMcode ccurl_multi_setopt_timer_callback(CURLM *multi, ccurl_timer_callback callback);

static const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static const size_t ccurl_readfunc_abort = CURL_READFUNC_ABORT;
static const int ccurl_pause_recv = CURLPAUSE_RECV;
static const curl_socket_t ccurl_socket_timeout = CURL_SOCKET_TIMEOUT;

#endif
