/* SPDX-License-Identifier: Apache-2.0 */
/* The command line as an operator meets it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "env.h"

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

TestSuite(cli, .init = start, .fini = stop, .timeout = 30);

Test(cli, bad_config_exits_2_naming_the_field_and_writes_nothing) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ],\n"
                "    \"shares\": 0 } ] }\n");
        env_touch(&e, "dev/fuse");
        int rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                         "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "resources[0].shares"), "%s", out);
        cr_assert_eq(env_dir_entries(e.cdi_dir), 0, "nothing may be written to the CDI dir");
        cr_assert_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");
        free(out);

        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/fuse\",\n  \"match\": [ } ] }");
        rc = env_run(&e, &out, "check", "--config", e.config, NULL);
        cr_assert_eq(rc, 2);
        cr_assert_not_null(strstr(out, "line 2"), "JSON errors say where: %s", out);
        free(out);

        rc = env_run(&e, &out, "check", "--config", "/nonexistent/cdiplug.json", NULL);
        cr_assert_eq(rc, 2);
        cr_assert_not_null(strstr(out, "/nonexistent/cdiplug.json"), "%s", out);
        free(out);
}

Test(cli, check_validates_a_good_config) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        cr_assert_eq(env_run(&e, &out, "check", "--config", e.config, NULL), 0, "%s", out);
        cr_assert_not_null(strstr(out, "1 resources"), "%s", out);
        free(out);
}

Test(cli, help_version_and_usage_errors) {
        char *out = NULL;
        cr_assert_eq(env_run(&e, &out, "--help", NULL), 0);
        cr_assert_not_null(strstr(out, "serve"));
        cr_assert_not_null(strstr(out, "--kubelet-dir"));
        free(out);
        cr_assert_eq(env_run(&e, &out, "version", NULL), 0);
        cr_assert_not_null(strstr(out, "cdiplug " CDIPLUG_VERSION));
        free(out);
        cr_assert_eq(env_run(&e, &out, "frobnicate", NULL), 2);
        cr_assert_not_null(strstr(out, "frobnicate"));
        free(out);
        cr_assert_eq(env_run(&e, &out, "serve", "--no-such-flag", NULL), 2);
        free(out);
        cr_assert_eq(env_run(&e, &out, NULL), 2);
        free(out);
}

Test(cli, generate_writes_specs_once_or_prints_them) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/absent\", \"match\": [ { \"path\": \"/dev/nothing*\" } ] } ] }");
        env_touch(&e, "dev/ttyUSB0");
        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--cdi-dir", e.cdi_dir,
                             "--host-root", e.host, NULL),
                     0, "%s", out);
        free(out);
        char *path;
        cr_assert(asprintf(&path, "%s/example.com-serial.json", e.cdi_dir) > 0);
        char *spec = env_read(path);
        cr_assert_not_null(spec, "generate must write %s", path);
        cr_assert_not_null(strstr(spec, "\"/dev/ttyUSB0\""));
        free(spec);
        free(path);
        cr_assert_eq(env_dir_entries(e.cdi_dir), 2,
                     "one spec plus the ownership record: none for a resource "
                     "with no devices");

        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--stdout", "--host-root",
                             e.host, NULL),
                     0);
        cr_assert_not_null(strstr(out, "\"kind\""), "%s", out);
        cr_assert_not_null(strstr(out, "example.com/serial"));
        free(out);

        /* Nothing writable: a clear message and a non-zero exit. */
        cr_assert_eq(env_run(&e, &out, "generate", "--config", e.config, "--cdi-dir",
                             "/proc/cdiplug-no", "--host-root", e.host, NULL),
                     1);
        cr_assert_not_null(strstr(out, "/proc/cdiplug-no"), "%s", out);
        free(out);
}

static const char *const command_names[] = { "serve",  "check",     "generate",
                                             "doctor", "manifests", "version" };

/* The "--option" words of a text, each once, in a fixed-size set. */
struct words {
        char w[32][32];
        size_t n;
};

static void words_add_options(struct words *ws, const char *text, size_t len) {
        for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), "--", 2));) {
                size_t n = 2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
                bool seen = n == 2 || strncmp(p + 2, "help", 4) == 0;
                for (size_t i = 0; i < ws->n && !seen; i++)
                        seen = strlen(ws->w[i]) == n && strncmp(ws->w[i], p, n) == 0;
                if (!seen && ws->n < 32 && n < 32)
                        snprintf(ws->w[ws->n++], 32, "%.*s", (int)n, p);
                p += n;
        }
}

static bool words_have(const struct words *ws, const char *w) {
        for (size_t i = 0; i < ws->n; i++)
                if (strcmp(ws->w[i], w) == 0)
                        return true;
        return false;
}

/* The options a command's own help puts in its synopsis. */
static void synopsis_of(const char *cmd, struct words *ret) {
        char *out = NULL, prefix[64];
        cr_assert_eq(env_run(&e, &out, cmd, "--help", NULL), 0, "%s --help: %s", cmd, out);
        snprintf(prefix, sizeof(prefix), "Usage: cdiplug %s", cmd);
        cr_assert_eq(strncmp(out, prefix, strlen(prefix)), 0,
                     "%s --help prints its own synopsis first: %s", cmd, out);
        char *end = strstr(out, "\n\n");
        cr_assert_not_null(end, "%s", out);
        *ret = (struct words){ 0 };
        words_add_options(ret, out, (size_t)(end - out));
        free(out);
}

Test(cli, every_command_has_its_help_and_refuses_others_options_alike) {
        for (size_t i = 0; i < sizeof(command_names) / sizeof(command_names[0]); i++) {
                struct words syn;
                synopsis_of(command_names[i], &syn);
                char *out = NULL;
                cr_assert_eq(env_run(&e, &out, "help", command_names[i], NULL), 0);
                cr_assert_not_null(strstr(out, "Usage: cdiplug "), "%s", out);
                free(out);
        }
        /* An option of another command: one message, wherever. */
        static const char *const misplaced[][3] = {
                { "check", "--json", NULL },    { "serve", "--json", NULL },
                { "doctor", "--stdout", NULL }, { "generate", "--no-sandbox", NULL },
                { "version", "--config", "x" }, { "generate", "--kubelet-dir", "/tmp" },
        };
        for (size_t i = 0; i < sizeof(misplaced) / sizeof(misplaced[0]); i++) {
                char *out = NULL, want[128];
                int rc = env_run(&e, &out, misplaced[i][0], misplaced[i][1], misplaced[i][2], NULL);
                cr_assert_eq(rc, 2, "%s %s: exit %d: %s", misplaced[i][0], misplaced[i][1], rc,
                             out);
                snprintf(want, sizeof(want), ", not %s; see cdiplug %s --help", misplaced[i][0],
                         misplaced[i][0]);
                cr_assert_not_null(strstr(out, want), "%s", out);
                snprintf(want, sizeof(want), "%s is for ", misplaced[i][1]);
                cr_assert_not_null(strstr(out, want), "%s", out);
                free(out);
        }
        /* Unknown options and missing values point at the command's help. */
        char *out = NULL;
        cr_assert_eq(env_run(&e, &out, "doctor", "--no-such-flag", NULL), 2);
        cr_assert_not_null(strstr(out, "unknown option \"--no-such-flag\""), "%s", out);
        cr_assert_not_null(strstr(out, "see cdiplug doctor --help"), "%s", out);
        free(out);
        cr_assert_eq(env_run(&e, &out, "generate", "--stdout=yes", NULL), 2);
        cr_assert_not_null(strstr(out, "\"--stdout=yes\": the option takes no value; see "
                                       "cdiplug generate --help"),
                           "%s", out);
        free(out);
        cr_assert_eq(env_run(&e, &out, "check", "--config", NULL), 2);
        cr_assert_not_null(strstr(out, "--config needs a value; see cdiplug check --help"), "%s",
                           out);
        free(out);
}

/* The README's and the man page's synopses list exactly the options each
 * command takes. */
static void block_matches(const char *doc, const char *block, size_t len, const char *cmd) {
        struct words syn, listed = { 0 };
        synopsis_of(cmd, &syn);
        words_add_options(&listed, block, len);
        for (size_t i = 0; i < syn.n; i++)
                cr_assert(words_have(&listed, syn.w[i]), "%s's synopsis of %s lacks %s", doc, cmd,
                          syn.w[i]);
        for (size_t i = 0; i < listed.n; i++)
                cr_assert(words_have(&syn, listed.w[i]),
                          "%s's synopsis of %s lists %s, not its own", doc, cmd, listed.w[i]);
}

Test(cli, readme_and_man_page_synopses_list_every_option) {
        char *readme = env_read(CDIPLUG_SRC_DIR "/README.md");
        char *man = env_read(CDIPLUG_BUILD_DIR "/packaging/cdiplug.8");
        cr_assert_not_null(readme);
        cr_assert_not_null(man);
        /* roff writes a literal '-' as "\-". */
        char *w = man;
        for (const char *r = man; *r; r++)
                if (!(r[0] == '\\' && r[1] == '-'))
                        *w++ = *r;
        *w = '\0';
        char *section = strstr(readme, "## Command line\n");
        cr_assert_not_null(section);
        for (size_t i = 0; i < sizeof(command_names) / sizeof(command_names[0]); i++) {
                const char *cmd = command_names[i];
                char head[64];
                /* README: "    cdiplug CMD ..." and its continuation lines. */
                snprintf(head, sizeof(head), "\n    cdiplug %s", cmd);
                char *b = strstr(section, head);
                cr_assert_not_null(b, "README lacks the synopsis of %s", cmd);
                char *end = strstr(b + 1, "\n    cdiplug ");
                cr_assert_not_null(end);
                block_matches("README", b, (size_t)(end - b), cmd);
                /* man page: ".SY cdiplug\n.B CMD\n" up to ".YS". */
                snprintf(head, sizeof(head), ".SY cdiplug\n.B %s\n", cmd);
                b = strstr(man, head);
                cr_assert_not_null(b, "the man page lacks the synopsis of %s", cmd);
                end = strstr(b, ".YS");
                cr_assert_not_null(end);
                block_matches("the man page", b, (size_t)(end - b), cmd);
        }
        free(readme);
        free(man);
}

/* Every command that reads under --host-root names a missing one, exit 2,
 * nothing written; check no longer calls such a config "valid". */
Test(cli, a_missing_host_root_is_named_by_every_command) {
        static const char *const cmds[] = { "serve", "check", "generate", "doctor" };
        char *missing;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        cr_assert(asprintf(&missing, "%s/no-such-root", e.root) > 0);
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                /* The env's dirs, as far as the command takes them, so
                 * nothing outside the test's dir could be touched; where a
                 * command takes no such dir, --config once more fills in. */
                bool kubelet = strcmp(cmds[i], "generate") != 0;
                bool cdi = strcmp(cmds[i], "check") != 0;
                const char *roots[] = { missing, e.config };
                for (size_t k = 0; k < 2; k++) {
                        char *out = NULL, want[512];
                        int rc = env_run(&e, &out, cmds[i], "--config", e.config, "--host-root",
                                         roots[k], kubelet ? "--kubelet-dir" : "--config",
                                         kubelet ? e.kubelet_dir : e.config,
                                         cdi ? "--cdi-dir" : "--config", cdi ? e.cdi_dir : e.config,
                                         NULL);
                        cr_assert_eq(rc, 2, "%s --host-root %s: exit %d: %s", cmds[i], roots[k], rc,
                                     out);
                        snprintf(want, sizeof(want), "--host-root %s: %s", roots[k],
                                 k == 0 ? "no such directory" : "not a directory");
                        cr_assert_not_null(strstr(out, want), "%s: %s", cmds[i], out);
                        cr_assert_null(strstr(out, "valid"), "%s: %s", cmds[i], out);
                        free(out);
                }
        }
        cr_assert_eq(env_dir_entries(e.cdi_dir), 0, "nothing may be written to the CDI dir");
        cr_assert_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");
        free(missing);
}

/* check resolves the identity as serve will; both say "no such user". */
Test(cli, an_unknown_user_is_refused_by_check_and_serve_alike) {
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"user\": \"no-such-cdiplug-user\", \"resources\": [ { \"name\": \"example.com/fuse\", "
                "\"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        env_touch(&e, "dev/fuse");
        int rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "user: \"no-such-cdiplug-user\": no such user"), "%s", out);
        cr_assert_null(strstr(out, "valid"), "%s", out);
        free(out);

        rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                     "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "no such user"), "%s", out);
        cr_assert_null(strstr(out, "No such file or directory"), "%s", out);
        cr_assert_eq(env_dir_entries(e.cdi_dir), 0, "nothing may be written to the CDI dir");
        cr_assert_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");
        free(out);

        /* --user wins over the config, for check as for serve. */
        rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, "--user",
                     "65534:no-such-cdiplug-group", NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "--user \"65534:no-such-cdiplug-group\": no such group"),
                           "%s", out);
        free(out);
        rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, "--user",
                     "65534:65534", NULL);
        cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
        free(out);
}

/* DRA's config mistakes: check and serve name the field, exit 2, and
 * write nothing. */
Test(cli, dra_config_mistakes_name_their_field) {
        static const struct {
                const char *json, *field;
        } bad[] = {
                { "{ \"dra\": { \"driver\": \"Not_A_Name\" }, \"resources\": [] }", "dra.driver" },
                { "{ \"dra\": { \"driver\": \"a.example\", \"drvier\": 1 }, \"resources\": [] }",
                  "dra.drvier" },
                { "{ \"dra\": [ \"a.example\" ], \"resources\": [] }", "dra" },
                { "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": "
                  "\"/dev/fuse\" } ], \"api\": \"csi\" } ] }",
                  "resources[0].api" },
                { "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": "
                  "\"/dev/fuse\" } ], \"api\": \"dra\" } ] }",
                  "dra.driver" },
        };
        env_touch(&e, "dev/fuse");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *out = NULL, want[64];
                env_write(&e, "config.json", bad[i].json);
                snprintf(want, sizeof(want), "%s: ", bad[i].field);
                int rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host,
                                 NULL);
                cr_assert_eq(rc, 2, "%s: exit %d: %s", bad[i].json, rc, out);
                cr_assert_not_null(strstr(out, want), "%s: %s", bad[i].json, out);
                cr_assert_null(strstr(out, "valid"), "%s", out);
                free(out);
                rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir",
                             e.kubelet_dir, "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL);
                cr_assert_eq(rc, 2, "%s: exit %d: %s", bad[i].json, rc, out);
                cr_assert_not_null(strstr(out, want), "%s: %s", bad[i].json, out);
                free(out);
        }
        cr_assert_eq(env_dir_entries(e.cdi_dir), 0, "nothing may be written to the CDI dir");
        cr_assert_eq(env_dir_entries(e.kubelet_dir), -1, "nor the kubelet dir");

        /* A good one is valid, and check says no more than before. */
        char *out = NULL;
        env_write(
                &e, "config.json",
                "{ \"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ { \"name\": "
                "\"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ], \"api\": "
                "\"dra\" } ] }");
        int rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host, NULL);
        cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "valid, 1 resources"), "%s", out);
        free(out);
}

/* The kubelet serves the device plugin API at /var/lib/kubelet/device-plugins
 * whatever its --root-dir: --kubelet-root leaves the device plugin dir
 * alone (a root too long for a socket below it is no matter), and only
 * --kubelet-dir moves it (one too long is named). */
Test(cli, kubelet_root_leaves_the_device_plugin_dir) {
        char *root, *out = NULL, *want;
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        env_touch(&e, "dev/fuse");
        cr_assert(asprintf(&root, "%s/%0100d", e.root, 0) > 0);
        int rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host,
                         "--kubelet-root", root, NULL);
        cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
        cr_assert_null(strstr(out, "device-plugins"), "%s", out);
        free(out);
        cr_assert(asprintf(&want, "%s/device-plugins", root) > 0);
        rc = env_run(&e, &out, "check", "--config", e.config, "--host-root", e.host,
                     "--kubelet-dir", want, NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "is too long"), "%s", out);
        free(out);
        free(want);
        free(root);

        /* The node name: from the option or NODE_NAME, a DNS subdomain. */
        /* The env's dirs: were the name taken, nothing outside the test's
         * dir could be touched. */
        rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                     "--cdi-dir", e.cdi_dir, "--host-root", e.host, "--node-name", "Node_1", NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "--node-name \"Node_1\": must be a DNS subdomain"), "%s",
                           out);
        free(out);
        setenv("NODE_NAME", "bad node", 1);
        rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                     "--cdi-dir", e.cdi_dir, "--host-root", e.host, NULL);
        unsetenv("NODE_NAME");
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "NODE_NAME \"bad node\": must be a DNS subdomain"), "%s",
                           out);
        free(out);
        rc = env_run(&e, &out, "serve", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                     "--cdi-dir", e.cdi_dir, "--host-root", e.host, "--kubeconfig", "", NULL);
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "must not be empty"), "%s", out);
        free(out);
}

/* POD_UID comes from the environment, which may hold anything: a bad one
 * is named with its control characters escaped, never written raw to the
 * operator's terminal. */
Test(cli, a_pod_uid_with_control_characters_is_shown_escaped) {
        char *out = NULL;

        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": "
                  "\"/dev/fuse\" } ] } ] }");
        cr_assert_eq(setenv("POD_UID", "uid\x1b[31mred\x07\\", 1), 0);
        int rc = env_run(&e, &out, "serve", "--config", e.config, "--node-name", "n", NULL);
        unsetenv("POD_UID");
        cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
        cr_assert_not_null(strstr(out, "POD_UID \"uid\\x1b[31mred\\x07\\x5c\""), "%s", out);
        for (const char *p = out; *p; p++)
                cr_assert((unsigned char)*p >= 0x20 || *p == '\n',
                          "a control character reached the output: \"%s\"", out);
        free(out);
}
