/* SPDX-License-Identifier: Apache-2.0 */
/* Live reload: SIGHUP, or the config file changing on disk, re-reads the
 * config and applies the difference resource by resource.
 *
 * What tells it the file changed is watch.c's.
 *
 * A reload first builds everything it needs (the parsed config, each
 * changed or added resource's plugin with its devices discovered): any
 * failure there changes nothing. Only then does it touch what serves:
 * - unchanged: keeps its socket, Register, streams, spec and list;
 * - changed allocate or policy: only its answers change;
 * - changed devices (selectors, shares, edits): the spec is written
 *   before the new list goes out on the open streams, so every ID the
 *   kubelet sees resolves; discovery starts from a clone of the running
 *   devices, so an ID keeps its device while the daemon runs (a newcomer
 *   that would take it is refused; one the new selectors no longer find
 *   while the old ones still do leaves the list, and its spec, once no
 *   pod holds it (retained.c); one neither finds, unplugged, stays listed
 *   Unhealthy, as on a hotplug);
 * - removed: streams end, socket goes, its spec stays while a pod holds
 *   one of its devices (retained.c); the struct lives on until grpc is
 *   done;
 * - added: served and registered like one present at start.
 * A reload that would give a spec file still needed by another resource
 * (removed now, or earlier and still retained) to a resource of another
 * kind ("ab-cd/ef" and "ab/cd-ef" are both ab-cd-ef.json) is refused as a
 * whole: writing it would replace the spec a pod holding the old
 * resource's devices resolves its CDI names through. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "kube.h"
#include "serve-internal.h"
#include "plugin.h"
#include "resources.h"
#include "log.h"

enum change { UNCHANGED, CHANGED_ANSWERS, CHANGED_DEVICES, ADDED };

struct step {
        enum change change;
        struct dp_resource *res;  /* the running one, or the new one when ADDED */
        struct dp_plugin *plugin; /* CHANGED_DEVICES: the running one's devices, rediscovered */
        struct res_devlist found; /* CHANGED_DEVICES, ADDED: for the notes */
        char **watch_dirs;        /* CHANGED_DEVICES */
        struct cfg_resource
                *keep; /* CHANGED_DEVICES: the old settings, if its spec cannot be written */
        size_t n_gone; /* CHANGED_DEVICES: devices the new config no longer names */
};

struct plan {
        struct cfg_config *next;
        size_t n_steps;
        struct step *steps;           /* one per resource of next */
        size_t n_old;                 /* running resources when the plan was made */
        bool *kept;                   /* per running resource: still configured */
        struct cfg_resource **retire; /* per running resource: room for its settings once removed */
        struct dp_resource **res;     /* the new d->res */
        size_t n_res;                 /* filled in res */
        size_t added, changed, removed, unchanged, failed;
};

static void plan_free(struct plan *p) {
        for (size_t j = 0; p->steps && j < p->n_steps; j++) {
                struct step *s = &p->steps[j];
                if (s->change == ADDED)
                        dp_resource_free(s->res);
                dp_plugin_free(s->plugin);
                res_devlist_free(&s->found);
                base_strv_free(s->watch_dirs);
                free(s->keep);
        }
        for (size_t i = 0; p->retire && i < p->n_old; i++)
                free(p->retire[i]);
        free(p->steps);
        free(p->kept);
        free(p->retire);
        free(p->res);
        cfg_free(p->next);
}

static int discover(struct dp_daemon *d, struct dp_plugin *plugin, struct res_devlist *found) {
        const struct cfg_resource *cfg = plugin->cfg;
        bool changed;
        int r;

        r = res_discover(d->opts->host_root, cfg->selectors, cfg->n_selectors, found);
        if (r < 0) {
                log_with(LOG_ERR,
                         &(struct log_fields){
                                 .resource = cfg->name, .path = d->opts->host_root, .err = r },
                         "config: resource \"%s\": device discovery under %s failed: %s", cfg->name,
                         d->opts->host_root, strerror(-r));
                return r;
        }
        r = dp_plugin_update(plugin, found, &changed);
        if (r < 0)
                log_with(LOG_ERR, &(struct log_fields){ .resource = cfg->name, .err = r },
                         "config: resource \"%s\": %s", cfg->name, strerror(-r));
        return r;
}

static struct dp_resource *find_running(struct dp_daemon *d, const char *name, size_t *ret_i) {
        for (size_t i = 0; i < d->n_res; i++)
                if (strcmp(d->res[i]->cfg->name, name) == 0) {
                        *ret_i = i;
                        return d->res[i];
                }
        return NULL;
}

/* Devices the old selectors find now and the new ones do not leave the
 * list (capacity drops); a device neither finds is unplugged and stays
 * listed Unhealthy, as on a hotplug. Asked now, not taken from the last
 * list: a device unplugged since would otherwise count as unnamed. */
static int retire_unnamed(struct dp_daemon *d, const struct dp_resource *old, struct step *s) {
        const struct cfg_resource *oc = old->cfg;
        struct res_devlist before = { 0 };
        int r = res_discover(d->opts->host_root, oc->selectors, oc->n_selectors, &before);

        if (r < 0) {
                log_with(LOG_ERR,
                         &(struct log_fields){
                                 .resource = oc->name, .path = d->opts->host_root, .err = r },
                         "config: resource \"%s\": device discovery under %s failed: %s", oc->name,
                         d->opts->host_root, strerror(-r));
                return r;
        }
        dp_plugin_retire(s->plugin, &before, &s->n_gone);
        res_devlist_free(&before);
        return 0;
}

/* Everything that can fail, before anything that serves is touched. */
static int prepare_step(struct dp_daemon *d, struct plan *p, size_t j) {
        const struct cfg_resource *cfg = &p->next->resources[j];
        struct step *s = &p->steps[j];
        struct dp_resource *old;
        size_t i;
        int r;

        old = find_running(d, cfg->name, &i);
        /* Register announces the name, the socket and options that are
         * the same for every resource: only a new socket name (from a
         * newer naming rule) would call for a new Register, and then the
         * old endpoint goes as a removed one and the new comes as added. */
        if (old && strcmp(old->cfg->socket_name, cfg->socket_name) != 0)
                old = NULL;
        if (!old) {
                s->change = ADDED;
                r = dp_resource_new(d, cfg, &s->res);
                return r < 0 ? r : discover(d, s->res->plugin, &s->found);
        }
        p->kept[i] = true;
        s->res = old;
        if (strcmp(old->cfg->settings_json, cfg->settings_json) != 0) {
                s->change = CHANGED_DEVICES;
                s->keep = calloc(1, sizeof(*s->keep));
                if (!s->keep)
                        return -ENOMEM;
                /* From the running devices: an ID handed out keeps its
                 * device, and a newcomer that would take it is refused,
                 * as on a hotplug. */
                r = dp_plugin_clone(old->plugin, cfg, &s->plugin);
                if (r >= 0)
                        r = discover(d, s->plugin, &s->found);
                if (r >= 0)
                        r = retire_unnamed(d, old, s);
                if (r >= 0)
                        r = res_watch_dirs(d->opts->host_root, cfg->selectors, cfg->n_selectors,
                                           &s->watch_dirs);
                return r;
        }
        s->change = old->cfg->alloc_modes != cfg->alloc_modes || old->cfg->policy != cfg->policy
                            ? CHANGED_ANSWERS
                            : UNCHANGED;
        return 0;
}

/* The other kind's resource that still needs file, or NULL: a running
 * one (next no longer configures it under that file, names.c refuses
 * two resources sharing one) or one whose retained spec it is. */
static const char *file_needed_by(const struct dp_daemon *d, const char *file, const char *kind) {
        for (size_t i = 0; i < d->n_res; i++) {
                const struct dp_plugin *pl = d->res[i]->plugin;
                if (strcmp(pl->cfg->spec_file, file) == 0 && strcmp(pl->cfg->kind, kind) != 0)
                        return d->res[i]->cfg->name;
        }
        const char *gone = dp_retained_resource(d, file);
        _cleanup_free_ char *gone_kind = NULL;
        if (gone && cfg_names_of(gone, &gone_kind, NULL) >= 0 && strcmp(gone_kind, kind) != 0)
                return gone;
        return NULL;
}

/* -EEXIST, logged, when next would overwrite a spec another resource's
 * pods may still need. */
static int check_spec_files(const struct dp_daemon *d, const struct cfg_config *next) {
        const char *path = d->opts->config_path;

        for (size_t j = 0; j < next->n_resources; j++) {
                const char *name = next->resources[j].name;
                const char *kind = next->resources[j].kind, *file = next->resources[j].spec_file;
                const char *other = file_needed_by(d, file, kind);
                if (!other)
                        continue;
                log_with(LOG_ERR, &(struct log_fields){ .resource = name, .path = path },
                         "config: %s: resource \"%s\" would replace CDI spec %s/%s, which "
                         "defines the devices of resource \"%s\" (removed from the config) that "
                         "a pod may still need to start its containers; keeping the running "
                         "configuration. Remove \"%s\" first: \"%s\" can be added once its spec "
                         "is gone (cdiplug removes it when no pod holds one of its devices)",
                         path, name, d->opts->cdi_dir, file, other, other, name);
                return -EEXIST;
        }
        return 0;
}

static int prepare(struct dp_daemon *d, struct plan *p) {
        size_t n = p->next->n_resources;

        p->n_steps = n;
        p->steps = calloc(n, sizeof(*p->steps));
        p->res = calloc(n, sizeof(*p->res));
        p->n_old = d->n_res;
        p->kept = calloc(d->n_res + 1, sizeof(*p->kept));
        p->retire = calloc(d->n_res + 1, sizeof(*p->retire));
        if (!p->steps || !p->res || !p->kept || !p->retire)
                return -ENOMEM;
        for (size_t j = 0; j < n; j++) {
                int r = prepare_step(d, p, j);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < d->n_res; i++)
                if (!p->kept[i] && !(p->retire[i] = calloc(1, sizeof(**p->retire))))
                        return -ENOMEM;
        return 0;
}

static void retire(struct dp_daemon *d, struct dp_resource *res, struct cfg_resource *room) {
        dp_resource_own_cfg(res, room);
        dp_register_cancel(res);
        dp_server_stop(res);
        dp_resource_retire(res);
        log_with(
                LOG_INFO,
                &(struct log_fields){ .resource = res->cfg->name, .path = res->socket_path },
                "resource \"%s\": removed from the config: its streams end and its socket %s is gone",
                res->cfg->name, res->socket_path);
        /* Its spec may still be needed to start a container of a pod
         * that holds one of its devices: retained.c decides. */
        if (dp_retained_add(d, res->plugin->cfg->spec_file, res->cfg->name) < 0)
                log_with(LOG_ERR,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .path = d->opts->cdi_dir },
                         "resource \"%s\": out of memory; its CDI spec in %s stays", res->cfg->name,
                         d->opts->cdi_dir);
        dp_resource_maybe_free(res);
}

static int write_spec(struct dp_resource *res, const struct dp_plugin *plugin) {
        int r = dp_spec_write(res, plugin);

        if (r < 0)
                log_with(LOG_ERR,
                         &(struct log_fields){ .resource = plugin->cfg->name,
                                               .path = res->d->opts->cdi_dir,
                                               .err = r },
                         "resource \"%s\": cannot write CDI spec into %s: %s", plugin->cfg->name,
                         res->d->opts->cdi_dir, strerror(-r));
        return r;
}

static void log_devices(const struct dp_plugin *p) {
        size_t healthy = 0;

        for (size_t i = 0; i < p->n_devs; i++)
                healthy += p->devs[i].healthy;
        log_with(LOG_INFO, &(struct log_fields){ .resource = p->cfg->name },
                 "resource \"%s\": %zu devices (%zu healthy), %zu IDs", p->cfg->name, p->n_devs,
                 healthy, p->n_ids);
}

/* "api" changed: the same plugin, another front end. To DRA, its socket
 * goes and its streams end (the DRA list gets it, dra.c); to the device
 * plugin API, it gets a socket and registers. */
static void switch_api(struct dp_daemon *d, struct dp_resource *res, bool was_dra) {
        log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                 "resource \"%s\": now served through %s", res->cfg->name,
                 cfg_api_name(res->cfg->api));
        if (was_dra) {
                dp_server_serve(res);
                return;
        }
        dp_register_cancel(res);
        dp_server_stop(res);
}

/* New devices: spec first, then the list on the streams already open. */
static bool apply_devices(struct dp_daemon *d, struct step *s, const struct cfg_resource *cfg) {
        struct dp_resource *res = s->res;
        struct dp_plugin *old = res->plugin;
        bool was_dra = dp_resource_is_dra(res);

        if (write_spec(res, s->plugin) < 0) {
                /* The running list stays, so its settings must too: the
                 * next reload sees the difference and tries again. */
                log_with(LOG_WARN, &(struct log_fields){ .resource = cfg->name },
                         "resource \"%s\": keeping its previous devices until a reload succeeds",
                         cfg->name);
                dp_resource_own_cfg(res, TAKE_PTR(s->keep));
                return false;
        }
        dp_plugin_spec_written(s->plugin);
        /* Past what any stream has sent, so each one sends the new list. */
        s->plugin->generation = old->generation + 1;
        res->plugin = TAKE_PTR(s->plugin);
        dp_plugin_free(old);
        res->cfg = cfg;
        dp_resource_drop_owned(res);
        base_strv_free(res->watch_dirs);
        res->watch_dirs = TAKE_PTR(s->watch_dirs);
        dp_watch_resource(d, res);
        if (dp_notes_log(&res->logged_notes, cfg->name, &s->found, res->plugin) < 0)
                log_with(LOG_ERR, &(struct log_fields){ .resource = cfg->name },
                         "resource \"%s\": out of memory logging what discovery noted", cfg->name);
        if (s->n_gone)
                log_with(LOG_INFO, &(struct log_fields){ .resource = cfg->name },
                         "resource \"%s\": %zu devices no longer named by the config are not "
                         "offered any more; they stay in its CDI spec while a pod may hold one",
                         cfg->name, s->n_gone);
        log_devices(res->plugin);
        if (was_dra != dp_resource_is_dra(res))
                switch_api(d, res, was_dra);
        dp_server_push(res);
        return true;
}

static bool apply_added(struct dp_daemon *d, struct step *s) {
        struct dp_resource *res = s->res;

        /* Its IDs must resolve before the kubelet sees them. Not served
         * now, it counts as added again on the next reload. */
        if (write_spec(res, res->plugin) < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": not served; the next reload tries again",
                         res->cfg->name);
                return false;
        }
        dp_plugin_spec_written(res->plugin);
        if (dp_notes_log(&res->logged_notes, res->cfg->name, &s->found, res->plugin) < 0)
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": out of memory logging what discovery noted",
                         res->cfg->name);
        log_devices(res->plugin);
        dp_watch_resource(d, res);
        dp_server_serve(res);
        return true;
}

static bool streq_null(const char *a, const char *b) {
        return a == b || (a && b && strcmp(a, b) == 0);
}

static const char *shown(const char *v) {
        return !v ? "unset" : *v ? v : "\"\"";
}

/* Keeps the running value of a setting fixed at start; every reload
 * whose file differs says so until a restart applies the file's. A
 * setting the command line gives is not the file's to change. */
static void keep_running(const char *key, bool on_command_line, char **running, char **next) {
        if (!on_command_line && !streq_null(*running, *next))
                log_warn("config: \"%s\" changed (%s to %s): needs a restart; the rest is applied",
                         key, shown(*running), shown(*next));
        free(*next);
        *next = TAKE_PTR(*running);
}

/* What start-up fixed cannot change while the daemon runs: the identity
 * (the sandbox sets it), the metrics endpoint's socket (bound before the
 * lock-down, which allows no new network socket) and the PodResources
 * socket it was given, and the DRA driver. The host root, kubelet dir and
 * CDI dir are command-line options, which a reload does not re-read. */
static void restart_only(struct dp_daemon *d, struct cfg_config *next) {
        keep_running("user", d->opts->user, &d->cfg->user, &next->user);
        keep_running("metrics.address", d->opts->metrics_address, &d->cfg->metrics_address,
                     &next->metrics_address);
        keep_running("metrics.pod_resources_socket", d->opts->pod_resources_socket,
                     &d->cfg->pod_resources_socket, &next->pod_resources_socket);
        /* The DRA driver's sockets and name are made before the lock-down
         * (dra.c). Resources move to and from DRA live. */
        keep_running("dra.driver", false, &d->cfg->dra_driver, &next->dra_driver);
        /* Its dir is opened before the lock-down (publish.c). */
        keep_running("nfd.features_dir", d->opts->nfd_features_dir, &d->cfg->nfd_features_dir,
                     &next->nfd_features_dir);
        /* Whether a client follows the labels was decided at start. */
        next->node_labels = d->cfg->node_labels;
}

static void apply_log_format(const struct dp_daemon *d) {
        if (d->opts->log_format == CFG_LOG_UNSET)
                log_set_json(d->cfg->log_format == CFG_LOG_JSON);
}

static void warn_overlaps(const struct dp_daemon *d) {
        _cleanup_free_ struct dp_plugin **plugins = calloc(d->n_res + 1, sizeof(*plugins));

        if (!plugins) {
                log_warn("cannot look for devices that two resources share: out of memory");
                return;
        }
        for (size_t i = 0; i < d->n_res; i++)
                /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): every slot below n_res holds a resource */
                plugins[i] = d->res[i]->plugin;
        dp_warn_overlaps(plugins, d->n_res);
}

static void commit(struct dp_daemon *d, struct plan *p) {
        restart_only(d, p->next);
        for (size_t i = 0; i < d->n_res; i++)
                if (!p->kept[i]) {
                        retire(d, d->res[i], TAKE_PTR(p->retire[i]));
                        p->removed++;
                }
        for (size_t j = 0; j < p->next->n_resources; j++) {
                struct step *s = &p->steps[j];
                const struct cfg_resource *cfg = &p->next->resources[j];

                if (s->change != ADDED)
                        p->res[p->n_res++] = s->res;
                switch (s->change) {
                case ADDED:
                        if (apply_added(d, s)) {
                                p->res[p->n_res++] = TAKE_PTR(s->res);
                                p->added++;
                        } else
                                p->failed++;
                        break;
                case CHANGED_DEVICES:
                        if (apply_devices(d, s, cfg))
                                p->changed++;
                        else
                                p->failed++;
                        break;
                case CHANGED_ANSWERS:
                case UNCHANGED:
                        /* The same settings (or only the answers' ones),
                         * now held by the new config; what Register
                         * announced is the same (see prepare_step). */
                        s->res->cfg = cfg;
                        s->res->plugin->cfg = cfg;
                        dp_resource_drop_owned(s->res);
                        if (s->change == CHANGED_ANSWERS)
                                p->changed++;
                        else
                                p->unchanged++;
                        break;
                }
        }
        free(d->res);
        d->res = TAKE_PTR(p->res);
        d->n_res = p->n_res;
        cfg_free(d->cfg);
        d->cfg = TAKE_PTR(p->next);
        apply_log_format(d);
        /* As at start-up: resources the reload added or changed may
         * now find a device another one lists. */
        if (p->added || p->changed)
                warn_overlaps(d);
        /* Removed resources' specs, and any kept from before, and devices
         * the new config no longer names: the new config may own some
         * again, and an operator's SIGHUP is a request to look now. */
        if (dp_gone_any(d))
                dp_retained_devices(d);
        else
                dp_retained_check(d);
}

/* ---- this node's labels, for the resources' "nodes" ----
 * The labels come from the API server, on cdiplug-kube; a change is
 * applied as a reload of the config file (the same plan, the same logs),
 * run on the watcher thread through the timer list. */

static bool have_credentials(const struct dp_daemon *d);

/* Label changes are applied at most this often (coalesced). */
#define NODES_RELOAD_EVERY_MS 1000

/* Why the labels are not known, for a resource that needs them. */
static const char *labels_missing(const struct dp_daemon *d) {
        if (!d->opts->node_name)
                return "no node name (--node-name, NODE_NAME) to read them by";
        if (!d->nodes.followed && !have_credentials(d))
                return "no API server credentials to read them with (--kubeconfig, or the "
                       "in-cluster service account)";
        if (!d->nodes.followed)
                return "the labels are followed only when the config selects by label at "
                       "start: restart cdiplug";
        return "waiting for them from the API server";
}

static void log_verdict(void *ctx, const struct cfg_resource *res, size_t idx,
                        enum cfg_node_verdict v, const char *why) {
        const struct dp_daemon *d = ctx;
        const char *node = d->opts->node_name ? d->opts->node_name : "(no name)";

        if (v == CFG_NODE_UNDECIDED)
                log_with(LOG_WARN, &(struct log_fields){ .resource = res->name },
                         "resource \"%s\" (resources[%zu]) is not served: %s: %s", res->name, idx,
                         why, labels_missing(d));
        else
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->name },
                         "node \"%s\" %s resource \"%s\" (resources[%zu]): %s", node,
                         v == CFG_NODE_SERVES ? "serves" : "does not serve", res->name, idx, why);
}

/* Keep the resources this node serves: -EINVAL (logged) when it would
 * serve two of one name. */
static int select_node(struct dp_daemon *d, struct cfg_config *next) {
        struct base_field_error err = { 0 };
        int r = cfg_nodes_select(next, d->opts->node_name, d->nodes.labels, log_verdict, d, &err);

        if (r < 0)
                log_with(LOG_ERR,
                         &(struct log_fields){ .path = d->opts->config_path,
                                               .err = r == -EINVAL ? 0 : r },
                         "config: %s: %s%s%s; keeping the running configuration",
                         d->opts->config_path, err.field ? err.field : "", err.field ? ": " : "",
                         err.msg ? err.msg : strerror(-r));
        base_field_error_clear(&err);
        return r;
}

/* On cdiplug-kube: the labels are kept for the next reload, which the
 * watcher runs at once, or NODES_RELOAD_EVERY_MS after the last one:
 * labels that flip every few ms cost one reload (and its log lines) a
 * second, not one each, and the reload reads the labels heard last, so
 * the last change is never lost. */
static void labels_heard(void *ctx, const cJSON *labels) {
        struct dp_daemon *d = ctx;
        cJSON *copy = cJSON_Duplicate(labels, true);

        if (!copy) {
                log_error("nodes: out of memory keeping the node's labels; the last stay");
                return;
        }
        pthread_mutex_lock(&d->lock);
        cJSON_Delete(d->nodes.labels);
        d->nodes.labels = copy;
        uint64_t due = dp_now_ms();
        if (d->nodes.reloads && due < d->nodes.last_ms + NODES_RELOAD_EVERY_MS)
                due = d->nodes.last_ms + NODES_RELOAD_EVERY_MS;
        dp_timer_set(&d->nodes_timer, due);
        pthread_mutex_unlock(&d->lock);
}

void dp_nodes_due(void *ctx) {
        struct dp_daemon *d = ctx;

        d->nodes.last_ms = dp_now_ms();

        log_with(LOG_INFO, &(struct log_fields){ 0 }, "nodes: node \"%s\": %d labels read",
                 d->opts->node_name, cJSON_GetArraySize(d->nodes.labels));
        dp_reload(d,
                  d->nodes.reloads++ ? "the node's labels changed" : "the node's labels were read");
}

/* Credentials are there when given (--kubeconfig) or when the pod's
 * environment names the API server; a broken set is an error, as for DRA. */
static bool have_credentials(const struct dp_daemon *d) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        return d->opts->kubeconfig || (host && *host);
}

int dp_nodes_setup(struct dp_daemon *d) {
        struct kube_settings ks = { .kubeconfig = d->opts->kubeconfig,
                                    .node_name = d->opts->node_name };
        int r;

        if (!d->cfg->node_labels || !d->opts->node_name)
                return 0;
        if (!have_credentials(d)) {
                log_warn("nodes: resources select nodes by label, but there are no API server "
                         "credentials (--kubeconfig, or the in-cluster service account): those "
                         "resources are not served");
                return 0;
        }
        if (!d->dra.kube) {
                r = kube_new(&ks, &d->nodes.kube);
                if (r < 0)
                        return r;
        }
        r = kube_labels_follow(d->dra.kube ? d->dra.kube : d->nodes.kube, labels_heard, d);
        if (r < 0)
                return r;
        d->nodes.followed = true;
        log_with(LOG_INFO, &(struct log_fields){ 0 },
                 "nodes: following the labels of node \"%s\" for the resources that select "
                 "nodes by label",
                 d->opts->node_name);
        return 0;
}

int dp_nodes_start(struct dp_daemon *d) {
        return d->nodes.kube ? kube_start(d->nodes.kube) : 0;
}

bool dp_nodes_api(const struct dp_daemon *d) {
        return d->nodes.kube != NULL;
}

void dp_nodes_free(struct dp_daemon *d) {
        /* Joins cdiplug-kube, whose callback takes d->lock: not held here. */
        kube_free(d->nodes.kube);
        d->nodes.kube = NULL;
        cJSON_Delete(d->nodes.labels);
        d->nodes.labels = NULL;
}

void dp_reload(struct dp_daemon *d, const char *why) {
        const char *path = d->opts->config_path;
        struct base_field_error err = { 0 };
        struct plan p = { 0 };
        int r;

        log_with(LOG_INFO, &(struct log_fields){ .path = path }, "config: reloading %s (%s)", path,
                 why);
        /* Before reading: edits from now on in the dir the path now leads
         * to are seen. */
        dp_watch_config_real(d);
        r = cfg_load(path, &p.next, &err);
        if (r == -ENOENT)
                log_with(LOG_WARN, &(struct log_fields){ .path = path },
                         "config: %s was removed; keeping the running configuration", path);
        else if (r < 0 && err.msg)
                /* As `check` prints it: the file, the field's JSON path. */
                log_with(LOG_ERR, &(struct log_fields){ .path = path },
                         "config: %s: %s%s%s; keeping the running configuration", path,
                         err.field ? err.field : "", err.field && *err.field ? ": " : "",
                         err.msg ? err.msg : "");
        else if (r < 0)
                log_with(LOG_ERR, &(struct log_fields){ .path = path, .err = r },
                         "config: %s: %s; keeping the running configuration", path, strerror(-r));
        base_field_error_clear(&err);
        if (r < 0)
                return;
        if (select_node(d, p.next) < 0) {
                cfg_free(p.next);
                return;
        }
        /* The rest of what `check` and start-up refuse: names with no
         * valid CDI form, resources that would share a kind, a spec file or
         * a socket. It also sets each socket name as start-up did. */
        r = dp_names_prepare_instance(p.next, d->opts->kubelet_dir, d->opts->instance, true);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = path, .err = r == -EINVAL ? 0 : r },
                         "config: %s: %s; keeping the running configuration", path,
                         r == -EINVAL ? "a name cannot be served (see above)" : strerror(-r));
                cfg_free(p.next);
                return;
        }
        r = check_spec_files(d, p.next);
        if (r < 0) {
                cfg_free(p.next);
                return;
        }
        r = prepare(d, &p);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = path, .err = r },
                         "config: %s: cannot apply it: %s; keeping the running configuration", path,
                         strerror(-r));
                plan_free(&p);
                return;
        }
        commit(d, &p);
        /* DRA resources added, removed or changed: the health list again. */
        dp_dra_publish(d);
        dp_nfd_update(d);
        if (p.failed)
                log_error("reload: %zu added, %zu changed, %zu removed, %zu unchanged, %zu failed",
                          p.added, p.changed, p.removed, p.unchanged, p.failed);
        else
                log_info("reload: %zu added, %zu changed, %zu removed, %zu unchanged", p.added,
                         p.changed, p.removed, p.unchanged);
        plan_free(&p);
        /* Old plugins and configs leave the heap holed, as a kubelet restart does. */
        malloc_trim(0);
}
