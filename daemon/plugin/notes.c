/* SPDX-License-Identifier: Apache-2.0 */
/* What discovery wants the operator to hear (a match that is no device
 * node, a selector that finds nothing and why, devices refused for sharing
 * an ID), logged once: discovery runs on every hotplug event, and a line
 * repeats only after its cause went away and came back. */
#include <string.h>

#include "plugin.h"
#include "resources.h"
#include "log.h"

/* One line per group of devices that want one ID. */
static int clash_lines(const struct dp_plugin *p, const struct res_devlist *found,
                       struct base_strvec *lines) {
        for (size_t i = 0; i < found->n_clashes;) {
                const char *id = found->clashes[i].id;
                size_t j = i, dev;
                bool kept = p && dp_plugin_find_dev(p, id, &dev) == 0 && p->devs[dev].healthy;
                _cleanup_free_ char *nodes = NULL;
                for (; j < found->n_clashes && strcmp(found->clashes[j].id, id) == 0; j++) {
                        char *more = NULL;
                        if (xasprintf(&more, "%s%s%s", nodes ? nodes : "", nodes ? ", " : "",
                                      found->clashes[j].nodes[0]) < 0)
                                return -ENOMEM;
                        free(nodes);
                        nodes = more;
                }
                char *line = NULL;
                int r = kept ? xasprintf(
                                       &line,
                                       "devices %s all want ID \"%s\": the one already served under it "
                                       "stays, the others are refused (an ID never changes meaning)",
                                       nodes, id)
                             : xasprintf(
                                       &line,
                                       "devices %s all want ID \"%s\": all refused; rename a node or "
                                       "choose another \"id\" for its selector",
                                       nodes, id);
                if (r < 0 || base_strvec_push(lines, line) < 0)
                        return -ENOMEM;
                i = j;
        }
        return 0;
}

/* Devices refused because the ID they would get names another device. */
static int taken_lines(const struct dp_plugin *p, const struct res_devlist *found,
                       struct base_strvec *lines) {
        for (size_t i = 0; p && i < found->n; i++) {
                const struct res_device *src = &found->devs[i];
                size_t dev;
                char *line = NULL;
                if (dp_plugin_find_dev(p, src->id, &dev) < 0 || !dp_plugin_id_taken(p, dev, src))
                        continue;
                if (xasprintf(&line,
                              "device %s refused: its ID \"%s\" names %s while the daemon runs "
                              "(an ID never changes meaning)",
                              src->nodes[0], src->id, dp_str_next(dp_device_id(p, dev))) < 0 ||
                    base_strvec_push(lines, line) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int dp_notes_lines(const struct res_devlist *found, const struct dp_plugin *p,
                   struct base_strvec *lines) {
        int r = 0;

        for (char **s = found->notes; s && *s && r >= 0; s++)
                r = base_strvec_push_dup(lines, *s);
        if (r >= 0)
                r = clash_lines(p, found, lines);
        if (r >= 0)
                r = taken_lines(p, found, lines);
        if (r < 0)
                base_strvec_clear(lines);
        return r;
}

int dp_notes_log(char ***logged, const char *resource, const struct res_devlist *found,
                 const struct dp_plugin *p) {
        struct base_strvec now = { 0 };
        int r = dp_notes_lines(found, p, &now);

        if (r < 0)
                return r;
        for (char **s = now.v; s && *s; s++)
                if (!base_strv_contains(*logged, *s))
                        log_with(LOG_WARN, &(struct log_fields){ .resource = resource },
                                 "resource \"%s\": %s", resource, *s);
        base_strv_free(*logged);
        *logged = base_strvec_take(&now);
        return 0;
}
