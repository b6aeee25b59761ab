/* SPDX-License-Identifier: Apache-2.0 */
/* The running daemon's state, shared by its files: one grpc server per
 * resource on one completion queue drained by the main thread, and a
 * watcher thread that turns signals, inotify events and retry timers into
 * actions. Both hold d->lock while they touch any of this state, so
 * handlers never race. What each file offers is in its own header
 * (server.h, kubelet.h, watch.h, publish.h, reload.h). */
#pragma once

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "metrics.h"

struct cfg_config;
struct cfg_resource;
struct dp_daemon;
struct dp_options;
struct dp_plugin;

/* Every completion-queue tag is one of these, embedded in its owner. */
struct dp_tag {
        void (*fn)(struct dp_daemon *d, struct dp_tag *tag, bool ok);
};

enum dp_server_state { SRV_DOWN, SRV_UP, SRV_STOPPING };

struct dp_call;
struct dp_reg;
struct dp_retained;

struct dp_resource {
        struct dp_daemon *d;
        const struct cfg_resource *cfg;
        struct dp_plugin *plugin;
        char *socket_path;
        char **watch_dirs;   /* device dirs, for hotplug */
        char **logged_notes; /* discovery notes already logged */

        grpc_server *server; /* for the daemon's lifetime */
        enum dp_server_state state;
        int listen_fd; /* our socket in the kubelet dir, or -1 */
        struct dp_tag shutdown_tag;
        struct dp_call *streams; /* open ListAndWatch streams */

        struct dp_reg *reg; /* Register call in flight */
        unsigned reg_gen;   /* kubelet_gen when the last Register started */
        bool reg_again;     /* a new kubelet appeared meanwhile */
        unsigned reg_failures;
        uint64_t retry_at_ms; /* CLOCK_MONOTONIC, 0 = none */

        unsigned spec_failures;    /* CDI spec writes failed in a row */
        uint64_t spec_retry_at_ms; /* next attempt, 0 = none */

        unsigned accept_failures;  /* accepts failed in a row (out of fds) */
        unsigned accept_unlogged;  /* failures since the last log line */
        uint64_t accept_resume_ms; /* accepting paused until then, 0 = not paused */
        uint64_t accept_logged_ms;

        uint64_t relisten_at_ms; /* socket deleted alone: re-create then, 0 = none */
        unsigned listen_gen;     /* kubelet_gen when listen_fd was made */

        struct dp_res_stats stats; /* for /metrics and /readyz */

        /* Removed by a reload: freed once its server, calls and Register
         * are done with it (reload.c). */
        unsigned calls; /* dp_calls that point here */
        bool retired;
        struct cfg_resource *owned_cfg; /* cfg once the config it came from is gone */
        struct dp_resource *next_retired;
};

struct dp_daemon {
        const struct dp_options *opts;
        struct cfg_config *cfg;
        struct dp_resource **res; /* in config order; a reload replaces the array */
        size_t n_res;
        struct dp_resource *retired; /* removed by a reload, still winding down */
        grpc_completion_queue *cq;
        pthread_mutex_t lock;
        bool stopping;
        unsigned live; /* servers, calls and Registers not yet done */
        char *kubelet_sock;

        int signal_fd;
        int inotify_fd;
        int timer_fd;
        int kubelet_wd;  /* watch on the kubelet dir, or -1 */
        int ancestor_wd; /* watch on its nearest ancestor while it is missing */
        int *dev_wds;    /* device dir watches, one per dev_wd_dirs entry */
        struct base_strvec dev_wd_dirs;

        int config_wd;     /* watch on the config file's dir, or -1 */
        char *config_name; /* the config file's name in that dir */
        /* Where the file really lives when the config path is a symlink
         * (a ConfigMap's ..data layout, a link elsewhere): a write in
         * place there shows up only in that dir. Re-resolved on every
         * reload; -1 / NULL when the path is no link. */
        int config_real_wd;
        char *config_real_name;
        bool reload_due; /* the config file changed on disk */

        unsigned kubelet_gen;               /* bumped each time a new kubelet.sock appears */
        grpc_channel *kubelet_ch;           /* shared by every Register, or NULL */
        unsigned kubelet_ch_gen;            /* bumped each time kubelet_ch is replaced */
        uint64_t kubelet_restarts;          /* new kubelet.sock seen after a first one */
        bool kubelet_seen;                  /* a kubelet.sock was there once */
        struct dp_http *http;               /* the metrics endpoint, or NULL */
        struct dp_retained *retained_specs; /* specs of resources gone from the config, or NULL */
};

/* daemon.c */
int dp_resource_new(struct dp_daemon *d, const struct cfg_resource *cfg, struct dp_resource **ret);
/* The kubelet's PodResources socket the daemon asks, or NULL when off. */
const char *dp_podres_socket(const struct dp_daemon *d);
void dp_resource_free(struct dp_resource *res);
/* Takes cfg: a reload replaces it. */
int dp_daemon_run(const struct dp_options *opts, struct cfg_config *cfg);
