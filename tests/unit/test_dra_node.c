/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA node server alone (daemon/dra/node.c, health.c), over real unix
 * sockets, driven by the fake kubelet's plugin manager (tests/kubelet/dra.c).
 * The harness plays the daemon's part: one thread drains the completion
 * queue, one polls the listening sockets and the registry dir, both under
 * one lock, as serve/daemon.c does. */
#include <criterion/criterion.h>
#include <grpc/support/alloc.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "dra.h"
#include "dra_node.h"
#include "loop.h"
#include "plugin.h"
#include "resources.h"
#include "faketree.h"
#include "kubelet.h"
#include "logwait.h"
#include "rpc.h"

#define DRIVER "cdiplug.example.com"
#define POOL "node1/example.com/serial"
#define WAIT_MS 10000

/* 0: the node's default (40 s). */
static unsigned lookup_timeout_ms;

/* The resource Prepare maps to: ttyS0 and ttyS1, spec written. */
static struct dp_plugin *serial_plugin(struct cfg_resource *cfg) {
        static char *nodes0[] = { (char *)"/dev/ttyS0", NULL },
                    *nodes1[] = { (char *)"/dev/ttyS1", NULL };
        struct res_device d[] = {
                { .id = (char *)"ttyS0", .nodes = nodes0, .n_nodes = 1, .numa_node = -1 },
                { .id = (char *)"ttyS1", .nodes = nodes1, .n_nodes = 1, .numa_node = -1 },
        };
        struct res_devlist list = { .devs = d, .n = 2 };
        struct dp_plugin *p;
        bool changed;

        *cfg = (struct cfg_resource){ .name = (char *)"example.com/serial",
                                      .kind = (char *)"example.com/serial",
                                      .spec_file = (char *)"example.com-serial.json",
                                      .socket_name = (char *)"cdiplug-example.com-serial.sock",
                                      .shares = 1,
                                      .alloc_modes = CFG_ALLOC_CDI_CRI,
                                      .api = CFG_API_DRA };
        cr_assert_eq(dp_plugin_new(cfg, &p), 0);
        cr_assert_eq(dp_plugin_update(p, &list, &changed), 0);
        dp_plugin_spec_written(p);
        return p;
}

/* The API server's part: claims by name, answered on a thread of its own
 * as the API client answers on cdiplug-claims. */
struct fake_claim {
        const char *ns, *name, *uid;
        int err;   /* 0 or the lookup's error */
        bool hang; /* never answered until the harness stops */
        struct dra_result results[2];
        size_t n_results;
};

struct fake_api {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t thread;
        const struct fake_claim *claims;
        size_t n_claims;
        struct dra_lookup **queue; /* lookups to answer */
        size_t n_queue, cap;
        struct dra_lookup **hung;
        size_t n_hung;
        unsigned lookups; /* asked so far */
        bool stop;
};

struct harness {
        char *root;
        struct fake_api api;
        struct dp_plugin *plugin;
        struct cfg_resource cfg;
        unsigned timeout_ms;
        char *log;
        grpc_completion_queue *cq;
        struct dra_node *n;
        pthread_mutex_t lock;
        pthread_t drain, watch;
        int stop_fd, ino, wake_fd;
        bool stopping;
};

struct queued {
        struct dra_lookup *l;
        char *ns, *name, *uid;
};

static int fake_lookup(void *ctx, const char *ns, const char *name, const char *uid,
                       struct dra_lookup *l) {
        struct fake_api *a = ctx;
        struct queued *q = malloc(sizeof(*q));

        cr_assert(q);
        *q = (struct queued){ l, strdup(ns), strdup(name), strdup(uid) };
        pthread_mutex_lock(&a->lock);
        a->lookups++;
        if (a->n_queue == a->cap) {
                a->cap = a->cap ? a->cap * 2 : 64;
                a->queue = realloc(a->queue, a->cap * sizeof(*a->queue));
                cr_assert(a->queue);
        }
        a->queue[a->n_queue++] = (struct dra_lookup *)q;
        pthread_cond_signal(&a->cond);
        pthread_mutex_unlock(&a->lock);
        return 0;
}

static void answer_one(struct fake_api *a, struct queued *q) {
        const struct fake_claim *c = NULL;

        for (size_t i = 0; i < a->n_claims; i++)
                if (strcmp(a->claims[i].ns, q->ns) == 0 && strcmp(a->claims[i].name, q->name) == 0)
                        c = &a->claims[i];
        if (c && c->hang) {
                pthread_mutex_lock(&a->lock);
                a->hung = realloc(a->hung, (a->n_hung + 1) * sizeof(*a->hung));
                a->hung[a->n_hung++] = (struct dra_lookup *)q;
                pthread_mutex_unlock(&a->lock);
                return;
        }
        if (!c)
                dra_node_claim_done(q->l, -ENOENT, NULL, NULL, 0);
        else if (strcmp(c->uid, q->uid) != 0)
                dra_node_claim_done(q->l, -ESTALE, NULL, NULL, 0);
        else
                dra_node_claim_done(q->l, c->err, NULL, c->results, c->n_results);
        free(q->ns);
        free(q->name);
        free(q->uid);
        free(q);
}

static void *api_thread(void *arg) {
        struct fake_api *a = arg;

        pthread_mutex_lock(&a->lock);
        for (;;) {
                while (!a->n_queue && !a->stop)
                        pthread_cond_wait(&a->cond, &a->lock);
                if (!a->n_queue && a->stop)
                        break;
                struct queued *q = (struct queued *)a->queue[--a->n_queue];
                pthread_mutex_unlock(&a->lock);
                answer_one(a, q);
                pthread_mutex_lock(&a->lock);
        }
        pthread_mutex_unlock(&a->lock);
        /* As kube_free does: every lookup still waiting ends, cancelled. */
        for (size_t i = 0; i < a->n_hung; i++) {
                struct queued *q = (struct queued *)a->hung[i];
                dra_node_claim_done(q->l, -ECANCELED, NULL, NULL, 0);
                free(q->ns);
                free(q->name);
                free(q->uid);
                free(q);
        }
        free(a->hung);
        free(a->queue);
        return NULL;
}

static void *drain_thread(void *arg) {
        struct harness *h = arg;

        for (;;) {
                grpc_event ev =
                        grpc_completion_queue_next(h->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        return NULL;
                if (ev.type != GRPC_OP_COMPLETE)
                        continue;
                pthread_mutex_lock(&h->lock);
                ((struct dp_tag *)ev.tag)->fn(NULL, ev.tag, ev.success);
                if (h->stopping && dra_node_done(h->n))
                        grpc_completion_queue_shutdown(h->cq);
                pthread_mutex_unlock(&h->lock);
        }
}

/* What the daemon's watcher does for the DRA sockets: accept, and make the
 * registry socket again when it is deleted. */
static void *watch_thread(void *arg) {
        struct harness *h = arg;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

        for (;;) {
                int fds[2], timeout = -1;
                uint64_t next;
                pthread_mutex_lock(&h->lock);
                dra_node_poll_fds(h->n, fds);
                dra_node_expire(h->n, dp_now_ms(), &next);
                if (next)
                        timeout = (int)(next - dp_now_ms() + 1);
                pthread_mutex_unlock(&h->lock);
                struct pollfd p[5] = { { .fd = h->stop_fd, .events = POLLIN },
                                       { .fd = h->ino, .events = POLLIN },
                                       { .fd = fds[0], .events = POLLIN },
                                       { .fd = fds[1], .events = POLLIN },
                                       { .fd = h->wake_fd, .events = POLLIN } };
                if (poll(p, 5, timeout) < 0)
                        continue;
                if (p[0].revents)
                        return NULL;
                pthread_mutex_lock(&h->lock);
                uint64_t v;
                if (p[4].revents && read(h->wake_fd, &v, sizeof(v)) < 0)
                        continue;
                if (p[1].revents && read(h->ino, buf, sizeof(buf)) > 0)
                        dra_node_relisten(h->n);
                for (int i = 2; i < 4; i++)
                        if (p[i].revents)
                                dra_node_accept(h->n, p[i].fd);
                pthread_mutex_unlock(&h->lock);
        }
}

/* The owner's timer: the watch thread works its timeout out again. */
static void deadline_set(void *ctx, uint64_t due_ms) {
        struct harness *h = ctx;
        uint64_t one = 1;
        (void)due_ms;
        cr_assert_eq(write(h->wake_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

static void harness_start_at(struct harness *h, char *root, const struct fake_claim *claims,
                             size_t n_claims, const struct dra_health_device *devs, size_t count) {
        struct dra_node_settings s = { .kubelet_root = NULL, .driver = DRIVER };
        int fd;

        memset(h, 0, sizeof(*h));
        h->root = root;
        cr_assert(h->root);
        pthread_mutex_init(&h->api.lock, NULL);
        pthread_cond_init(&h->api.cond, NULL);
        h->api.claims = claims;
        h->api.n_claims = n_claims;
        cr_assert_eq(pthread_create(&h->api.thread, NULL, api_thread, &h->api), 0);
        s.lookup = fake_lookup;
        s.lookup_ctx = &h->api;
        s.lock = &h->lock;
        s.lookup_timeout_ms = lookup_timeout_ms;
        s.deadline_set = deadline_set;
        s.deadline_ctx = h;
        h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        h->plugin = serial_plugin(&h->cfg);
        cr_assert_eq(asprintf(&h->log, "%s/log", h->root) > 0, true);
        /* The module logs to stderr; the test reads what it said. */
        fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert(fd >= 0);
        cr_assert(dup2(fd, 2) == 2);
        close(fd);
        s.kubelet_root = h->root;
        pthread_mutex_init(&h->lock, NULL);
        dp_grpc_init();
        h->cq = grpc_completion_queue_create_for_next(NULL);
        cr_assert_eq(dra_node_new(&s, &h->n), 0);
        cr_assert_eq(dra_node_health_set(h->n, devs, count), 0);
        cr_assert_eq(dra_node_pools_set(
                             h->n, &(struct dra_node_pool){ .name = POOL, .plugin = h->plugin }, 1),
                     0);
        h->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        cr_assert(inotify_add_watch(h->ino, dra_node_registry_dir(h->n), IN_DELETE) >= 0);
        h->stop_fd = eventfd(0, EFD_CLOEXEC);
        pthread_mutex_lock(&h->lock);
        cr_assert_eq(dra_node_start(h->n, h->cq), 0);
        pthread_mutex_unlock(&h->lock);
        cr_assert_eq(pthread_create(&h->drain, NULL, drain_thread, h), 0);
        cr_assert_eq(pthread_create(&h->watch, NULL, watch_thread, h), 0);
}

static void harness_start(struct harness *h, const struct dra_health_device *devs, size_t count) {
        harness_start_at(h, ft_new(), NULL, 0, devs, count);
}

/* The daemon stopping: no more connections, the node stops. */
static void harness_begin_stop(struct harness *h) {
        uint64_t one = 1;

        cr_assert_eq(write(h->stop_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
        pthread_join(h->watch, NULL);
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        dra_node_stop(h->n);
        pthread_mutex_unlock(&h->lock);
}

/* Everything freed but the dir, for a restart on it. */
static char *harness_finish(struct harness *h) {
        /* The API client goes first (kube_free), then the node. */
        pthread_mutex_lock(&h->api.lock);
        h->api.stop = true;
        pthread_cond_signal(&h->api.cond);
        pthread_mutex_unlock(&h->api.lock);
        pthread_join(h->api.thread, NULL);
        pthread_join(h->drain, NULL);
        grpc_completion_queue_destroy(h->cq);
        dra_node_free(h->n);
        dp_plugin_free(h->plugin);
        close(h->stop_fd);
        close(h->wake_fd);
        close(h->ino);
        grpc_shutdown();
        pthread_mutex_destroy(&h->lock);
        free(h->log);
        return h->root;
}

static char *harness_stop_keep(struct harness *h) {
        harness_begin_stop(h);
        return harness_finish(h);
}

static void harness_stop(struct harness *h) {
        ft_free(harness_stop_keep(h));
}

static const struct dra_health_device two[] = {
        { "node1/example.com/serial", "ttys0", true, NULL },
        { "node1/example.com/serial", "ttys1", true, NULL },
};

Test(dra_node, getinfo_answers_the_driver_and_both_versions) {
        struct harness h;
        struct tk_dra *k;
        Pluginregistration__PluginInfo *info = NULL, *probe = NULL;
        _cleanup_free_ char *endpoint = NULL, *reg = NULL;
        struct stat st;

        harness_start(&h, two, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_info(k, DRIVER, &info), 0);
        cr_assert_str_eq(info->type, "DRAPlugin");
        cr_assert_str_eq(info->name, DRIVER);
        cr_assert_eq(asprintf(&endpoint, "%s/plugins/%s/dra.sock", h.root, DRIVER) > 0, true);
        cr_assert_str_eq(info->endpoint, endpoint);
        cr_assert_eq(info->n_supported_versions, 4);
        cr_assert_str_eq(info->supported_versions[0], "v1.DRAPlugin");
        cr_assert_str_eq(info->supported_versions[1], "v1beta1.DRAPlugin");
        cr_assert_str_eq(info->supported_versions[2], "v1.DRAResourceHealth");
        cr_assert_str_eq(info->supported_versions[3], "v1alpha1.DRAResourceHealth");
        cr_assert_eq(log_wait(h.log, "the kubelet registered driver \"" DRIVER "\"", WAIT_MS), 0);
        /* The kubelet's periodic probe gets the same answer. */
        cr_assert_eq(tk_dra_probe(k, DRIVER, &probe), GRPC_STATUS_OK);
        cr_assert_str_eq(probe->endpoint, endpoint);
        cr_assert_eq(log_count(h.log, "the kubelet registered driver"), 1);
        /* The plugin dir is ours alone; the registry dir is shared. */
        cr_assert_eq(stat(dra_node_endpoint(h.n), &st), 0);
        cr_assert(S_ISSOCK(st.st_mode));
        cr_assert_eq(asprintf(&reg, "%s/plugins/%s", h.root, DRIVER) > 0, true);
        cr_assert_eq(stat(reg, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0700);
        pluginregistration__plugin_info__free_unpacked(info, NULL);
        pluginregistration__plugin_info__free_unpacked(probe, NULL);
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_node, refusal_is_logged_with_the_kubelets_reason) {
        struct harness h;
        struct tk_dra *k;

        harness_start(&h, two, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        tk_dra_refuse(k, "driver name already registered by another plugin");
        /* The socket existed before the refusal was set: register again. */
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_restart(k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(log_wait(h.log,
                              "the kubelet refused driver \"" DRIVER
                              "\": driver name already registered by another plugin",
                              WAIT_MS),
                     0);
        tk_dra_stop(k);
        harness_stop(&h);
}

/* A unary call whose request is the given bytes: its status. */
static grpc_status_code call_bytes(grpc_channel *ch, const char *method, const char *bytes,
                                   size_t len, char **ret_details) {
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        grpc_slice slice = grpc_slice_from_copied_buffer(bytes, len);
        struct dp_unary u;
        grpc_status_code st;
        grpc_call *call;

        dp_unary_init(&u, grpc_raw_byte_buffer_create(&slice, 1));
        grpc_slice_unref(slice);
        call = dp_unary_begin(ch, cq, method, WAIT_MS, &u, &u);
        cr_assert(call);
        (void)grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        st = u.status;
        char *d = grpc_slice_to_c_string(u.details);
        *ret_details = strdup(d);
        gpr_free(d);
        dp_unary_clear(&u);
        grpc_call_unref(call);
        dp_cq_destroy(cq);
        return st;
}

Test(dra_node, unknown_method_and_bad_request_get_a_status_and_serving_goes_on) {
        struct harness h;
        struct tk_dra *k;
        grpc_byte_buffer *recv = NULL;
        _cleanup_free_ char *details = NULL, *details2 = NULL;
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;

        harness_start(&h, two, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        grpc_channel *ch = tk_dra_channel(k, DRIVER);
        cr_assert_eq(dp_call_unary_raw(ch, "/v1beta1.DevicePlugin/Allocate", &empty.base, WAIT_MS,
                                       &recv, &details),
                     GRPC_STATUS_UNIMPLEMENTED);
        cr_assert(strstr(details, "unknown method"));
        /* A field 1 whose varint never ends decodes as nothing. */
        cr_assert_eq(call_bytes(ch, "/pluginregistration.Registration/NotifyRegistrationStatus",
                                "\x08\xff\xff", 3, &details2),
                     GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert(strstr(details2, "cannot decode"), "%s", details2);
        cr_assert_eq(tk_dra_probe(k, DRIVER, NULL), GRPC_STATUS_OK);
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_node, health_streams_of_both_versions_follow_every_change) {
        struct harness h;
        struct tk_dra *k;
        struct tk_dra_health *alpha, *v1;
        _cleanup_free_ char *a1 = NULL, *b1 = NULL, *a2 = NULL, *b2 = NULL;
        struct dra_health_device changed[] = { two[0], two[1] };
        grpc_status_code st;

        harness_start(&h, two, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_health_open(k, DRIVER, "v1alpha1", &alpha), 0);
        cr_assert_eq(tk_dra_health_open(k, DRIVER, "v1", &v1), 0);
        cr_assert_eq(tk_dra_health_wait(alpha, 1, WAIT_MS, &a1), 0);
        cr_assert_eq(tk_dra_health_wait(v1, 1, WAIT_MS, &b1), 0);
        cr_assert_str_eq(a1, "node1/example.com/serial/ttys0=HEALTHY,"
                             "node1/example.com/serial/ttys1=HEALTHY");
        cr_assert_str_eq(b1, a1);
        changed[1].healthy = false;
        pthread_mutex_lock(&h.lock);
        cr_assert_eq(dra_node_health_set(h.n, changed, 2), 0);
        pthread_mutex_unlock(&h.lock);
        cr_assert_eq(tk_dra_health_wait(alpha, 2, WAIT_MS, &a2), 0);
        cr_assert_eq(tk_dra_health_wait(v1, 2, WAIT_MS, &b2), 0);
        cr_assert_str_eq(a2, "node1/example.com/serial/ttys0=HEALTHY,"
                             "node1/example.com/serial/ttys1=UNHEALTHY");
        cr_assert_str_eq(b2, a2);
        /* Stopping ends each stream with a status, not a reset. */
        harness_begin_stop(&h);
        cr_assert_eq(tk_dra_health_wait_end(alpha, WAIT_MS, &st), 0);
        cr_assert_eq(st, GRPC_STATUS_UNAVAILABLE);
        cr_assert_eq(tk_dra_health_wait_end(v1, WAIT_MS, &st), 0);
        cr_assert_eq(st, GRPC_STATUS_UNAVAILABLE);
        tk_dra_health_close(alpha);
        tk_dra_health_close(v1);
        tk_dra_stop(k);
        ft_free(harness_finish(&h));
}

/* The kubelet takes a device unreported for its timeout as Unknown: when
 * the node's deadline says so, the same list goes out again, with each
 * device's timeout and an unhealthy one's message. */
Test(dra_node, the_health_list_is_sent_again_when_due) {
        struct harness h;
        struct tk_dra *k;
        struct tk_dra_health *v1;
        _cleanup_free_ char *l1 = NULL, *l2 = NULL, *msg = NULL;
        struct dra_health_device devs[] = { two[0], two[1] };
        uint64_t next = 0;
        int64_t timeout = 0;

        devs[1].healthy = false;
        devs[1].message = "device node /dev/ttyS1 is no longer found";
        harness_start(&h, devs, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_health_open(k, DRIVER, "v1", &v1), 0);
        cr_assert_eq(tk_dra_health_wait(v1, 1, WAIT_MS, &l1), 0);
        /* Not due yet: nothing goes out, the resend stays due. */
        pthread_mutex_lock(&h.lock);
        dra_node_expire(h.n, dp_now_ms(), &next);
        pthread_mutex_unlock(&h.lock);
        cr_assert_gt(next, dp_now_ms());
        cr_assert_leq(next, dp_now_ms() + DRA_HEALTH_RESEND_S * 1000);
        cr_assert_eq(tk_dra_health_lists(v1), 1);
        pthread_mutex_lock(&h.lock);
        dra_node_expire(h.n, next, &next);
        pthread_mutex_unlock(&h.lock);
        cr_assert_eq(tk_dra_health_wait(v1, 2, WAIT_MS, &l2), 0);
        cr_assert_str_eq(l2, l1);
        cr_assert_eq(tk_dra_health_detail(v1, "node1/example.com/serial/ttys1", &timeout, &msg), 0);
        cr_assert_eq(timeout, DRA_HEALTH_TIMEOUT_S);
        cr_assert_str_eq(msg, "device node /dev/ttyS1 is no longer found");
        harness_begin_stop(&h);
        tk_dra_health_close(v1);
        tk_dra_stop(k);
        ft_free(harness_finish(&h));
}

Test(dra_node, deleted_registry_socket_is_made_again_and_registers_again) {
        struct harness h;
        struct tk_dra *k;
        struct stat st;

        harness_start(&h, two, 2);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_restart(k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 2, WAIT_MS), 0);
        cr_assert_eq(stat(dra_node_registry_path(h.n), &st), 0);
        cr_assert_eq(tk_dra_probe(k, DRIVER, NULL), GRPC_STATUS_OK);
        cr_assert_eq(log_count(h.log, "registry socket"), 1);
        tk_dra_stop(k);
        harness_stop(&h);
}

/* Prepare and Unprepare. */

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepClaim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepResp;

static const PrepClaim *claim_of(const PrepResp *r, const char *uid) {
        for (size_t i = 0; i < r->n_claims; i++)
                if (strcmp(r->claims[i]->key, uid) == 0)
                        return r->claims[i]->value;
        cr_assert_fail("no answer for claim %s", uid);
        return NULL;
}

/* The CDI ID Allocate answers for a device ID, and its slice name. */
static char *cdi_of(const struct harness *h, const char *id) {
        size_t dev;
        char *q = NULL;
        cr_assert_eq(dp_plugin_find_dev(h->plugin, id, &dev), 0);
        cr_assert_eq(dp_plugin_qualified(h->plugin, dev, &q), 0);
        return q;
}

static char *name_of(const char *id) {
        char *n = NULL;
        cr_assert_eq(dra_device_name(id, &n), 0);
        return n;
}

static struct fake_claim claims[8];
static size_t n_claims;

/* Two claims of the pool: a0 holds ttyS0, a1 ttyS1. */
static void fixture(void) {
        static char *names[2];
        names[0] = name_of("ttyS0");
        names[1] = name_of("ttyS1");
        claims[0] =
                (struct fake_claim){ "ns", "a0", "uid-a0", 0, false, { { "req", POOL, names[0] } },
                                     1 };
        claims[1] =
                (struct fake_claim){ "ns", "a1", "uid-a1", 0, false, { { "req", POOL, names[1] } },
                                     1 };
        claims[2] = (struct fake_claim){
                .ns = "ns", .name = "unallocated", .uid = "uid-u", .err = -ENODATA
        };
        claims[3] =
                (struct fake_claim){ "ns",    "foreign",
                                     "uid-f", 0,
                                     false,   { { "req", "node2/example.com/serial", names[0] } },
                                     1 };
        claims[4] =
                (struct fake_claim){ "ns", "nodev", "uid-n", 0, false, { { "req", POOL, "ttys9" } },
                                     1 };
        claims[5] = (struct fake_claim){ .ns = "ns", .name = "hang", .uid = "uid-h", .hang = true };
        n_claims = 6;
}

static void start_prepare(struct harness *h, struct tk_dra **k) {
        fixture();
        harness_start_at(h, ft_new(), claims, n_claims, two, 2);
        cr_assert_eq(tk_dra_start(h->root, k), 0);
        cr_assert_eq(tk_dra_wait_registered(*k, DRIVER, 1, WAIT_MS), 0);
}

static char *checkpoint(const struct harness *h) {
        char *path = NULL, *text = NULL;
        size_t len = 0;
        FILE *f;

        cr_assert_eq(asprintf(&path, "%s/plugins/%s/checkpoint.json", h->root, DRIVER) > 0, true);
        f = fopen(path, "r");
        free(path);
        if (!f)
                return NULL;
        cr_assert_eq(getdelim(&text, &len, '\0', f) > 0, true);
        fclose(f);
        return text;
}

Test(dra_prepare, answers_the_cdi_ids_of_allocate_on_both_versions_after_the_checkpoint) {
        struct harness h;
        struct tk_dra *k;
        const char *versions[] = { "v1", "v1beta1" };

        start_prepare(&h, &k);
        _cleanup_free_ char *cdi0 = cdi_of(&h, "ttyS0"), *cdi1 = cdi_of(&h, "ttyS1");
        _cleanup_free_ char *name0 = name_of("ttyS0");
        for (size_t v = 0; v < 2; v++) {
                PrepResp *r = NULL;
                struct tk_dra_claim c[] = { { "ns", "a0", "uid-a0" }, { "ns", "a1", "uid-a1" } };
                cr_assert_eq(tk_dra_prepare(k, DRIVER, versions[v], c, 2, &r), GRPC_STATUS_OK);
                cr_assert_eq(r->n_claims, 2);
                const PrepClaim *a0 = claim_of(r, "uid-a0"), *a1 = claim_of(r, "uid-a1");
                cr_assert_str_eq(a0->error, "");
                cr_assert_eq(a0->n_devices, 1);
                cr_assert_str_eq(a0->devices[0]->pool_name, POOL);
                cr_assert_str_eq(a0->devices[0]->device_name, name0);
                cr_assert_eq(a0->devices[0]->n_request_names, 1);
                cr_assert_str_eq(a0->devices[0]->request_names[0], "req");
                cr_assert_eq(a0->devices[0]->n_cdi_device_ids, 1);
                cr_assert_str_eq(a0->devices[0]->cdi_device_ids[0], cdi0);
                cr_assert_str_eq(a1->devices[0]->cdi_device_ids[0], cdi1);
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(
                        r, NULL);
                /* On disk by the time the answer came. */
                _cleanup_free_ char *cp = checkpoint(&h);
                cr_assert(cp && strstr(cp, "uid-a0") && strstr(cp, "uid-a1") && strstr(cp, cdi0));
        }
        /* The second time came from the checkpoint, not the API server. */
        pthread_mutex_lock(&h.api.lock);
        cr_assert_eq(h.api.lookups, 2);
        pthread_mutex_unlock(&h.api.lock);
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_prepare, each_claims_problem_is_its_error_string) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        struct tk_dra_claim c[] = {
                { "ns", "a0", "uid-a0" },         { "ns", "missing", "uid-m" },
                { "ns", "unallocated", "uid-u" }, { "ns", "a1", "uid-replaced" },
                { "ns", "foreign", "uid-f" },     { "ns", "nodev", "uid-n" },
                { "", "a0", "uid-empty-ns" },
        };

        start_prepare(&h, &k);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 7, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 7);
        cr_assert_str_eq(claim_of(r, "uid-a0")->error, "");
        cr_assert_str_eq(claim_of(r, "uid-m")->error, "no such ResourceClaim");
        cr_assert_str_eq(claim_of(r, "uid-u")->error, "the ResourceClaim is not allocated");
        cr_assert(strstr(claim_of(r, "uid-replaced")->error, "another uid"));
        cr_assert_neq(strlen(claim_of(r, "uid-f")->error), 0);
        cr_assert_eq(claim_of(r, "uid-f")->n_devices, 0);
        cr_assert_neq(strlen(claim_of(r, "uid-n")->error), 0);
        cr_assert(strstr(claim_of(r, "uid-empty-ns")->error, "namespace"));
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        /* Only what prepared is checkpointed. */
        _cleanup_free_ char *cp = checkpoint(&h);
        cr_assert(cp && strstr(cp, "uid-a0") && !strstr(cp, "uid-f") && !strstr(cp, "uid-n"));
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_prepare, a_thousand_claims_are_answered) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        struct tk_dra_claim *c = calloc(1000, sizeof(*c));
        char(*uids)[16] = calloc(1000, 16);

        start_prepare(&h, &k);
        for (size_t i = 0; i < 1000; i++) {
                snprintf(uids[i], 16, "uid-%zu", i);
                c[i] = (struct tk_dra_claim){ "ns", i % 2 ? "a1" : "missing", uids[i] };
        }
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1000, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1000);
        for (size_t i = 0; i < 1000; i++)
                cr_assert_str_eq(claim_of(r, uids[i])->error,
                                 i % 2 ? "the ResourceClaim has another uid (it was deleted and "
                                         "created again)"
                                       : "no such ResourceClaim");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        free(c);
        free(uids);
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_prepare, a_lookup_past_the_deadline_fails_its_claim_only) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        struct tk_dra_claim c[] = { { "ns", "a0", "uid-a0" }, { "ns", "hang", "uid-h" } };

        lookup_timeout_ms = 300;
        start_prepare(&h, &k);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 2, &r), GRPC_STATUS_OK);
        cr_assert_str_eq(claim_of(r, "uid-a0")->error, "");
        cr_assert_str_eq(claim_of(r, "uid-h")->error,
                         "the ResourceClaim lookup did not finish in time");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        tk_dra_stop(k);
        harness_stop(&h);
}

Test(dra_prepare, unprepare_after_a_restart_works_from_the_checkpoint) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        UnprepResp *u = NULL;
        struct tk_dra_claim c[] = { { "ns", "a0", "uid-a0" } };
        struct tk_dra_claim unknown[] = { { "ns", "a0", "uid-a0" }, { "ns", "x", "uid-never" } };
        char *root;

        start_prepare(&h, &k);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_assert_str_eq(claim_of(r, "uid-a0")->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        tk_dra_stop(k);
        root = harness_stop_keep(&h);
        /* Again on the same dir, and no claim known to the API server. */
        harness_start_at(&h, root, NULL, 0, two, 2);
        pthread_mutex_lock(&h.lock);
        cr_assert_eq(dra_node_prepared(h.n), 1);
        pthread_mutex_unlock(&h.lock);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        /* Prepare again answers from the checkpoint though the claim is gone. */
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1beta1", c, 1, &r), GRPC_STATUS_OK);
        cr_assert_str_eq(claim_of(r, "uid-a0")->error, "");
        cr_assert_eq(claim_of(r, "uid-a0")->n_devices, 1);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_eq(tk_dra_unprepare(k, DRIVER, "v1", unknown, 2, &u), GRPC_STATUS_OK);
        cr_assert_eq(u->n_claims, 2);
        for (size_t i = 0; i < 2; i++)
                cr_assert_str_eq(u->claims[i]->value->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                u, NULL);
        pthread_mutex_lock(&h.lock);
        cr_assert_eq(dra_node_prepared(h.n), 0);
        pthread_mutex_unlock(&h.lock);
        _cleanup_free_ char *cp = checkpoint(&h);
        cr_assert(cp && !strstr(cp, "uid-a0"));
        tk_dra_stop(k);
        harness_stop(&h);
}

/* A checkpoint that does not read is left as it is (another instance may
 * hold claims in it) and every call fails its claims naming it, until it
 * reads again; then the claims it holds are answered from it. */
Test(dra_prepare, a_bad_checkpoint_is_left_and_fails_the_calls_until_it_reads) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        UnprepResp *u = NULL;
        char *root = ft_new(), *rel = NULL, *path = NULL, *text = NULL, *msg = NULL;
        const char *bad = "{\"version\": 1, \"claims\": [truncated";
        struct tk_dra_claim c[] = { { "ns", "a0", "uid-a0" } };
        struct dra_device dev = { .request = "req", .pool = POOL, .device = "x" };
        char *ids[] = { "example.com/serial=x", NULL };
        struct dra_claim kept = { .uid = "uid-kept", .ns = "ns", .name = "kept" };
        size_t len;

        fixture();
        cr_assert_eq(asprintf(&rel, "plugins/%s/checkpoint.json", DRIVER) > 0, true);
        cr_assert_eq(ft_file(root, rel, bad), 0);
        harness_start_at(&h, root, claims, n_claims, two, 2);
        cr_assert_eq(log_wait(h.log, "is unusable", WAIT_MS), 0);
        cr_assert_eq(tk_dra_start(h.root, &k), 0);
        cr_assert_eq(tk_dra_wait_registered(k, DRIVER, 1, WAIT_MS), 0);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_expect(strstr(claim_of(r, "uid-a0")->error, "checkpoint.json cannot be read"), "%s",
                  claim_of(r, "uid-a0")->error);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_eq(tk_dra_unprepare(k, DRIVER, "v1", c, 1, &u), GRPC_STATUS_OK);
        cr_expect(strstr(u->claims[0]->value->error, "checkpoint.json cannot be read"), "%s",
                  u->claims[0]->value->error);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
                u, NULL);
        _cleanup_free_ char *still = checkpoint(&h);
        cr_expect_str_eq(still, bad, "the bad file was replaced");
        /* Readable again, holding a claim another instance prepared. */
        dev.cdi_ids = ids;
        kept.devices = &dev;
        kept.n_devices = 1;
        cr_assert_eq(dra_checkpoint_encode(&kept, 1, &text, &len, &msg), 0);
        cr_assert_eq(asprintf(&path, "%s/%s", root, rel) > 0, true);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(text, 1, len, f), len);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_expect_str_eq(claim_of(r, "uid-a0")->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        _cleanup_free_ char *both = checkpoint(&h);
        cr_expect(both && strstr(both, "uid-kept") && strstr(both, "uid-a0"), "%s", both);
        tk_dra_stop(k);
        free(rel);
        free(path);
        free(text);
        harness_stop(&h);
}

/* The lock held elsewhere past the bound: the claims that would change
 * the checkpoint fail, the call is answered, and once the lock is free
 * again they prepare. */
Test(dra_prepare, a_lock_held_too_long_fails_the_claims_and_serving_goes_on) {
        struct harness h;
        struct tk_dra *k;
        PrepResp *r = NULL;
        struct tk_dra_claim c[] = { { "ns", "a0", "uid-a0" } };
        _cleanup_free_ char *lock = NULL;
        int fd;

        start_prepare(&h, &k);
        cr_assert_eq(asprintf(&lock, "%s/plugins/%s/checkpoint.lock", h.root, DRIVER) > 0, true);
        fd = open(lock, O_RDWR | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_expect(strstr(claim_of(r, "uid-a0")->error, "cannot lock the checkpoint"), "%s",
                  claim_of(r, "uid-a0")->error);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        cr_assert_eq(log_wait(h.log, "held it for more than 2 s", WAIT_MS), 0);
        close(fd);
        cr_assert_eq(tk_dra_prepare(k, DRIVER, "v1", c, 1, &r), GRPC_STATUS_OK);
        cr_expect_str_eq(claim_of(r, "uid-a0")->error, "");
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
        tk_dra_stop(k);
        harness_stop(&h);
}

/* Temps a crash left while writing the checkpoint (random names now, the
 * fixed one of older versions) are not checkpoints: gone at start. */
Test(dra_prepare, temps_a_crash_left_are_removed_at_start) {
        struct harness h;
        char *root = ft_new();
        const char *temps[] = { ".checkpoint.json.tmp", ".checkpoint.json.tmp0123456789abcdef" };

        for (size_t i = 0; i < ELEMENTSOF(temps); i++) {
                _cleanup_free_ char *rel = NULL;
                cr_assert_eq(asprintf(&rel, "plugins/%s/%s", DRIVER, temps[i]) > 0, true);
                cr_assert_eq(ft_file(root, rel, "{\"version\": 1, \"cl"), 0);
        }
        harness_start_at(&h, root, NULL, 0, two, 2);
        for (size_t i = 0; i < ELEMENTSOF(temps); i++) {
                _cleanup_free_ char *path = NULL;
                struct stat st;
                cr_assert_eq(asprintf(&path, "%s/plugins/%s/%s", root, DRIVER, temps[i]) > 0, true);
                cr_expect_neq(stat(path, &st), 0, "%s is left", temps[i]);
        }
        pthread_mutex_lock(&h.lock);
        cr_assert_eq(dra_node_prepared(h.n), 0);
        pthread_mutex_unlock(&h.lock);
        harness_stop(&h);
}
