/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA driver in the running daemon: its node server (daemon/dra) on
 * the daemon's completion queue and watcher, and the health list it
 * streams, built from the DRA resources' plugins. A resource with
 * "api": "dra" has the same plugin as any other (discovery, CDI spec,
 * hotplug, health), but no device-plugin socket and no Register
 * (server.c). The node server exists whenever the config has a "dra"
 * section: the kubelet then knows the driver even while no resource uses
 * it, and a reload that adds the first DRA resource needs nothing more. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "config.h"
#include "dra.h"
#include "dra_node.h"
#include "kube.h"
#include "log.h"
#include "loop.h"
#include "plugin.h"
#include "resources.h"
#include "serve-internal.h"

static bool is_dra(const struct dp_resource *res) {
        return res->cfg->api == CFG_API_DRA;
}

/* A Prepare waits for lookups: its deadline on the loop's timer list. */
static void deadline_set(void *ctx, uint64_t due_ms) {
        struct dp_daemon *d = ctx;

        d->dra.due_ms = dp_due_min(d->dra.due_ms, due_ms);
        dp_timer_set(&d->dra_timer, d->dra.due_ms);
}

void dp_dra_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t next = 0;

        if (d->dra.node)
                dra_node_expire(d->dra.node, dp_now_ms(), &next);
        d->dra.due_ms = next;
        dp_timer_set(&d->dra_timer, next);
}

/* /readyz and cdiplug_ready: a DRA resource is registered when its
 * driver is. */
static void set_registered(struct dp_daemon *d, bool accepted) {
        for (size_t i = 0; i < d->n_res; i++)
                if (is_dra(d->res[i]))
                        d->res[i]->stats.registered = accepted;
}

static void publish_slices(struct dp_daemon *d);

/* The kubelet's NotifyRegistrationStatus on this instance's registry
 * socket. Only now may the slices go out: the scheduler allocates a
 * published device at once, and a kubelet that has not registered the
 * driver fails that claim's Prepare ("not registered") and backs the pod
 * off for a minute. A refusal publishes nothing. */
static void registered(void *ctx, bool accepted) {
        struct dp_daemon *d = ctx;

        set_registered(d, accepted);
        if (accepted && d->dra.kube && d->opts->node_name)
                publish_slices(d);
}

/* A claim's outcome, on cdiplug-claims: handed to the node server. */
static void claim_got(void *ctx, struct kube_claim *claim) {
        _cleanup_free_ struct dra_result *v = calloc(claim->n_results + 1, sizeof(*v));

        if (!v && claim->err == 0)
                dra_node_claim_done(ctx, -ENOMEM, NULL, NULL, 0);
        else {
                for (size_t i = 0; v && i < claim->n_results; i++)
                        v[i] = (struct dra_result){ .request = claim->results[i].request,
                                                    .pool = claim->results[i].pool,
                                                    .device = claim->results[i].device };
                dra_node_claim_done(ctx, claim->err, claim->msg, v, v ? claim->n_results : 0);
        }
        kube_claim_clear(claim);
}

static int lookup(void *ctx, const char *ns, const char *name, const char *uid,
                  struct dra_lookup *l) {
        return kube_claim_get(ctx, ns, name, uid, claim_got, l);
}

static void cancel(void *ctx, struct dra_lookup *l) {
        kube_claim_cancel(ctx, l);
}

/* The API client reads its credentials now (before the lock-down); it is
 * needed only with a node name, which every DRA resource requires (the
 * command line checked that). */
static int kube_setup(struct dp_daemon *d) {
        struct kube_settings ks = { .kubeconfig = d->opts->kubeconfig,
                                    .node_name = d->opts->node_name,
                                    .driver = d->cfg->dra_driver,
                                    .instance = d->opts->instance,
                                    .hold_leftovers = true };

        if (!d->opts->node_name) {
                log_warn("dra: no node name (--node-name, NODE_NAME): no ResourceSlices are "
                         "published and no claim is prepared; a DRA resource needs a restart "
                         "with one");
                return 0;
        }
        return kube_new(&ks, &d->dra.kube);
}

/* A registry socket someone deletes (an operator, a node's cleanup; the
 * kubelet does not) is made again at once. The dir's own deletion ends
 * the watch (IN_IGNORED); the kubelet root's watch brings it back. */
static int watch_registry(struct dp_daemon *d) {
        int wd = inotify_add_watch(d->watch.inotify_fd, dra_node_registry_dir(d->dra.node),
                                   IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR);

        if (wd < 0)
                return -errno;
        d->dra.wd = wd;
        return 0;
}

/* How long after another instance's DRA socket went the health list is
 * sent again: the kubelet must have handled the end of that instance's
 * stream first, or it clears what we send. */
#define HEALTH_AFTER_PEER_MS 200

/* The checkpoint replaced (by the other instance of a rolling update, or
 * by ours): read again, so the specs kept for prepared claims follow it
 * (retained_claims.c) between calls too. Every write is a rename into place. */
static void watch_checkpoint(struct dp_daemon *d) {
        const char *dir = dra_node_plugin_dir(d->dra.node);

        d->dra.ck_wd =
                inotify_add_watch(d->watch.inotify_fd, dir, IN_MOVED_TO | IN_DELETE | IN_ONLYDIR);
        if (d->dra.ck_wd < 0)
                log_with(LOG_WARN, &(struct log_fields){ .path = dir, .err = errno },
                         "dra: cannot watch %s: %s; the checkpoint is read again only at each "
                         "call",
                         dir, strerror(errno));
}

int dp_dra_setup(struct dp_daemon *d) {
        struct dra_node_settings s = {
                .kubelet_root = d->opts->kubelet_root,
                .driver = d->cfg->dra_driver,
                .instance = d->opts->instance,
                .lock = &d->lock,
                .deadline_set = deadline_set,
                .deadline_ctx = d,
                .registered = registered,
        };
        int r;

        if (!d->cfg->dra_driver)
                return 0;
        r = kube_setup(d);
        if (r < 0)
                return r;
        if (d->dra.kube) {
                s.lookup = lookup;
                s.cancel = cancel;
                s.lookup_ctx = d->dra.kube;
        }
        r = dra_node_new(&s, &d->dra.node);
        if (r < 0)
                return r;
        /* The kubelet root, for a plugins_registry that is deleted and
         * made again (the node's operator, a kubelet reinstall): added to
         * whatever else watches that dir, and kept. */
        d->dra.root_wd = inotify_add_watch(d->watch.inotify_fd, d->opts->kubelet_root,
                                           IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD);
        if (d->dra.root_wd < 0)
                log_with(LOG_WARN,
                         &(struct log_fields){ .path = d->opts->kubelet_root, .err = errno },
                         "dra: cannot watch %s: %s; a deleted plugins_registry is not noticed "
                         "when it comes back, going on",
                         d->opts->kubelet_root, strerror(errno));
        watch_checkpoint(d);
        r = watch_registry(d);
        if (r < 0)
                log_with(LOG_ERR,
                         &(struct log_fields){ .path = dra_node_registry_dir(d->dra.node),
                                               .err = -r },
                         "dra: cannot watch %s: %s", dra_node_registry_dir(d->dra.node),
                         strerror(-r));
        return r;
}

/* The sockets of this driver's instances that died without removing them
 * (SIGKILL, a node crash) stay for good otherwise, and the kubelet's
 * GetInfo on them is refused: removed at start. A live instance's answer
 * a connect(), so it keeps its own. */
void dp_sweep_dead_sockets(const char *dir, bool (*match)(const char *name, void *ctx), void *ctx) {
        _cleanup_strv_ char **gone = NULL;
        int r = base_remove_dead_sockets(dir, match, ctx, &gone);

        if (r < 0 && r != -ENOENT)
                log_with(LOG_WARN, &(struct log_fields){ .path = dir, .err = -r },
                         "cannot look for dead sockets in %s: %s", dir, strerror(-r));
        for (char **g = gone; g && *g; g++)
                log_with(LOG_INFO, &(struct log_fields){ .path = *g },
                         "removed %s: no process listens on it any more (an instance that "
                         "stopped without removing it)",
                         *g);
}

/* Every pool first, then the API client: its first list deletes this
 * node's slices of pools it was not given (resources removed while the
 * daemon was down). */
int dp_dra_start(struct dp_daemon *d) {
        int r;

        if (!d->dra.node)
                return 0;
        if (d->dra.kube)
                log_with(LOG_INFO,
                         &(struct log_fields){ .path = dra_node_registry_path(d->dra.node) },
                         "dra: ResourceSlices wait until the kubelet registers driver \"%s\" "
                         "(%s)",
                         d->cfg->dra_driver, dra_node_registry_path(d->dra.node));
        dp_dra_publish(d);
        dp_sweep_dead_sockets(dra_node_registry_dir(d->dra.node), dra_registry_sock_match,
                              (void *)d->cfg->dra_driver);
        dp_sweep_dead_sockets(dra_node_plugin_dir(d->dra.node), dra_endpoint_sock_match, NULL);
        r = dra_node_start(d->dra.node, d->cq);
        if (r >= 0 && d->dra.kube)
                r = kube_start(d->dra.kube);
        return r;
}

bool dp_resource_is_dra(const struct dp_resource *res) {
        return is_dra(res);
}

/* The pools Prepare maps claims to: every DRA resource's. */
static int set_pools(struct dp_daemon *d) {
        _cleanup_free_ struct dra_node_pool *pools = calloc(d->n_res + 1, sizeof(*pools));
        _cleanup_strv_ char **names = calloc(d->n_res + 1, sizeof(*names));
        size_t n = 0;
        int r;

        if (!pools || !names)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_res; i++) {
                if (!is_dra(d->res[i]))
                        continue;
                r = dra_pool_name(d->opts->node_name, d->res[i]->cfg->name, &names[n]);
                if (r < 0)
                        return r;
                pools[n] = (struct dra_node_pool){ .name = names[n], .plugin = d->res[i]->plugin };
                n++;
        }
        return dra_node_pools_set(d->dra.node, pools, n);
}

struct health_list {
        struct dra_health_device *v;
        char **names; /* owned pool and device names */
        size_t n, cap, n_names;
};

static void health_list_clear(struct health_list *l) {
        for (size_t i = 0; i < l->n_names; i++)
                free(l->names[i]);
        free(l->names);
        free(l->v);
}

static int keep(struct health_list *l, char *s) {
        char **more = reallocarray(l->names, l->n_names + 1, sizeof(*l->names));
        if (!more) {
                free(s);
                return -ENOMEM;
        }
        l->names = more;
        l->names[l->n_names++] = s;
        return 0;
}

/* The health of res's devices, as the model lists them (names, which
 * IDs, the messages), into l under res's pool. */
static int add_resource(struct health_list *l, const struct dp_daemon *d,
                        const struct dp_resource *res) {
        struct dra_health *h = NULL;
        size_t n = 0;
        char *pool = NULL;
        int r = dra_pool_name(d->opts->node_name, res->cfg->name, &pool);

        if (r < 0 || (r = keep(l, pool)) < 0)
                return r;
        r = dra_health(res->plugin, &h, &n);
        if (r < 0)
                return r;
        struct dra_health_device *more =
                n > SIZE_MAX / 2 - l->n ? NULL : reallocarray(l->v, l->n + n + 1, sizeof(*l->v));
        if (!more) {
                dra_health_list_free(h, n);
                return -ENOMEM;
        }
        l->v = more;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char *name = strdup(h[i].name);
                if (!name || (r = keep(l, name)) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (h[i].message && (r = keep(l, h[i].message)) < 0) {
                        h[i].message = NULL; /* keep() freed it */
                        break;
                }
                l->v[l->n++] = (struct dra_health_device){ .pool = pool,
                                                           .device = name,
                                                           .healthy = h[i].healthy,
                                                           .message = TAKE_PTR(h[i].message) };
        }
        dra_health_list_free(h, n);
        return r;
}

void dp_dra_idents_clear(struct dp_res_idents *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->keys[i]);
        free(c->keys);
        free(c->v);
        *c = (struct dp_res_idents){ 0 };
}

static int cmp_key(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The identity of device dev of p: the cached one when its ID and first
 * node are unchanged, else read from sysfs. A device with none (no node,
 * a virtual one, sysfs racing a hotplug) simply carries no identity. */
static void ident_of(const struct dp_daemon *d, const struct dp_res_idents *old,
                     const struct dp_plugin *p, size_t dev, char *key, struct res_identity *ret) {
        char **hit = old->n ? bsearch(&key, old->keys, old->n, sizeof(char *), cmp_key) : NULL;

        if (hit) {
                *ret = old->v[hit - old->keys];
                return;
        }
        *ret = (struct res_identity){ .bus = RES_BUS_NONE };
        if (p->devs[dev].n_nodes > 0 &&
            res_device_identity(d->opts->host_root, dp_str_next(dp_device_id(p, dev)), ret) < 0)
                *ret = (struct res_identity){ .bus = RES_BUS_NONE };
}

/* res's identities brought up to its plugin's devices. The keys are
 * sorted as the devices are, by ID ('\n' sorts before every character an
 * ID may hold), so old ones are found by bisection; a miss only costs a
 * read, a hit is always the same ID and node. */
static int idents_update(const struct dp_daemon *d, struct dp_resource *res) {
        const struct dp_plugin *p = res->plugin;
        struct dp_res_idents now = { .v = calloc(p->n_devs + 1, sizeof(*now.v)),
                                     .keys = calloc(p->n_devs + 1, sizeof(*now.keys)) };

        if (!now.v || !now.keys) {
                dp_dra_idents_clear(&now);
                return -ENOMEM;
        }
        for (; now.n < p->n_devs; now.n++) {
                const char *id = dp_device_id(p, now.n);
                const char *node = p->devs[now.n].n_nodes > 0 ? dp_str_next(id) : "";
                size_t len = strlen(id) + 1 + strlen(node) + 1;
                char *key = malloc(len);

                if (!key) {
                        dp_dra_idents_clear(&now);
                        return -ENOMEM;
                }
                snprintf(key, len, "%s\n%s", id, node);
                now.keys[now.n] = key;
                ident_of(d, &res->idents, p, now.n, key, &now.v[now.n]);
        }
        dp_dra_idents_clear(&res->idents);
        res->idents = now;
        return 0;
}

/* The ResourceSlices: a DRA resource's devices whenever its list changed,
 * and the pools of resources no longer served by DRA dropped (their slices
 * are deleted). The API client copes with the network; this never
 * blocks. */
static void publish_slices(struct dp_daemon *d) {
        _cleanup_strvec_ struct base_strvec now = { 0 };
        /* Until the kubelet has registered this instance's driver, a
         * pool's devices wait (its dra_gen stays behind); registered()
         * publishes them. Pools already given to the API client stay
         * kept and repaired (a kubelet restart's wipe). */
        bool accepted = dra_node_accepted(d->dra.node);
        int r;

        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                cJSON *devices = NULL;
                char *pool = NULL;

                if (!is_dra(res)) {
                        res->dra_gen = 0; /* its pool is dropped below */
                        dp_dra_idents_clear(&res->idents);
                        free(res->dra_pool);
                        res->dra_pool = NULL;
                        continue;
                }
                r = dra_pool_name(d->opts->node_name, res->cfg->name, &pool);
                if (r >= 0 && !res->dra_pool &&
                    xasprintf(&res->dra_pool, "%s:%s", d->cfg->dra_driver, pool) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = base_strvec_push(&now, pool);
                if (r < 0 || res->dra_gen == res->plugin->generation || !accepted)
                        continue;
                r = idents_update(d, res);
                if (r >= 0)
                        r = dra_devices_json_ids(res->plugin, res->cfg->name, res->idents.v,
                                                 &devices);
                if (r > 0)
                        log_with(LOG_WARN, &(struct log_fields){ .resource = res->cfg->name },
                                 "resource \"%s\": %d devices left out of its ResourceSlices: "
                                 "their IDs give the same device name as another's",
                                 res->cfg->name, r);
                if (r >= 0)
                        r = kube_pool_set(d->dra.kube, pool, devices);
                if (r < 0)
                        log_with(LOG_ERR,
                                 &(struct log_fields){ .resource = res->cfg->name, .err = -r },
                                 "resource \"%s\": cannot publish its devices: %s", res->cfg->name,
                                 strerror(-r));
                else
                        res->dra_gen = res->plugin->generation;
        }
        for (size_t i = 0; i < d->dra.published.n; i++) {
                bool kept = false;
                for (size_t k = 0; k < now.n && !kept; k++)
                        kept = strcmp(now.v[k], d->dra.published.v[i]) == 0;
                if (!kept)
                        (void)kube_pool_set(d->dra.kube, d->dra.published.v[i], NULL);
        }
        base_strvec_clear(&d->dra.published);
        d->dra.published = now;
        now = (struct base_strvec){ 0 };
        /* Only a registered instance's view is the node's: before it, a
         * rolling update's older instance still serves the slices that
         * this one's pools do not name yet. */
        if (accepted)
                (void)kube_pools_complete(d->dra.kube);
}

/* Every DRA resource's devices, for the health streams. Called at start
 * and after each change of a DRA resource's list or of the resources. */
void dp_dra_publish(struct dp_daemon *d) {
        struct health_list l = { 0 };
        int r = 0;

        if (!d->dra.node || !d->opts->node_name)
                return;
        set_registered(d, dra_node_accepted(d->dra.node));
        if (d->dra.kube)
                publish_slices(d);
        for (size_t i = 0; r >= 0 && i < d->n_res; i++)
                if (is_dra(d->res[i]))
                        r = add_resource(&l, d, d->res[i]);
        if (r >= 0)
                r = dra_node_health_set(d->dra.node, l.v, l.n);
        /* Plugins are replaced by a reload: Prepare must not keep the old
         * ones, even when the new list cannot be made. */
        if (r >= 0)
                r = set_pools(d);
        if (r < 0)
                dra_node_pools_set(d->dra.node, NULL, 0);
        if (r < 0)
                log_with(LOG_ERR, &(struct log_fields){ .err = -r },
                         "dra: cannot update the device health list and pools: %s; the previous "
                         "ones stay",
                         strerror(-r));
        health_list_clear(&l);
}

/* plugins_registry is back: watched again, its socket made again. */
static void registry_back(struct dp_daemon *d) {
        const char *dir = dra_node_registry_dir(d->dra.node);
        int r = watch_registry(d);

        if (r < 0) {
                log_with(LOG_WARN, &(struct log_fields){ .path = dir, .err = -r },
                         "dra: cannot watch %s again: %s; the registry socket is made again "
                         "only when it comes back once more",
                         dir, strerror(-r));
                return;
        }
        log_with(LOG_INFO, &(struct log_fields){ .path = dir }, "dra: %s is back, watched again",
                 dir);
        dra_node_relisten(d->dra.node);
}

void dp_dra_event(struct dp_daemon *d, const struct inotify_event *ev) {
        const char *reg_dir;

        if (!d->dra.node || d->stopping)
                return;
        if (ev->wd == d->dra.ck_wd && d->dra.ck_wd >= 0) {
                if (ev->len && (ev->mask & IN_MOVED_TO) &&
                    strcmp(ev->name, DRA_CHECKPOINT_FILE) == 0)
                        (void)dra_node_refresh(d->dra.node);
                /* Another instance's DRA socket gone: it stopped, and the
                 * kubelet forgets the driver's health until the next list
                 * (sent once it has seen that stream end). */
                if (ev->len && (ev->mask & IN_DELETE) && dra_endpoint_sock_match(ev->name, NULL) &&
                    strcmp(strrchr(dra_node_endpoint(d->dra.node), '/') + 1, ev->name) != 0)
                        dra_node_health_resend(d->dra.node, HEALTH_AFTER_PEER_MS);
                return;
        }
        if (ev->wd == d->dra.wd && (ev->mask & IN_IGNORED)) {
                d->dra.wd = -1;
                /* Made again before this event was read. */
                if (access(dra_node_registry_dir(d->dra.node), F_OK) == 0)
                        registry_back(d);
                return;
        }
        if (ev->wd == d->dra.root_wd && d->dra.wd < 0 && ev->len) {
                reg_dir = strrchr(dra_node_registry_dir(d->dra.node), '/');
                if (reg_dir && strcmp(ev->name, reg_dir + 1) == 0)
                        registry_back(d);
                return;
        }
        if (ev->wd != d->dra.wd)
                return;
        if (ev->len && strcmp(ev->name, dra_node_registry_name(d->dra.node)) == 0)
                dra_node_relisten(d->dra.node);
}

void dp_dra_poll_fds(const struct dp_daemon *d, int ret[2]) {
        ret[0] = ret[1] = -1;
        if (d->dra.node)
                dra_node_poll_fds(d->dra.node, ret);
}

void dp_dra_accept(struct dp_daemon *d, int fd) {
        if (d->dra.node && fd >= 0)
                dra_node_accept(d->dra.node, fd);
}

void dp_dra_stop(struct dp_daemon *d) {
        if (d->dra.node)
                dra_node_stop(d->dra.node);
}

bool dp_dra_done(const struct dp_daemon *d) {
        return !d->dra.node || dra_node_done(d->dra.node);
}

/* The API client first: it answers the lookups still waiting (cancelled)
 * into the node server. */
void dp_dra_free(struct dp_daemon *d) {
        kube_free(d->dra.kube);
        d->dra.kube = NULL;
        base_strvec_clear(&d->dra.published);
        dra_node_free(d->dra.node);
        d->dra.node = NULL;
}
