/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug generate: every resource's CDI spec, once. */
#include <stdio.h>
#include <string.h>

#include "cdi.h"
#include "config.h"
#include "log.h"
#include "plugin.h"
#include "resources.h"

#include "cli-internal.h"

/* Build every resource's spec once, outside the daemon: for podman and
 * other CDI users that have no kubelet. */
static int generate(const struct dp_options *o, const struct cfg_config *cfg) {
        size_t written = 0, empty = 0;

        for (size_t i = 0; i < cfg->n_resources; i++) {
                const struct cfg_resource *rc = &cfg->resources[i];
                struct dp_plugin *p = NULL;
                struct res_devlist found = { 0 };
                struct cdi_spec spec = { 0 };
                _cleanup_free_ char *json = NULL;
                bool changed;
                int r;

                r = dp_plugin_new(rc, &p);
                if (r >= 0)
                        r = res_discover(o->host_root, rc->selectors, rc->n_selectors, &found);
                if (r >= 0)
                        r = dp_plugin_update(p, &found, &changed);
                if (r >= 0) {
                        char **logged = NULL;
                        r = dp_notes_log(&logged, rc->name, &found, p);
                        base_strv_free(logged);
                }
                if (r >= 0 && p->n_devs == 0) {
                        /* A spec without devices is invalid for every
                         * runtime: say so and write none. */
                        log_with(LOG_WARN, &(struct log_fields){ .resource = rc->name },
                                 "resource \"%s\": no matching devices, no CDI spec", rc->name);
                        empty++;
                        res_devlist_free(&found);
                        dp_plugin_free(p);
                        continue;
                }
                if (r >= 0)
                        r = dp_plugin_spec(p, &spec);
                if (r >= 0 && o->to_stdout) {
                        r = cdi_spec_to_json(&spec, &json);
                        if (r >= 0)
                                printf("%s\n", json);
                } else if (r >= 0)
                        r = cdi_spec_write(o->cdi_dir, &spec);
                if (r < 0)
                        log_with(LOG_ERR,
                                 &(struct log_fields){ .resource = rc->name,
                                                       .path = o->to_stdout ? NULL : o->cdi_dir,
                                                       .err = r },
                                 "resource \"%s\": cannot generate its CDI spec%s%s: %s", rc->name,
                                 o->to_stdout ? "" : " in ", o->to_stdout ? "" : o->cdi_dir,
                                 strerror(-r));
                else {
                        written++;
                        log_with(LOG_INFO, &(struct log_fields){ .resource = rc->name },
                                 "resource \"%s\": %zu devices in CDI kind \"%s\"", rc->name,
                                 p->n_devs, p->cfg->kind);
                }
                cdi_spec_free(&spec);
                res_devlist_free(&found);
                dp_plugin_free(p);
        }
        if (written == 0) {
                log_error("no CDI spec could be written");
                return CLI_EXIT_FAILURE;
        }
        return written + empty == cfg->n_resources ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cli_generate(const struct dp_options *o) {
        struct cfg_config *cfg = NULL;
        int r = cli_load_selected(o, false, NULL, NULL, &cfg);

        if (r != 0)
                return r;
        r = generate(o, cfg);
        cfg_free(cfg);
        return r;
}
