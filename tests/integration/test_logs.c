/* SPDX-License-Identifier: Apache-2.0 */
/* --log-format json and the "log_format" key: every line the daemon
 * writes is one JSON object with time, level and message, and lines about
 * a resource carry it as a field log pipelines can filter on. The fields
 * are what the line is about, passed where it is logged: never read out
 * of the message, which holds peer-sent IDs and paths only mentioned. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"

#define CONFIG(extra)                                                                              \
        "{ " extra                                                                                 \
        "\"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }"

/* A device ID the kubelet could send; the quote is for the log. */
#define REFUSED_ID "tty\"S9"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(logs, .fini = stop, .timeout = 60);

/* Serve until registered, stop, and check every line of the log. */
static void check_json_lines(void) {
        env_touch(&e, "dev/ttyS0");
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/serial", 1, 10000), 0);
        /* A refused Allocate: its resource and the device it named, as
         * sent, quote and all (in the message it ends the quoted ID
         * early), and no path though the method's name looks like one. */
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        V1beta1__AllocateResponse *r = NULL;
        char *why = NULL;
        cr_assert_neq(call_allocate(ch, &r, &why, REFUSED_ID, NULL, NULL), GRPC_STATUS_OK);
        free(why);
        grpc_channel_destroy(ch);
        /* Remove the config: a warning with the path as a field. */
        cr_assert_eq(unlink(e.config), 0);
        cr_assert_geq(log_wait_count(e.log, "was removed", 1, 10000), 0);
        int status = env_stop(&e, SIGTERM, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        FILE *f = fopen(e.log, "re");
        cr_assert_not_null(f);
        char *line = NULL;
        size_t cap = 0;
        unsigned lines = 0, with_resource = 0, with_path = 0, warnings = 0, refused = 0,
                 starting = 0;
        while (getline(&line, &cap, f) >= 0) {
                cJSON *o = cJSON_Parse(line);
                cr_assert_not_null(o, "not JSON: %s", line);
                const cJSON *time = cJSON_GetObjectItemCaseSensitive(o, "time");
                const cJSON *level = cJSON_GetObjectItemCaseSensitive(o, "level");
                const cJSON *msg = cJSON_GetObjectItemCaseSensitive(o, "message");
                cr_assert(cJSON_IsString(time) && strlen(time->valuestring) == 24 &&
                                  time->valuestring[23] == 'Z',
                          "time: %s", line);
                cr_assert(cJSON_IsString(level) && cJSON_IsString(msg), "%s", line);
                const cJSON *res = cJSON_GetObjectItemCaseSensitive(o, "resource");
                if (res) {
                        cr_assert_str_eq(res->valuestring, "example.com/serial", "%s", line);
                        with_resource++;
                }
                const cJSON *path = cJSON_GetObjectItemCaseSensitive(o, "path");
                if (strstr(msg->valuestring, "was removed")) {
                        cr_assert_str_eq(level->valuestring, "warning");
                        cr_assert(cJSON_IsString(path) && strcmp(path->valuestring, e.config) == 0,
                                  "%s", line);
                        warnings++;
                }
                if (strstr(msg->valuestring, "refused")) {
                        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(o, "device");
                        cr_assert_str_eq(level->valuestring, "warning");
                        cr_assert(cJSON_IsString(res), "%s", line);
                        cr_assert(cJSON_IsString(dev) && strcmp(dev->valuestring, REFUSED_ID) == 0,
                                  "%s", line);
                        cr_assert_null(path, "%s", line);
                        refused++;
                }
                /* It names the kubelet and CDI dirs, but is about neither. */
                if (strstr(msg->valuestring, " starting: ")) {
                        cr_assert_null(path, "%s", line);
                        starting++;
                }
                with_path += path != NULL;
                lines++;
                cJSON_Delete(o);
        }
        free(line);
        fclose(f);
        cr_assert_gt(lines, 3);
        cr_assert_gt(with_resource, 1);
        cr_assert_gt(with_path, 1);
        cr_assert_eq(warnings, 1);
        cr_assert_eq(refused, 1);
        cr_assert_eq(starting, 1);
}

Test(logs, json_from_the_command_line) {
        env_init(&e);
        env_write(&e, "config.json", CONFIG(""));
        env_spawn(&e, "--log-format", "json", NULL);
        check_json_lines();
}

Test(logs, json_from_the_config) {
        env_init(&e);
        env_write(&e, "config.json", CONFIG("\"log_format\": \"json\", "));
        env_spawn(&e, NULL);
        check_json_lines();
}

Test(logs, text_by_default_and_bad_format_is_a_usage_error) {
        env_init(&e);
        env_write(&e, "config.json", CONFIG(""));
        char *out = NULL;
        cr_assert_eq(env_run(&e, &out, "check", "--config", e.config, "--log-format", "yaml", NULL),
                     2);
        cr_assert_not_null(strstr(out, "--log-format"), "%s", out);
        free(out);
        env_spawn(&e, NULL);
        cr_assert_geq(log_wait_count(e.log, "cdiplug: info: ", 1, 10000), 0, "no text line");
}
