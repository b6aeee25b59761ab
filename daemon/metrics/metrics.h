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

struct dp_plugin;
struct timespec;

/* The Prometheus text writer (prom.c). */

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

void dp_stats_allocate(struct dp_res_stats *s, int grpc_status, double seconds);
void dp_stats_spec_write(struct dp_res_stats *s, int r);
double dp_wall_seconds(void);
/* The boot time (unix seconds) from a /proc/stat-format file; 0 when it
 * cannot be read or has none. */
double dp_boot_time(const char *stat_path);

/* What the page and /readyz read from the runtime, which fills it in: the
 * endpoint's thread takes the runtime's lock through lock() (until NULL:
 * wait; else give up at that CLOCK_REALTIME time with -ETIMEDOUT), calls
 * the others only while holding it, and lets go with unlock(). */
struct dp_metrics_res {
        const char *name; /* the extended resource */
        /* "<driver>:<pool>" while served by DRA, else NULL: ':' is in no
         * driver, pool or resource name, so it cannot pass for one. */
        const char *pool;
        /* The allocatable ID of its slice device name (the DRA model's
         * dra_device_find): 0 or -ENOENT. */
        int (*dra_find)(const struct dp_plugin *p, const char *name, size_t *ret_id);
        const struct dp_plugin *plugin; /* its devices */
        const struct dp_res_stats *stats;
        uint64_t streams;        /* ListAndWatch streams open */
        bool registering;        /* a Register is in flight */
        const char *unpublished; /* DRA: why its devices are not (all) published, or NULL */
};
/* The DRA driver's figures, copied under the source's lock. Label values
 * are the runtime's (static strings), so metrics/ needs nothing of
 * daemon/dra or daemon/kube. */
#define DP_DRA_METHODS 2  /* prepare, unprepare */
#define DP_DRA_VERSIONS 2 /* v1, v1beta1 */
#define DP_DRA_OUTCOMES 3 /* ok, claim_error, failed */
#define DP_DRA_API_CLASSES 8
#define DP_DRA_API_CODES 16
#define DP_KUBE_WATCHES 2 /* resourceslices, node */
struct dp_metrics_dra {
        bool on;       /* the config has a "dra" section */
        bool accepted; /* the kubelet's last word on the registration */
        uint64_t prepared;
        uint64_t calls[DP_DRA_METHODS][DP_DRA_VERSIONS][DP_DRA_OUTCOMES];
        bool api; /* an API client runs (a node name was given) */
        uint64_t api_errors[DP_DRA_API_CLASSES];
        const char *api_error_class[DP_DRA_API_CLASSES]; /* label values */
        uint64_t api_codes[DP_DRA_API_CODES];            /* the same errors by HTTP code */
        const char *api_code[DP_DRA_API_CODES];          /* label values */
        uint64_t publishes;                              /* pool changes published */
        double publish_seconds_sum;                      /* kube_pool_set → slices written */
        uint64_t publish_count;
        uint64_t claim_lookups;
        uint64_t slices; /* our slices the API server holds now */
        /* The API client's watches: name NULL when it keeps no such one. */
        const char *watch_name[DP_KUBE_WATCHES]; /* label values */
        bool watch_up[DP_KUBE_WATCHES];
        double watch_last_up[DP_KUBE_WATCHES]; /* wall-clock seconds, 0: never */
};

struct dp_metrics_source {
        void *ctx;
        int (*lock)(void *ctx, const struct timespec *until);
        void (*unlock)(void *ctx);
        bool (*stopping)(void *ctx);
        uint64_t (*kubelet_restarts)(void *ctx);
        size_t (*n_res)(void *ctx);
        void (*res)(void *ctx, size_t i, struct dp_metrics_res *ret);
        /* NULL, or the DRA figures (under the lock, like the rest). */
        void (*dra)(void *ctx, struct dp_metrics_dra *ret);
};

/* Readiness of one resource: 1 when it is registered with the kubelet and
 * its CDI spec is written, else 0 and *ret_reason (static) says why.
 * /readyz is the AND of these. */
int dp_resource_ready(const struct dp_metrics_res *res, const char **ret_reason);

/* A PodResources answer read in place (podres_wire.c): strings are
 * pointers into the answer's bytes, not NUL-terminated. */
struct dp_podres_str {
        const char *s;
        size_t len;
};
/* One ContainerDevices of a container of a pod, or (dynamic) one
 * ClaimResource of one of its DynamicResources: a DRA device, by its
 * driver, pool and device name (resource and devices empty). */
struct dp_podres_devices {
        struct dp_podres_str namespace_, pod, container, resource;
        struct dp_podres_str devices; /* the message, for dp_podres_next_id() or _cdi() */
        bool dynamic;
        struct dp_podres_str driver, pool, device;
};
/* fn returns 0 to go on, < 0 to stop the walk with that error. */
typedef int (*dp_podres_fn)(void *arg, const struct dp_podres_devices *dv);
/* Calls fn for each device set of a packed ListPodResourcesResponse, in
 * the answer's order, allocating nothing; -EBADMSG if it is malformed. */
int dp_podres_walk(const void *wire, size_t len, dp_podres_fn fn, void *arg);
/* The same, with each claim device (dynamic) too, where it comes among a
 * container's fields. */
int dp_podres_walk_all(const void *wire, size_t len, dp_podres_fn fn, void *arg);
/* The device ID after *pos (start at 0): 1 and *ret, 0 at the end, or
 * -EBADMSG. */
int dp_podres_next_id(const struct dp_podres_devices *dv, size_t *pos, struct dp_podres_str *ret);
/* A claim device's (dynamic) CDI device names the same way. */
int dp_podres_next_cdi(const struct dp_podres_devices *dv, size_t *pos, struct dp_podres_str *ret);
bool dp_podres_str_eq(struct dp_podres_str s, const char *c);

/* Appends s[0..len) with each byte that is not part of valid UTF-8, and
 * each NUL, replaced by U+FFFD: a Prometheus page must be UTF-8 through
 * and through, or the whole page is refused. */
void dp_mbuf_utf8(struct dp_mbuf *b, const char *s, size_t len);

/* One allocated ID of one of our resources, as PodResources lists it;
 * strings are valid UTF-8 with no NUL. */
struct dp_podres_alloc {
        const char *resource, *id, *namespace_, *pod, *container;
        /* A DRA device: resource is "<driver>:<pool>", id its device name. */
        bool dynamic;
};
/* What one List left: only our resources' IDs, so its size follows our
 * allocations, not the answer's. Immutable once published; shared by
 * the scrapes that use it (refs under the podres lock). */
struct dp_podres_answer {
        unsigned refs;
        bool up;        /* false: the List failed, timed out or did not decode */
        bool truncated; /* more of our IDs than DP_PODRES_MAX_IDS */
        size_t n;
        struct dp_podres_alloc *v;
        struct dp_mbuf text; /* the strings v points into */
};

/* The kubelet's PodResources service, asked by a worker thread of its
 * own (podresources.c): a scrape never waits on the kubelet on the
 * thread that answers health checks, and nothing is decoded under
 * d->lock. */
struct dp_podres;

#define DP_DEFAULT_PODRES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define DP_PODRES_DEADLINE_MS 500
/* An answer, or a failure, is reused this long. */
#define DP_PODRES_CACHE_S 1.0
/* Our IDs kept from one answer, and their strings' bytes, at most. */
#define DP_PODRES_MAX_IDS 65536
#define DP_PODRES_MAX_TEXT (4u << 20)
/* notify_fd is written (an eventfd) each time a new answer is published. */
int dp_podres_new(const char *path, int notify_fd, struct dp_podres **ret);
void dp_podres_free(struct dp_podres *pr);
/* Starts the worker: after the lock-down, so it inherits the filter. */
int dp_podres_start(struct dp_podres *pr);
const char *dp_podres_path(const struct dp_podres *pr);
/* The answer if one at most DP_PODRES_CACHE_S old is there (a reference:
 * give it back with dp_podres_unref), else NULL, having asked the worker
 * for a new one about the resources named (copied) unless one is under
 * way; notify_fd says when it is there. */
struct dp_podres_answer *dp_podres_get(struct dp_podres *pr, char *const *names, size_t n);
void dp_podres_unref(struct dp_podres *pr, struct dp_podres_answer *a);
uint64_t dp_podres_errors(struct dp_podres *pr);

/* The whole /metrics page, with the allocations of answer (NULL: none
 * asked) and errors PodResources errors so far. Takes the source's lock. */
int dp_metrics_render(const struct dp_metrics_source *src, const struct dp_podres_answer *answer,
                      uint64_t errors, struct dp_mbuf *b);

/* A request head: request line and header fields, without the empty
 * line that ends it. path points into the head. */
#define DP_HTTP_MAX_BODY 1024
enum dp_http_method { DP_HTTP_GET, DP_HTTP_HEAD, DP_HTTP_OTHER };
struct dp_http_request {
        enum dp_http_method method;
        const char *path; /* without query or fragment */
        size_t path_len;
        size_t content_length; /* DP_HTTP_MAX_BODY at most */
        bool http10;
        bool close; /* the client wants the connection closed after */
};
/* 0 and *ret, or the status to answer before closing: 400, 413 (a body
 * over DP_HTTP_MAX_BODY), 501 (Transfer-Encoding), 505. */
int dp_http_parse_head(const char *head, size_t len, struct dp_http_request *ret);

/* The HTTP endpoint: dp_http_open() makes its socket and tries to bind it
 * before the lock-down (no socket of another family can be made after
 * it); a taken port is logged and tried again once serving; only a bad
 * address or no socket at all fails. dp_http_start() starts serving
 * after the lock-down; dp_http_stop() stops and frees. */
struct dp_http;
int dp_http_open(const struct dp_metrics_source *src, const char *address, const char *podres_path,
                 struct dp_http **ret);
int dp_http_start(struct dp_http *h);
void dp_http_stop(struct dp_http *h);
