/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up in a fixed order, then two loops.
 *
 * 1. open what start-up needs: signalfd, inotify (kubelet dir, device
 *    dirs, the config file's dir), timerfd;
 * 2. lock down (sandbox/): identity, capabilities, no_new_privs, seccomp;
 * 3. grpc_init(), which starts grpc's threads: they inherit the filter;
 * 4. discover devices and write CDI specs, serve, then register.
 * Then the main thread drains the completion queue while the watcher
 * thread waits on the signalfd, inotify and the retry timer, and reloads
 * the config (reload.c) on SIGHUP or when the file changes. */
#include <grpc/grpc.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/un.h>

#include "cdi.h"
#include "config.h"
#include "serve-internal.h"
#include "plugin.h"
#include "resources.h"
#include "rpc.h"
#include "sandbox.h"
#include "log.h"

static int lockdown(const struct dp_daemon *d) {
        /* The API client's TCP sockets, only when DRA is configured or node
         * labels are followed. */
        struct sbx_options so = { .api_access = d->cfg->dra_driver != NULL || dp_nodes_api(d) };
        struct sbx_error err = { 0 };
        const char *user = d->opts->user ? d->opts->user : d->cfg->user;
        int r;

        if (d->opts->no_sandbox) {
                log_warn(
                        "--no-sandbox: serving with full privileges and no seccomp filter; for debugging only");
                return 0;
        }
        if (user) {
                r = sbx_parse_user(user, &so);
                if (r < 0) {
                        log_with(LOG_ERR, &(struct log_fields){ .err = r }, "user \"%s\": %s", user,
                                 strerror(-r));
                        return r;
                }
        }
        r = sbx_lockdown(&so, &err);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = r }, "sandbox: %s failed: %s",
                         err.step ? err.step : "lock-down", strerror(-r));
                return r;
        }
        log_info("sandbox: no capabilities, no_new_privs, seccomp filter loaded%s",
                 user ? " (running as the configured user)" : "");
        return 0;
}

static void stop_all(struct dp_daemon *d) {
        if (d->stopping)
                return;
        d->stopping = true;
        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                dp_server_stop(res);
                dp_register_cancel(res);
        }
        dp_dra_stop(d);
        dp_retained_stop(d);
        dp_maybe_finish(d);
}

/* Once stopping, the ListAndWatch streams have DP_STOP_GRACE_MS to take
 * their status (server.c) before every call left is cancelled: a peer that
 * does not read must not hold up the stop. */

/* Run every completion until the queue is shut down (dp_maybe_finish). */
static void drain(struct dp_daemon *d) {
        gpr_timespec deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
        bool grace = false;

        for (;;) {
                grpc_event ev = grpc_completion_queue_next(d->cq, deadline, NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        return;
                if (ev.type == GRPC_QUEUE_TIMEOUT) {
                        pthread_mutex_lock(&d->lock);
                        dp_server_cancel_stopping(d);
                        pthread_mutex_unlock(&d->lock);
                        deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
                        continue;
                }
                if (ev.type != GRPC_OP_COMPLETE)
                        continue;
                pthread_mutex_lock(&d->lock);
                ((struct dp_tag *)ev.tag)->fn(d, ev.tag, ev.success);
                /* The DRA server's tags do not count in d->live. */
                if (d->stopping)
                        dp_maybe_finish(d);
                /* Stopping shuts the servers down, which completes their
                 * waiting request slots: a completion always follows. */
                if (d->stopping && !grace) {
                        grace = true;
                        deadline =
                                gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                             gpr_time_from_millis(DP_STOP_GRACE_MS, GPR_TIMESPAN));
                }
                pthread_mutex_unlock(&d->lock);
        }
}

/* The poll set: signals, inotify, the retry timer, the DRA server's two
 * listening sockets (-1 without "dra"), then one listening socket per
 * resource (-1, ignored by poll, while it has none). Only this
 * thread changes listening sockets and the resources once it runs, so the
 * set is rebuilt after each round of work. Returns the number of entries:
 * out of memory after a reload added resources, the new ones wait (the
 * signals, and so a restart, still work). */
#define POLL_FIXED 5

static size_t poll_set(struct dp_daemon *d, struct pollfd **fds, size_t *cap) {
        size_t n = POLL_FIXED + d->n_res;

        if (n > *cap) {
                struct pollfd *more = realloc(*fds, n * sizeof(**fds));
                if (more) {
                        *fds = more;
                        *cap = n;
                } else {
                        log_error("watcher: out of memory; %zu resources not accepting connections",
                                  n - *cap);
                        n = *cap;
                }
        }
        if (n < POLL_FIXED)
                return 0; /* the caller stops: not even the signals can be watched */
        (*fds)[0] = (struct pollfd){ .fd = d->watch.signal_fd, .events = POLLIN };
        (*fds)[1] = (struct pollfd){ .fd = d->watch.inotify_fd, .events = POLLIN };
        (*fds)[2] = (struct pollfd){ .fd = dp_loop_fd(&d->loop), .events = POLLIN };
        int dra[2];
        dp_dra_poll_fds(d, dra);
        (*fds)[3] = (struct pollfd){ .fd = dra[0], .events = POLLIN };
        (*fds)[4] = (struct pollfd){ .fd = dra[1], .events = POLLIN };
        for (size_t i = 0; i + POLL_FIXED < n; i++)
                (*fds)[POLL_FIXED + i] =
                        (struct pollfd){ .fd = dp_server_poll_fd(d->res[i]), .events = POLLIN };
        return n;
}

static void *watcher(void *arg) {
        struct dp_daemon *d = arg;
        _cleanup_free_ struct pollfd *fds = NULL;
        size_t cap = 0, n_fds;

        /* Named, so its (absent) wake-ups can be told from grpc's. */
        pthread_setname_np(pthread_self(), "cdiplug-watch");
        pthread_mutex_lock(&d->lock);
        n_fds = poll_set(d, &fds, &cap);
        pthread_mutex_unlock(&d->lock);
        for (;;) {
                bool hup = false;

                if (n_fds < POLL_FIXED) {
                        log_error("watcher: out of memory");
                        break;
                }
                if (poll(fds, n_fds, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        log_with(LOG_ERR, &(struct log_fields){ .err = errno }, "poll: %m");
                        break;
                }
                pthread_mutex_lock(&d->lock);
                if (fds[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(d->watch.signal_fd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGHUP) {
                                        hup = true;
                                        continue;
                                }
                                log_info("signal %s: shutting down", strsignal((int)si.ssi_signo));
                                stop_all(d);
                        }
                }
                for (size_t i = 0; !d->stopping && i + POLL_FIXED < n_fds && i < d->n_res; i++)
                        if ((fds[POLL_FIXED + i].revents & POLLIN) &&
                            d->res[i]->srv.listen_fd == fds[POLL_FIXED + i].fd)
                                dp_server_accept(d->res[i]);
                for (size_t i = 3; !d->stopping && i < POLL_FIXED; i++)
                        if (fds[i].revents & POLLIN)
                                dp_dra_accept(d, fds[i].fd);
                if (!d->stopping && (fds[1].revents & POLLIN))
                        dp_watch_handle(d);
                /* File changes before SIGHUP: a change written before the
                 * signal was sent is then never applied after it. */
                if (!d->stopping && d->watch.reload_due) {
                        d->watch.reload_due = false;
                        dp_reload(d, "the file changed");
                }
                if (!d->stopping && hup)
                        dp_reload(d, "SIGHUP");
                if (fds[2].revents & POLLIN)
                        dp_loop_dispatch(&d->loop, !d->stopping);
                bool done = d->stopping;
                n_fds = poll_set(d, &fds, &cap);
                pthread_mutex_unlock(&d->lock);
                if (done)
                        break;
        }
        return NULL;
}

/* Each file sets its own timer; when several are due at once they run in
 * this order. Added first, so that any file may set its timer at once. */
static void add_timers(struct dp_daemon *d) {
        dp_timer_add(&d->loop, &d->retained_timer, dp_retained_due, d);
        dp_timer_add(&d->loop, &d->spec_timer, dp_spec_due, d);
        dp_timer_add(&d->loop, &d->accept_timer, dp_accept_due, d);
        dp_timer_add(&d->loop, &d->relisten_timer, dp_watch_due, d);
        dp_timer_add(&d->loop, &d->register_timer, dp_register_due, d);
        dp_timer_add(&d->loop, &d->dra_timer, dp_dra_due, d);
        dp_timer_add(&d->loop, &d->nodes_timer, dp_nodes_due, d);
        dp_timer_add(&d->loop, &d->nfd_timer, dp_nfd_due, d);
        dp_timer_add(&d->loop, &d->stop_timer, dp_server_stop_due, d);
}

static int setup_fds(struct dp_daemon *d) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        /* Blocked before any thread exists, so every thread inherits it and
         * only the signalfd sees these signals. */
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
                return -errno;
        signal(SIGPIPE, SIG_IGN);
        d->watch.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        d->watch.inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (d->watch.signal_fd < 0 || d->watch.inotify_fd < 0 || dp_loop_init(&d->loop) < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = errno },
                         "cannot create signalfd/inotify/timerfd: %m");
                return -errno;
        }
        return 0;
}

/* The metrics endpoint's socket: bound now, served after the lock-down.
 * The command line wins over the config; "" switches either off. */
static int metrics_open(struct dp_daemon *d) {
        const char *addr =
                d->opts->metrics_address ? d->opts->metrics_address : d->cfg->metrics_address;
        struct dp_metrics_source src;

        if (!addr || !*addr)
                return 0;
        dp_scrape_source(d, &src);
        return dp_http_open(&src, addr, dp_podres_socket(d), &d->http);
}

static int setup_resources(struct dp_daemon *d) {
        d->res = calloc(d->cfg->n_resources + 1, sizeof(*d->res));
        if (!d->res)
                return -ENOMEM;
        for (size_t i = 0; i < d->cfg->n_resources; i++) {
                int r = dp_resource_new(d, &d->cfg->resources[i], &d->res[i]);
                if (r < 0)
                        return r;
                d->n_res = i + 1;
        }
        return 0;
}

static void warn_overlaps(struct dp_daemon *d) {
        _cleanup_free_ struct dp_plugin **plugins = calloc(d->n_res + 1, sizeof(*plugins));

        if (!plugins)
                return;
        for (size_t i = 0; i < d->n_res; i++)
                plugins[i] = d->res[i]->plugin;
        dp_warn_overlaps(plugins, d->n_res);
}

static void daemon_free(struct dp_daemon *d) {
        for (size_t i = 0; i < d->n_res; i++)
                dp_resource_free(d->res[i]);
        dp_retired_free_all(d);
        dp_retained_free(d);
        dp_dra_free(d);
        dp_nodes_free(d);
        dp_nfd_free(d);
        free(d->res);
        free(d->kubelet.sock);
        free(d->watch.dev_wds);
        base_strvec_clear(&d->watch.dev_wd_dirs);
        free(d->watch.config_name);
        free(d->watch.config_real_name);
        cfg_free(d->cfg);
        if (d->watch.signal_fd >= 0)
                close(d->watch.signal_fd);
        if (d->watch.inotify_fd >= 0)
                close(d->watch.inotify_fd);
        dp_loop_done(&d->loop);
}

/* Everything opened before the lock-down, then the lock-down: 0 or the
 * first step's negative errno (each says what failed). */
static int setup(struct dp_daemon *d) {
        int r = xasprintf(&d->kubelet.sock, "%s/kubelet.sock", d->opts->kubelet_dir);

        if (r >= 0)
                r = setup_resources(d);
        if (r >= 0)
                r = setup_fds(d);
        if (r >= 0)
                r = dp_watch_setup(d);
        if (r >= 0)
                r = dp_dra_setup(d);
        if (r >= 0)
                r = dp_nodes_setup(d);
        if (r >= 0)
                r = dp_nfd_setup(d);
        if (r >= 0)
                r = dp_watch_config_setup(d);
        if (r >= 0)
                r = metrics_open(d);
        if (r >= 0)
                r = lockdown(d);
        return r;
}

static bool resource_sock_match(const char *name, void *unused) {
        size_t len = strlen(name);

        (void)unused;
        return strncmp(name, "cdiplug-", 8) == 0 && len > 13 &&
               strcmp(name + len - 5, ".sock") == 0;
}

/* After grpc_init, under d->lock: every resource's devices and spec, then
 * its server, then its Register. */
static int start_serving(struct dp_daemon *d) {
        int r;

        for (size_t i = 0; i < d->n_res; i++) {
                bool changed;
                r = dp_resource_refresh(d->res[i], &changed);
                if (r < 0)
                        return r;
        }
        dp_specs_startup(d);
        warn_overlaps(d);
        /* Any instance's resource sockets are cdiplug-*.sock. */
        dp_sweep_dead_sockets(d->opts->kubelet_dir, resource_sock_match, NULL);
        /* Serve first, then register: the kubelet dials back at once. The
         * sockets wait for kubelet.sock (watch.c), like after a restart. */
        bool kubelet = d->watch.kubelet_wd >= 0 && dp_kubelet_present(d);
        d->kubelet.seen = kubelet;
        if (kubelet)
                dp_kubelet_sock_note(d);
        if (d->watch.kubelet_wd >= 0 && !kubelet)
                log_with(LOG_INFO, &(struct log_fields){ .path = d->kubelet.sock },
                         "waiting for %s before serving", d->kubelet.sock);
        for (size_t i = 0; i < d->n_res; i++) {
                r = dp_server_start(d->res[i]);
                if (r < 0)
                        return r;
                if (kubelet && dp_server_listen(d->res[i]) >= 0)
                        dp_register(d->res[i]);
        }
        dp_nfd_update(d);
        /* The DRA driver registers through plugins_registry, whether or
         * not kubelet.sock is there. */
        r = dp_dra_start(d);
        return r < 0 ? r : dp_nodes_start(d);
}

int dp_daemon_run(const struct dp_options *opts, struct cfg_config *cfg) {
        struct dp_daemon d = {
                .opts = opts,
                .cfg = cfg,
                .loop = { .fd = -1 },
                .kubelet = { .gen = 1 },
                .watch = {
                        .signal_fd = -1,
                        .inotify_fd = -1,
                        .kubelet_wd = -1,
                        .ancestor_wd = -1,
                        .config_wd = -1,
                        .config_real_wd = -1,
                },
                .dra = { .wd = -1, .root_wd = -1, .ck_wd = -1 },
                .nfd = { .dfd = -1 },
        };
        pthread_t thread;
        int r;

        pthread_mutex_init(&d.lock, NULL);
        add_timers(&d);
        r = setup(&d);
        if (r < 0)
                goto out;

        /* One malloc arena, before grpc starts its threads: each thread
         * would otherwise get an arena of its own that keeps what it freed.
         * The daemon's work is one thread's; the others mostly sleep. */
        mallopt(M_ARENA_MAX, 1);
        dp_grpc_init();
        d.cq = grpc_completion_queue_create_for_next(NULL);
        pthread_mutex_lock(&d.lock);
        r = start_serving(&d);
        pthread_mutex_unlock(&d.lock);
        if (r < 0)
                goto out_grpc;

        if (d.http) {
                r = dp_http_start(d.http);
                if (r < 0)
                        goto out_grpc;
        }
        r = -pthread_create(&thread, NULL, watcher, &d);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .err = r },
                         "cannot start the watcher thread: %s", strerror(-r));
                goto out_grpc;
        }
        drain(&d);
        pthread_join(thread, NULL);
        dp_nfd_stop(&d);
        log_with(LOG_INFO, &(struct log_fields){ .path = opts->cdi_dir },
                 "stopped; sockets removed, CDI specs left in %s for pods that still use them",
                 opts->cdi_dir);
        r = 0;
        goto out_cq;

out_grpc:
        /* Start-up failed after grpc_init: stop whatever did start. */
        pthread_mutex_lock(&d.lock);
        stop_all(&d);
        pthread_mutex_unlock(&d.lock);
        drain(&d);
out_cq:
        /* Before grpc_shutdown: its PodResources channel is grpc's. */
        dp_http_stop(d.http);
        dp_kubelet_channel_close(&d);
        grpc_completion_queue_destroy(d.cq);
        daemon_free(&d);
        grpc_shutdown();
        pthread_mutex_destroy(&d.lock);
        return r;
out:
        dp_http_stop(d.http);
        daemon_free(&d);
        pthread_mutex_destroy(&d.lock);
        return r;
}
