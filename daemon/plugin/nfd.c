/* SPDX-License-Identifier: Apache-2.0 */
/* The Node Feature Discovery feature file: what this node serves, in the
 * format of NFD's local feature source (nfd-worker reads every file in
 * its features.d, one "NAME=VALUE" a line, '#' comments). A name with a
 * DNS prefix becomes a node label of that name as it is, so resource
 * "example.com/serial" gives the labels example.com/serial.present and
 * example.com/serial.count. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "plugin.h"

/* A label's name part (after the '/') is at most 63 characters. */
#define LABEL_NAME_MAX 63

size_t dp_nfd_count(const struct dp_plugin *p) {
        size_t n = 0;

        for (size_t i = 0; i < p->n_devs; i++)
                n += p->devs[i].healthy && !p->devs[i].gone;
        return n;
}

int dp_nfd_render(const struct dp_plugin *const *plugins, size_t n, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return -ENOMEM;
        fputs("# Written by cdiplug: the devices this node serves, for Node Feature Discovery.\n"
              "# Rewritten on every change; removed when cdiplug stops.\n",
              f);
        for (size_t i = 0; i < n; i++) {
                const char *name = plugins[i]->cfg->name, *slash = strchr(name, '/');
                size_t count = dp_nfd_count(plugins[i]);

                /* ".present" is the longer suffix: 8 characters. */
                if (slash && strlen(slash + 1) + 8 > LABEL_NAME_MAX) {
                        fprintf(f,
                                "# %s: its name is too long for a label (%d characters "
                                "with \".present\")\n",
                                name, LABEL_NAME_MAX);
                        continue;
                }
                fprintf(f, "%s.present=%s\n%s.count=%zu\n", name, count ? "true" : "false", name,
                        count);
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}
