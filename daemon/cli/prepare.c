/* SPDX-License-Identifier: Apache-2.0 */
/* The config as the commands load it: parsed, its names worked out, the
 * serving identity resolved; what fails is printed here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "resources.h"
#include "sandbox.h"

#include "cli-internal.h"

static int load_config(const struct dp_options *o, struct cfg_config **ret) {
        struct base_field_error err = { 0 };
        int r = cfg_load(o->config_path, ret, &err);

        if (r < 0 && err.msg) {
                if (err.field && *err.field)
                        fprintf(stderr, "cdiplug: error: %s: %s: %s\n", o->config_path, err.field,
                                err.msg);
                else
                        fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, err.msg);
        } else if (r < 0)
                fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, strerror(-r));
        base_field_error_clear(&err);
        return r;
}

/* Valid, but probably not what the operator meant: said, not refused. */
void cli_check_warnings(const struct cfg_config *cfg) {
        for (size_t i = 0; i < cfg->n_resources; i++)
                for (size_t j = 0; j < cfg->resources[i].n_selectors; j++) {
                        const char *field = NULL;
                        const char *w =
                                res_selector_warning(cfg->resources[i].selectors[j], &field);
                        if (w)
                                fprintf(stderr,
                                        "cdiplug: warning: resources[%zu].match[%zu].%s: %s\n", i,
                                        j, field, w);
                }
}

/* The config, loaded and its names worked out as serve would: 0, or the
 * exit status (2: the config is wrong, 1: something else failed). */
int cli_load_prepared(const struct dp_options *o, bool sockets, struct cfg_config **ret) {
        struct cfg_config *cfg = NULL;
        int r;

        if (load_config(o, &cfg) < 0)
                return CLI_EXIT_USAGE;
        if (o->log_format == CFG_LOG_UNSET)
                log_set_json(cfg->log_format == CFG_LOG_JSON);
        r = dp_names_prepare_instance(cfg, o->kubelet_dir, o->instance, sockets);
        if (r < 0) {
                if (r != -EINVAL)
                        log_with(LOG_ERR, &(struct log_fields){ .path = o->config_path, .err = r },
                                 "%s: %s", o->config_path, strerror(-r));
                cfg_free(cfg);
                return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
        }
        *ret = cfg;
        return 0;
}

/* The identity serve switches to (--user over the config's "user"),
 * resolved now with the resolver the lock-down uses: check finds what
 * serve would stumble on, and serve stops before it opens anything. */
int cli_resolve_user(const struct dp_options *o, const struct cfg_config *cfg) {
        const char *user = o->user ? o->user : cfg->user, *problem = NULL;
        struct sbx_options ids;
        int r;

        if (!user)
                return 0;
        r = sbx_resolve_user(user, &ids, &problem);
        if (r >= 0)
                return 0;
        if (o->user)
                fprintf(stderr, "cdiplug: error: --user \"%s\": %s\n", user,
                        problem ? problem : strerror(-r));
        else
                fprintf(stderr, "cdiplug: error: %s: user: \"%s\": %s\n", o->config_path, user,
                        problem ? problem : strerror(-r));
        /* A failed lookup (NSS unreachable) is no mistake in the config. */
        return problem ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
}
