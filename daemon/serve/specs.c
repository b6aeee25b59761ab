/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's CDI spec on disk, written at start-up and again when its
 * devices change. At start-up, cdiplug's own specs for resources no
 * longer configured are handed to retained.c, which removes each once no
 * pod holds one of its devices, and other specs that clash with ours are
 * reported, because runtimes resolve such clashes by dropping devices.
 * Afterwards a running resource's devices and spec are brought up to
 * date: discovery again (start-up, hotplug) and the spec's retries, each
 * pushing a changed list to the open ListAndWatch streams. The rest of a
 * resource's life is resource.c. */
#include <errno.h>
#include <string.h>

#include "cdi.h"
#include "serve-internal.h"
#include "config.h"
#include "plugin.h"
#include "log.h"
#include "resources.h"

static void retain_stale(struct dp_daemon *d) {
        _cleanup_free_ const char **kinds = calloc(d->n_res + 1, sizeof(char *));
        char **stale = NULL;
        int r;

        if (!kinds)
                return;
        for (size_t i = 0; i < d->n_res; i++)
                kinds[i] = d->res[i]->plugin->cfg->kind;
        r = cdi_sweep(d->opts->cdi_dir, kinds, &stale);
        if (r < 0) {
                log_with(LOG_WARN, &(struct log_fields){ .path = d->opts->cdi_dir, .err = r },
                         "cannot look for old CDI specs of ours in %s: %s; continuing",
                         d->opts->cdi_dir, strerror(-r));
                return;
        }
        for (char **f = stale; f && *f; f++) {
                log_with(
                        LOG_INFO, &(struct log_fields){ .path = d->opts->cdi_dir, .file = *f },
                        "CDI spec %s/%s is ours, but no configured resource owns it: it stays until no pod "
                        "holds one of its devices",
                        d->opts->cdi_dir, *f);
                if (dp_retained_add(d, *f, NULL) < 0)
                        log_with(LOG_ERR,
                                 &(struct log_fields){ .path = d->opts->cdi_dir, .file = *f },
                                 "CDI spec %s/%s: out of memory; it stays", d->opts->cdi_dir, *f);
        }
        base_strv_free(stale);
        dp_retained_check(d);
}

static void warn_conflicts(struct dp_daemon *d) {
        _cleanup_free_ struct cdi_spec *specs = calloc(d->n_res + 1, sizeof(*specs));
        _cleanup_free_ char *etc = NULL, *run = NULL;
        struct cdi_conflict *c = NULL;
        size_t n_specs = 0, n = 0;
        const char *dirs[4];
        size_t n_dirs = 0;
        bool root = strcmp(d->opts->host_root, "/") == 0;

        /* The runtime reads /etc/cdi and /var/run/cdi (the latter wins);
         * seen through the host root when there is one. */
        if (!specs || xasprintf(&etc, "%s/etc/cdi", root ? "" : d->opts->host_root) < 0 ||
            xasprintf(&run, "%s/var/run/cdi", root ? "" : d->opts->host_root) < 0)
                return;
        dirs[n_dirs++] = d->opts->cdi_dir;
        if (strcmp(etc, d->opts->cdi_dir) != 0)
                dirs[n_dirs++] = etc;
        if (strcmp(run, d->opts->cdi_dir) != 0)
                dirs[n_dirs++] = run;
        dirs[n_dirs] = NULL;
        for (size_t i = 0; i < d->n_res; i++)
                if (d->res[i]->plugin->n_devs &&
                    dp_plugin_spec(d->res[i]->plugin, &specs[n_specs]) >= 0)
                        n_specs++;
        if (cdi_find_conflicts(dirs, specs, n_specs, &c, &n) >= 0)
                for (size_t i = 0; i < n; i++) {
                        if (c[i].type == CDI_CONFLICT_DEVICE)
                                log_with(
                                        LOG_WARN,
                                        &(struct log_fields){ .path = c[i].path,
                                                              .device = c[i].device },
                                        "CDI spec %s also defines device \"%s\": runtimes may refuse it; "
                                        "continuing",
                                        c[i].path, c[i].device);
                        else if (c[i].type == CDI_CONFLICT_KIND)
                                log_with(
                                        LOG_WARN, &(struct log_fields){ .path = c[i].path },
                                        "CDI spec %s also defines kind \"%s\"%s; continuing",
                                        c[i].path, c[i].kind,
                                        strncmp(c[i].path, run, strlen(run)) == 0
                                                ? ": specs in /var/run/cdi take priority over /etc/cdi"
                                                : "");
                        else
                                log_with(
                                        LOG_WARN,
                                        &(struct log_fields){ .path = c[i].path,
                                                              .err = c[i].error },
                                        "CDI spec %s could not be checked for clashes with ours: %s; continuing",
                                        c[i].path, strerror(-c[i].error));
                }
        cdi_conflicts_free(c, n);
        for (size_t i = 0; i < n_specs; i++)
                cdi_spec_free(&specs[i]);
}

void dp_specs_startup(struct dp_daemon *d) {
        retain_stale(d);
        warn_conflicts(d);
}

/* Rediscover the resource's devices; on a change rewrite its CDI spec
 * first, so every ID the kubelet is about to see resolves. */
int dp_resource_refresh(struct dp_resource *res, bool *ret_changed) {
        struct dp_daemon *d = res->d;
        struct res_devlist found = { 0 };
        bool changed = false;
        int r;

        r = res_discover(d->opts->host_root, res->cfg->selectors, res->cfg->n_selectors, &found);
        if (r < 0) {
                log_with(LOG_ERR,
                         &(struct log_fields){
                                 .resource = res->cfg->name, .path = d->opts->host_root, .err = r },
                         "resource \"%s\": device discovery under %s failed: %s", res->cfg->name,
                         d->opts->host_root, strerror(-r));
                return r;
        }
        r = dp_plugin_update(res->plugin, &found, &changed);
        if (r >= 0)
                r = dp_notes_log(&res->logged_notes, res->cfg->name, &found, res->plugin);
        res_devlist_free(&found);
        if (r < 0)
                return r;
        /* The spec first, so every ID the kubelet is about to see
         * resolves; a failed write is retried on the timer (publish.c). */
        if (changed) {
                dp_spec_publish(res);
                size_t healthy = 0;
                for (size_t i = 0; i < res->plugin->n_devs; i++)
                        healthy += res->plugin->devs[i].healthy;
                log_with(LOG_INFO, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": %zu devices (%zu healthy), %zu IDs", res->cfg->name,
                         res->plugin->n_devs, healthy, res->plugin->n_ids);
        }
        *ret_changed = changed;
        return 0;
}

void dp_spec_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();

        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                uint64_t gen = res->plugin->generation;
                if (!res->spec_retry.at_ms || res->spec_retry.at_ms > now)
                        continue;
                res->spec_retry.at_ms = 0;
                if (dp_spec_publish(res) >= 0 && res->plugin->generation != gen)
                        dp_server_push(res);
        }
        dp_spec_timer_set(d);
}
