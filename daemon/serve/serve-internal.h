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
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "metrics.h"
#include "loop.h"
#include "rpc.h" /* struct dp_tag */
#include "serve.h"

struct cfg_config;
struct cfg_resource;
struct dp_daemon;
struct dp_options;
struct dp_plugin;

enum dp_server_state { SRV_DOWN, SRV_UP, SRV_STOPPING };

struct dp_call;
struct dp_reg;
struct dp_retained;

/* A resource's state is in parts, each changed only by the file named:
 * a file's tests need only its part. */

/* Registration with the kubelet (kubelet.c). */
struct dp_res_register {
        struct dp_reg *call; /* Register call in flight */
        unsigned gen;        /* kubelet_gen when the last Register started */
        bool again;          /* a new kubelet appeared meanwhile */
        unsigned failures;
        uint64_t retry_at_ms;   /* CLOCK_MONOTONIC, 0 = none */
        unsigned starts;        /* Register calls started so far */
        unsigned drops;         /* streams the kubelet ended, in a row */
        uint64_t dropped_at_ms; /* the last of them */
};

/* Retrying a CDI spec write that failed (publish.c). */
struct dp_res_spec_retry {
        unsigned failures; /* CDI spec writes failed in a row */
        uint64_t at_ms;    /* next attempt, 0 = none */
};

/* Accepting connections paused when out of fds (server.c). */
struct dp_res_accept {
        unsigned failures;  /* accepts failed in a row (out of fds) */
        unsigned unlogged;  /* failures since the last log line */
        uint64_t resume_ms; /* accepting paused until then, 0 = not paused */
        uint64_t logged_ms;
};

/* A socket deleted alone, re-created after a grace period (watch.c). */
struct dp_res_relisten {
        uint64_t at_ms; /* re-create then, 0 = none */
};

/* Its grpc server and the socket it listens on (server.c). */
struct dp_res_server {
        grpc_server *server; /* for the daemon's lifetime */
        enum dp_server_state state;
        int listen_fd;       /* our socket in the kubelet dir, or -1 */
        unsigned listen_gen; /* kubelet.gen when listen_fd was made */
        /* What listen_fd was bound as: only that is ever removed (another
         * instance may have bound the name since). */
        struct base_owned listen_id;
        struct dp_tag shutdown_tag;
        struct dp_call *streams; /* open ListAndWatch streams */
        /* Asked to serve while the old server still stops (a reload moved
         * the resource to DRA and back): serve once that one is gone. */
        bool serve_again;
        /* A stop that a peer holds up (it takes no status: it does not
         * read) has its calls cancelled then (dp_now_ms() time), 0: none. */
        uint64_t stop_due_ms;
};

/* Removed by a reload: freed once its server, calls and Register are done
 * with it (resource.c). */
struct dp_res_life {
        unsigned calls; /* dp_calls that point here */
        bool retired;
        struct cfg_resource *owned_cfg; /* cfg once the config it came from is gone */
        struct dp_resource *next_retired;
};

/* dra.c's: the hardware identity of a DRA resource's devices, one per
 * device of the plugin as last published (p->devs order), kept by ID and
 * first node so that a hotplug reads sysfs only for devices it brings. */
struct dp_res_idents {
        struct res_identity *v;
        char **keys; /* per device: "<ID>\n<first node>" */
        size_t n;
};

struct dp_resource {
        struct dp_daemon *d;
        const struct cfg_resource *cfg;
        struct dp_plugin *plugin;
        char *socket_path;
        char **watch_dirs;   /* device dirs, for hotplug */
        char **logged_notes; /* discovery notes already logged */

        struct dp_res_server srv;            /* server.c's */
        struct dp_res_register registration; /* kubelet.c's */
        struct dp_res_spec_retry spec_retry; /* publish.c's */
        struct dp_res_accept accept;         /* server.c's */
        struct dp_res_relisten relisten;     /* watch.c's */
        struct dp_res_life life;             /* resource.c's */
        uint64_t dra_gen; /* dra.c's: plugin generation its pool was published at, 0 none */
        char *dra_pool;   /* dra.c's: "<driver>:<pool>" while served by DRA, else NULL (/metrics) */
        struct dp_res_idents idents; /* dra.c's */

        struct dp_res_stats stats; /* for /metrics and /readyz */
};

/* The daemon's parts, like a resource's, each changed only by the file
 * named (and set up by daemon.c). */

/* The kubelet we register with (kubelet.c). */
struct dp_kubelet {
        char *sock;        /* kubelet.sock's path */
        unsigned gen;      /* bumped each time a new kubelet.sock appears */
        grpc_channel *ch;  /* shared by every Register, or NULL */
        unsigned ch_gen;   /* bumped each time ch is replaced */
        uint64_t restarts; /* new kubelet.sock seen after a first one */
        bool seen;         /* a kubelet.sock was there once */
        /* The kubelet.sock we found by looking (at start-up, or when its
         * dir appeared) and registered with, 0 when none: its IN_CREATE
         * may still be queued on the watch made just before, and is no
         * new kubelet. Cleared when any kubelet.sock goes or comes. */
        dev_t noted_dev;
        ino_t noted_ino;
};

/* What wakes the watcher thread: signals and inotify watches (watch.c). */
struct dp_watcher {
        int signal_fd;
        int inotify_fd;
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
};

/* The DRA driver's node server and API client (dra.c). */
struct dra_node;
struct kube;
struct dp_dra {
        struct dra_node *node;        /* NULL: the config has no "dra" section */
        struct kube *kube;            /* NULL: no "dra" section, or no node name */
        struct base_strvec published; /* pools given to the API client, not yet dropped */
        int wd;                       /* watch on plugins_registry, or -1 */
        int root_wd;                  /* watch on the kubelet root, for plugins_registry's return */
        int ck_wd;                    /* watch on the plugin dir, for the checkpoint, or -1 */
        uint64_t due_ms;              /* dra_timer's: the earliest Prepare deadline, 0 none */
};

/* This node's labels, for the resources' "nodes" (reload.c). */
struct cJSON;
struct dp_nodes {
        struct kube *kube;    /* a client of its own, or NULL: none, or DRA's follows them */
        bool followed;        /* some client follows them (started with the daemon) */
        struct cJSON *labels; /* as last heard from the API server; NULL: not yet */
        unsigned reloads;     /* reloads the labels brought */
        uint64_t last_ms;     /* when the last of them began */
};

/* The Node Feature Discovery feature file (publish.c). */
struct dp_nfd {
        int dfd;           /* the features dir, opened before the lock-down, or -1: none */
        char *dir;         /* its path, for messages */
        char *last;        /* what was last written, or NULL */
        unsigned failures; /* writes failed in a row; nfd_timer retries */
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

        /* The timer list; each timer is its file's, set only there:
         * retained.c, publish.c (spec retries), server.c (accept pauses),
         * watch.c (socket re-creation), kubelet.c (Register retries),
         * dra.c (Prepare's lookup deadlines, health resends), server.c (stops'
         * grace), reload.c (the node's labels changed), publish.c (NFD
         * feature file retries). */
        struct dp_loop loop;
        struct dp_timer retained_timer, spec_timer, accept_timer, relisten_timer, register_timer,
                dra_timer, nodes_timer, nfd_timer, stop_timer;

        struct dp_kubelet kubelet;          /* kubelet.c's */
        struct dp_watcher watch;            /* watch.c's */
        struct dp_dra dra;                  /* dra.c's */
        struct dp_nodes nodes;              /* reload.c's */
        struct dp_nfd nfd;                  /* publish.c's */
        struct dp_http *http;               /* the metrics endpoint, or NULL */
        struct dp_retained *retained_specs; /* specs of resources gone from the config, or NULL */
};

/* daemon.c */
/* The kubelet's PodResources socket the daemon asks, or NULL when off. */
const char *dp_podres_socket(const struct dp_daemon *d);

/* resource.c: a resource's lifetime. */
int dp_resource_new(struct dp_daemon *d, const struct cfg_resource *cfg, struct dp_resource **ret);
/* specs.c: discover its devices again; *ret_changed when its list changed (its
 * spec is then written first). */
int dp_resource_refresh(struct dp_resource *res, bool *ret_changed);
/* Keep its settings in room, past the config they came from. */
void dp_resource_own_cfg(struct dp_resource *res, struct cfg_resource *room);
void dp_resource_drop_owned(struct dp_resource *res);
void dp_resource_retire(struct dp_resource *res);
/* Free a retired resource once its server, calls and Register are done. */
void dp_resource_maybe_free(struct dp_resource *res);
void dp_retired_free_all(struct dp_daemon *d);
void dp_resource_free(struct dp_resource *res);

/* dra.c: the DRA driver's node server, when the config has "dra". setup
 * before the lock-down, start after grpc_init; publish after any change
 * of a DRA resource's list or of the resources. */
struct inotify_event;
int dp_dra_setup(struct dp_daemon *d);
int dp_dra_start(struct dp_daemon *d);
/* The sockets in dir that match and refuse a connect(), removed and
 * logged (dra.c). */
void dp_sweep_dead_sockets(const char *dir, bool (*match)(const char *name, void *ctx), void *ctx);
bool dp_resource_is_dra(const struct dp_resource *res);
void dp_dra_publish(struct dp_daemon *d);
void dp_dra_event(struct dp_daemon *d, const struct inotify_event *ev);
void dp_dra_poll_fds(const struct dp_daemon *d, int ret[2]);
void dp_dra_accept(struct dp_daemon *d, int fd);
void dp_dra_stop(struct dp_daemon *d);
bool dp_dra_done(const struct dp_daemon *d);
void dp_dra_free(struct dp_daemon *d);
void dp_dra_idents_clear(struct dp_res_idents *c);
/* A timer callback: ctx is the daemon. */
void dp_dra_due(void *ctx);

/* scrape.c: what the metrics endpoint renders, read from d under d->lock. */
void dp_scrape_source(struct dp_daemon *d, struct dp_metrics_source *ret);

/* Registration with the kubelet and the retry timer (kubelet.c). */

struct dp_daemon;
struct dp_resource;

void dp_register(struct dp_resource *res);
/* A timer callback: ctx is the daemon. */
void dp_register_due(void *ctx);
void dp_register_cancel(struct dp_resource *res);
void dp_register_relistened(struct dp_resource *res);
/* The kubelet ended a ListAndWatch stream of res opened when the
 * Register count was reg_starts, and no other stream of res is open:
 * register again when that kubelet still is ours (kubelet.c). */
void dp_register_after_drop(struct dp_resource *res, unsigned reg_starts);
bool dp_kubelet_present(const struct dp_daemon *d);
/* Note the kubelet.sock found by looking; then, on an IN_CREATE of
 * kubelet.sock, whether it is still that one (asked once). */
void dp_kubelet_sock_note(struct dp_daemon *d);
bool dp_kubelet_sock_is_noted(struct dp_daemon *d);
void dp_kubelet_channel_close(struct dp_daemon *d);
/* kubelet.sock appeared (again): bump the generation and drop the channel. */
void dp_kubelet_new_gen(struct dp_daemon *d);
/* Its create event: a kubelet.sock after a first one is a restart. */
void dp_kubelet_sock_created(struct dp_daemon *d);
void dp_maybe_finish(struct dp_daemon *d);

/* The CDI specs the daemon writes: per resource with retries
 * (publish.c), the clean-up at start-up, refresh and retries (specs.c). */

struct dp_daemon;
struct dp_plugin;
struct dp_resource;

/* publish.c */
/* Write plugin's spec (res's, or the one a reload is about to give it)
 * into the CDI dir, counted in res's metrics. 0 or a negative errno. */
int dp_spec_write(struct dp_resource *res, const struct dp_plugin *plugin);
int dp_spec_publish(struct dp_resource *res);
/* A timer callback: ctx is the daemon. */
void dp_spec_due(void *ctx); /* specs.c */
/* The spec timer set to the earliest retry any resource waits for. */
void dp_spec_timer_set(struct dp_daemon *d);

/* specs.c */
void dp_specs_startup(struct dp_daemon *d);

/* publish.c, too: the NFD feature file. setup opens its dir (before the
 * lock-down); update writes it when what it says changed (start-up,
 * hotplug, reload); stop removes it (a clean stop). */
int dp_nfd_setup(struct dp_daemon *d);
void dp_nfd_update(struct dp_daemon *d);
/* A timer callback (ctx: the daemon): a failed feature file write again. */
void dp_nfd_due(void *ctx);
void dp_nfd_stop(struct dp_daemon *d);
void dp_nfd_free(struct dp_daemon *d);

/* Live reload (reload.c): the config file's changes applied per resource,
 * and resources a reload removed, freed once nothing uses them. */

struct dp_daemon;
struct dp_resource;
struct inotify_event;

void dp_reload(struct dp_daemon *d, const char *why);

/* reload.c, too: this node's labels for the resources' "nodes". setup
 * (before the lock-down, after dp_dra_setup) makes or borrows the API
 * client that follows them when the config selects by label; start
 * starts its own; a change reloads (due, on the timer). */
int dp_nodes_setup(struct dp_daemon *d);
int dp_nodes_start(struct dp_daemon *d);
/* A timer callback: ctx is the daemon. */
void dp_nodes_due(void *ctx);
void dp_nodes_free(struct dp_daemon *d);
/* Whether the sandbox must allow the API client's TCP sockets for them. */
bool dp_nodes_api(const struct dp_daemon *d);

/* CDI specs of resources no longer configured (retained.c), kept while
 * PodResources shows a pod holding one of their devices. add records one
 * (resource may be NULL: found at start-up); check asks PodResources now
 * (after adds, and on every reload); due runs on the timer. */

struct dp_daemon;

int dp_retained_add(struct dp_daemon *d, const char *file, const char *resource);
void dp_retained_check(struct dp_daemon *d);
/* The resource whose retained spec is file (removed by a reload, still
 * kept), or NULL: none, or one found at start-up whose resource is not
 * known. */
const char *dp_retained_resource(const struct dp_daemon *d, const char *file);
/* A timer callback: ctx is the daemon. */
void dp_retained_due(void *ctx);
void dp_retained_stop(struct dp_daemon *d);
void dp_retained_free(struct dp_daemon *d);
/* A reload left devices gone (plugin.h): ask PodResources about them as
 * about retained specs, now and on the same timer. */
void dp_retained_devices(struct dp_daemon *d);

/* retained.c, too: whether any resource has gone devices; and, on a List answer
 * (its wire bytes, read in place), forget those no pod holds (their spec
 * is rewritten). Returns whether one is still held. */
bool dp_gone_any(const struct dp_daemon *d);
bool dp_gone_judge(struct dp_daemon *d, const void *wire, size_t len);

/* What prepared DRA claims hold (retained_claims.c). claim_holding: the
 * prepared claim that holds a CDI device of spec file file (cdi_id NULL)
 * or the device cdi_id itself, and which device (*ret_dev); NULL when
 * none. gone_prepared: whether one holds gone device dev of res. */

struct dra_claim;

const struct dra_claim *dp_claim_holding(const struct dp_daemon *d, const char *file,
                                         const char *cdi_id, const char **ret_dev);
bool dp_gone_prepared(struct dp_resource *res, size_t dev);

/* One resource's grpc server (server.c): its socket in the kubelet dir,
 * the DevicePlugin calls and the ListAndWatch streams it pushes to. */

struct dp_daemon;
struct dp_resource;

int dp_server_start(struct dp_resource *res);
/* Start its server and, when the kubelet is there, its socket and
 * Register: a resource (again) on the device plugin API. */
void dp_server_serve(struct dp_resource *res);
int dp_server_listen(struct dp_resource *res);
void dp_server_unlisten(struct dp_resource *res, bool unlink_path);
void dp_server_accept(struct dp_resource *res);
/* A timer callback: ctx is the daemon. */
void dp_accept_due(void *ctx);
int dp_server_poll_fd(const struct dp_resource *res);
/* Streams end with a status first; the server's other calls are
 * cancelled once every status is out (see dp_server_cancel_stopping). */
void dp_server_stop(struct dp_resource *res);
/* Cancel every call of every stopping server now, statuses out or not:
 * for a peer that takes none (it does not read) when the daemon stops. */
void dp_server_cancel_stopping(struct dp_daemon *d);
/* How long streams have to take their status once a server stops (a
 * reload's or the daemon's) before its calls are cancelled. */
#define DP_STOP_GRACE_MS 1000
/* A timer callback (ctx: the daemon): the same for a server a reload
 * stopped, once its grace is over. */
void dp_server_stop_due(void *ctx);
void dp_server_push(struct dp_resource *res);
size_t dp_server_streams(const struct dp_resource *res);

/* The watcher (watch.c): signals, inotify on the kubelet dir and the
 * device dirs, and the retry timer, turned into actions. */

struct dp_daemon;
struct dp_resource;

int dp_watch_setup(struct dp_daemon *d);
/* The config file's dir, and where a symlinked config really lives
 * (resolved again by each reload before it reads). */
int dp_watch_config_setup(struct dp_daemon *d);
void dp_watch_config_real(struct dp_daemon *d);
void dp_watch_handle(struct dp_daemon *d);
/* A timer callback: ctx is the daemon. */
void dp_watch_due(void *ctx);
void dp_watch_resource(struct dp_daemon *d, struct dp_resource *res);
