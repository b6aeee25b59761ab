/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics page in Prometheus text format 0.0.4, the counters behind
 * it, and readiness. Samples are appended by hand rather than with
 * printf: 10,000 devices make 10,000 lines, and a scrape holds d->lock
 * while it writes them, so writing them is kept cheap. */
#include <dirent.h>
#include <fcntl.h>
#include <grpc/grpc.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "config.h"
#include "metrics.h"
#include "plugin.h"
#include "log.h"

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

/* The names grpc-go and its Prometheus middleware use for the code label. */
static const char *const grpc_code_names[DP_GRPC_CODES] = {
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
};

static const char *const event_names[DP_EV_N] = { "appeared", "vanished", "recovered" };

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

double dp_wall_seconds(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void dp_stats_allocate(struct dp_res_stats *s, int grpc_status, double seconds) {
        if (grpc_status >= 0 && grpc_status < DP_GRPC_CODES)
                s->allocate[grpc_status]++;
        dp_histogram_observe(&s->allocate_seconds, seconds);
}

void dp_stats_spec_write(struct dp_res_stats *s, int r) {
        s->spec_failed = r < 0;
        if (r < 0) {
                s->spec_writes_failed++;
                return;
        }
        s->spec_writes_ok++;
        s->spec_last_write = dp_wall_seconds();
}

int dp_resource_ready(const struct dp_metrics_res *res, const char **ret_reason) {
        if (res->stats->spec_failed) {
                *ret_reason = "its CDI spec could not be written";
                return 0;
        }
        if (!res->stats->registered) {
                *ret_reason = res->registering ? "registering with the kubelet"
                                               : "not registered with the kubelet";
                return 0;
        }
        return 1;
}

/* The runtime's resources as one scrape reads them, under its lock. */
struct view {
        size_t n;
        struct dp_metrics_res *v;
        uint64_t kubelet_restarts;
        struct dp_metrics_dra dra;
};

/* One family per call: header, then a sample per resource. */
static void per_resource_u64(struct dp_mbuf *b, const struct view *d, const char *name,
                             const char *type, const char *help,
                             uint64_t (*get)(const struct dp_metrics_res *)) {
        dp_metric_header(b, name, type, help);
        for (size_t i = 0; i < d->n; i++) {
                dp_metric_start(b, name);
                dp_metric_label(b, "resource", d->v[i].name);
                dp_metric_u64(b, get(&d->v[i]));
        }
}

static uint64_t get_registrations(const struct dp_metrics_res *res) {
        return res->stats->registrations;
}
static uint64_t get_ready(const struct dp_metrics_res *res) {
        const char *why;
        return (uint64_t)dp_resource_ready(res, &why);
}
static uint64_t get_streams(const struct dp_metrics_res *res) {
        return res->streams;
}

/* Decimal digits of v at the end of buf[24]; returns where they start. */
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

static void render_devices(struct dp_mbuf *b, const struct view *d) {
        dp_metric_header(
                b, "cdiplug_device_info", "gauge",
                "A device the resource lists to the kubelet, with its health and NUMA node where known.");
        for (size_t i = 0; i < d->n; i++) {
                const struct dp_plugin *p = d->v[i].plugin;
                struct dp_mbuf pre = { 0 };
                dp_mbuf_puts(&pre, "cdiplug_device_info{resource=\"");
                dp_mbuf_escaped(&pre, d->v[i].name);
                dp_mbuf_puts(&pre, "\",device=\"");
                if (pre.err) {
                        b->err = pre.err;
                        return;
                }
                for (size_t j = 0; j < p->n_devs; j++)
                        dp_metric_device_line(b, &pre, dp_device_id(p, j), p->devs[j].healthy,
                                              p->devs[j].numa_node);
                dp_mbuf_free(&pre);
        }
        dp_metric_header(b, "cdiplug_devices", "gauge", "Devices of the resource by health.");
        for (size_t i = 0; i < d->n; i++) {
                const struct dp_plugin *p = d->v[i].plugin;
                uint64_t healthy = 0;
                for (size_t j = 0; j < p->n_devs; j++)
                        healthy += p->devs[j].healthy;
                for (int h = 0; h < 2; h++) {
                        dp_metric_start(b, "cdiplug_devices");
                        dp_metric_label(b, "resource", d->v[i].name);
                        dp_metric_label(b, "health", h ? "Unhealthy" : "Healthy");
                        dp_metric_u64(b, h ? p->n_devs - healthy : healthy);
                }
        }
}

/* Only our resources' IDs (the answer holds nothing else), each with the
 * device behind it (a share ID such as "fuse-3" names one share of
 * device "fuse"). An ID we do not know (the kubelet's checkpoint from
 * before a configuration change) has no device to name and is left
 * out. The answer's resources are in the order the kubelet lists them:
 * the last one found is tried first. */
static void render_allocations(struct dp_mbuf *b, const struct view *d,
                               const struct dp_podres_answer *answer) {
        const struct dp_metrics_res *res = NULL;

        dp_metric_header(
                b, "cdiplug_device_allocation_info", "gauge",
                "A device ID the kubelet has allocated to a container, from its PodResources API.");
        for (size_t i = 0; answer && i < answer->n; i++) {
                const struct dp_podres_alloc *al = &answer->v[i];
                size_t idx;

                if (!res || strcmp(res->name, al->resource) != 0) {
                        res = NULL;
                        for (size_t j = 0; j < d->n && !res; j++)
                                if (strcmp(d->v[j].name, al->resource) == 0)
                                        res = &d->v[j];
                        if (!res)
                                continue; /* removed by a reload since */
                }
                if (dp_plugin_find_id(res->plugin, al->id, &idx) < 0)
                        continue;
                dp_metric_start(b, "cdiplug_device_allocation_info");
                dp_metric_label(b, "resource", res->name);
                dp_metric_label(b, "device",
                                dp_device_id(res->plugin, dp_plugin_id_dev(res->plugin, idx)));
                dp_metric_label(b, "id", al->id);
                dp_metric_label(b, "namespace", al->namespace_);
                dp_metric_label(b, "pod", al->pod);
                dp_metric_label(b, "container", al->container);
                dp_metric_u64(b, 1);
        }
}

static void render_calls(struct dp_mbuf *b, const struct view *d) {
        dp_metric_header(b, "cdiplug_allocate_requests_total", "counter",
                         "Allocate calls answered, by gRPC status code.");
        for (size_t i = 0; i < d->n; i++)
                for (int c = 0; c < DP_GRPC_CODES; c++) {
                        if (c != 0 && !d->v[i].stats->allocate[c])
                                continue;
                        dp_metric_start(b, "cdiplug_allocate_requests_total");
                        dp_metric_label(b, "resource", d->v[i].name);
                        dp_metric_label(b, "code", grpc_code_names[c]);
                        dp_metric_u64(b, d->v[i].stats->allocate[c]);
                }
        dp_metric_header(b, "cdiplug_allocate_duration_seconds", "histogram",
                         "Time from an Allocate request received to its answer encoded.");
        for (size_t i = 0; i < d->n; i++)
                dp_histogram_render(b, "cdiplug_allocate_duration_seconds", "resource",
                                    d->v[i].name, &d->v[i].stats->allocate_seconds);
        per_resource_u64(b, d, "cdiplug_registrations_total", "counter",
                         "Successful registrations with the kubelet.", get_registrations);
        dp_metric_header(b, "cdiplug_kubelet_restarts_total", "counter",
                         "Times a new kubelet.sock appeared after a first one (kubelet restarts).");
        dp_metric_start(b, "cdiplug_kubelet_restarts_total");
        dp_metric_u64(b, d->kubelet_restarts);
        per_resource_u64(b, d, "cdiplug_listandwatch_streams", "gauge",
                         "ListAndWatch streams open to the kubelet.", get_streams);
        per_resource_u64(
                b, d, "cdiplug_resource_ready", "gauge",
                "1 when the resource is registered and its CDI spec is written (as /readyz).",
                get_ready);
        dp_metric_header(
                b, "cdiplug_device_events_total", "counter",
                "Device changes seen by discovery (appeared includes those found at start-up).");
        for (size_t i = 0; i < d->n; i++)
                for (int e = 0; e < DP_EV_N; e++) {
                        dp_metric_start(b, "cdiplug_device_events_total");
                        dp_metric_label(b, "resource", d->v[i].name);
                        dp_metric_label(b, "event", event_names[e]);
                        dp_metric_u64(b, d->v[i].plugin->events[e]);
                }
        dp_metric_header(b, "cdiplug_cdi_spec_writes_total", "counter",
                         "CDI spec writes, by result.");
        for (size_t i = 0; i < d->n; i++)
                for (int ok = 1; ok >= 0; ok--) {
                        dp_metric_start(b, "cdiplug_cdi_spec_writes_total");
                        dp_metric_label(b, "resource", d->v[i].name);
                        dp_metric_label(b, "result", ok ? "success" : "failure");
                        dp_metric_u64(b, ok ? d->v[i].stats->spec_writes_ok
                                            : d->v[i].stats->spec_writes_failed);
                }
        dp_metric_header(b, "cdiplug_cdi_spec_last_write_timestamp_seconds", "gauge",
                         "When the resource's CDI spec was last written.");
        for (size_t i = 0; i < d->n; i++) {
                if (!d->v[i].stats->spec_last_write)
                        continue;
                dp_metric_start(b, "cdiplug_cdi_spec_last_write_timestamp_seconds");
                dp_metric_label(b, "resource", d->v[i].name);
                dp_metric_double(b, d->v[i].stats->spec_last_write);
        }
}

static const char *const dra_method_names[DP_DRA_METHODS] = { "prepare", "unprepare" };
static const char *const dra_version_names[DP_DRA_VERSIONS] = { "v1", "v1beta1" };
static const char *const dra_outcome_names[DP_DRA_OUTCOMES] = { "ok", "claim_error", "failed" };

static void single_u64(struct dp_mbuf *b, const char *name, const char *type, const char *help,
                       uint64_t v) {
        dp_metric_header(b, name, type, help);
        dp_metric_start(b, name);
        dp_metric_u64(b, v);
}

/* Only with a "dra" section: a device-plugin-only page stays as it was.
 * Every label takes values from fixed tables (method, version, outcome,
 * error class), never from a peer. */
static void render_dra(struct dp_mbuf *b, const struct dp_metrics_dra *dra) {
        if (!dra->on)
                return;
        single_u64(b, "cdiplug_dra_registered", "gauge",
                   "1 when the kubelet's last NotifyRegistrationStatus accepted the DRA driver.",
                   dra->accepted);
        single_u64(b, "cdiplug_dra_prepared_claims", "gauge",
                   "ResourceClaims prepared on this node now (the checkpoint's).", dra->prepared);
        dp_metric_header(b, "cdiplug_dra_requests_total", "counter",
                         "NodePrepareResources and NodeUnprepareResources calls answered, by "
                         "method, API version and outcome (claim_error: a claim in the answer "
                         "carries an error; failed: a gRPC error).");
        for (int m = 0; m < DP_DRA_METHODS; m++)
                for (int v = 0; v < DP_DRA_VERSIONS; v++)
                        for (int o = 0; o < DP_DRA_OUTCOMES; o++) {
                                dp_metric_start(b, "cdiplug_dra_requests_total");
                                dp_metric_label(b, "method", dra_method_names[m]);
                                dp_metric_label(b, "version", dra_version_names[v]);
                                dp_metric_label(b, "outcome", dra_outcome_names[o]);
                                dp_metric_u64(b, dra->calls[m][v][o]);
                        }
        if (!dra->api)
                return;
        dp_metric_header(b, "cdiplug_dra_api_errors_total", "counter",
                         "Kubernetes API requests that failed, by class (connect: no answer; "
                         "else the HTTP status class).");
        for (int c = 0; c < DP_DRA_API_CLASSES; c++) {
                if (!dra->api_error_class[c])
                        continue;
                dp_metric_start(b, "cdiplug_dra_api_errors_total");
                dp_metric_label(b, "class", dra->api_error_class[c]);
                dp_metric_u64(b, dra->api_errors[c]);
        }
        single_u64(b, "cdiplug_dra_pool_publishes_total", "counter",
                   "Changes of a DRA resource's devices written to its ResourceSlices.",
                   dra->publishes);
        dp_metric_header(b, "cdiplug_dra_publish_duration_seconds", "summary",
                         "Time from a change of a DRA resource's devices to its ResourceSlices "
                         "written on the API server.");
        dp_metric_start(b, "cdiplug_dra_publish_duration_seconds_sum");
        dp_metric_double(b, dra->publish_seconds_sum);
        dp_metric_start(b, "cdiplug_dra_publish_duration_seconds_count");
        dp_metric_u64(b, dra->publish_count);
        single_u64(b, "cdiplug_dra_resource_slices", "gauge",
                   "This node's ResourceSlices of the driver the API server holds now.",
                   dra->slices);
        single_u64(b, "cdiplug_dra_claim_lookups_total", "counter",
                   "ResourceClaim lookups answered by the API client, any outcome.",
                   dra->claim_lookups);
}

double dp_boot_time(const char *stat_path) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        const char *p;

        /* btime follows a line per CPU and one count per interrupt: on a
         * big node it lies far into the file, which is read whole. */
        if (base_read_file_at(AT_FDCWD, stat_path, 0, 4 << 20, &buf, &len) < 0)
                return 0;
        p = strstr(buf, "\nbtime ");
        return p ? strtod(p + 7, NULL) : 0;
}

/* The process_* metrics every Prometheus client library exports, from
 * /proc/self: CPU time, resident memory, open fds, start time. Only the
 * endpoint's one thread renders, so the boot time, which never changes,
 * is read once. */
static void render_process(struct dp_mbuf *b) {
        static double btime;
        char buf[1024], *p;
        unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
        long long rss = 0;
        ssize_t n;
        int fd;
        double ticks = (double)sysconf(_SC_CLK_TCK);
        uint64_t fds = 0;
        struct rlimit rl;

        fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
                close(fd);
        if (n > 0) {
                buf[n] = '\0';
                /* The command name may hold spaces and ')': skip to the last. */
                p = strrchr(buf, ')');
                /* NOLINTBEGIN(cert-err34-c): the kernel's own numbers */
                if (p &&
                    sscanf(p + 2,
                           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                           "%*d %*d %llu %llu %lld",
                           &utime, &stime, &start, &vsize, &rss) != 5)
                        utime = stime = start = vsize = 0, rss = 0;
                /* NOLINTEND(cert-err34-c) */
        }
        if (btime == 0)
                btime = dp_boot_time("/proc/stat");
        DIR *dir = opendir("/proc/self/fd");
        if (dir) {
                struct dirent *de;
                while ((de = readdir(dir)))
                        fds += de->d_name[0] != '.';
                closedir(dir);
                fds--; /* the one opendir holds */
        }
        dp_metric_header(b, "process_cpu_seconds_total", "counter",
                         "Total user and system CPU time spent in seconds.");
        dp_metric_start(b, "process_cpu_seconds_total");
        dp_metric_double(b, (double)(utime + stime) / ticks);
        dp_metric_header(b, "process_resident_memory_bytes", "gauge",
                         "Resident memory size in bytes.");
        dp_metric_start(b, "process_resident_memory_bytes");
        dp_metric_u64(b, (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE));
        dp_metric_header(b, "process_virtual_memory_bytes", "gauge",
                         "Virtual memory size in bytes.");
        dp_metric_start(b, "process_virtual_memory_bytes");
        dp_metric_u64(b, vsize);
        dp_metric_header(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        dp_metric_start(b, "process_open_fds");
        dp_metric_u64(b, fds);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                dp_metric_header(b, "process_max_fds", "gauge",
                                 "Maximum number of open file descriptors.");
                dp_metric_start(b, "process_max_fds");
                dp_metric_u64(b, rl.rlim_cur);
        }
        dp_metric_header(b, "process_start_time_seconds", "gauge",
                         "Start time of the process since unix epoch in seconds.");
        dp_metric_start(b, "process_start_time_seconds");
        dp_metric_double(b, btime + (double)start / ticks);
}

/* The resources' part of the page, under the source's lock: the views
 * point into the runtime's state, so nothing of them outlives it. */
static void render_resources(struct dp_mbuf *b, const struct dp_metrics_source *src,
                             const struct dp_podres_answer *answer) {
        struct view d = { 0 };

        src->lock(src->ctx, NULL);
        d.n = src->n_res(src->ctx);
        d.kubelet_restarts = src->kubelet_restarts(src->ctx);
        d.v = calloc(d.n ? d.n : 1, sizeof(*d.v));
        if (!d.v) {
                src->unlock(src->ctx);
                b->err = -ENOMEM;
                return;
        }
        for (size_t i = 0; i < d.n; i++)
                src->res(src->ctx, i, &d.v[i]);
        if (src->dra)
                src->dra(src->ctx, &d.dra);
        /* One allocation of about the page's size rather than a dozen
         * doublings, each copying what was written so far; and not much
         * more, as all of it is populated (dp_mbuf_reserve). A device's
         * line is about 64 bytes and its resource's name and its ID; an
         * allocation's about 128 and its names, which the answer holds. */
        size_t est = 16384 + d.n * 3072;
        for (size_t i = 0; i < d.n; i++) {
                const struct dp_plugin *p = d.v[i].plugin;
                est += p->n_devs * (64 + strlen(d.v[i].name));
                for (size_t j = 0; j < p->n_devs; j++)
                        est += strlen(dp_device_id(p, j));
        }
        if (answer)
                est += answer->n * 128 + answer->text.len * 2;
        dp_mbuf_reserve(b, est);
        render_devices(b, &d);
        render_allocations(b, &d, answer);
        render_calls(b, &d);
        render_dra(b, &d.dra);
        src->unlock(src->ctx);
        free(d.v);
}

int dp_metrics_render(const struct dp_metrics_source *src, const struct dp_podres_answer *answer,
                      uint64_t errors, struct dp_mbuf *b) {
        dp_metric_header(b, "cdiplug_build_info", "gauge",
                         "cdiplug's version and the grpc core it runs on.");
        dp_metric_start(b, "cdiplug_build_info");
        dp_metric_label(b, "version", CDIPLUG_VERSION);
        dp_metric_label(b, "grpc_version", grpc_version_string());
        dp_metric_u64(b, 1);
        render_resources(b, src, answer);
        dp_metric_header(
                b, "cdiplug_pod_resources_up", "gauge",
                "1 when the last List on the kubelet's PodResources API answered in time.");
        dp_metric_start(b, "cdiplug_pod_resources_up");
        dp_metric_u64(b, answer && answer->up);
        dp_metric_header(b, "cdiplug_pod_resources_errors_total", "counter",
                         "PodResources List calls that failed, timed out or answered garbage.");
        dp_metric_start(b, "cdiplug_pod_resources_errors_total");
        dp_metric_u64(b, errors);
        render_process(b);
        return b->err;
}
