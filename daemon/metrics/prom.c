/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text writer (exposition format 0.0.4): a growing buffer,
 * HELP and TYPE headers, samples with escaped labels (invalid UTF-8
 * repaired to U+FFFD), numbers and histograms. The page (metrics.c) says
 * what to write; this file knows only how. Samples are appended by hand
 * rather than with printf: 10,000 devices make 10,000 lines, and a scrape
 * holds the daemon's lock while it writes them, so writing is kept cheap. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "metrics.h"

/* Allocate takes microseconds; the upper buckets are for a daemon under
 * pressure (a shared CPU, a slow disk blocking the lock). */
const double dp_hist_bounds[DP_HIST_BUCKETS] = {
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1,
};
/* The same as "%g" writes them (a unit test checks), for the le label:
 * formatting a double costs more than the rest of the line. */
const char *const dp_hist_bound_labels[DP_HIST_BUCKETS] = {
        "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
        "0.005", "0.01",   "0.025",   "0.05",   "0.1",   "1",
};

void dp_mbuf_free(struct dp_mbuf *b) {
        if (b->mapped)
                munmap(b->s, b->cap);
        else
                free(b->s);
        *b = (struct dp_mbuf){ 0 };
}

/* A page of 10,000 devices is a megabyte, made once per scrape. Kept
 * between scrapes it would double the daemon's footprint, so it is
 * mapped for the scrape and unmapped once sent; and mapped populated:
 * faulting its pages in one by one cost more than writing the page
 * (about half the daemon's CPU per scrape on a VM). */
static int mbuf_resize(struct dp_mbuf *b, size_t cap) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        char *s;

        if (cap < DP_MBUF_MAP_MIN && !b->mapped) {
                s = realloc(b->s, cap);
                if (!s)
                        return -ENOMEM;
        } else {
                cap = (cap + page - 1) & ~(page - 1);
                if (b->mapped) {
                        s = mremap(b->s, b->cap, cap, MREMAP_MAYMOVE);
                        /* Best effort: without it the new pages fault in
                         * when written, as they would have anyway. */
                        if (s != MAP_FAILED)
                                (void)madvise(s + b->cap, cap - b->cap, MADV_POPULATE_WRITE);
                } else {
                        s = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                        if (s != MAP_FAILED && b->s) {
                                memcpy(s, b->s, b->len);
                                free(b->s);
                        }
                }
                if (s == MAP_FAILED)
                        return -ENOMEM;
                b->mapped = true;
        }
        b->s = s;
        b->cap = cap;
        return 0;
}

void dp_mbuf_reserve(struct dp_mbuf *b, size_t cap) {
        if (b->err || b->cap >= cap)
                return;
        b->err = mbuf_resize(b, cap);
}

/* Room for n more bytes and the terminating NUL at b->s + b->len, or NULL
 * (and b->err set). A mapping grows by a quarter: it moves without a
 * copy, and doubling would populate up to twice the page. */
static char *mbuf_grow(struct dp_mbuf *b, size_t n) {
        if (b->err)
                return NULL;
        if (b->cap - b->len < n + 1) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap - b->len < n + 1) {
                        if (cap > SIZE_MAX / 2) {
                                b->err = -ENOMEM;
                                return NULL;
                        }
                        cap = b->mapped ? cap + cap / 4 : cap * 2;
                }
                b->err = mbuf_resize(b, cap);
                if (b->err)
                        return NULL;
        }
        return b->s + b->len;
}

static inline char *mbuf_room(struct dp_mbuf *b, size_t n) {
        /* A failed buffer has cap 0 or keeps err: the slow path. */
        if (!b->err && b->cap - b->len >= n + 1)
                return b->s + b->len;
        return mbuf_grow(b, n);
}

void dp_mbuf_put(struct dp_mbuf *b, const char *s, size_t n) {
        char *w = mbuf_room(b, n);
        if (!w)
                return;
        memcpy(w, s, n);
        b->len += n;
        b->s[b->len] = '\0';
}

void dp_mbuf_puts(struct dp_mbuf *b, const char *s) {
        dp_mbuf_put(b, s, strlen(s));
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0
 * (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
        unsigned char c = s[0];
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                len = 3;
                if (c == 0xe0)
                        lo = 0xa0;
                else if (c == 0xed)
                        hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4;
                if (c == 0xf0)
                        lo = 0x90;
                else if (c == 0xf4)
                        hi = 0x8f;
        } else
                return 0;
        if (n < len || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return len;
}

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

void dp_mbuf_utf8(struct dp_mbuf *b, const char *s, size_t len) {
        const unsigned char *u = (const unsigned char *)s;
        size_t start = 0, i = 0;

        while (i < len) {
                size_t n = u[i] ? utf8_seq(u + i, len - i) : 0;
                if (n) {
                        i += n;
                        continue;
                }
                dp_mbuf_put(b, s + start, i - start);
                dp_mbuf_put(b, replacement, sizeof(replacement) - 1);
                start = ++i;
        }
        dp_mbuf_put(b, s + start, i - start);
}

/* Escapes '\\', '"' and newline as the format demands; bytes that are
 * not UTF-8 become U+FFFD. */
void dp_mbuf_escaped(struct dp_mbuf *b, const char *s) {
        for (;;) {
                size_t n = strcspn(s, "\\\"\n");
                dp_mbuf_utf8(b, s, n);
                s += n;
                if (!*s)
                        return;
                dp_mbuf_put(b, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", 2);
                s++;
        }
}

/* Whether s[0..n) is plain ASCII, the common case written in one piece. */
static bool ascii(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] >= 0x80)
                        return false;
        return true;
}

/* HELP text escapes only '\\' and newline. */
static void help_escaped(struct dp_mbuf *b, const char *s) {
        for (; *s; s++) {
                if (*s == '\\')
                        dp_mbuf_put(b, "\\\\", 2);
                else if (*s == '\n')
                        dp_mbuf_put(b, "\\n", 2);
                else
                        dp_mbuf_put(b, s, 1);
        }
}

void dp_metric_header(struct dp_mbuf *b, const char *name, const char *type, const char *help) {
        dp_mbuf_puts(b, "# HELP ");
        dp_mbuf_puts(b, name);
        dp_mbuf_put(b, " ", 1);
        help_escaped(b, help);
        dp_mbuf_puts(b, "\n# TYPE ");
        dp_mbuf_puts(b, name);
        dp_mbuf_put(b, " ", 1);
        dp_mbuf_puts(b, type);
        dp_mbuf_put(b, "\n", 1);
}

void dp_metric_start(struct dp_mbuf *b, const char *name) {
        dp_mbuf_puts(b, name);
        b->in_labels = false;
}

void dp_metric_label(struct dp_mbuf *b, const char *key, const char *value) {
        size_t klen = strlen(key), vlen = strcspn(value, "\\\"\n");
        char sep = b->in_labels ? ',' : '{';

        b->in_labels = true;
        if (value[vlen] || !ascii(value, vlen)) { /* needs escaping or checking */
                dp_mbuf_put(b, &sep, 1);
                dp_mbuf_put(b, key, klen);
                dp_mbuf_put(b, "=\"", 2);
                dp_mbuf_escaped(b, value);
                dp_mbuf_put(b, "\"", 1);
                return;
        }
        /* The common case in one piece: 10,000s of labels a scrape. */
        char *w = mbuf_room(b, klen + vlen + 4);
        if (!w)
                return;
        *w++ = sep;
        memcpy(w, key, klen);
        w += klen;
        *w++ = '=';
        *w++ = '"';
        memcpy(w, value, vlen);
        w += vlen;
        *w++ = '"';
        *w = '\0';
        b->len = (size_t)(w - b->s);
}

static void end_labels(struct dp_mbuf *b) {
        dp_mbuf_put(b, b->in_labels ? "} " : " ", b->in_labels ? 2 : 1);
        b->in_labels = false;
}

/* v's decimal digits, ending at buf + 24. */
static char *u64_digits(char buf[24], uint64_t v) {
        char *p = buf + 24;
        do {
                *--p = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        return p;
}

void dp_metric_u64(struct dp_mbuf *b, uint64_t v) {
        char num[24], *p = u64_digits(num, v);

        end_labels(b);
        dp_mbuf_put(b, p, (size_t)(num + sizeof(num) - p));
        dp_mbuf_put(b, "\n", 1);
}

void dp_metric_double(struct dp_mbuf *b, double v) {
        char num[40];

        end_labels(b);
        if (isinf(v))
                dp_mbuf_puts(b, v > 0 ? "+Inf\n" : "-Inf\n");
        else if (isnan(v))
                dp_mbuf_puts(b, "NaN\n");
        else {
                /* The shortest of %.15g to %.17g that reads back as v
                 * (%.17g always does): 0.06, not 0.059999999999999998. */
                for (int prec = 15; prec <= 17; prec++) {
                        snprintf(num, sizeof(num), "%.*g", prec, v);
                        if (strtod(num, NULL) == v)
                                break;
                }
                dp_mbuf_puts(b, num);
                dp_mbuf_put(b, "\n", 1);
        }
}

void dp_histogram_observe(struct dp_histogram *h, double seconds) {
        for (size_t i = 0; i < DP_HIST_BUCKETS; i++)
                if (seconds <= dp_hist_bounds[i]) {
                        h->le[i]++;
                        break;
                }
        h->count++;
        h->sum += seconds;
}

void dp_histogram_render(struct dp_mbuf *b, const char *name, const char *key, const char *value,
                         const struct dp_histogram *h) {
        char metric[128];
        uint64_t cum = 0;

        snprintf(metric, sizeof(metric), "%s_bucket", name);
        for (size_t i = 0; i < DP_HIST_BUCKETS; i++) {
                cum += h->le[i];
                dp_metric_start(b, metric);
                if (key)
                        dp_metric_label(b, key, value);
                dp_metric_label(b, "le", dp_hist_bound_labels[i]);
                dp_metric_u64(b, cum);
        }
        dp_metric_start(b, metric);
        if (key)
                dp_metric_label(b, key, value);
        dp_metric_label(b, "le", "+Inf");
        dp_metric_u64(b, h->count);
        snprintf(metric, sizeof(metric), "%s_sum", name);
        dp_metric_start(b, metric);
        if (key)
                dp_metric_label(b, key, value);
        dp_metric_double(b, h->sum);
        snprintf(metric, sizeof(metric), "%s_count", name);
        dp_metric_start(b, metric);
        if (key)
                dp_metric_label(b, key, value);
        dp_metric_u64(b, h->count);
}

/* The rest is written in place, one capacity check a line: this is the
 * bulk of a scrape (10,000 lines for 10,000 devices). */
void dp_metric_device_line(struct dp_mbuf *b, const struct dp_mbuf *pre, const char *id,
                           bool healthy, int numa) {
        static const char ok[] = "\",health=\"Healthy", bad[] = "\",health=\"Unhealthy",
                          numa_key[] = "\",numa_node=\"", end[] = "\"} 1\n";
        char digits[24], *num = u64_digits(digits, numa >= 0 ? (uint64_t)numa : 0);
        size_t idlen = strcspn(id, "\\\"\n"), numlen = (size_t)(digits + sizeof(digits) - num);

        if (id[idlen] || !ascii(id, idlen)) { /* rare: the slow way */
                dp_mbuf_put(b, pre->s, pre->len);
                dp_mbuf_escaped(b, id);
                dp_mbuf_puts(b, healthy ? ok : bad);
                if (numa >= 0) {
                        dp_mbuf_puts(b, numa_key);
                        dp_mbuf_put(b, num, numlen);
                }
                dp_mbuf_put(b, end, sizeof(end) - 1);
                return;
        }
        char *w = mbuf_room(b, pre->len + idlen + sizeof(bad) + sizeof(numa_key) + numlen +
                                       sizeof(end));
        if (!w)
                return;
        memcpy(w, pre->s, pre->len);
        w += pre->len;
        memcpy(w, id, idlen);
        w += idlen;
        memcpy(w, healthy ? ok : bad, healthy ? sizeof(ok) - 1 : sizeof(bad) - 1);
        w += healthy ? sizeof(ok) - 1 : sizeof(bad) - 1;
        if (numa >= 0) {
                memcpy(w, numa_key, sizeof(numa_key) - 1);
                w += sizeof(numa_key) - 1;
                memcpy(w, num, numlen);
                w += numlen;
        }
        memcpy(w, end, sizeof(end) - 1);
        w += sizeof(end) - 1;
        *w = '\0';
        b->len = (size_t)(w - b->s);
}
