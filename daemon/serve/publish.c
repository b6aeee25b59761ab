/* SPDX-License-Identifier: Apache-2.0 */
/* Writing a resource's CDI spec before its list goes out. A runtime
 * resolves an allocated device through the spec file, so an ID the file
 * does not define must never reach the kubelet: when the write fails (disk
 * full, read-only, EIO) the plugin holds its list to what the file on disk
 * defines, and the write is retried on the daemon's timerfd with backoff
 * until it succeeds; then the full list goes out. Nothing polls: a failing
 * disk costs one attempt per back-off period. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdi.h"
#include "config.h"
#include "serve-internal.h"
#include "metrics.h"
#include "plugin.h"
#include "log.h"

#define SPEC_RETRY_MIN_MS 100
#define SPEC_RETRY_MAX_MS 5000

int dp_spec_write(struct dp_resource *res, const struct dp_plugin *plugin) {
        struct cdi_spec spec = { 0 };
        int r = dp_plugin_spec(plugin, &spec);

        if (r >= 0)
                r = cdi_spec_write(res->d->opts->cdi_dir, &spec);
        cdi_spec_free(&spec);
        dp_stats_spec_write(&res->stats, r);
        return r;
}

/* Before the list is first held, what it may offer is read back from the
 * file on disk: the plugin's own record of what it wrote knows nothing
 * of a file an earlier run wrote (a full disk at start-up), and the file
 * is what runtimes resolve names through. Unreadable: nothing offered. */
static void hold_to_disk(struct dp_resource *res) {
        struct cdi_spec spec = { 0 };
        _cleanup_free_ bool *defined = NULL, *same = NULL;

        if (!res->plugin->held && res->plugin->n_devs && dp_plugin_spec(res->plugin, &spec) >= 0 &&
            cdi_spec_compare(res->d->opts->cdi_dir, &spec, &defined, &same) >= 0)
                dp_plugin_spec_on_disk(res->plugin, defined, same);
        cdi_spec_free(&spec);
        dp_plugin_hold(res->plugin);
}

/* The spec timer set to the earliest retry any resource waits for. */
void dp_spec_timer_set(struct dp_daemon *d) {
        uint64_t next = 0;
        for (size_t i = 0; i < d->n_res; i++)
                next = dp_due_min(next, d->res[i]->spec_retry.at_ms);
        dp_timer_set(&d->spec_timer, next);
}

static void failed(struct dp_resource *res, int r) {
        struct dp_daemon *d = res->d;
        uint64_t delay =
                dp_backoff_ms(SPEC_RETRY_MIN_MS, SPEC_RETRY_MAX_MS, res->spec_retry.failures);

        /* Logged on the first failure and then once per maximal back-off,
         * not on every attempt of a disk that stays full. */
        if (res->spec_retry.failures == 0 || delay == SPEC_RETRY_MAX_MS) {
                log_with(
                        LOG_ERR,
                        &(struct log_fields){ .resource = res->cfg->name,
                                              .path = d->opts->cdi_dir,
                                              .file = res->plugin->cfg->spec_file,
                                              .err = r },
                        "resource \"%s\": cannot write CDI spec %s/%s: %s (errno %d); listing only the "
                        "devices the spec on disk defines, retrying in %llu ms",
                        res->cfg->name, d->opts->cdi_dir, res->plugin->cfg->spec_file, strerror(-r),
                        -r, (unsigned long long)delay);
        }
        res->spec_retry.failures++;
        res->spec_retry.at_ms = dp_now_ms() + delay;
        hold_to_disk(res);
        dp_spec_timer_set(d);
}

int dp_spec_publish(struct dp_resource *res) {
        int r = dp_spec_write(res, res->plugin);

        if (r < 0) {
                failed(res, r);
                return r;
        }
        if (res->spec_retry.failures)
                log_with(
                        LOG_INFO,
                        &(struct log_fields){ .resource = res->cfg->name,
                                              .path = res->d->opts->cdi_dir },
                        "resource \"%s\": CDI spec written into %s after %u failed attempts; listing every "
                        "device again",
                        res->cfg->name, res->d->opts->cdi_dir, res->spec_retry.failures);
        res->spec_retry.failures = 0;
        res->spec_retry.at_ms = 0;
        dp_plugin_spec_written(res->plugin);
        return 0;
}

/* ---- the Node Feature Discovery feature file ----
 * One file, NFD_FILE in the features dir, written atomically with a
 * dot-prefixed temp name: nfd-worker skips files whose names start with
 * '.', so it never reads half of one. The dir is opened before the
 * lock-down and only *at() calls reach it after. */

#define NFD_FILE "cdiplug"
#define NFD_TMP ".cdiplug.tmp."
/* A failed write (a full disk, a read-only dir) is tried again after a
 * back-off from 1 s doubling to 1 min, each spread by up to ±25% so that
 * the nodes that share a cause do not all retry at once. */
#define NFD_RETRY_MIN_MS 1000
#define NFD_RETRY_MAX_MS 60000

static const struct dp_plugin *const *plugins_of(const struct dp_daemon *d,
                                                 const struct dp_plugin **v) {
        for (size_t i = 0; i < d->n_res; i++)
                v[i] = d->res[i]->plugin;
        return v;
}

int dp_nfd_setup(struct dp_daemon *d) {
        const char *dir =
                d->opts->nfd_features_dir ? d->opts->nfd_features_dir : d->cfg->nfd_features_dir;

        if (!dir)
                return 0;
        d->nfd.dir = strdup(dir);
        if (!d->nfd.dir)
                return -ENOMEM;
        d->nfd.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->nfd.dfd < 0) {
                int r = -errno;
                log_with(LOG_ERR, &(struct log_fields){ .path = dir, .err = r },
                         "nfd: cannot open the features dir %s: %s", dir, strerror(-r));
                return r;
        }
        base_remove_temps_at(d->nfd.dfd, NFD_TMP);
        log_with(LOG_INFO, &(struct log_fields){ .path = dir, .file = NFD_FILE },
                 "nfd: keeping the feature file %s/%s", dir, NFD_FILE);
        return 0;
}

/* The old file, if any, stays whole; logged on the first failure and
 * then once per maximal back-off, not on every attempt. */
static void nfd_failed(struct dp_daemon *d, int r) {
        uint64_t delay = dp_backoff_ms(NFD_RETRY_MIN_MS, NFD_RETRY_MAX_MS, d->nfd.failures);
        unsigned seed = (unsigned)dp_now_ms() ^ (unsigned)(uintptr_t)d;

        if (d->nfd.failures == 0 || delay == NFD_RETRY_MAX_MS)
                log_with(LOG_ERR,
                         &(struct log_fields){ .path = d->nfd.dir, .file = NFD_FILE, .err = r },
                         "nfd: cannot write %s/%s: %s; retrying in about %llu ms", d->nfd.dir,
                         NFD_FILE, strerror(-r), (unsigned long long)delay);
        delay = delay - delay / 4 + (uint64_t)rand_r(&seed) % (delay / 2 + 1);
        d->nfd.failures++;
        dp_timer_set(&d->nfd_timer, dp_now_ms() + delay);
}

void dp_nfd_update(struct dp_daemon *d) {
        _cleanup_free_ const struct dp_plugin **plugins = NULL;
        _cleanup_free_ char *text = NULL;
        int r;

        if (d->nfd.dfd < 0)
                return;
        plugins = calloc(d->n_res + 1, sizeof(*plugins));
        if (!plugins || dp_nfd_render(plugins_of(d, plugins), d->n_res, &text) < 0) {
                log_error("nfd: out of memory; the feature file stays as it was");
                return;
        }
        if (d->nfd.last && strcmp(d->nfd.last, text) == 0) {
                /* Back to what the file says: nothing left to retry. */
                d->nfd.failures = 0;
                dp_timer_set(&d->nfd_timer, 0);
                return;
        }
        r = base_write_atomic_at(d->nfd.dfd, NFD_FILE, NFD_TMP, text, strlen(text), 0644);
        if (r < 0) {
                nfd_failed(d, r);
                return;
        }
        if (d->nfd.failures)
                log_with(LOG_INFO, &(struct log_fields){ .path = d->nfd.dir, .file = NFD_FILE },
                         "nfd: %s/%s written after %u failed attempts", d->nfd.dir, NFD_FILE,
                         d->nfd.failures);
        d->nfd.failures = 0;
        dp_timer_set(&d->nfd_timer, 0);
        free(d->nfd.last);
        d->nfd.last = TAKE_PTR(text);
}

void dp_nfd_due(void *ctx) {
        dp_nfd_update(ctx);
}

void dp_nfd_stop(struct dp_daemon *d) {
        dp_timer_set(&d->nfd_timer, 0);
        if (d->nfd.dfd < 0 || !d->nfd.last)
                return;
        /* Stopped, the node serves nothing: its labels go with the file. */
        if (unlinkat(d->nfd.dfd, NFD_FILE, 0) < 0 && errno != ENOENT)
                log_with(LOG_WARN,
                         &(struct log_fields){ .path = d->nfd.dir, .file = NFD_FILE, .err = errno },
                         "nfd: cannot remove %s/%s: %m", d->nfd.dir, NFD_FILE);
        free(d->nfd.last);
        d->nfd.last = NULL;
}

void dp_nfd_free(struct dp_daemon *d) {
        if (d->nfd.dfd >= 0)
                close(d->nfd.dfd);
        d->nfd.dfd = -1;
        free(d->nfd.dir);
        free(d->nfd.last);
        d->nfd.dir = d->nfd.last = NULL;
}
