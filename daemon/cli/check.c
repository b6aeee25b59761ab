/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug check: the config and the devices it finds, validated. */
#include <stdio.h>

#include "config.h"
#include "plugin.h"

#include "cli-internal.h"

int cli_check(const struct dp_options *o) {
        struct cfg_config *cfg = NULL;
        int r = cli_load_prepared(o, true, &cfg);

        if (r != 0)
                return r;
        r = cli_resolve_user(o, cfg);
        if (r != 0) {
                cfg_free(cfg);
                return r;
        }
        cli_check_warnings(cfg);
        dp_check_devices(o->host_root, cfg);
        printf("%s: valid, %zu resources\n", o->config_path, cfg->n_resources);
        cfg_free(cfg);
        return 0;
}
