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
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra_node.h"
#include "faketree.h"
#include "kubelet.h"
#include "logwait.h"
#include "rpc.h"

#define DRIVER "cdiplug.example.com"
#define WAIT_MS 10000

struct harness {
        char *root;
        char *log;
        grpc_completion_queue *cq;
        struct dra_node *n;
        pthread_mutex_t lock;
        pthread_t drain, watch;
        int stop_fd, ino;
        bool stopping;
};

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
                int fds[2];
                pthread_mutex_lock(&h->lock);
                dra_node_poll_fds(h->n, fds);
                pthread_mutex_unlock(&h->lock);
                struct pollfd p[4] = { { .fd = h->stop_fd, .events = POLLIN },
                                       { .fd = h->ino, .events = POLLIN },
                                       { .fd = fds[0], .events = POLLIN },
                                       { .fd = fds[1], .events = POLLIN } };
                if (poll(p, 4, -1) < 0)
                        continue;
                if (p[0].revents)
                        return NULL;
                pthread_mutex_lock(&h->lock);
                if (p[1].revents && read(h->ino, buf, sizeof(buf)) > 0)
                        dra_node_relisten(h->n);
                for (int i = 2; i < 4; i++)
                        if (p[i].revents)
                                dra_node_accept(h->n, p[i].fd);
                pthread_mutex_unlock(&h->lock);
        }
}

static void harness_start(struct harness *h, const struct dra_health_device *devs, size_t count) {
        struct dra_node_settings s = { .kubelet_root = NULL, .driver = DRIVER };
        int fd;

        memset(h, 0, sizeof(*h));
        h->root = ft_new();
        cr_assert(h->root);
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
        h->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        cr_assert(inotify_add_watch(h->ino, dra_node_registry_dir(h->n), IN_DELETE) >= 0);
        h->stop_fd = eventfd(0, EFD_CLOEXEC);
        pthread_mutex_lock(&h->lock);
        cr_assert_eq(dra_node_start(h->n, h->cq), 0);
        pthread_mutex_unlock(&h->lock);
        cr_assert_eq(pthread_create(&h->drain, NULL, drain_thread, h), 0);
        cr_assert_eq(pthread_create(&h->watch, NULL, watch_thread, h), 0);
}

static void harness_stop(struct harness *h) {
        uint64_t one = 1;

        cr_assert_eq(write(h->stop_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
        pthread_join(h->watch, NULL);
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        dra_node_stop(h->n);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->drain, NULL);
        grpc_completion_queue_destroy(h->cq);
        dra_node_free(h->n);
        close(h->stop_fd);
        close(h->ino);
        grpc_shutdown();
        pthread_mutex_destroy(&h->lock);
        ft_free(h->root);
        free(h->log);
}

static const struct dra_health_device two[] = {
        { "node1/example.com/serial", "ttys0", true },
        { "node1/example.com/serial", "ttys1", true },
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
        cr_assert_eq(info->n_supported_versions, 2);
        cr_assert_str_eq(info->supported_versions[0], "v1.DRAPlugin");
        cr_assert_str_eq(info->supported_versions[1], "v1beta1.DRAPlugin");
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
        cr_assert_eq(write(h.stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t)),
                     (ssize_t)sizeof(uint64_t));
        pthread_join(h.watch, NULL);
        pthread_mutex_lock(&h.lock);
        h.stopping = true;
        dra_node_stop(h.n);
        pthread_mutex_unlock(&h.lock);
        cr_assert_eq(tk_dra_health_wait_end(alpha, WAIT_MS, &st), 0);
        cr_assert_eq(st, GRPC_STATUS_UNAVAILABLE);
        cr_assert_eq(tk_dra_health_wait_end(v1, WAIT_MS, &st), 0);
        cr_assert_eq(st, GRPC_STATUS_UNAVAILABLE);
        pthread_join(h.drain, NULL);
        tk_dra_health_close(alpha);
        tk_dra_health_close(v1);
        tk_dra_stop(k);
        grpc_completion_queue_destroy(h.cq);
        dra_node_free(h.n);
        close(h.stop_fd);
        close(h.ino);
        grpc_shutdown();
        ft_free(h.root);
        free(h.log);
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
