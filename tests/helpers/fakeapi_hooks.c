/* SPDX-License-Identifier: Apache-2.0 */
/* Ready-made fakeapi hooks (fakeapi_hooks.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fakeapi_hooks.h"

static const char chunked[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n";

static void pause_us(unsigned us) {
        struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

        nanosleep(&ts, NULL);
}

static bool flip(struct fakeapi_peer *peer, const struct fakeapi_flips *f, unsigned i) {
        char line[512];
        const char *zone = i + 1 == f->n ? "a" : i % 2 ? "b" : "c";
        int w = snprintf(line, sizeof(line),
                         "{\"type\":\"%s\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\","
                         "\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":"
                         "\"%s\",\"example.com/zone\":\"%s\",\"example.com/flip\":\"f%u\"}}}}\n",
                         i ? "MODIFIED" : "ADDED", f->node, f->node, zone, i);

        return w > 0 && (size_t)w < sizeof(line) && fakeapi_peer_chunk(peer, line, (size_t)w);
}

bool fakeapi_flips_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                        const char *query, bool watch, bool *keep) {
        struct fakeapi_flips *f = ctx;
        bool ok;

        (void)method;
        if (!watch || strcmp(path, "/api/v1/nodes") != 0 || !query ||
            !strstr(query, "fieldSelector") || atomic_exchange(&f->started, true))
                return false;
        ok = fakeapi_peer_send(peer, chunked, sizeof(chunked) - 1);
        for (unsigned i = 0; ok && i < f->n; i++) {
                ok = flip(peer, f, i);
                atomic_fetch_add(&f->sent, 1);
                if (f->interval_us)
                        pause_us(f->interval_us);
        }
        while (ok && !atomic_load(&f->release))
                pause_us(20000);
        *keep = false;
        return true;
}

bool fakeapi_hold_hook(void *ctx, struct fakeapi_peer *peer, const char *method, const char *path,
                       const char *query, bool watch, bool *keep) {
        struct fakeapi_hold *h = ctx;

        (void)peer;
        (void)method;
        (void)watch;
        (void)keep;
        if (strncmp(path, h->prefix, strlen(h->prefix)) != 0 ||
            (h->query_has && (!query || !strstr(query, h->query_has))))
                return false;
        atomic_fetch_add(&h->held, 1);
        while (!atomic_load(&h->release))
                pause_us(20000);
        atomic_fetch_sub(&h->held, 1);
        return false;
}
