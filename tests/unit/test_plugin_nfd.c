/* SPDX-License-Identifier: Apache-2.0 */
/* The Node Feature Discovery feature file's text: per resource served,
 * present and count, counting healthy devices only; a name too long for a
 * label becomes a comment. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "plugin.h"
#include "resources.h"

static struct res_device dev(const char *id, const char *node) {
        struct res_device d = { 0 };
        d.id = (char *)id;
        d.nodes = calloc(2, sizeof(char *));
        d.nodes[0] = (char *)node;
        d.n_nodes = 1;
        d.numa_node = -1;
        return d;
}

static struct cfg_resource res(const char *name) {
        return (struct cfg_resource){ .name = (char *)name,
                                      .kind = (char *)name,
                                      .spec_file = "example.com-x.json",
                                      .socket_name = "cdiplug-example.com-x.sock",
                                      .shares = 1,
                                      .alloc_modes = CFG_ALLOC_CDI_CRI };
}

Test(plugin_nfd, present_and_count_per_resource) {
        struct cfg_resource a = res("example.com/serial"), b = res("example.com/gpio"),
                            c = res("example.com/"
                                    "a-name-part-of-fifty-six-characters-is-too-long-for-a-la");
        struct res_device devs[] = { dev("ttyUSB0", "/dev/ttyUSB0"),
                                     dev("ttyUSB1", "/dev/ttyUSB1") };
        struct res_devlist both = { .devs = devs, .n = 2 }, one = { .devs = devs, .n = 1 },
                           none = { 0 };
        struct dp_plugin *pa, *pb, *pc;
        bool changed;
        char *text = NULL;

        cr_assert_eq(dp_plugin_new(&a, &pa), 0);
        cr_assert_eq(dp_plugin_new(&b, &pb), 0);
        cr_assert_eq(dp_plugin_new(&c, &pc), 0);
        cr_assert_eq(dp_plugin_update(pa, &both, &changed), 0);
        cr_assert_eq(dp_plugin_update(pb, &none, &changed), 0);
        const struct dp_plugin *v[] = { pa, pb, pc };
        cr_assert_eq(dp_nfd_render(v, 3, &text), 0);
        cr_assert_not_null(strstr(text, "\nexample.com/serial.present=true\n"
                                        "example.com/serial.count=2\n"
                                        "example.com/gpio.present=false\n"
                                        "example.com/gpio.count=0\n"),
                           "%s", text);
        cr_assert_not_null(strstr(text, "# example.com/a-name-part"), "%s", text);
        cr_assert_null(strstr(text, "too-long-for-a-la.present"), "%s", text);
        /* Every line a comment or NAME=VALUE, as nfd-worker reads it. */
        for (char *l = text; *l; l = strchr(l, '\n') + 1)
                cr_assert(*l == '#' || (strchr(l, '=') && strchr(l, '=') < strchr(l, '\n')), "%s",
                          l);
        free(text);

        /* ttyUSB1 unplugged: listed Unhealthy, not counted. */
        cr_assert_eq(dp_plugin_update(pa, &one, &changed), 0);
        cr_assert(changed);
        cr_assert_eq(dp_nfd_count(pa), 1);
        cr_assert_eq(dp_nfd_render(v, 1, &text), 0);
        cr_assert_not_null(strstr(text, "example.com/serial.count=1\n"), "%s", text);
        free(text);
        dp_plugin_free(pa);
        dp_plugin_free(pb);
        dp_plugin_free(pc);
        free(devs[0].nodes);
        free(devs[1].nodes);
}
