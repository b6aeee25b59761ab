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
#define KUBE_CURL_SYM(f) extern __typeof__(f) *sym_##f
KUBE_CURL_SYM(curl_easy_cleanup);
KUBE_CURL_SYM(curl_easy_escape);
KUBE_CURL_SYM(curl_easy_getinfo);
KUBE_CURL_SYM(curl_easy_init);
KUBE_CURL_SYM(curl_easy_setopt);
KUBE_CURL_SYM(curl_easy_strerror);
KUBE_CURL_SYM(curl_free);
KUBE_CURL_SYM(curl_global_init);
KUBE_CURL_SYM(curl_multi_add_handle);
KUBE_CURL_SYM(curl_multi_cleanup);
KUBE_CURL_SYM(curl_multi_info_read);
KUBE_CURL_SYM(curl_multi_init);
KUBE_CURL_SYM(curl_multi_perform);
KUBE_CURL_SYM(curl_multi_poll);
KUBE_CURL_SYM(curl_multi_remove_handle);
KUBE_CURL_SYM(curl_multi_timeout);
KUBE_CURL_SYM(curl_multi_wakeup);
KUBE_CURL_SYM(curl_slist_append);
KUBE_CURL_SYM(curl_slist_free_all);
KUBE_CURL_SYM(curl_url);
KUBE_CURL_SYM(curl_url_cleanup);
KUBE_CURL_SYM(curl_url_get);
KUBE_CURL_SYM(curl_url_set);
KUBE_CURL_SYM(curl_version_info);
#undef KUBE_CURL_SYM

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
