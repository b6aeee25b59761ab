/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics page, the counters behind it, and readiness: what the page
 * says, written with the Prometheus text writer (prom.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "config.h"
#include "metrics.h"
#include "plugin.h"
#include "log.h"

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
        if (res->unpublished) {
                *ret_reason = res->unpublished;
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
static bool names_alloc(const struct dp_metrics_res *res, const struct dp_podres_alloc *al) {
        if (al->dynamic)
                return res->pool && strcmp(res->pool, al->resource) == 0;
        return strcmp(res->name, al->resource) == 0;
}

/* A DRA device is named by its pool and slice device name: the same
 * resource, device and ID labels as a device-plugin one, so the joins
 * below work for both. */
static void render_allocations(struct dp_mbuf *b, const struct view *d,
                               const struct dp_podres_answer *answer) {
        const struct dp_metrics_res *res = NULL;

        dp_metric_header(
                b, "cdiplug_device_allocation_info", "gauge",
                "A device ID the kubelet has allocated to a container, from its PodResources API.");
        for (size_t i = 0; answer && i < answer->n; i++) {
                const struct dp_podres_alloc *al = &answer->v[i];
                size_t idx;
                int r;

                if (!res || !names_alloc(res, al)) {
                        res = NULL;
                        for (size_t j = 0; j < d->n && !res; j++)
                                if (names_alloc(&d->v[j], al))
                                        res = &d->v[j];
                        if (!res)
                                continue; /* removed by a reload since */
                }
                r = !al->dynamic    ? dp_plugin_find_id(res->plugin, al->id, &idx)
                    : res->dra_find ? res->dra_find(res->plugin, al->id, &idx)
                                    : -ENOENT;
                if (r < 0)
                        continue;
                dp_metric_start(b, "cdiplug_device_allocation_info");
                dp_metric_label(b, "resource", res->name);
                dp_metric_label(b, "device",
                                dp_device_id(res->plugin, dp_plugin_id_dev(res->plugin, idx)));
                dp_metric_label(b, "id", dp_plugin_id(res->plugin, idx));
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

/* The API client's watches: a watch that is down leaves the slices as
 * they were, but a wipe or a change is not repaired until it is back. */
static void render_watches(struct dp_mbuf *b, const struct dp_metrics_dra *dra) {
        dp_metric_header(b, "cdiplug_kube_watch_up", "gauge",
                         "1 while the API client's watch (resourceslices, node) has its stream "
                         "open, else 0.");
        for (int w = 0; w < DP_KUBE_WATCHES; w++) {
                if (!dra->watch_name[w])
                        continue;
                dp_metric_start(b, "cdiplug_kube_watch_up");
                dp_metric_label(b, "watch", dra->watch_name[w]);
                dp_metric_u64(b, dra->watch_up[w]);
        }
        dp_metric_header(b, "cdiplug_kube_watch_last_up_timestamp_seconds", "gauge",
                         "When the watch last had its stream open (now while it is up; 0: "
                         "never), in seconds since the epoch.");
        for (int w = 0; w < DP_KUBE_WATCHES; w++) {
                if (!dra->watch_name[w])
                        continue;
                dp_metric_start(b, "cdiplug_kube_watch_last_up_timestamp_seconds");
                dp_metric_label(b, "watch", dra->watch_name[w]);
                dp_metric_double(b, dra->watch_last_up[w]);
        }
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
        dp_metric_header(b, "cdiplug_dra_api_error_codes_total", "counter",
                         "The same failed Kubernetes API requests by HTTP status code (connect: "
                         "no answer; 4xx, 5xx: a code not listed on its own; other: an answer "
                         "that could not be used).");
        for (int c = 0; c < DP_DRA_API_CODES; c++) {
                if (!dra->api_code[c])
                        continue;
                dp_metric_start(b, "cdiplug_dra_api_error_codes_total");
                dp_metric_label(b, "code", dra->api_code[c]);
                dp_metric_u64(b, dra->api_codes[c]);
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
        render_watches(b, dra);
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
