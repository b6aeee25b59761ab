/* SPDX-License-Identifier: Apache-2.0 */
/* Writing a resource's CDI spec before its list goes out. A runtime
 * resolves an allocated device through the spec file, so an ID the file
 * does not define must never reach the kubelet: when the write fails (disk
 * full, read-only, EIO) the plugin holds its list to what the file on disk
 * defines, and the write is retried on the daemon's timerfd with backoff
 * until it succeeds; then the full list goes out. Nothing polls: a failing
 * disk costs one attempt per back-off period. */
#include <string.h>

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
                                              .file = res->plugin->spec_file,
                                              .err = r },
                        "resource \"%s\": cannot write CDI spec %s/%s: %s (errno %d); listing only the "
                        "devices the spec on disk defines, retrying in %llu ms",
                        res->cfg->name, d->opts->cdi_dir, res->plugin->spec_file, strerror(-r), -r,
                        (unsigned long long)delay);
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
