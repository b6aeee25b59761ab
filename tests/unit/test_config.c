/* SPDX-License-Identifier: Apache-2.0 */
/* cfg: every mistake names its JSON path; valid configs parse fully. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static struct cfg_config *parse_ok(const char *json) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        int r = cfg_parse(json, strlen(json), &cfg, &err);
        cr_assert_eq(r, 0, "%s: %s", err.field, err.msg);
        return cfg;
}

Test(config, an_empty_resource_list_is_valid) {
        /* The packaged default: serves nothing until edited. */
        struct cfg_config *cfg = parse_ok("{\"resources\": []}");
        cr_assert_eq(cfg->n_resources, 0);
        cfg_free(cfg);
}

Test(config, parses_resources_with_defaults) {
        struct cfg_config *cfg = parse_ok(
                "{\"resources\":[{\"name\":\"example.com/serial\",\"match\":[{\"path\":\"/dev/ttyUSB*\"}]},"
                "{\"name\":\"example.com/fuse\",\"match\":[{\"path\":\"/dev/fuse\"}],\"shares\":8,"
                "\"allocate\":[\"cdi-annotations\",\"device-specs\"],\"policy\":\"spread\"}],\"allocate\":[\"cdi-cri\"],\"user\":\"65534\"}");
        cr_assert_eq(cfg->n_resources, 2);
        cr_assert_str_eq(cfg->resources[0].name, "example.com/serial");
        cr_assert_str_eq(cfg->resources[0].socket_name, "cdiplug-example.com-serial.sock");
        cr_assert_eq(cfg->resources[0].shares, 1);
        cr_assert_eq(cfg->resources[0].n_selectors, 1);
        cr_assert_eq(cfg->resources[0].alloc_modes, CFG_ALLOC_CDI_CRI);
        cr_assert_eq(cfg->resources[1].shares, 8);
        cr_assert_eq(cfg->resources[0].policy, CFG_POLICY_PACKED, "packed is the default");
        cr_assert_eq(cfg->resources[1].policy, CFG_POLICY_SPREAD);
        cr_assert_eq(cfg->resources[1].alloc_modes,
                     CFG_ALLOC_CDI_ANNOTATIONS | CFG_ALLOC_DEVICE_SPECS);
        cr_assert_str_eq(cfg->user, "65534");
        cfg_free(cfg);
}

struct bad {
        const char *json;
        const char *field;
        const char *msg_has;
};

static const struct bad cases[] = {
        { "{\"resources\": [", "", "line 1" },
        { "[]", "", "object" },
        { "{}", "resources", "required" },
        { "{\"resources\": {}}", "resources", "must be an array" },
        { "{\"resources\": [], \"extra\": 1}", "extra", "unknown key" },
        { "{\"user\": \"a\", \"user\": \"b\", \"resources\": []}", "user", "duplicate key" },
        { "{\"user\": 5, \"user\": \"b\", \"resources\": []}", "user", "duplicate key" },
        { "{\"resources\": [], \"metrics\": {\"address\": 5, \"address\": \"\"}}",
          "metrics.address", "duplicate key" },
        { "{\"resources\": [], \"metrics\": {\"colour\": 1}}", "metrics.colour", "unknown key" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"name\": \"example.com/b\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "duplicate key" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"colour\": 1}]}",
          "resources[0].colour", "unknown key" },
        { "{\"resources\": [{\"match\": [{\"path\": \"/dev/a\"}]}]}", "resources[0].name",
          "required" },
        { "{\"resources\": [{\"name\": 7, \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "string" },
        { "{\"resources\": [{\"name\": \"serial\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "domain" },
        { "{\"resources\": [{\"name\": \"kubernetes.io/serial\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "kubernetes.io" },
        { "{\"resources\": [{\"name\": \"x.kubernetes.io/serial\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "kubernetes.io" },
        { "{\"resources\": [{\"name\": \"Example.com/serial\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "lowercase" },
        { "{\"resources\": [{\"name\": \"example.com/-serial\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "start and end" },
        { "{\"resources\": [{\"name\": \"example.com/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
          "\"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "63" },
        { "{\"resources\": [{\"name\": \"example.com/a\"}]}", "resources[0].match", "required" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": []}]}", "resources[0].match",
          "non-empty" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"bogus\": 1}]}]}",
          "resources[0].match[0].bogus", "" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"shares\": 0}]}",
          "resources[0].shares", "1 to" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"shares\": 1.5}]}",
          "resources[0].shares", "whole" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"shares\": \"2\"}]}",
          "resources[0].shares", "whole" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"allocate\": [\"magic\"]}]}",
          "resources[0].allocate[0]", "unknown allocate mode" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]},"
          "{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/b\"}]}]}",
          "resources[1].name", "duplicates" },
        { "{\"resources\": [{\"name\": \"a.com/b-c\", \"match\": [{\"path\": \"/dev/a\"}]},"
          "{\"name\": \"a.com-b/c\", \"match\": [{\"path\": \"/dev/b\"}]}]}",
          "resources[1].name", "duplicates" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"policy\": \"tight\"}]}",
          "resources[0].policy", "packed" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]}], \"user\": 5}",
          "user", "user" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]}], \"log_format\": \"xml\"}",
          "log_format", "\"json\"" },
        /* An escaped NUL would cut the string short: refused like a raw
         * NUL byte, naming the field (keys too). */
        { "{\"resources\": [{\"name\": \"example.com/a\\u0000b\", \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].name", "\\u0000" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}, {\"path\": \"/dev/b\\u0000/..\"}]}]}",
          "resources[0].match[1].path", "NUL" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"na\\u0000me\": 1, \"match\": [{\"path\": \"/dev/a\"}]}]}",
          "resources[0].na\\u0000me", "NUL" },
        { "{\"user\": \"a\\\\\\u0000\", \"resources\": []}", "user", "NUL" },
        { "{\"resources\": [], \"metrics\": {\"address\": \"127.0.0.1:1\\u0000\"}}",
          "metrics.address", "NUL" },
        /* DRA: the "dra" section and each resource's "api". */
        { "{\"resources\": [], \"dra\": \"cdiplug.example.com\"}", "dra", "must be an object" },
        { "{\"resources\": [], \"dra\": []}", "dra", "must be an object" },
        { "{\"resources\": [], \"dra\": {}}", "dra.driver", "required" },
        { "{\"resources\": [], \"dra\": {\"driver\": 7}}", "dra.driver", "string" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"\"}}", "dra.driver", "empty" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"a..b\"}}", "dra.driver", "DNS subdomain" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"-a.example\"}}", "dra.driver",
          "DNS subdomain" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"a_b.example\"}}", "dra.driver",
          "DNS subdomain" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"cdiplug/example\"}}", "dra.driver",
          "DNS subdomain" },
        { "{\"resources\": [], \"dra\": {\"driver\": "
          "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example\"}}",
          "dra.driver", "at most 63" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"a.example\", \"socket\": \"x\"}}",
          "dra.socket", "unknown key" },
        { "{\"resources\": [], \"dra\": {\"driver\": \"a.example\", \"driver\": \"b.example\"}}",
          "dra.driver", "duplicate key" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"api\": \"DRA\"}]}",
          "resources[0].api", "\"device-plugin\" or \"dra\"" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"api\": 1}]}",
          "resources[0].api", "\"device-plugin\" or \"dra\"" },
        { "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]},"
          "{\"name\": \"example.com/b\", \"match\": [{\"path\": \"/dev/b\"}], \"api\": \"dra\"}]}",
          "dra.driver", "resources[1]" },
};

Test(config, reports_the_field_of_every_mistake) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct bad *c = &cases[i];
                struct cfg_config *cfg = NULL;
                struct base_field_error err = { 0 };
                int r = cfg_parse(c->json, strlen(c->json), &cfg, &err);
                cr_assert_eq(r, -EINVAL, "accepted: %s", c->json);
                cr_assert_null(cfg);
                cr_assert_str_eq(err.field, c->field, "for %s: field \"%s\" (%s)", c->json,
                                 err.field, err.msg);
                cr_assert_not_null(strstr(err.msg, c->msg_has), "for %s: message \"%s\"", c->json,
                                   err.msg);
                base_field_error_clear(&err);
        }
}

/* Out of int's range: converting these to int before the range check was
 * undefined behaviour, which clang's UBSan (float-cast-overflow) catches in
 * tests/run-all.sh's clang build. 1e400 parses as infinity. */
Test(config, shares_out_of_int_range_are_refused) {
        static const char *const values[] = { "1e300",      "-1e300",     "1e400", "-1e400",
                                              "2147483648", "4294967297", "1e10",  "1025",
                                              "-1",         "1024.5" };
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
                char json[256];
                struct cfg_config *cfg = NULL;
                struct base_field_error err = { 0 };
                snprintf(json, sizeof(json),
                         "{\"resources\": [{\"name\": \"example.com/a\", \"match\": "
                         "[{\"path\": \"/dev/a\"}], \"shares\": %s}]}",
                         values[i]);
                cr_assert_eq(cfg_parse(json, strlen(json), &cfg, &err), -EINVAL, "accepted: %s",
                             json);
                cr_assert_null(cfg);
                cr_assert_str_eq(err.field, "resources[0].shares", "for %s", values[i]);
                cr_assert_not_null(strstr(err.msg, "1 to 1024"), "for %s: %s", values[i], err.msg);
                base_field_error_clear(&err);
        }
        struct cfg_config *cfg =
                parse_ok("{\"resources\": [{\"name\": \"example.com/a\", \"match\": "
                         "[{\"path\": \"/dev/a\"}], \"shares\": 1024.0}]}");
        cr_assert_eq(cfg->resources[0].shares, 1024);
        cfg_free(cfg);
}

Test(config, refuses_oversized_and_nul) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };
        char nul[] = "{\"resources\":\0[]}";
        cr_assert_eq(cfg_parse(nul, sizeof(nul) - 1, &cfg, &err), -EINVAL);
        base_field_error_clear(&err);
        char *big = calloc(CFG_MAX_BYTES + 2, 1);
        memset(big, ' ', CFG_MAX_BYTES + 1);
        cr_assert_eq(cfg_parse(big, CFG_MAX_BYTES + 1, &cfg, &err), -EINVAL);
        cr_assert_not_null(strstr(err.msg, "larger"));
        base_field_error_clear(&err);
        free(big);
}

/* "\\u0000" in JSON is a backslash and the text "u0000", no NUL. */
Test(config, an_escaped_backslash_before_u0000_is_no_nul) {
        struct cfg_config *cfg = parse_ok("{\"user\": \"a\\\\u0000b\", \"resources\": []}");
        cr_assert_str_eq(cfg->user, "a\\u0000b");
        cfg_free(cfg);
}

Test(config, resource_name_rule) {
        cr_assert_null(cfg_resource_name_problem("example.com/serial"));
        cr_assert_null(cfg_resource_name_problem("a.b-c.example/x_y.z-1"));
        cr_assert_not_null(cfg_resource_name_problem("example.com/"));
        cr_assert_not_null(cfg_resource_name_problem("/serial"));
        cr_assert_not_null(cfg_resource_name_problem("example..com/serial"));
        cr_assert_not_null(cfg_resource_name_problem("requests.example.com/serial"));
        cr_assert_not_null(cfg_resource_name_problem("example.com/ser ial"));
        cr_assert_null(cfg_resource_name_problem("notkubernetes.io/serial"));
}

Test(config, load_says_what_the_file_problem_is) {
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };

        /* A missing file is not a malformed config: callers (reload, doctor)
         * tell the two apart by the errno. */
        cr_assert_eq(cfg_load("/nonexistent/cdiplug.json", &cfg, &err), -ENOENT);
        cr_assert_null(cfg);
        cr_assert_not_null(strstr(err.msg, "/nonexistent/cdiplug.json"), "%s", err.msg);
        base_field_error_clear(&err);

        cr_assert_eq(cfg_load("/", &cfg, &err), -EINVAL);
        cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
        base_field_error_clear(&err);
}

Test(config, log_format_key) {
        struct cfg_config *cfg = parse_ok(
                "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]}]}");
        cr_assert_eq(cfg->log_format, CFG_LOG_UNSET);
        cfg_free(cfg);
        cfg = parse_ok(
                "{\"log_format\": \"json\", \"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]}]}");
        cr_assert_eq(cfg->log_format, CFG_LOG_JSON);
        cfg_free(cfg);
}

/* A reload compares these: what decides a resource's devices differs
 * exactly when its selectors, shares or edits do. */
Test(config, settings_json_tells_device_settings_from_answers) {
        const char *base =
                "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]}]}";
        const char *answers =
                "{\"allocate\": [\"device-specs\"], \"resources\": [{\"name\": \"example.com/a\", "
                "\"match\": [{\"path\": \"/dev/a\"}], \"policy\": \"spread\", \"allocate\": [\"cdi-cri\"]}]}";
        const char *shares =
                "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}], \"shares\": 2}]}";
        const char *glob =
                "{\"resources\": [{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a*\"}]}]}";
        struct cfg_config *a = parse_ok(base), *b = parse_ok(answers), *c = parse_ok(shares),
                          *d = parse_ok(glob);
        cr_assert_str_eq(a->resources[0].settings_json, b->resources[0].settings_json);
        cr_assert_str_neq(a->resources[0].settings_json, c->resources[0].settings_json);
        cr_assert_str_neq(a->resources[0].settings_json, d->resources[0].settings_json);
        cfg_free(a);
        cfg_free(b);
        cfg_free(c);
        cfg_free(d);
}

Test(config, dra_section_and_api) {
        struct cfg_config *cfg = parse_ok(
                "{\"dra\": {\"driver\": \"cdiplug.example.com\"}, \"resources\": ["
                "{\"name\": \"example.com/a\", \"match\": [{\"path\": \"/dev/a\"}]},"
                "{\"name\": \"example.com/b\", \"match\": [{\"path\": \"/dev/b\"}], \"api\": \"dra\"},"
                "{\"name\": \"example.com/c\", \"match\": [{\"path\": \"/dev/c\"}], \"api\": \"device-plugin\"}]}");
        cr_assert_str_eq(cfg->dra_driver, "cdiplug.example.com");
        cr_assert_eq(cfg->resources[0].api, CFG_API_DEVICE_PLUGIN, "device-plugin is the default");
        cr_assert_eq(cfg->resources[1].api, CFG_API_DRA);
        cr_assert_eq(cfg->resources[2].api, CFG_API_DEVICE_PLUGIN);
        cfg_free(cfg);

        /* A "dra" section without DRA resources is valid (they may come
         * with a reload); without one, dra_driver stays NULL. */
        cfg = parse_ok("{\"dra\": {\"driver\": \"a.example\"}, \"resources\": []}");
        cr_assert_str_eq(cfg->dra_driver, "a.example");
        cfg_free(cfg);
        cfg = parse_ok("{\"resources\": []}");
        cr_assert_null(cfg->dra_driver);
        cfg_free(cfg);
}

/* The API server's rule (ValidateCSIDriverName, reused for DRA drivers):
 * a DNS subdomain once lowercased, at most 63 characters. */
Test(config, driver_name_rule) {
        static const char ok63[] =
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example";
        cr_assert_eq(strlen(ok63), 63);
        cr_assert_null(cfg_driver_name_problem(ok63));
        cr_assert_null(cfg_driver_name_problem("cdiplug.example.com"));
        cr_assert_null(cfg_driver_name_problem("gpu"));
        cr_assert_null(cfg_driver_name_problem("Cdiplug.Example.com"), "the API lowercases first");
        cr_assert_not_null(cfg_driver_name_problem(""));
        cr_assert_not_null(cfg_driver_name_problem("a.example."));
        cr_assert_not_null(cfg_driver_name_problem("a-.example"));
        cr_assert_not_null(cfg_driver_name_problem("a example"));
        cr_assert_not_null(cfg_driver_name_problem(
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example"));
}

/* Moving a resource between the APIs re-creates its front end: its
 * settings differ; leaving "api" out is saying "device-plugin". */
Test(config, settings_json_counts_the_api) {
        struct cfg_config *plain = parse_ok(
                "{\"dra\": {\"driver\": \"a.example\"}, \"resources\": [{\"name\": \"example.com/a\", "
                "\"match\": [{\"path\": \"/dev/a\"}]}]}");
        struct cfg_config *dp = parse_ok(
                "{\"dra\": {\"driver\": \"a.example\"}, \"resources\": [{\"name\": \"example.com/a\", "
                "\"match\": [{\"path\": \"/dev/a\"}], \"api\": \"device-plugin\"}]}");
        struct cfg_config *dra = parse_ok(
                "{\"dra\": {\"driver\": \"a.example\"}, \"resources\": [{\"name\": \"example.com/a\", "
                "\"match\": [{\"path\": \"/dev/a\"}], \"api\": \"dra\"}]}");
        cr_assert_str_eq(plain->resources[0].settings_json, dp->resources[0].settings_json);
        cr_assert_str_neq(plain->resources[0].settings_json, dra->resources[0].settings_json);
        cfg_free(plain);
        cfg_free(dp);
        cfg_free(dra);
}
