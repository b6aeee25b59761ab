/* SPDX-License-Identifier: Apache-2.0 */
/* The libcurl loader (see curl-dl.h for why the daemon does not link it). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "curl-dl.h"
#include "log.h"

#define KUBE_CURL_DEF(f) __typeof__(f) *sym_##f
KUBE_CURL_DEF(curl_easy_cleanup);
KUBE_CURL_DEF(curl_easy_escape);
KUBE_CURL_DEF(curl_easy_getinfo);
KUBE_CURL_DEF(curl_easy_init);
KUBE_CURL_DEF(curl_easy_setopt);
KUBE_CURL_DEF(curl_easy_strerror);
KUBE_CURL_DEF(curl_free);
KUBE_CURL_DEF(curl_global_init);
KUBE_CURL_DEF(curl_multi_add_handle);
KUBE_CURL_DEF(curl_multi_cleanup);
KUBE_CURL_DEF(curl_multi_info_read);
KUBE_CURL_DEF(curl_multi_init);
KUBE_CURL_DEF(curl_multi_perform);
KUBE_CURL_DEF(curl_multi_poll);
KUBE_CURL_DEF(curl_multi_remove_handle);
KUBE_CURL_DEF(curl_multi_timeout);
KUBE_CURL_DEF(curl_multi_wakeup);
KUBE_CURL_DEF(curl_slist_append);
KUBE_CURL_DEF(curl_slist_free_all);
KUBE_CURL_DEF(curl_url);
KUBE_CURL_DEF(curl_url_cleanup);
KUBE_CURL_DEF(curl_url_get);
KUBE_CURL_DEF(curl_url_set);
KUBE_CURL_DEF(curl_version_info);
#undef KUBE_CURL_DEF

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
        void *addr[KUBE_CURL_NSYMS];
        const char *err;
        void *dl;

        /* RTLD_NOW: libcurl and everything it pulls are bound here, before
         * the lock-down; nothing is resolved lazily under the filter.
         * RTLD_NODELETE: never unloaded, even if a handle were closed. */
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
        {
                /* Options the client sets are refused by an older library
                 * only at run time, request by request: refuse it now. */
                const curl_version_info_data *v = ((
                        __typeof__(curl_version_info) *)addr[KUBE_CURL_NSYMS - 1])(CURLVERSION_NOW);
                if (!v || v->version_num < KUBE_CURL_MIN_VERSION) {
                        log_error("kube: \"%s\" is libcurl %s: " KUBE_CURL_INSTALL, soname,
                                  v && v->version ? v->version : "of unknown version");
                        return -ENOTSUP;
                }
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
