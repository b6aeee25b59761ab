/* SPDX-License-Identifier: Apache-2.0 */
/* Monitoring: Prometheus text exposition (format 0.0.4), the daemon's own
 * counters, the kubelet's PodResources client and the HTTP endpoint that
 * serves /metrics, /healthz and /readyz. The endpoint runs on one
 * libevent thread of its own; it reads the daemon's state under d->lock, like
 * the two loops, and nothing here runs unless someone asks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podresources.pb-c.h"

struct dp_daemon;
struct dp_resource;

/* Growing text buffer; a failed allocation sticks in err (-ENOMEM) and
 * makes every later append a no-op, so callers check once at the end.
 * From DP_MBUF_MAP_MIN on, the buffer is a mapping of its own (see
 * dp_mbuf_reserve), so free it with dp_mbuf_free, never free(). */
struct dp_mbuf {
        char *s;
        size_t len, cap;
        int err;
        bool in_labels; /* a sample's '{' is open */
        bool mapped;    /* s is an mmap of cap bytes */
};

#define DP_MBUF_MAP_MIN (256 * 1024)
void dp_mbuf_free(struct dp_mbuf *b);
void dp_mbuf_reserve(struct dp_mbuf *b, size_t cap);
void dp_mbuf_put(struct dp_mbuf *b, const char *s, size_t n);
void dp_mbuf_puts(struct dp_mbuf *b, const char *s);
/* A label value with '\\', '"' and newline escaped as the format demands. */
void dp_mbuf_escaped(struct dp_mbuf *b, const char *s);

/* "# HELP name help\n# TYPE name type\n". */
void dp_metric_header(struct dp_mbuf *b, const char *name, const char *type, const char *help);
/* A sample: dp_metric_start(name), any number of dp_metric_label(), then
 * one dp_metric_u64() or dp_metric_double() ends the line. */
void dp_metric_start(struct dp_mbuf *b, const char *name);
void dp_metric_label(struct dp_mbuf *b, const char *key, const char *value);
void dp_metric_u64(struct dp_mbuf *b, uint64_t v);
void dp_metric_double(struct dp_mbuf *b, double v);

/* One cdiplug_device_info sample: pre holds the line up to the device ID
 * (the resource's, written once per resource); numa < 0 leaves numa_node
 * out. */
void dp_metric_device_line(struct dp_mbuf *b, const struct dp_mbuf *pre, const char *id,
                           bool healthy, int numa);

/* A histogram of seconds with fixed buckets (DP_HIST_BOUNDS). */
#define DP_HIST_BUCKETS 12
extern const double dp_hist_bounds[DP_HIST_BUCKETS];
extern const char *const dp_hist_bound_labels[DP_HIST_BUCKETS];
struct dp_histogram {
        uint64_t le[DP_HIST_BUCKETS]; /* observations <= bound, not cumulated */
        uint64_t count;
        double sum;
};
void dp_histogram_observe(struct dp_histogram *h, double seconds);
/* The _bucket (cumulative, then +Inf), _sum and _count lines of name,
 * with one label key=value on each (key may be NULL). */
void dp_histogram_render(struct dp_mbuf *b, const char *name, const char *key, const char *value,
                         const struct dp_histogram *h);

/* What each resource counts; lives in dp_resource, under d->lock. */
#define DP_GRPC_CODES 17
enum { DP_EV_APPEARED, DP_EV_VANISHED, DP_EV_RECOVERED, DP_EV_N };
struct dp_res_stats {
        uint64_t allocate[DP_GRPC_CODES]; /* Allocate answers by gRPC status */
        struct dp_histogram allocate_seconds;
        uint64_t registrations; /* successful Registers */
        uint64_t spec_writes_ok, spec_writes_failed;
        double spec_last_write; /* unix time of the last good write, 0: never */
        bool registered;        /* the latest Register succeeded, none since */
        bool spec_failed;       /* the latest spec write failed */
};

void dp_stats_allocate(struct dp_resource *res, int grpc_status, double seconds);
void dp_stats_spec_write(struct dp_resource *res, int r);
double dp_wall_seconds(void);
/* The boot time (unix seconds) from a /proc/stat-format file; 0 when it
 * cannot be read or has none. */
double dp_boot_time(const char *stat_path);
double dp_mono_seconds(void);

/* Readiness of one resource: 1 when it is registered with the kubelet and
 * its CDI spec is written, else 0 and *ret_reason (static) says why.
 * Called with d->lock held. /readyz is the AND of these. */
int dp_resource_ready(const struct dp_resource *res, const char **ret_reason);

/* The kubelet's PodResources service, as seen by scrapes. */
struct dp_podres_chunk;
struct dp_podres {
        char *path;
        void *ch;                    /* grpc_channel, dialled lazily */
        uint64_t dev, ino, ctime_ns; /* the socket file the channel was dialled to */
        double fetched_at;           /* monotonic seconds of the cached answer */
        uint8_t *wire; /* the cached answer as received; NULL when the last List failed */
        size_t wire_len;
        V1__ListPodResourcesResponse *decoded; /* for the scrape under way */
        struct dp_podres_chunk *chunks;        /* where decoded lives */
        uint64_t errors;
};

#define DP_DEFAULT_PODRES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define DP_PODRES_DEADLINE_MS 500
#define DP_PODRES_CACHE_S 1.0
void dp_podres_init(struct dp_podres *pr, const char *path);
void dp_podres_clear(struct dp_podres *pr);
/* The pods' resources, from a List at most DP_PODRES_CACHE_S old; NULL
 * when the kubelet did not answer in time or answered nonsense (the error
 * is counted and logged at debug level: a scrape must not spam the log).
 * Valid until dp_podres_release(), which gives its memory back. */
const V1__ListPodResourcesResponse *dp_podres_list(struct dp_podres *pr);
void dp_podres_release(struct dp_podres *pr);

/* The whole /metrics page. Takes d->lock itself (after the PodResources
 * call, which runs without it). */
int dp_metrics_render(struct dp_daemon *d, struct dp_podres *pr, struct dp_mbuf *b);

/* The HTTP endpoint: dp_http_open() binds and listens before the lock-down
 * (no socket of another family can be made after it); dp_http_start()
 * starts serving after it; dp_http_stop() stops and frees. */
struct dp_http;
int dp_http_open(struct dp_daemon *d, const char *address, const char *podres_path,
                 struct dp_http **ret);
int dp_http_start(struct dp_http *h);
void dp_http_stop(struct dp_http *h);
/* "HOST:PORT" or "[V6]:PORT", numeric host; -EINVAL with a message. */
int dp_http_parse_address(const char *address, void *ret_sockaddr, unsigned *ret_len,
                          const char **ret_msg);
