/* SPDX-License-Identifier: Apache-2.0 */
/* Registration with the kubelet: Register on kubelet.sock, asynchronously
 * on the daemon's completion queue, because the kubelet dials back and
 * calls GetDevicePluginOptions before it answers, and that call must be
 * served by the same loop. Failures retry with backoff; a missing
 * kubelet.sock waits for inotify instead of a timer. */
#include <dirent.h>
#include <fcntl.h>
#include <grpc/support/alloc.h>
#include <string.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>

#include "config.h"
#include "serve-internal.h"
#include "plugin.h"
#include "rpc.h"
#include "log.h"

#define REG_TIMEOUT_MS 10000
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 10000
/* A kubelet.sock that refuses the connection is bound but not yet
 * listening (we act on its IN_CREATE, which comes at bind) or a dead
 * kubelet's: nothing reached a kubelet, so try again soon, and never
 * later than RETRY_CONNECT_MAX_MS: the kubelet answers the moment it
 * listens. */
#define RETRY_CONNECT_MIN_MS 2
#define RETRY_CONNECT_MAX_MS 250

struct dp_reg {
        struct dp_tag tag;
        struct dp_resource *res;
        unsigned ch_gen; /* d->kubelet.ch_gen when started */
        bool relistened; /* our socket was re-created meanwhile */
        grpc_call *call;
        struct dp_unary u;
};

bool dp_kubelet_present(const struct dp_daemon *d) {
        struct stat st;
        return stat(d->kubelet.sock, &st) == 0 && S_ISSOCK(st.st_mode);
}

void dp_kubelet_sock_note(struct dp_daemon *d) {
        struct stat st;
        if (stat(d->kubelet.sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
                d->kubelet.noted_dev = st.st_dev;
                d->kubelet.noted_ino = st.st_ino;
        }
}

bool dp_kubelet_sock_is_noted(struct dp_daemon *d) {
        struct stat st;
        bool same = d->kubelet.noted_ino != 0 && stat(d->kubelet.sock, &st) == 0 &&
                    st.st_dev == d->kubelet.noted_dev && st.st_ino == d->kubelet.noted_ino;
        d->kubelet.noted_ino = 0;
        return same;
}

/* Once stopping and nothing is left in flight, end the main loop. */
void dp_maybe_finish(struct dp_daemon *d) {
        if (d->stopping && d->live == 0 && dp_dra_done(d))
                grpc_completion_queue_shutdown(d->cq);
}

/* The Register timer set to the earliest retry any resource waits for. */
static void register_timer_set(struct dp_daemon *d) {
        uint64_t next = 0;
        for (size_t i = 0; i < d->n_res; i++)
                next = dp_due_min(next, d->res[i]->registration.retry_at_ms);
        dp_timer_set(&d->register_timer, next);
}

static void reg_free(struct dp_reg *g) {
        if (g->call)
                grpc_call_unref(g->call);
        dp_unary_clear(&g->u);
        free(g);
}

/* Every Register goes over one channel: 64 resources registering at once
 * share one connection instead of each building a channel, a connection
 * and an HTTP/2 handshake of its own. A channel whose connect failed
 * waits out grpc's reconnect backoff (100 ms at the least) and fails every
 * call meanwhile, so it is replaced instead; a dropped connection (the
 * kubelet restarted) is simply dialled again on the next call, to whatever
 * kubelet.sock is then. */
static grpc_channel *kubelet_channel(struct dp_daemon *d) {
        if (d->kubelet.ch) {
                grpc_connectivity_state st =
                        grpc_channel_check_connectivity_state(d->kubelet.ch, 0);
                if (st != GRPC_CHANNEL_TRANSIENT_FAILURE && st != GRPC_CHANNEL_SHUTDOWN)
                        return d->kubelet.ch;
                dp_kubelet_channel_close(d);
        }
        d->kubelet.ch = dp_channel_unix(d->kubelet.sock);
        return d->kubelet.ch;
}

void dp_kubelet_channel_close(struct dp_daemon *d) {
        if (!d->kubelet.ch)
                return;
        /* Calls still on it fail, and take their own references. */
        grpc_channel_destroy(d->kubelet.ch);
        d->kubelet.ch = NULL;
        d->kubelet.ch_gen++;
}

/* A new kubelet: Registers and sockets made for the old one are stale, and
 * its connection leads to a dead kubelet. */
void dp_kubelet_new_gen(struct dp_daemon *d) {
        d->kubelet.gen++;
        dp_kubelet_channel_close(d);
        /* Failures against the dead kubelet's socket (refused while it
         * was down) say nothing about the new one: its first refusal (bound,
         * not yet listening) is retried in milliseconds, not after the
         * back-off those failures built up. */
        for (size_t i = 0; i < d->n_res; i++)
                d->res[i]->registration.failures = 0;
}

/* A delay of d ms, spread over [d, 3d/2]: the resources (and the
 * nodes) that found kubelet.sock refusing together do not retry in step. */
static uint64_t jittered(uint64_t d) {
        static unsigned seed;

        if (!seed)
                seed = (unsigned)dp_now_ms() ^ (unsigned)(uintptr_t)&seed; /* ASLR: per process */
        return d + (uint64_t)rand_r(&seed) % (d / 2 + 1);
}

void dp_kubelet_sock_created(struct dp_daemon *d) {
        /* The first kubelet of a daemon that started before it is no
         * restart. */
        d->kubelet.restarts += d->kubelet.seen;
        d->kubelet.seen = true;
}

/* The Register never reached a kubelet: its connect failed. */
static bool connect_failed(struct dp_daemon *d, const struct dp_reg *g) {
        if (g->u.status != GRPC_STATUS_UNAVAILABLE)
                return false;
        if (g->ch_gen != d->kubelet.ch_gen || !d->kubelet.ch)
                return true; /* replaced because a connect failed */
        return grpc_channel_check_connectivity_state(d->kubelet.ch, 0) ==
               GRPC_CHANNEL_TRANSIENT_FAILURE;
}

/* A kubelet restart churns through servers, channels and calls and leaves
 * the heap holed; once the last Register is answered, give the free pages
 * back (madvise), so the daemon's footprint is its steady state. */
static void trim_after_burst(struct dp_daemon *d) {
        for (size_t i = 0; i < d->n_res; i++)
                if (d->res[i]->registration.call)
                        return;
        malloc_trim(0);
}

static void on_registered(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_reg *g = (struct dp_reg *)tag;
        struct dp_resource *res = g->res;

        res->registration.call = NULL;
        if (ok && g->u.status == GRPC_STATUS_OK) {
                res->registration.failures = 0;
                res->registration.retry_at_ms = 0;
                res->stats.registrations++;
                res->stats.registered = true;
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": registered with the kubelet (endpoint %s)",
                         res->cfg->name, res->cfg->socket_name);
        } else if (g->relistened && !d->stopping) {
                /* The kubelet may have dialled back just while our socket
                 * was being re-created: that is no reason to back off. */
                log_with(
                        LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                        "resource \"%s\": Register failed while its socket was re-created, registering again",
                        res->cfg->name);
                res->registration.again = true;
        } else if (!d->stopping && !res->registration.again && !res->life.retired) {
                char *why = grpc_slice_to_c_string(g->u.details);
                bool refused = connect_failed(d, g);
                uint64_t delay =
                        refused ? jittered(dp_backoff_ms(RETRY_CONNECT_MIN_MS, RETRY_CONNECT_MAX_MS,
                                                         res->registration.failures))
                                : dp_backoff_ms(RETRY_MIN_MS, RETRY_MAX_MS,
                                                res->registration.failures);
                res->registration.failures++;
                if (dp_kubelet_present(d)) {
                        res->registration.retry_at_ms = dp_now_ms() + delay;
                        /* A dead kubelet's socket refuses every few hundred ms:
                         * one warning in 16 says so. */
                        int level = !refused                               ? LOG_WARN
                                    : delay < RETRY_MIN_MS                 ? LOG_INFO
                                    : res->registration.failures % 16 == 0 ? LOG_WARN
                                                                           : LOG_DEBUG;
                        log_with(
                                level, &(struct log_fields){ .resource = res->cfg->name },
                                "resource \"%s\": Register failed (status %d: %s), retrying in %llu ms",
                                res->cfg->name, g->u.status, why, (unsigned long long)delay);
                } else
                        log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                                 "resource \"%s\": kubelet.sock is gone, waiting for the kubelet",
                                 res->cfg->name);
                gpr_free(why);
                register_timer_set(d);
        }
        reg_free(g);
        d->live--;
        if (res->registration.again && !d->stopping) {
                res->registration.again = false;
                dp_register(res);
        }
        trim_after_burst(d);
        dp_maybe_finish(d);
        dp_resource_maybe_free(res);
}

void dp_register(struct dp_resource *res) {
        struct dp_daemon *d = res->d;
        V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
        V1beta1__DevicePluginOptions opts = dp_plugin_options;
        struct dp_reg *g;
        grpc_channel *ch;
        if (d->stopping || res->srv.listen_fd < 0)
                return;
        res->stats.registered = false; /* until the new Register is answered */
        if (res->registration.call) {
                /* A Register is in flight to what may be the old kubelet. */
                res->registration.again = true;
                return;
        }
        res->registration.retry_at_ms = 0;
        if (!dp_kubelet_present(d)) {
                log_with(
                        LOG_INFO,
                        &(struct log_fields){ .resource = res->cfg->name, .path = d->kubelet.sock },
                        "resource \"%s\": waiting for %s", res->cfg->name, d->kubelet.sock);
                return;
        }
        g = calloc(1, sizeof(*g));
        if (!g)
                goto fail;
        g->tag.fn = on_registered;
        g->res = res;
        req.version = "v1beta1";
        req.endpoint = res->cfg->socket_name;
        req.resource_name = res->cfg->name;
        req.options = &opts;
        dp_unary_init(&g->u, dp_pack(&req.base));
        ch = kubelet_channel(d);
        if (!ch)
                goto fail;
        g->ch_gen = d->kubelet.ch_gen;
        g->call = dp_unary_begin(ch, d->cq, DP_METHOD_REGISTER, REG_TIMEOUT_MS, &g->u, &g->tag);
        if (!g->call)
                goto fail;
        res->registration.call = g;
        res->registration.gen = d->kubelet.gen;
        res->registration.starts++;
        d->live++;
        return;
fail:
        log_with(LOG_ERR,
                 &(struct log_fields){ .resource = res->cfg->name, .path = d->kubelet.sock },
                 "resource \"%s\": cannot start Register on %s", res->cfg->name, d->kubelet.sock);
        if (g)
                reg_free(g);
        res->registration.retry_at_ms = dp_now_ms() + RETRY_MAX_MS;
        register_timer_set(d);
}

/* A kubelet before 1.36 keeps one device plugin endpoint per resource,
 * not one per socket: when the old instance of a rolling update stops,
 * the end of its stream makes that kubelet disconnect the endpoint it then
 * holds, the new instance's, by closing our ListAndWatch stream, and
 * nothing would connect it again. So a stream the kubelet ends, with no
 * Register since it opened (a kubelet replacing our endpoint after our
 * own Register ends the old stream too) and from the kubelet we
 * registered with (a new one is watch.c's), is answered with a Register.
 * Drops in a row back off up to RETRY_MAX_MS, so a kubelet that ends every
 * stream at once costs one Register per 10 s. */
#define DROP_RETRY_MIN_MS 10
#define DROP_QUIET_MS 10000

/* Another instance's socket of res (the same name but for the instance
 * tag) bound after ours: then we are the old instance of a rolling
 * update, the kubelet dropping us is right, and registering again would
 * take the resource back from the new one (and, with a kubelet that ends
 * the old endpoint's stream on a new Register, start a tug of war). */
static bool newer_instance(const struct dp_resource *res) {
        const char *name = res->cfg->socket_name, *tag = res->d->opts->instance;
        size_t len = strlen(name), stem;
        struct stat mine, other;
        struct dirent *e;
        bool newer = false;
        DIR *dir;

        if (!tag || len < strlen(tag) + strlen(".sock") || lstat(res->socket_path, &mine) < 0)
                return false;
        stem = len - strlen(tag) - strlen(".sock");
        dir = opendir(res->d->opts->kubelet_dir);
        if (!dir)
                return false;
        while (!newer && (e = readdir(dir))) {
                if (strlen(e->d_name) != len || strncmp(e->d_name, name, stem) != 0 ||
                    strcmp(e->d_name + len - strlen(".sock"), ".sock") != 0 ||
                    strcmp(e->d_name, name) == 0 ||
                    fstatat(dirfd(dir), e->d_name, &other, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISSOCK(other.st_mode))
                        continue;
                newer = other.st_ctim.tv_sec > mine.st_ctim.tv_sec ||
                        (other.st_ctim.tv_sec == mine.st_ctim.tv_sec &&
                         other.st_ctim.tv_nsec > mine.st_ctim.tv_nsec);
        }
        closedir(dir);
        return newer;
}

void dp_register_after_drop(struct dp_resource *res, unsigned reg_starts) {
        struct dp_daemon *d = res->d;
        uint64_t now = dp_now_ms(), delay;

        if (d->stopping || res->life.retired || res->srv.state != SRV_UP ||
            res->srv.listen_fd < 0 || res->registration.call ||
            res->registration.starts != reg_starts || res->registration.gen != d->kubelet.gen ||
            !base_owned_is(res->socket_path, &res->srv.listen_id) || !dp_kubelet_present(d))
                return;
        if (newer_instance(res)) {
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": the kubelet ended its ListAndWatch stream; a newer "
                         "instance serves it now",
                         res->cfg->name);
                return;
        }
        if (res->registration.dropped_at_ms + DROP_QUIET_MS < now)
                res->registration.drops = 0;
        delay = dp_backoff_ms(DROP_RETRY_MIN_MS, RETRY_MAX_MS, res->registration.drops++);
        res->registration.dropped_at_ms = now;
        log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                 "resource \"%s\": the kubelet ended its ListAndWatch stream; registering again "
                 "in %llu ms",
                 res->cfg->name, (unsigned long long)delay);
        if (!res->registration.retry_at_ms || res->registration.retry_at_ms > now + delay)
                res->registration.retry_at_ms = now + delay;
        register_timer_set(d);
}

void dp_register_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();
        for (size_t i = 0; i < d->n_res; i++)
                if (d->res[i]->registration.retry_at_ms &&
                    d->res[i]->registration.retry_at_ms <= now)
                        dp_register(d->res[i]);
        register_timer_set(d);
}

void dp_register_relistened(struct dp_resource *res) {
        if (res->registration.call)
                res->registration.call->relistened = true;
}

void dp_register_cancel(struct dp_resource *res) {
        res->registration.retry_at_ms = 0;
        if (res->registration.call)
                grpc_call_cancel(res->registration.call->call, NULL);
}
