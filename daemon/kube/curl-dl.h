/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl, loaded on demand. The daemon is not linked with libcurl: Debian's
 * libcurl4 pulls some thirty libraries (ldap, krb5, ssh2, nghttp2, ...)
 * whose relocations and initialisers cost every daemon about 1 MB of
 * RssAnon, also one that serves device plugins only. kube_new() loads it
 * (before the lock-down, RTLD_NOW so nothing is bound later) and every
 * call goes through one of the pointers below, resolved once. libcurl's
 * headers still give the types and constants.
 */
#pragma once

#include <curl/curl.h>

/* The soname the loader asks for, and the oldest libcurl whose API the
 * client uses (CURLOPT_PROTOCOLS_STR is 7.85.0). */
#define KUBE_CURL_SONAME "libcurl.so.4"
#define KUBE_CURL_MIN_VERSION 0x075500
#define KUBE_CURL_MIN_TEXT "7.85.0"

/* One pointer per libcurl function the client calls; NULL until
 * kube_curl_load() succeeded. */
extern __typeof__(curl_easy_cleanup) *sym_curl_easy_cleanup;
extern __typeof__(curl_easy_escape) *sym_curl_easy_escape;
extern __typeof__(curl_easy_getinfo) *sym_curl_easy_getinfo;
extern __typeof__(curl_easy_init) *sym_curl_easy_init;
extern __typeof__(curl_easy_setopt) *sym_curl_easy_setopt;
extern __typeof__(curl_easy_strerror) *sym_curl_easy_strerror;
extern __typeof__(curl_free) *sym_curl_free;
extern __typeof__(curl_global_init) *sym_curl_global_init;
extern __typeof__(curl_multi_add_handle) *sym_curl_multi_add_handle;
extern __typeof__(curl_multi_cleanup) *sym_curl_multi_cleanup;
extern __typeof__(curl_multi_info_read) *sym_curl_multi_info_read;
extern __typeof__(curl_multi_init) *sym_curl_multi_init;
extern __typeof__(curl_multi_perform) *sym_curl_multi_perform;
extern __typeof__(curl_multi_poll) *sym_curl_multi_poll;
extern __typeof__(curl_multi_remove_handle) *sym_curl_multi_remove_handle;
extern __typeof__(curl_multi_timeout) *sym_curl_multi_timeout;
extern __typeof__(curl_multi_wakeup) *sym_curl_multi_wakeup;
extern __typeof__(curl_slist_append) *sym_curl_slist_append;
extern __typeof__(curl_slist_free_all) *sym_curl_slist_free_all;
extern __typeof__(curl_url) *sym_curl_url;
extern __typeof__(curl_url_cleanup) *sym_curl_url_cleanup;
extern __typeof__(curl_url_get) *sym_curl_url_get;
extern __typeof__(curl_url_set) *sym_curl_url_set;
extern __typeof__(curl_version_info) *sym_curl_version_info;

/* Loads KUBE_CURL_SONAME, resolves every pointer and starts libcurl's
 * global state, once per process; later calls return the first result.
 * 0, or -ELIBACC (library or a function missing), -ENOTSUP (older than
 * KUBE_CURL_MIN_TEXT), -ENOMEM (curl_global_init failed), each logged
 * with the library's name and what to install. Never unloaded: libcurl's
 * and OpenSSL's global state cannot be torn down safely. */
int kube_curl_load(void);

/* The same from a given soname, without the once: for the tests of a
 * missing library. Leaves the pointers untouched when it fails. */
int kube_curl_load_from(const char *soname);
