/* SPDX-License-Identifier: Apache-2.0 */
/* The API server's addresses, pinned for libcurl (CURLOPT_RESOLVE: it
 * tries them in turn). An address literal needs nothing. A name is
 * resolved at start, before the lock-down, and again on cdiplug-kube
 * before the first request after a failure to connect (or while it never
 * resolved): a kubeconfig naming a DNS host keeps working when the name
 * moves, and a name that does not resolve at start is not fatal. The
 * filter allows what glibc's resolver needs for that only with a "dra"
 * section (the api-sockets and api-dns groups, SECURITY.md).
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
/* A name that failed is looked up again at most this often: each lookup
 * may block cdiplug-kube for the resolver's timeout. */
#define RESOLVE_EVERY_MS 1000

/* "HOST:PORT:ADDR[,ADDR...]" for the addresses of res, in *ret. */
static int pin_entry(const struct kube_creds *c, const struct addrinfo *res, char **ret) {
        _cleanup_free_ char *entry = NULL;
        size_t n = 0;

        if (xasprintf(&entry, "%s:%u:", c->host, c->port) < 0)
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

int kube_resolve(struct kube *k, bool at_start) {
        const struct kube_creds *c = &k->creds;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        unsigned char tmp[sizeof(struct in6_addr)];
        _cleanup_free_ char *entry = NULL;
        uint64_t now = dp_now_ms();
        struct curl_slist *l;
        int r;

        if (inet_pton(AF_INET, c->host, tmp) == 1 || inet_pton(AF_INET6, c->host, tmp) == 1)
                return 0;
        k->resolve_named = true;
        if (!at_start && now < k->resolve_next_ms)
                return -EHOSTUNREACH;
        k->resolve_next_ms = now + RESOLVE_EVERY_MS;
        r = getaddrinfo(c->host, NULL, &hints, &res);
        if (r == 0) {
                r = pin_entry(c, res, &entry);
                freeaddrinfo(res);
        } else {
                if (at_start || !k->resolve_warned)
                        log_with(LOG_WARN, &(struct log_fields){ .path = c->source },
                                 "kube: cannot resolve the API server \"%s\" (from %s): %s; DRA "
                                 "waits and resolves it again before each attempt, the device "
                                 "plugins serve meanwhile",
                                 c->host, c->source, gai_strerror(r));
                k->resolve_warned = true;
                k->resolve_due = true;
                return -EHOSTUNREACH;
        }
        if (r < 0) {
                k->resolve_due = true;
                return r;
        }
        /* The cache entry is replaced, whatever libcurl held for it. */
        l = sym_curl_slist_append(NULL, entry);
        if (!l) {
                k->resolve_due = true;
                return -ENOMEM;
        }
        sym_curl_slist_free_all(k->resolve);
        k->resolve = l;
        k->resolve_due = false;
        k->resolve_warned = false;
        log_with(LOG_INFO, &(struct log_fields){ .path = c->source },
                 "kube: API server \"%s\" pinned to %s (%s)", c->host,
                 strchr(strchr(entry, ':') + 1, ':') + 1,
                 at_start ? "resolved at start" : "resolved again after a failure");
        return 0;
}
