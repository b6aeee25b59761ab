/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's "nodes": parsing with the field named, the Kubernetes label
 * rules, the verdict for a node (names, labels, both, unknown), and the
 * selection that keeps only what a node serves. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static struct cfg_config *parse_ok(const char *text) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        int r = cfg_parse(text, strlen(text), &cfg, &err);
        cr_assert_eq(r, 0, "%s: %s", err.field, err.msg);
        return cfg;
}

static void parse_fails(const char *text, const char *field, const char *msg_part) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        cr_assert_eq(cfg_parse(text, strlen(text), &cfg, &err), -EINVAL, "accepted: %s", text);
        cr_assert_str_eq(err.field, field, "%s: %s", text, err.msg);
        cr_assert_not_null(strstr(err.msg, msg_part), "%s: %s", text, err.msg);
        base_field_error_clear(&err);
}

#define RES(nodes)                                                                                 \
        "{ \"resources\": [ { \"name\": \"example.com/a\", \"match\": [ { \"path\": "              \
        "\"/dev/a*\" } ], \"nodes\": " nodes " } ] }"

Test(config_nodes, refuses_bad_nodes_naming_the_field) {
        parse_fails(RES("[]"), "resources[0].nodes", "must be an object");
        parse_fails(RES("{}"), "resources[0].nodes", "\"names\", \"labels\" or both");
        parse_fails(RES("{ \"zones\": [] }"), "resources[0].nodes", "\"zones\": unknown key");
        parse_fails(RES("{ \"names\": [] }"), "resources[0].nodes.names", "1 to 64");
        parse_fails(RES("{ \"names\": [ \"\" ] }"), "resources[0].nodes.names", "[0]");
        parse_fails(RES("{ \"names\": [ 1 ] }"), "resources[0].nodes.names", "glob");
        parse_fails(RES("{ \"labels\": {} }"), "resources[0].nodes.labels", "1 to 64 labels");
        parse_fails(RES("{ \"labels\": { \"-gpu\": \"x\" } }"), "resources[0].nodes.labels",
                    "key \"-gpu\"");
        parse_fails(RES("{ \"labels\": { \"Example.com/gpu\": \"x\" } }"),
                    "resources[0].nodes.labels", "prefix");
        parse_fails(RES("{ \"labels\": { \"gpu\": \"a b\" } }"), "resources[0].nodes.labels",
                    "value \"a b\"");
        parse_fails(RES("{ \"labels\": { \"gpu\": 1 } }"), "resources[0].nodes.labels",
                    "must be a string");
        parse_fails(RES("{ \"labels\": { \"gpu\": \"a\", \"gpu\": \"b\" } }"),
                    "resources[0].nodes.labels", "duplicate key");
        /* Two resources of one name need "nodes" on both. */
        parse_fails("{ \"resources\": [ { \"name\": \"example.com/a\", \"match\": [ { \"path\": "
                    "\"/dev/a*\" } ], \"nodes\": { \"names\": [ \"x\" ] } }, { \"name\": "
                    "\"example.com/a\", \"match\": [ { \"path\": \"/dev/b*\" } ] } ] }",
                    "resources[1].name", "duplicates resources[0]");
        parse_fails("{ \"nfd\": { \"features_dir\": \"rel\" }, \"resources\": [] }",
                    "nfd.features_dir", "absolute");
        parse_fails("{ \"nfd\": { \"dir\": \"/x\" }, \"resources\": [] }", "nfd", "unknown key");
}

Test(config_nodes, label_rules) {
        cr_assert_null(cfg_label_key_problem("gpu"));
        cr_assert_null(cfg_label_key_problem("feature.node.kubernetes.io/pci-10de.present"));
        cr_assert_null(cfg_label_key_problem("a_b.c-d"));
        cr_assert_not_null(cfg_label_key_problem(""));
        cr_assert_not_null(cfg_label_key_problem("/gpu"));
        cr_assert_not_null(cfg_label_key_problem("example.com/"));
        cr_assert_not_null(cfg_label_key_problem("a/b/c"));
        char long_name[65];
        memset(long_name, 'a', 64);
        long_name[64] = '\0';
        cr_assert_not_null(cfg_label_key_problem(long_name));
        cr_assert_null(cfg_label_key_problem(long_name + 1));
        cr_assert_null(cfg_label_value_problem(""));
        cr_assert_null(cfg_label_value_problem("v1.2_3-x"));
        cr_assert_not_null(cfg_label_value_problem("x-"));
        cr_assert_not_null(cfg_label_value_problem(long_name));
}

static int verdict(const struct cfg_nodes *n, const char *node, const char *labels_json,
                   char **why) {
        cJSON *labels = labels_json ? cJSON_Parse(labels_json) : NULL;
        int v = cfg_nodes_match(n, node, labels, why);
        cJSON_Delete(labels);
        return v;
}

Test(config_nodes, a_node_matches_names_and_labels) {
        struct cfg_config *cfg = parse_ok(
                RES("{ \"names\": [ \"edge-*\", \"lab-[0-9]\" ], \"labels\": { \"gpu\": \"yes\", "
                    "\"example.com/zone\": \"a\" } }"));
        const struct cfg_nodes *n = cfg->resources[0].nodes;
        char *why = NULL;

        cr_assert_eq(verdict(n, "edge-7",
                             "{\"gpu\":\"yes\",\"example.com/zone\":\"a\",\"x\":\"y\"}", &why),
                     CFG_NODE_SERVES, "%s", why);
        free(why);
        cr_assert_eq(verdict(n, "lab-3", "{\"gpu\":\"yes\",\"example.com/zone\":\"a\"}", &why),
                     CFG_NODE_SERVES);
        free(why);
        cr_assert_eq(verdict(n, "lab-33", "{\"gpu\":\"yes\",\"example.com/zone\":\"a\"}", &why),
                     CFG_NODE_SKIPS);
        cr_assert_str_eq(why,
                         "node \"lab-33\" matches none of nodes.names (\"edge-*\", \"lab-[0-9]\")");
        free(why);
        cr_assert_eq(verdict(n, "edge-1", "{\"gpu\":\"yes\",\"example.com/zone\":\"b\"}", &why),
                     CFG_NODE_SKIPS);
        cr_assert_not_null(strstr(why, "\"example.com/zone\" is \"b\", not \"a\""), "%s", why);
        free(why);
        cr_assert_eq(verdict(n, "edge-1", "{\"example.com/zone\":\"a\"}", &why), CFG_NODE_SKIPS);
        cr_assert_not_null(strstr(why, "no label \"gpu\""), "%s", why);
        free(why);
        /* Unknown: no name, or no labels. */
        cr_assert_eq(verdict(n, NULL, "{}", &why), CFG_NODE_UNDECIDED);
        cr_assert_not_null(strstr(why, "--node-name"), "%s", why);
        free(why);
        cr_assert_eq(verdict(n, "edge-1", NULL, &why), CFG_NODE_UNDECIDED);
        free(why);
        /* The name decides first: a node not named is not served, labels or not. */
        cr_assert_eq(verdict(n, "core-1", NULL, &why), CFG_NODE_SKIPS);
        free(why);
        /* No "nodes": every node. */
        cr_assert_eq(verdict(NULL, NULL, NULL, &why), CFG_NODE_SERVES);
        free(why);
        cfg_free(cfg);
}

struct heard {
        char lines[8][256];
        size_t n;
};

static void hear(void *ctx, const struct cfg_resource *res, size_t idx, enum cfg_node_verdict v,
                 const char *why) {
        struct heard *h = ctx;
        cr_assert_lt(h->n, 8);
        snprintf(h->lines[h->n++], sizeof(h->lines[0]), "%zu %s %d %s", idx, res->name, (int)v,
                 why);
}

#define GROUPS                                                                                     \
        "{ \"resources\": ["                                                                       \
        " { \"name\": \"example.com/a\", \"match\": [ { \"path\": \"/dev/a*\" } ],"                \
        "   \"nodes\": { \"names\": [ \"edge-*\" ] } },"                                           \
        " { \"name\": \"example.com/a\", \"match\": [ { \"path\": \"/dev/b*\" } ],"                \
        "   \"nodes\": { \"labels\": { \"gpu\": \"yes\" } } },"                                    \
        " { \"name\": \"example.com/c\", \"match\": [ { \"path\": \"/dev/c*\" } ] } ] }"

Test(config_nodes, select_keeps_what_a_node_serves) {
        struct cfg_config *cfg = parse_ok(GROUPS);
        struct base_field_error err = { 0 };
        struct heard h = { 0 };
        cJSON *labels = cJSON_Parse("{\"gpu\":\"yes\"}");

        cr_assert(cfg->node_labels, "a resource selects by label");
        cr_assert_eq(cfg_nodes_select(cfg, "core-1", labels, hear, &h, &err), 0);
        cr_assert_eq(cfg->n_resources, 2);
        /* The second group's resource, now first, with its own selector. */
        cr_assert_str_eq(cfg->resources[0].name, "example.com/a");
        cr_assert_not_null(strstr(cfg->resources[0].settings_json, "/dev/b*"));
        cr_assert_str_eq(cfg->resources[1].name, "example.com/c");
        cr_assert_eq(h.n, 2, "only resources with \"nodes\" are heard");
        cr_assert_not_null(strstr(h.lines[0], "0 example.com/a 1 "), "%s", h.lines[0]);
        cr_assert_not_null(strstr(h.lines[1], "1 example.com/a 0 "), "%s", h.lines[1]);
        cfg_free(cfg);

        /* A node in both groups would serve the name twice: refused. */
        cfg = parse_ok(GROUPS);
        cr_assert_eq(cfg_nodes_select(cfg, "edge-1", labels, NULL, NULL, &err), -EINVAL);
        cr_assert_str_eq(err.field, "resources[1].nodes");
        cr_assert_not_null(strstr(err.msg, "twice"), "%s", err.msg);
        base_field_error_clear(&err);
        cfg_free(cfg);

        /* Labels unknown: the label group is not served; names still decide. */
        cfg = parse_ok(GROUPS);
        cr_assert_eq(cfg_nodes_select(cfg, "edge-1", NULL, NULL, NULL, &err), 0);
        cr_assert_eq(cfg->n_resources, 2);
        cr_assert_not_null(strstr(cfg->resources[0].settings_json, "/dev/a*"));
        cfg_free(cfg);
        cJSON_Delete(labels);
}

Test(config_nodes, nodes_do_not_count_as_a_device_setting) {
        struct cfg_config *a = parse_ok(RES("{ \"names\": [ \"x\" ] }"));
        struct cfg_config *b = parse_ok(RES("{ \"names\": [ \"y\" ] }"));
        /* A reload that changes only who serves it leaves a served resource alone. */
        cr_assert_str_eq(a->resources[0].settings_json, b->resources[0].settings_json);
        cfg_free(a);
        cfg_free(b);
}
