#include "CCurl.h"

CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) { return curl_easy_setopt(handle, option, value); }
CURLcode ccurl_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) { return curl_easy_setopt(handle, option, value); }
CURLcode ccurl_easy_setopt_ptr(CURL *handle, CURLoption option, void *value) { return curl_easy_setopt(handle, option, value); }
CURLcode ccurl_easy_setopt_str(CURL *handle, CURLoption option, const char *value) { return curl_easy_setopt(handle, option, value); }
CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) { return curl_easy_setopt(handle, option, value); }
CURLcode ccurl_easy_setopt_data_callback(CURL *handle, CURLoption option, ccurl_data_callback callback) { return curl_easy_setopt(handle, option, callback); }

CURLcode ccurl_easy_setopt_seek_callback(CURL *handle, ccurl_seek_callback callback) { return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback); }
CURLcode ccurl_easy_setopt_prereq_callback(CURL *handle, ccurl_prereq_callback callback) { return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, callback); }
CURLcode ccurl_easy_setopt_opensocket_callback(CURL *handle, ccurl_opensocket_callback callback) { return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback); }
CURLcode ccurl_easy_setopt_closesocket_callback(CURL *handle, ccurl_closesocket_callback callback) { return curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, callback); }

CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) { return curl_easy_getinfo(handle, info, value); }
CURLcode ccurl_easy_getinfo_str(CURL *handle, CURLINFO info, char **value) { return curl_easy_getinfo(handle, info, value); }

void *ccurl_easy_openssl_ssl(CURL *handle) {
    struct curl_tlssessioninfo *info = NULL;
    if(curl_easy_getinfo(handle, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info) return NULL;
    return info->backend == CURLSSLBACKEND_OPENSSL ? info->internals : NULL;
}

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }
CURLSHcode ccurl_share_setopt_long(CURLSH *share, CURLSHoption option, long value) { return curl_share_setopt(share, option, value); }
CURLMcode ccurl_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value) { return curl_multi_setopt(multi, option, value); }
CURLMcode ccurl_multi_setopt_socket_callback(CURLM *multi, ccurl_socket_callback callback) { return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback); }
CURLMcode ccurl_multi_setopt_timer_callback(CURLM *multi, ccurl_timer_callback callback) { return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback); }
