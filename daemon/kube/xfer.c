/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTPS transfer to the API server on the multi handle: TLS always
 * verified (libcurl's default, never turned off), the host pinned to the
 * address resolved before the lock-down, a bearer token or client
 * certificate, and a budget of bytes and time for every answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube-internal.h"
#include "log.h"
#include "loop.h"

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud) {
        struct kube_xfer *x = ud;
        size_t n = size * nmemb;

        if (x->stream)
                return x->stream(x, p, n);
        if (n > x->limit - x->len) {
                /* Returning short makes libcurl fail the transfer. */
                x->too_big = true;
                return 0;
        }
        if (x->len + n + 1 > x->cap) {
                size_t cap = x->cap ? x->cap : 16384;
                char *nb;

                while (cap < x->len + n + 1)
                        cap *= 2;
                if (cap > x->limit + 1)
                        cap = x->limit + 1;
                nb = realloc(x->buf, cap);
                if (!nb)
                        return 0;
                x->buf = nb;
                x->cap = cap;
        }
        memcpy(x->buf + x->len, p, n);
        x->len += n;
        x->buf[x->len] = '\0';
        return n;
}

static int add_header(struct curl_slist **l, const char *h) {
        struct curl_slist *n = sym_curl_slist_append(*l, h);

        if (!n)
                return -ENOMEM;
        *l = n;
        return 0;
}

static int set_tls(struct kube *k, CURL *h) {
        const struct kube_creds *c = &k->creds;
        CURLcode rc = CURLE_OK;

        if (c->ca.data) {
                struct curl_blob b = { .data = c->ca.data,
                                       .len = c->ca.len,
                                       .flags = CURL_BLOB_COPY };
                rc = sym_curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
        } else if (c->ca_file)
                rc = sym_curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
        if (rc == CURLE_OK && c->cert.data) {
                struct curl_blob b = { .data = c->cert.data,
                                       .len = c->cert.len,
                                       .flags = CURL_BLOB_COPY };
                rc = sym_curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        } else if (rc == CURLE_OK && c->cert_file)
                rc = sym_curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
        if (rc == CURLE_OK && c->key.data) {
                struct curl_blob b = { .data = c->key.data,
                                       .len = c->key.len,
                                       .flags = CURL_BLOB_COPY };
                rc = sym_curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        } else if (rc == CURLE_OK && c->key_file)
                rc = sym_curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
        /* Explicit, though they are libcurl's defaults: TLS is verified. */
        if (rc == CURLE_OK)
                rc = sym_curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        if (rc == CURLE_OK)
                rc = sym_curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        return rc == CURLE_OK ? 0 : -EINVAL;
}

void kube_token_stale(struct kube *k) {
        pthread_mutex_lock(&k->net_mu);
        k->token_stale = true;
        pthread_mutex_unlock(&k->net_mu);
}

/* Under net_mu: the token is shared by both threads, and a re-read
 * replaces it. */
static int set_auth(struct kube *k, struct curl_slist **headers) {
        const char *tok = NULL;
        char *h = NULL;
        int r;

        pthread_mutex_lock(&k->net_mu);
        r = kube_creds_token(&k->creds, dp_now_ms(), k->token_stale, &tok);
        k->token_stale = false;
        if (r < 0 && !k->token_warned) {
                /* The path only: never the token. */
                log_with(LOG_WARN, &(struct log_fields){ .path = k->creds.token_file, .err = -r },
                         "kube: cannot re-read the token %s: %s; keeping the one read before",
                         k->creds.token_file, strerror(-r));
                k->token_warned = true;
        } else if (r == 0)
                k->token_warned = false;
        r = tok && xasprintf(&h, "Authorization: Bearer %s", tok) < 0 ? -ENOMEM : 0;
        pthread_mutex_unlock(&k->net_mu);
        if (!h)
                return r;
        r = add_header(headers, h);
        explicit_bzero(h, strlen(h));
        free(h);
        return r;
}

static int set_method(CURL *h, const char *method, const char *body) {
        CURLcode rc = CURLE_OK;

        if (body) {
                rc = sym_curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
                if (rc == CURLE_OK)
                        rc = sym_curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                                                  (curl_off_t)strlen(body));
        }
        if (rc == CURLE_OK && strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
                rc = sym_curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        return rc == CURLE_OK ? 0 : -EINVAL;
}

/* Time bounds: connecting, and a stalled answer (no byte for 30 s). A
 * watch is quiet between events, so it has only an overall bound a little
 * past the timeoutSeconds it asked the server for, plus TCP keep-alive to
 * notice a peer that vanished. */
static int set_time_bounds(CURL *h, enum kube_xkind kind) {
        CURLcode rc = sym_curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);

        if (rc == CURLE_OK && kind == KX_WATCH)
                rc = sym_curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)KUBE_WATCH_SECONDS_MAX + 30L);
        else if (rc == CURLE_OK) {
                rc = sym_curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
                if (rc == CURLE_OK)
                        rc = sym_curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
                if (rc == CURLE_OK)
                        rc = sym_curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
        }
        if (rc == CURLE_OK)
                rc = sym_curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        if (rc == CURLE_OK)
                rc = sym_curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
        if (rc == CURLE_OK)
                rc = sym_curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
        return rc == CURLE_OK ? 0 : -EINVAL;
}

int kube_xfer_new(struct kube *k, enum kube_xkind kind, const char *method, const char *path,
                  char *body, size_t limit, struct kube_xfer **ret) {
        struct kube_xfer *x = calloc(1, sizeof(*x));
        _cleanup_free_ char *url = NULL;
        int r;

        if (!x) {
                free(body);
                return -ENOMEM;
        }
        /* A name never resolved yet: looked up again (cdiplug-dns), and
         * this attempt fails. Once it has an address, that address stays
         * in use until a new lookup succeeds. */
        r = kube_resolve_pins(k, &x->resolve);
        if (r < 0) {
                free(x);
                free(body);
                return r;
        }
        x->k = k;
        x->multi = kind == KX_CLAIM ? k->claims_multi : k->multi;
        x->kind = kind;
        x->limit = limit;
        x->body_out = body;
        x->started_ms = dp_now_ms();
        x->h = sym_curl_easy_init();
        if (!x->h || xasprintf(&url, "%s%s", k->creds.server, path) < 0) {
                kube_xfer_free(x);
                return -ENOMEM;
        }
        r = add_header(&x->headers, "Accept: application/json");
        if (r == 0 && body)
                r = add_header(&x->headers, "Content-Type: application/json");
        /* No "Expect: 100-continue" round trip before a body. */
        if (r == 0)
                r = add_header(&x->headers, "Expect:");
        if (r == 0)
                r = set_auth(k, &x->headers);
        if (r == 0)
                r = set_tls(k, x->h);
        if (r == 0)
                r = set_method(x->h, method, body);
        if (r == 0)
                r = set_time_bounds(x->h, kind);
        if (r == 0 &&
            (sym_curl_easy_setopt(x->h, CURLOPT_URL, url) != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_PROTOCOLS_STR, "https") != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_USERAGENT, "cdiplug/" CDIPLUG_VERSION) !=
                     CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers) != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x) != CURLE_OK ||
             sym_curl_easy_setopt(x->h, CURLOPT_PRIVATE, x) != CURLE_OK ||
             /* Refused by its Content-Length before a byte: not on the
              * watch, where libcurl 8.4 and later apply it to the whole
              * stream (its events are bounded one by one instead). */
             (kind != KX_WATCH && sym_curl_easy_setopt(x->h, CURLOPT_MAXFILESIZE_LARGE,
                                                       (curl_off_t)limit) != CURLE_OK) ||
             (x->resolve && sym_curl_easy_setopt(x->h, CURLOPT_RESOLVE, x->resolve) != CURLE_OK)))
                r = -EINVAL;
        if (r == 0 && sym_curl_multi_add_handle(x->multi, x->h) != CURLM_OK)
                r = -ENOMEM;
        if (r < 0) {
                kube_xfer_free(x);
                return r;
        }
        *ret = x;
        return 0;
}

void kube_xfer_free(struct kube_xfer *x) {
        if (!x)
                return;
        if (x->h) {
                sym_curl_multi_remove_handle(x->multi, x->h);
                sym_curl_easy_cleanup(x->h);
        }
        sym_curl_slist_free_all(x->resolve);
        if (x->headers) {
                /* The Authorization line holds the token. */
                for (struct curl_slist *l = x->headers; l; l = l->next)
                        explicit_bzero(l->data, strlen(l->data));
                sym_curl_slist_free_all(x->headers);
        }
        free(x->body_out);
        free(x->buf);
        free(x->slice);
        free(x->pool);
        free(x);
}

long kube_xfer_code(const struct kube_xfer *x) {
        long code = 0;

        sym_curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        return code;
}

int kube_xfer_class(const struct kube_xfer *x, CURLcode rc) {
        long code = kube_xfer_code(x);

        if (code == 0)
                return KUBE_ERR_CONNECT;
        if (code >= 200 && code < 300)
                return rc == CURLE_OK || x->kind == KX_WATCH         ? -1
                       : x->too_big || rc == CURLE_FILESIZE_EXCEEDED ? KUBE_ERR_CLIENT
                                                                     : KUBE_ERR_CONNECT;
        switch (code) {
        case 401:
        case 403:
                return KUBE_ERR_UNAUTHORIZED;
        case 404:
                return KUBE_ERR_NOT_FOUND;
        case 409:
                return KUBE_ERR_CONFLICT;
        case 410:
                return KUBE_ERR_GONE;
        case 429:
                return KUBE_ERR_THROTTLED;
        default:
                return code >= 500 ? KUBE_ERR_SERVER : KUBE_ERR_CLIENT;
        }
}

uint64_t kube_xfer_retry_after_ms(const struct kube_xfer *x) {
        curl_off_t s = 0;

        if (sym_curl_easy_getinfo(x->h, CURLINFO_RETRY_AFTER, &s) != CURLE_OK || s <= 0)
                return 0;
        if (s > KUBE_RETRY_AFTER_MAX_S)
                s = KUBE_RETRY_AFTER_MAX_S;
        return (uint64_t)s * 1000u;
}

/* The names /metrics gives the error classes and codes, beside the
 * classification itself. */
const char *kube_error_class_name(enum kube_error_class c) {
        static const char *const names[KUBE_ERR_N] = {
                [KUBE_ERR_CONNECT] = "connect",     [KUBE_ERR_UNAUTHORIZED] = "unauthorized",
                [KUBE_ERR_NOT_FOUND] = "not_found", [KUBE_ERR_CONFLICT] = "conflict",
                [KUBE_ERR_GONE] = "gone",           [KUBE_ERR_THROTTLED] = "throttled",
                [KUBE_ERR_CLIENT] = "client",       [KUBE_ERR_SERVER] = "server",
        };
        return (unsigned)c < KUBE_ERR_N ? names[c] : "unknown";
}

static const struct {
        long code;
        const char *name;
} code_slots[KUBE_CODE_N] = {
        { 0, "connect" }, { 400, "400" }, { 401, "401" }, { 403, "403" },
        { 404, "404" },   { 409, "409" }, { 410, "410" }, { 422, "422" },
        { 429, "429" },   { 500, "500" }, { 502, "502" }, { 503, "503" },
        { 504, "504" },   { -4, "4xx" },  { -5, "5xx" },  { -1, "other" },
};

static int slot_of(long code) {
        for (int i = 0; i < KUBE_CODE_N; i++)
                if (code_slots[i].code == code)
                        return i;
        return -1;
}

int kube_code_slot(long code) {
        int slot = slot_of(code);

        if (slot < 0 && code >= 400 && code < 600)
                slot = slot_of(code < 500 ? -4 : -5);
        return slot >= 0 ? slot : KUBE_CODE_N - 1; /* "other": an answer we could not use */
}

const char *kube_code_name(int slot) {
        return slot >= 0 && slot < KUBE_CODE_N ? code_slots[slot].name : "other";
}

void kube_count_error(struct kube *k, int cls, const struct kube_xfer *x) {
        /* The code the class was read from: no answer (also one cut off
         * mid-way) is "connect", a 2xx we could not use is "other". */
        long code = cls == KUBE_ERR_CONNECT ? 0
                    : cls == KUBE_ERR_GONE  ? 410
                    : x                     ? kube_xfer_code(x)
                                            : -1;

        if (cls == KUBE_ERR_CLIENT && code < 400)
                code = -1;
        if (cls < 0 || cls >= KUBE_ERR_N)
                return;
        /* The name may have moved: look it up again before the next try. */
        if (cls == KUBE_ERR_CONNECT)
                kube_resolve_ask(k);
        pthread_mutex_lock(&k->mu);
        k->stats.api_errors[cls]++;
        k->stats.api_codes[kube_code_slot(code)]++;
        pthread_mutex_unlock(&k->mu);
}

int kube_parse(const char *buf, size_t len, cJSON **ret) {
        cJSON *o;

        if (!buf)
                return -EBADMSG;
        if (base_json_values(buf, len) > KUBE_PARSE_VALUES_MAX)
                return -E2BIG;
        o = cJSON_ParseWithLength(buf, len);
        if (!o)
                return -EBADMSG;
        *ret = o;
        return 0;
}

/* The Status message of an error answer, if it is one; control
 * characters a server put in it are shown as '?'. */
static void status_message(const struct kube_xfer *x, char *buf, size_t size) {
        _cleanup_(kube_cjson_deletep) cJSON *o = NULL;
        const cJSON *m;

        buf[0] = '\0';
        if (!x->buf || x->kind == KX_WATCH || kube_parse(x->buf, x->len, &o) < 0)
                return;
        m = cJSON_GetObjectItemCaseSensitive(o, "message");
        snprintf(buf, size, "%s", cJSON_IsString(m) ? m->valuestring : "");
        for (char *c = buf; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        *c = '?';
}

/* How a transfer ended without (all of) its answer, in the words an
 * operator looks for. */
static const char *ending(CURLcode rc) {
        switch (rc) {
        case CURLE_PARTIAL_FILE:
                return "the connection was closed mid-answer";
        case CURLE_GOT_NOTHING:
                return "the connection was closed without an answer";
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
                return "the connection was reset";
        case CURLE_OPERATION_TIMEDOUT:
                return "it timed out";
        case CURLE_COULDNT_CONNECT:
                return "the connection was refused";
        default:
                return NULL;
        }
}

void kube_xfer_describe(const struct kube_xfer *x, CURLcode rc, char *buf, size_t size) {
        long code = kube_xfer_code(x);
        const char *end = ending(rc);
        char msg[256];

        /* Refused by its Content-Length, or while it came. */
        if (x->too_big || rc == CURLE_FILESIZE_EXCEEDED)
                snprintf(buf, size, "answer larger than %zu bytes", x->limit);
        else if (x->bad)
                snprintf(buf, size, "HTTP %ld, but %s", code, x->bad);
        else if (code == 0)
                snprintf(buf, size, "%s (%s)", end ? end : "no answer", sym_curl_easy_strerror(rc));
        else if (rc != CURLE_OK && code >= 200 && code < 300)
                /* A stream cut off: not "HTTP 200", which reads as success. */
                snprintf(buf, size, "%s after HTTP %ld (%s)", end ? end : "the transfer failed",
                         code, sym_curl_easy_strerror(rc));
        else {
                status_message(x, msg, sizeof(msg));
                snprintf(buf, size, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
        }
}

/* Not a stream of events (an error answer): keep it, bounded, for the log. */
static size_t keep_error(struct kube_xfer *x, const char *p, size_t n) {
        size_t all = n, room = x->limit - x->len;
        char *nb;

        if (n > room)
                n = room;
        nb = realloc(x->buf, x->len + n + 1);
        if (!nb)
                return 0;
        x->buf = nb;
        memcpy(x->buf + x->len, p, n);
        x->len += n;
        x->buf[x->len] = '\0';
        return all;
}

bool kube_stopping(struct kube *k) {
        bool stop;

        pthread_mutex_lock(&k->mu);
        stop = k->stop;
        pthread_mutex_unlock(&k->mu);
        return stop;
}

size_t kube_xfer_lines(struct kube_xfer *x, const char *p, size_t n,
                       void (*event)(struct kube_xfer *x, const char *line, size_t len)) {
        size_t used = 0;

        if (kube_xfer_code(x) != 200)
                return keep_error(x, p, n);
        while (used < n) {
                const char *nl = memchr(p + used, '\n', n - used);
                size_t take = nl ? (size_t)(nl - (p + used)) : n - used;
                char *nb;

                if (x->len + take > x->limit) {
                        x->too_big = true;
                        x->watch_end = -EMSGSIZE;
                        return 0;
                }
                nb = realloc(x->buf, x->len + take + 1);
                if (!nb)
                        return 0;
                x->buf = nb;
                memcpy(x->buf + x->len, p + used, take);
                x->len += take;
                x->buf[x->len] = '\0';
                used += take;
                if (!nl)
                        break;
                used++;
                if (x->len > 0)
                        event(x, x->buf, x->len);
                x->len = 0;
                if (x->watch_end)
                        return 0; /* ends the transfer */
                /* A stream that never pauses must not hold up a stop. */
                if (kube_stopping(x->k))
                        return 0;
        }
        return n;
}

uint64_t kube_jitter_ms(struct kube *k, uint64_t max_ms) {
        return dp_random(&k->rng) % (max_ms + 1);
}

uint64_t kube_backoff_next(struct kube *k, unsigned *failures, uint64_t cap_ms,
                           const struct kube_xfer *x) {
        uint64_t wait, ra = x ? kube_xfer_retry_after_ms(x) : 0;

        (*failures)++;
        /* The first: a connection cut for a whole fleet at once (a server
         * restart) is retried spread over a second, not in one burst. */
        wait = *failures == 1 ? kube_jitter_ms(k, KUBE_FIRST_RETRY_MS)
                              : dp_backoff_jitter_ms(KUBE_BACKOFF_MIN_MS * 2, cap_ms, *failures - 2,
                                                     dp_random(&k->rng));
        /* The server said when: not earlier than that. */
        return ra > wait ? ra : wait;
}

const char *kube_watch_name(enum kube_watch_id w) {
        return w == KUBE_WATCH_SLICES ? "resourceslices" : w == KUBE_WATCH_NODE ? "node" : "?";
}

static const char *watch_what(enum kube_watch_id w) {
        return w == KUBE_WATCH_SLICES ? "the ResourceSlice watch" : "the node's label watch";
}

static double wall_seconds(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kube_watch_up(struct kube *k, enum kube_watch_id w, uint64_t now) {
        struct kube_watch_log *l = &k->wlog[w];

        if (l->up)
                return;
        if (l->down_ms && !l->back_said)
                log_with(LOG_INFO, &(struct log_fields){ 0 },
                         "kube: %s is back after %.1f s (%u failed attempts)", watch_what(w),
                         (double)(now - l->down_ms) / 1000.0, l->attempts);
        l->back_said = l->down_ms != 0;
        l->up = true;
        pthread_mutex_lock(&k->mu);
        k->stats.watch_up[w] = true;
        k->stats.watch_last_up[w] = wall_seconds();
        pthread_mutex_unlock(&k->mu);
}

void kube_watch_healthy(struct kube *k, enum kube_watch_id w) {
        struct kube_watch_log *l = &k->wlog[w];

        if (l->up)
                *l = (struct kube_watch_log){ .up = true };
}

void kube_watch_down(struct kube *k, enum kube_watch_id w, const char *why, uint64_t wait_ms,
                     uint64_t now) {
        struct kube_watch_log *l = &k->wlog[w];
        int level = LOG_DEBUG;

        if (l->up) {
                pthread_mutex_lock(&k->mu);
                k->stats.watch_up[w] = false;
                k->stats.watch_last_up[w] = wall_seconds();
                pthread_mutex_unlock(&k->mu);
        }
        l->up = false;
        if (!l->down_ms)
                *l = (struct kube_watch_log){ .down_ms = now };
        l->attempts++;
        if (!why)
                return;
        if (!l->down_said) {
                level = LOG_WARN;
                l->down_said = true;
        } else if (wait_ms >= KUBE_LOG_WAIT_MS && !l->wait_said) {
                level = LOG_INFO;
                l->wait_said = true;
        }
        log_with(level, &(struct log_fields){ 0 }, "kube: %s ended: %s; again in %llu ms%s",
                 watch_what(w), why, (unsigned long long)wait_ms,
                 level == LOG_INFO ? " (still down; retries are said at debug level)" : "");
}
