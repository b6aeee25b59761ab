/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz cfg_parse: the whole configuration, including every "match"
 * selector (res_selector_parse). Any input must give either a config or
 * -EINVAL with a field and message, never both, never a crash or leak. */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        int r = cfg_parse((const char *)data, size, &cfg, &err);
        if (r == 0) {
                FUZZ_CHECK(cfg);
                for (size_t i = 0; i < cfg->n_resources; i++) {
                        const struct cfg_resource *res = &cfg->resources[i];
                        FUZZ_CHECK(res->shares >= 1 && res->shares <= CFG_MAX_SHARES);
                        FUZZ_CHECK(cfg_resource_name_problem(res->name) == NULL);
                        FUZZ_CHECK(res->socket_name && !strchr(res->socket_name, '/'));
                }
                cfg_free(cfg);
        } else {
                FUZZ_CHECK(r == -EINVAL || r == -ENOMEM);
                FUZZ_CHECK(!cfg);
                if (r == -EINVAL)
                        FUZZ_CHECK(err.field && err.msg);
        }
        base_field_error_clear(&err);
        return 0;
}
