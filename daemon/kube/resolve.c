/* SPDX-License-Identifier: Apache-2.0 */
/* The API server's addresses, pinned for libcurl (CURLOPT_RESOLVE: it
 * tries them in turn). An address literal needs nothing. A name is
 * resolved at start, before the lock-down, and again after a failure to
 * connect (or while it never resolved): a kubeconfig naming a DNS host
 * keeps working when the name moves, and a name that does not resolve at
 * start is not fatal. The lookups after start run on a thread of their
 * own, cdiplug-dns, so a resolver that hangs never holds cdiplug-kube (a
 * Prepare's lookup, the slices), and until one succeeds the last address
 * that worked stays pinned: a DNS outage alone fails nothing while the
 * API server answers. The filter allows what glibc's resolver needs for
 * that only with a "dra" section or node labels (the api-sockets and
 * api-dns groups, SECURITY.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

#define PIN_MAX 8
/* A name is looked up again at most this often. */
#define RESOLVE_EVERY_MS 1000

/* Shared by cdiplug-kube and cdiplug-dns, freed by whichever lets go
 * last: kube_free() does not wait for a lookup the resolver holds. */
struct kube_dns {
        pthread_mutex_t mu;
        pthread_cond_t cond;
        unsigned refs;
        bool want, stop;
        char *host;
        unsigned port;
        CURLM *multi; /* woken when a lookup ends; NULL once the kube is gone */
        bool done;    /* a lookup ended: entry, or err */
        char *entry;  /* "HOST:PORT:ADDR,..." */
        int err;      /* -errno */
        int gai;      /* getaddrinfo's error, 0: none */
};

/* "HOST:PORT:ADDR[,ADDR...]" for the addresses of res, in *ret. */
static int pin_entry(const char *host, unsigned port, const struct addrinfo *res, char **ret) {
        _cleanup_free_ char *entry = NULL;
        size_t n = 0;

        if (xasprintf(&entry, "%s:%u:", host, port) < 0)
                return -ENOMEM;
        for (const struct addrinfo *ai = res; ai && n < PIN_MAX; ai = ai->ai_next) {
                char addr[INET6_ADDRSTRLEN], *next = NULL;

                if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL, 0,
                                NI_NUMERICHOST) != 0)
                        continue;
                if (xasprintf(&next, ai->ai_family == AF_INET6 ? "%s%s[%s]" : "%s%s%s", entry,
                              n ? "," : "", addr) < 0)
                        return -ENOMEM;
                free(entry);
                entry = next;
                n++;
        }
        if (n == 0)
                return -EHOSTUNREACH;
        *ret = TAKE_PTR(entry);
        return 0;
}

/* One lookup: 0 with *entry, or -errno with *gai getaddrinfo's error
 * (0: none, the failure was ours). */
static int look_up(const char *host, unsigned port, char **entry, int *gai) {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        int r = getaddrinfo(host, NULL, &hints, &res);

        *gai = r;
        if (r == EAI_SYSTEM && errno > 0)
                return -errno;
        if (r != 0)
                return r == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
        r = pin_entry(host, port, res, entry);
        freeaddrinfo(res);
        return r;
}

static const char *why(int err, int gai) {
        return gai && gai != EAI_SYSTEM ? gai_strerror(gai) : strerror(-err);
}

/* What libcurl takes, logged: the addresses after "HOST:PORT:". Under
 * net_mu once the threads run: each transfer copies the list. */
static int pin(struct kube *k, const char *entry, const char *how) {
        struct curl_slist *l = sym_curl_slist_append(NULL, entry);

        if (!l)
                return -ENOMEM;
        /* The cache entry is replaced, whatever libcurl held for it. */
        sym_curl_slist_free_all(k->resolve);
        k->resolve = l;
        k->resolve_warned = false;
        log_with(LOG_INFO, &(struct log_fields){ .path = k->creds.source },
                 "kube: API server \"%s\" pinned to %s (%s)", k->creds.host,
                 strchr(strchr(entry, ':') + 1, ':') + 1, how);
        return 0;
}

static void failed(struct kube *k, int err, int gai, bool at_start) {
        const struct kube_creds *c = &k->creds;

        if (at_start || !k->resolve_warned) {
                if (k->resolve)
                        log_with(LOG_WARN, &(struct log_fields){ .path = c->source },
                                 "kube: cannot resolve the API server \"%s\" (from %s) again: "
                                 "%s; the last address that worked stays in use",
                                 c->host, c->source, why(err, gai));
                else
                        log_with(LOG_WARN, &(struct log_fields){ .path = c->source },
                                 "kube: cannot resolve the API server \"%s\" (from %s): %s; DRA "
                                 "waits and resolves it again before each attempt, the device "
                                 "plugins serve meanwhile",
                                 c->host, c->source, why(err, gai));
        }
        k->resolve_warned = true;
}

int kube_resolve(struct kube *k) {
        const struct kube_creds *c = &k->creds;
        unsigned char tmp[sizeof(struct in6_addr)];
        _cleanup_free_ char *entry = NULL;
        int r, gai;

        if (inet_pton(AF_INET, c->host, tmp) == 1 || inet_pton(AF_INET6, c->host, tmp) == 1)
                return 0;
        k->resolve_named = true;
        k->resolve_next_ms = dp_now_ms() + RESOLVE_EVERY_MS;
        r = look_up(c->host, c->port, &entry, &gai);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !entry) {
                failed(k, r < 0 ? r : -EHOSTUNREACH, gai, true);
                k->resolve_due = true;
                return -EHOSTUNREACH;
        }
        r = pin(k, entry, "resolved at start");
        k->resolve_due = r < 0;
        return r;
}

static void dns_unref(struct kube_dns *d) {
        bool last;

        pthread_mutex_lock(&d->mu);
        last = --d->refs == 0;
        pthread_mutex_unlock(&d->mu);
        if (!last)
                return;
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cond);
        free(d->host);
        free(d->entry);
        free(d);
}

static void *dns_main(void *arg) {
        struct kube_dns *d = arg;

        pthread_mutex_lock(&d->mu);
        for (;;) {
                char *entry = NULL;
                int r, gai;

                while (!d->want && !d->stop)
                        pthread_cond_wait(&d->cond, &d->mu);
                if (d->stop)
                        break;
                d->want = false;
                pthread_mutex_unlock(&d->mu);
                r = look_up(d->host, d->port, &entry, &gai);
                pthread_mutex_lock(&d->mu);
                free(d->entry);
                d->entry = entry;
                d->err = r;
                d->gai = gai;
                d->done = true;
                if (d->multi)
                        sym_curl_multi_wakeup(d->multi);
        }
        pthread_mutex_unlock(&d->mu);
        dns_unref(d);
        return NULL;
}

int kube_resolve_start(struct kube *k) {
        struct kube_dns *d;
        pthread_t t;
        int r;

        if (!k->resolve_named)
                return 0;
        d = calloc(1, sizeof(*d));
        if (!d || !(d->host = strdup(k->creds.host))) {
                free(d);
                return -ENOMEM;
        }
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->cond, NULL);
        d->port = k->creds.port;
        d->multi = k->multi;
        d->refs = 2;
        r = -pthread_create(&t, NULL, dns_main, d);
        if (r < 0) {
                d->refs = 1;
                dns_unref(d);
                return r;
        }
        pthread_setname_np(t, "cdiplug-dns");
        pthread_detach(t);
        k->dns = d;
        return 0;
}

void kube_resolve_stop(struct kube *k) {
        struct kube_dns *d = k->dns;

        if (!d)
                return;
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        d->multi = NULL;
        pthread_cond_signal(&d->cond);
        pthread_mutex_unlock(&d->mu);
        k->dns = NULL;
        dns_unref(d);
}

void kube_resolve_step(struct kube *k, uint64_t now) {
        struct kube_dns *d = k->dns;
        char *entry = NULL;
        bool done;
        int err, gai;

        if (!d)
                return;
        /* net_mu, then the resolver's: never the other way round. */
        pthread_mutex_lock(&k->net_mu);
        pthread_mutex_lock(&d->mu);
        done = d->done;
        d->done = false;
        entry = TAKE_PTR(d->entry);
        err = d->err;
        gai = d->gai;
        if (k->resolve_due && now >= k->resolve_next_ms) {
                /* Asked at most once a RESOLVE_EVERY_MS; meanwhile the
                 * last address that worked stays pinned. */
                d->want = true;
                k->resolve_due = false;
                k->resolve_next_ms = now + RESOLVE_EVERY_MS;
                pthread_cond_signal(&d->cond);
        }
        pthread_mutex_unlock(&d->mu);
        if (done && err == 0 && (!entry || pin(k, entry, "resolved again after a failure") < 0)) {
                err = -ENOMEM;
                gai = 0;
        }
        if (done && err == 0)
                k->resolve_due = false;
        /* With no address at all, the next attempt asks again. */
        if (done && err != 0)
                failed(k, err, gai, false);
        pthread_mutex_unlock(&k->net_mu);
        free(entry);
}

uint64_t kube_resolve_due(struct kube *k, uint64_t now) {
        uint64_t due;

        pthread_mutex_lock(&k->net_mu);
        due = k->dns && k->resolve_due && k->resolve_next_ms > now ? k->resolve_next_ms : 0;
        pthread_mutex_unlock(&k->net_mu);
        return due;
}

int kube_resolve_pins(struct kube *k, struct curl_slist **ret) {
        struct curl_slist *copy = NULL;
        int r = 0;

        *ret = NULL;
        pthread_mutex_lock(&k->net_mu);
        if (k->resolve_named && !k->resolve)
                r = -EHOSTUNREACH;
        /* A copy each: cdiplug-kube may pin new addresses (freeing the
         * list) before a transfer made on cdiplug-claims has started. */
        for (const struct curl_slist *l = k->resolve; l && r == 0; l = l->next) {
                struct curl_slist *n = sym_curl_slist_append(copy, l->data);
                if (!n)
                        r = -ENOMEM;
                else
                        copy = n;
        }
        pthread_mutex_unlock(&k->net_mu);
        if (r == -EHOSTUNREACH)
                kube_resolve_ask(k);
        if (r < 0) {
                sym_curl_slist_free_all(copy);
                return r;
        }
        *ret = copy;
        return 0;
}

void kube_resolve_ask(struct kube *k) {
        if (!k->resolve_named)
                return;
        pthread_mutex_lock(&k->net_mu);
        k->resolve_due = true;
        pthread_mutex_unlock(&k->net_mu);
        /* Its step runs on cdiplug-kube. */
        sym_curl_multi_wakeup(k->multi);
}
