/* SPDX-License-Identifier: Apache-2.0 */
/* This node's labels, followed on cdiplug-kube for the resources' "nodes"
 * selectors. One watch on the Node, fieldSelector metadata.name=NODE and
 * no resourceVersion: the API server then sends the Node as it is now (an
 * ADDED event) before its changes, so every (re)start of the watch doubles
 * as the read, and nothing needs a list or a resourceVersion kept. The
 * callback hears the labels only when they differ from the last it heard.
 * A failed watch is retried with the client's back-off; the labels heard
 * last stay in force meanwhile (an API server outage moves no resource).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

int kube_labels_follow(struct kube *k, kube_labels_fn *fn, void *ctx) {
        if (!k || !fn || k->started)
                return -EINVAL;
        k->labels_fn = fn;
        k->labels_ctx = ctx;
        return 0;
}

static int by_key(const void *a, const void *b) {
        return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The members of o, sorted by key, in *ret (malloc'd). */
static int sorted_members(const cJSON *o, size_t n, const cJSON ***ret) {
        const cJSON **v = calloc(n ? n : 1, sizeof(*v));
        const cJSON *it;
        size_t i = 0;

        if (!v)
                return -ENOMEM;
        cJSON_ArrayForEach(it, o) {
                if (i == n || !it->string) {
                        free(v);
                        return -EINVAL;
                }
                v[i++] = it;
        }
        qsort(v, n, sizeof(*v), by_key);
        *ret = v;
        return 0;
}

/* The sorted comparison, for objects of n members each whose orders differ. */
static bool equal_sorted(const cJSON *a, const cJSON *b, size_t n) {
        _cleanup_free_ const cJSON **va = NULL, **vb = NULL;
        bool same = true;

        if (sorted_members(a, n, &va) < 0 || sorted_members(b, n, &vb) < 0)
                return false;
        for (size_t i = 0; i < n && same; i++)
                same = strcmp(va[i]->string, vb[i]->string) == 0 &&
                       cJSON_Compare(va[i], vb[i], true);
        return same;
}

/* Linear where cJSON_Compare is not: it looks every key of one object up
 * in the other (n², 1.3 s of cdiplug-kube for 30,000 labels, with the
 * claim lookups waiting behind it). The API server writes a map's keys
 * sorted, so the two walk in step (about 1 ms for 30,000); only when the
 * keys part ways, with as many on both sides, are both sorted once (n log
 * n). A failure to sort counts as a change: one needless call, never a
 * lost one; so do duplicate keys whose values swapped places. */
bool kube_labels_equal(const cJSON *a, const cJSON *b) {
        const cJSON *x, *y;
        size_t n;

        if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
                return false;
        for (x = a->child, y = b->child; x && y; x = x->next, y = y->next) {
                if (!x->string || !y->string || strcmp(x->string, y->string) != 0)
                        break;
                if (!cJSON_Compare(x, y, true))
                        return false;
        }
        if (!x || !y)
                return !x && !y;
        n = (size_t)cJSON_GetArraySize(a);
        return n == (size_t)cJSON_GetArraySize(b) && equal_sorted(a, b, n);
}

/* Deleted, the Node has no labels: its resources selected by label go,
 * as they would on a node without them. */
static void labels_event(struct kube_xfer *x, const char *line, size_t len) {
        struct kube *k = x->k;
        _cleanup_(kube_cjson_deletep) cJSON *ev = NULL;
        _cleanup_(kube_cjson_deletep) cJSON *now = NULL;
        const cJSON *type;
        cJSON *obj, *md, *labels;

        /* Bounded like every answer: an event's bytes are, its tree too. */
        if (kube_parse(line, len, &ev) < 0) {
                x->watch_end = -EBADMSG;
                return;
        }
        type = cJSON_GetObjectItemCaseSensitive(ev, "type");
        obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
        if (!cJSON_IsString(type) || !cJSON_IsObject(obj)) {
                x->watch_end = -EBADMSG;
                return;
        }
        if (strcmp(type->valuestring, "ERROR") == 0) {
                x->watch_end = -EPROTO;
                return;
        }
        /* An open stream, whatever the event. */
        kube_watch_up(k, KUBE_WATCH_NODE, dp_now_ms());
        if (strcmp(type->valuestring, "BOOKMARK") == 0)
                return;
        md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
        if (strcmp(type->valuestring, "DELETED") != 0 && cJSON_IsObject(labels))
                now = cJSON_DetachItemViaPointer(md, labels);
        else
                now = cJSON_CreateObject();
        if (!now) {
                x->watch_end = -ENOMEM;
                return;
        }
        if (k->labels && kube_labels_equal(k->labels, now))
                return;
        cJSON_Delete(k->labels);
        k->labels = TAKE_PTR(now);
        k->labels_fn(k->labels_ctx, k->labels);
}

static size_t labels_write(struct kube_xfer *x, const char *p, size_t n) {
        return kube_xfer_lines(x, p, n, labels_event);
}

static void labels_start(struct kube *k, uint64_t now) {
        _cleanup_free_ char *sel = NULL, *path = NULL;
        char *esc = NULL;
        int r = -ENOMEM;

        if (xasprintf(&sel, "metadata.name=%s", k->node) == 0)
                esc = sym_curl_easy_escape(NULL, sel, 0);
        if (esc && xasprintf(&path, "/api/v1/nodes?watch=true&timeoutSeconds=%d&fieldSelector=%s",
                             KUBE_WATCH_SECONDS_MIN +
                                     (int)kube_jitter_ms(k, KUBE_WATCH_SECONDS_MAX -
                                                                    KUBE_WATCH_SECONDS_MIN),
                             esc) == 0)
                r = kube_xfer_new(k, KX_WATCH, "GET", path, NULL, KUBE_EVENT_MAX, &k->labels_x);
        sym_curl_free(esc);
        if (r < 0) {
                k->labels_x = NULL;
                k->labels_due_ms =
                        now + kube_backoff_next(k, &k->labels_failures, KUBE_BACKOFF_MAX_MS, NULL);
                return;
        }
        /* Before any data: it comes only from curl_multi_perform, on this
         * same thread, after this returns. */
        k->labels_x->stream = labels_write;
}

void kube_labels_step(struct kube *k, uint64_t now) {
        if (k->labels_fn && !k->labels_x && now >= k->labels_due_ms)
                labels_start(k, now);
}

uint64_t kube_labels_due(const struct kube *k, uint64_t now) {
        return k->labels_fn && !k->labels_x && k->labels_due_ms > now ? k->labels_due_ms : 0;
}

void kube_labels_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now) {
        long code = kube_xfer_code(x);
        int cls = kube_xfer_class(x, rc);
        /* Every watch starts with the Node (ADDED): ending within a second
         * is a server in trouble, backed off as the slices' watch is. */
        bool quick = now - x->started_ms < KUBE_WATCH_MIN_MS;
        uint64_t wait;
        char why[320];

        k->labels_x = NULL;
        if (!quick && now - x->started_ms >= KUBE_WATCH_HEALTHY_MS) {
                k->labels_failures = 0;
                kube_watch_healthy(k, KUBE_WATCH_NODE);
        }
        if (!x->watch_end && code == 200 && rc == CURLE_OK && !quick) {
                /* timeoutSeconds ran out: watch again (it re-reads the Node). */
                k->labels_due_ms = 0;
                return;
        }
        if (x->watch_end || (code == 200 && rc == CURLE_OK))
                cls = KUBE_ERR_CLIENT;
        else if (cls < 0)
                cls = KUBE_ERR_CONNECT;
        kube_count_error(k, cls, x->watch_end ? NULL : x);
        if (code == 401)
                kube_token_stale(k);
        wait = kube_backoff_next(
                k, &k->labels_failures,
                cls == KUBE_ERR_CONNECT ? KUBE_BACKOFF_CONNECT_MAX_MS : KUBE_BACKOFF_MAX_MS, x);
        k->labels_due_ms = now + wait;
        if (x->watch_end)
                snprintf(why, sizeof(why), "%s",
                         x->watch_end == -EMSGSIZE ? "an event larger than 1 MiB"
                         : x->watch_end == -EPROTO ? "an ERROR event"
                                                   : "something that is not a Node event");
        else if (code == 200 && rc == CURLE_OK)
                snprintf(why, sizeof(why), "the server ended it at once");
        else
                kube_xfer_describe(x, rc, why, sizeof(why));
        /* The last known labels stay in force meanwhile. */
        kube_watch_down(k, KUBE_WATCH_NODE, why, wait, now);
}
