/* SPDX-License-Identifier: Apache-2.0 */
/* The libcurl loader (see curl-dl.h for why the daemon does not link it). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "curl-dl.h"
#include "log.h"

__typeof__(curl_easy_cleanup) *sym_curl_easy_cleanup;
__typeof__(curl_easy_escape) *sym_curl_easy_escape;
__typeof__(curl_easy_getinfo) *sym_curl_easy_getinfo;
__typeof__(curl_easy_init) *sym_curl_easy_init;
__typeof__(curl_easy_setopt) *sym_curl_easy_setopt;
__typeof__(curl_easy_strerror) *sym_curl_easy_strerror;
__typeof__(curl_free) *sym_curl_free;
__typeof__(curl_global_init) *sym_curl_global_init;
__typeof__(curl_multi_add_handle) *sym_curl_multi_add_handle;
__typeof__(curl_multi_cleanup) *sym_curl_multi_cleanup;
__typeof__(curl_multi_info_read) *sym_curl_multi_info_read;
__typeof__(curl_multi_init) *sym_curl_multi_init;
__typeof__(curl_multi_perform) *sym_curl_multi_perform;
__typeof__(curl_multi_poll) *sym_curl_multi_poll;
__typeof__(curl_multi_remove_handle) *sym_curl_multi_remove_handle;
__typeof__(curl_multi_timeout) *sym_curl_multi_timeout;
__typeof__(curl_multi_wakeup) *sym_curl_multi_wakeup;
__typeof__(curl_slist_append) *sym_curl_slist_append;
__typeof__(curl_slist_free_all) *sym_curl_slist_free_all;
__typeof__(curl_url) *sym_curl_url;
__typeof__(curl_url_cleanup) *sym_curl_url_cleanup;
__typeof__(curl_url_get) *sym_curl_url_get;
__typeof__(curl_url_set) *sym_curl_url_set;
__typeof__(curl_version_info) *sym_curl_version_info;

/* The table: a name and where its address goes. The pointers are written
 * only once every name resolved, so a failed load leaves them all NULL. */
#define KUBE_CURL_ENTRY(f)                                                                         \
        { #f, (void **)&sym_##f }
static const struct {
        const char *name;
        void **dest;
} kube_curl_table[] = {
        KUBE_CURL_ENTRY(curl_easy_cleanup),
        KUBE_CURL_ENTRY(curl_easy_escape),
        KUBE_CURL_ENTRY(curl_easy_getinfo),
        KUBE_CURL_ENTRY(curl_easy_init),
        KUBE_CURL_ENTRY(curl_easy_setopt),
        KUBE_CURL_ENTRY(curl_easy_strerror),
        KUBE_CURL_ENTRY(curl_free),
        KUBE_CURL_ENTRY(curl_global_init),
        KUBE_CURL_ENTRY(curl_multi_add_handle),
        KUBE_CURL_ENTRY(curl_multi_cleanup),
        KUBE_CURL_ENTRY(curl_multi_info_read),
        KUBE_CURL_ENTRY(curl_multi_init),
        KUBE_CURL_ENTRY(curl_multi_perform),
        KUBE_CURL_ENTRY(curl_multi_poll),
        KUBE_CURL_ENTRY(curl_multi_remove_handle),
        KUBE_CURL_ENTRY(curl_multi_timeout),
        KUBE_CURL_ENTRY(curl_multi_wakeup),
        KUBE_CURL_ENTRY(curl_slist_append),
        KUBE_CURL_ENTRY(curl_slist_free_all),
        KUBE_CURL_ENTRY(curl_url),
        KUBE_CURL_ENTRY(curl_url_cleanup),
        KUBE_CURL_ENTRY(curl_url_get),
        KUBE_CURL_ENTRY(curl_url_set),
        KUBE_CURL_ENTRY(curl_version_info),
};
#undef KUBE_CURL_ENTRY
#define KUBE_CURL_NSYMS (sizeof(kube_curl_table) / sizeof(kube_curl_table[0]))

#define KUBE_CURL_INSTALL                                                                          \
        "the DRA API client needs libcurl >= " KUBE_CURL_MIN_TEXT                                  \
        " (install libcurl4 on Debian/Ubuntu, libcurl on Fedora/RHEL)"

int kube_curl_load_from(const char *soname) {
        __typeof__(curl_version_info) *version;
        const curl_version_info_data *v;
        void *addr[KUBE_CURL_NSYMS];
        const char *err;
        void *dl;

        /* RTLD_NOW: libcurl and everything it pulls are bound here, before
         * the lock-down; nothing is resolved lazily under the filter.
         * RTLD_NODELETE: never unloaded, even if a handle were closed; a
         * library refused below stays mapped, which only start-up (that
         * then fails) or a test ever sees. */
        dl = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!dl) {
                err = dlerror();
                log_error("kube: cannot load \"%s\" (%s): " KUBE_CURL_INSTALL, soname,
                          err ? err : "unknown error");
                return -ELIBACC;
        }
        for (size_t i = 0; i < KUBE_CURL_NSYMS; i++) {
                (void)dlerror();
                addr[i] = dlsym(dl, kube_curl_table[i].name);
                if (!addr[i]) {
                        err = dlerror();
                        log_error("kube: \"%s\" has no %s (%s): " KUBE_CURL_INSTALL, soname,
                                  kube_curl_table[i].name, err ? err : "NULL");
                        return -ELIBACC;
                }
        }
        /* Options the client sets are refused by an older library only at
         * run time, request by request: refuse it now. */
        version = dlsym(dl, "curl_version_info");
        v = version ? version(CURLVERSION_NOW) : NULL;
        if (!v || v->version_num < KUBE_CURL_MIN_VERSION) {
                log_error("kube: \"%s\" is libcurl %s: " KUBE_CURL_INSTALL, soname,
                          v && v->version ? v->version : "of unknown version");
                return -ENOTSUP;
        }
        for (size_t i = 0; i < KUBE_CURL_NSYMS; i++)
                *kube_curl_table[i].dest = addr[i];
        return 0;
}

static pthread_once_t kube_curl_once = PTHREAD_ONCE_INIT;
static int kube_curl_rc;

/* libcurl's global state (and OpenSSL's, reading its config file) must
 * come up once, before any thread and before the lock-down. */
static void kube_curl_load_once(void) {
        CURLcode c;

        kube_curl_rc = kube_curl_load_from(KUBE_CURL_SONAME);
        if (kube_curl_rc < 0)
                return;
        c = sym_curl_global_init(CURL_GLOBAL_DEFAULT);
        if (c != CURLE_OK) {
                log_error("kube: libcurl initialisation failed: %s", sym_curl_easy_strerror(c));
                kube_curl_rc = -ENOMEM;
        }
}

int kube_curl_load(void) {
        pthread_once(&kube_curl_once, kube_curl_load_once);
        return kube_curl_rc;
}
