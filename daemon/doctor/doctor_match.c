/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: what each selector matches now, and when it matches nothing,
 * why: the reason is res_selector_explain()'s, the resources module's own
 * account of its matching, so doctor and the daemon's log agree. */
#include "doctor-internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "plugin.h"
#include "resources.h"
#include "log.h"

/* Names listed in one explanation, so a busy /dev stays readable. */
#define MAX_LISTED 5
#define MAX_SELECTOR_TEXT 160

struct names {
        char text[512];
        size_t n;
};

static void names_add(struct names *l, const char *name) {
        size_t len = strlen(l->text);
        if (l->n++ < MAX_LISTED)
                snprintf(l->text + len, sizeof(l->text) - len, "%s%s", len ? ", " : "", name);
        else if (l->n == MAX_LISTED + 1)
                snprintf(l->text + len, sizeof(l->text) - len, ", ...");
}

/* The selector's text as written, shortened to fit a line. */
static void selector_text(const cJSON *entry, char *buf, size_t max) {
        char *s = entry ? cJSON_PrintUnformatted(entry) : NULL;
        snprintf(buf, max, "%s", s ? s : "?");
        if (s && strlen(s) >= max && max > 4)
                memcpy(buf + max - 4, "...", 4);
        free(s);
}

static bool is_optional(const cJSON *entry) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "optional"));
}

/* Why the selector finds nothing, in the resources module's words. A
 * selector marked "optional" may find nothing: said, not a problem. */
static void explain(struct doc_ctx *c, const char *where, const struct res_selector *sel,
                    const cJSON *entry) {
        _cleanup_free_ char *why = NULL;
        size_t found = 0;
        int r = res_selector_explain(c->o->host_root, sel, &why, &found);
        if (r < 0) {
                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: finds nothing, and cannot say why: %s",
                        where, strerror(-r));
                return;
        }
        if (is_optional(entry))
                doc_add(c, "match", DOC_INFO, NULL, "%s: finds nothing (optional): %s", where, why);
        else
                doc_add(c, "match", DOC_PROBLEM,
                        "plug the device in or load its driver, or fix the selector",
                        "%s: finds nothing: %s", where, why);
}

/* Discovery's notes and ID clashes, as the daemon logs them; a selector
 * that serves nothing because of them has a problem. */
static void report_notes(struct doc_ctx *c, const char *where, const struct res_devlist *found) {
        _cleanup_strvec_ struct base_strvec lines = { 0 };
        const char *prefix = "match[0]: "; /* one selector at a time */

        if (dp_notes_lines(found, NULL, &lines) < 0) {
                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: out of memory", where);
                return;
        }
        for (char **l = lines.v; l && *l; l++) {
                const char *text = *l;
                if (strncmp(text, prefix, strlen(prefix)) == 0)
                        text += strlen(prefix);
                doc_add(c, "match", found->n ? DOC_WARN : DOC_PROBLEM, NULL, "%s: %s", where, text);
        }
}

static void list_ids(const struct res_devlist *l, char *buf, size_t max) {
        struct names n = { 0 };
        for (size_t i = 0; i < l->n; i++)
                names_add(&n, l->devs[i].id);
        snprintf(buf, max, "%s", n.text);
}

void doc_check_match(struct doc_ctx *c) {
        for (size_t i = 0; i < c->cfg->n_resources; i++) {
                const struct cfg_resource *rc = &c->cfg->resources[i];
                /* The resource's own JSON, as the config loader kept it:
                 * the selectors' text makes the explanations concrete. */
                cJSON *settings = cJSON_Parse(rc->settings_json);
                const cJSON *match = cJSON_GetObjectItemCaseSensitive(settings, "match");
                size_t total = 0;
                bool all_optional = true;

                for (size_t j = 0; j < rc->n_selectors; j++) {
                        const cJSON *entry = cJSON_GetArrayItem(match, (int)j);
                        all_optional &= is_optional(entry);
                        struct res_devlist found = { 0 };
                        char text[MAX_SELECTOR_TEXT], where[MAX_SELECTOR_TEXT + 320], ids[512];
                        int r;

                        selector_text(entry, text, sizeof(text));
                        snprintf(where, sizeof(where), "resource \"%s\" match[%zu] %s", rc->name, j,
                                 text);
                        r = res_discover(c->o->host_root, &rc->selectors[j], 1, &found);
                        if (r < 0) {
                                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: discovery failed: %s",
                                        where, strerror(-r));
                                continue;
                        }
                        total += found.n;
                        if (found.n) {
                                list_ids(&found, ids, sizeof(ids));
                                doc_add(c, "match", DOC_INFO, NULL, "%s: %zu device%s: %s", where,
                                        found.n, found.n == 1 ? "" : "s", ids);
                        }
                        /* Devices found but refused (clashing IDs) are no
                         * "finds nothing": say what the daemon would log. */
                        if (found.n || found.n_clashes)
                                report_notes(c, where, &found);
                        else
                                explain(c, where, rc->selectors[j], entry);
                        res_devlist_free(&found);
                }
                /* Only optional selectors: finding nothing is allowed. */
                if (total == 0 && all_optional)
                        doc_add(c, "match", DOC_INFO, NULL,
                                "resource \"%s\": no devices now (every selector is optional): the "
                                "kubelet sees a capacity of 0",
                                rc->name);
                else if (total == 0)
                        doc_add(c, "match", DOC_PROBLEM, NULL,
                                "resource \"%s\": no devices: the kubelet sees a capacity of 0",
                                rc->name);
                cJSON_Delete(settings);
        }
}
