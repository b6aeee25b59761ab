/* SPDX-License-Identifier: Apache-2.0 */
/* The log writer alone: a JSON line carries exactly the fields its call
 * site passed, never one read out of the message text; escaping keeps
 * every line one valid JSON object; the text format is unchanged. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

/* Standard error goes to a memfd while a test logs. */
static int saved_stderr = -1, capture_fd = -1;

static void start(void) {
        capture_fd = memfd_create("log", MFD_CLOEXEC);
        cr_assert_geq(capture_fd, 0);
        saved_stderr = dup(STDERR_FILENO);
        cr_assert_geq(saved_stderr, 0);
        cr_assert_eq(dup2(capture_fd, STDERR_FILENO), STDERR_FILENO);
        log_set_level(LOG_INFO);
        log_set_json(true);
}

static void stop(void) {
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        close(capture_fd);
}

TestSuite(log, .init = start, .fini = stop, .timeout = 10);

/* What was logged since the last call; the caller frees it. */
static char *logged(void) {
        off_t end = lseek(capture_fd, 0, SEEK_CUR);
        cr_assert_geq(end, 0);
        char *s = calloc(1, (size_t)end + 1);
        cr_assert_not_null(s);
        cr_assert_eq(pread(capture_fd, s, (size_t)end, 0), end);
        cr_assert_eq(ftruncate(capture_fd, 0), 0);
        cr_assert_eq(lseek(capture_fd, 0, SEEK_SET), 0);
        return s;
}

/* The one JSON line logged since the last call. */
static cJSON *logged_json(void) {
        char *s = logged();
        size_t n = strlen(s);
        cr_assert(n > 0 && s[n - 1] == '\n' && !strchr(s, '\n')[1], "not one line: %s", s);
        cJSON *o = cJSON_Parse(s);
        cr_assert_not_null(o, "not JSON: %s", s);
        free(s);
        return o;
}

static const char *field(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!v)
                return NULL;
        cr_assert(cJSON_IsString(v), "%s is not a string", key);
        return v->valuestring;
}

static unsigned n_keys(const cJSON *o) {
        unsigned n = 0;
        for (const cJSON *c = o->child; c; c = c->next)
                n++;
        return n;
}

/* Every habit the old writer parsed the message for: a quoted resource,
 * a device ID, an absolute path, a trailing strerror text. Not one of
 * them is a field unless passed. */
Test(log, a_message_that_only_looks_like_fields_has_none) {
        log_warn("resource \"example.com/serial\": device ID \"ttyS9\" at /dev/ttyS9: %s",
                 strerror(ENOENT));
        cJSON *o = logged_json();
        cr_assert_str_eq(field(o, "level"), "warning");
        cr_assert_str_eq(field(o, "message"), "resource \"example.com/serial\": device ID "
                                              "\"ttyS9\" at /dev/ttyS9: No such file or directory");
        cr_assert_null(field(o, "resource"));
        cr_assert_null(field(o, "device"));
        cr_assert_null(field(o, "path"));
        cr_assert_null(field(o, "errno"));
        cr_assert_eq(n_keys(o), 3, "time, level and message only");
        cJSON_Delete(o);
}

/* A gRPC method name looks like a path: with no field passed, no path. */
Test(log, a_method_name_is_no_path) {
        log_with(LOG_WARN, &(struct log_fields){ .resource = "example.com/x", .device = "d0" },
                 "resource \"example.com/x\": /v1beta1.DevicePlugin/Allocate refused: no");
        cJSON *o = logged_json();
        cr_assert_str_eq(field(o, "resource"), "example.com/x");
        cr_assert_str_eq(field(o, "device"), "d0");
        cr_assert_null(field(o, "path"));
        cr_assert_null(field(o, "errno"));
        cJSON_Delete(o);
}

/* The fields passed are written even where the message does not show
 * them, as they were passed. */
Test(log, fields_come_from_the_call_site) {
        log_with(LOG_ERR,
                 &(struct log_fields){ .resource = "example.com/a",
                                       .device = "ID-1",
                                       .path = "/etc/cdi/x.json",
                                       .err = -EACCES },
                 "cannot write it");
        cJSON *o = logged_json();
        cr_assert_str_eq(field(o, "level"), "error");
        cr_assert_str_eq(field(o, "message"), "cannot write it");
        cr_assert_str_eq(field(o, "resource"), "example.com/a");
        cr_assert_str_eq(field(o, "device"), "ID-1");
        cr_assert_str_eq(field(o, "path"), "/etc/cdi/x.json");
        cr_assert_str_eq(field(o, "errno"), "EACCES");
        cr_assert_eq(n_keys(o), 7);
        cJSON_Delete(o);
}

/* NULL, "" and 0 are "none"; an errno of either sign gives its name, and
 * one without a name its number. */
Test(log, empty_fields_are_left_out_and_errno_has_either_sign) {
        log_with(LOG_INFO, &(struct log_fields){ .resource = "", .path = NULL, .err = ENOENT },
                 "a");
        cJSON *o = logged_json();
        cr_assert_null(field(o, "resource"));
        cr_assert_null(field(o, "path"));
        cr_assert_str_eq(field(o, "errno"), "ENOENT");
        cJSON_Delete(o);

        log_with(LOG_INFO, &(struct log_fields){ .err = -ENOENT }, "b");
        o = logged_json();
        cr_assert_str_eq(field(o, "errno"), "ENOENT");
        cJSON_Delete(o);

        log_with(LOG_INFO, &(struct log_fields){ .err = -4000 }, "c");
        o = logged_json();
        cr_assert_str_eq(field(o, "errno"), "4000");
        cJSON_Delete(o);

        log_with(LOG_INFO, NULL, "d");
        o = logged_json();
        cr_assert_eq(n_keys(o), 3);
        cJSON_Delete(o);
}

/* A directory and a name in it make one path, so a call site needs no
 * allocation to join them (out-of-memory lines have paths too). */
Test(log, path_and_file_make_one_path) {
        log_with(LOG_INFO, &(struct log_fields){ .path = "/etc/cdi", .file = "a-b.json" }, "x");
        cJSON *o = logged_json();
        cr_assert_str_eq(field(o, "path"), "/etc/cdi/a-b.json");
        cJSON_Delete(o);
        log_with(LOG_INFO, &(struct log_fields){ .file = "a-b.json" }, "x");
        o = logged_json();
        cr_assert_str_eq(field(o, "path"), "a-b.json");
        cJSON_Delete(o);
        log_with(LOG_INFO, &(struct log_fields){ .path = "/etc/cdi", .file = "" }, "x");
        o = logged_json();
        cr_assert_str_eq(field(o, "path"), "/etc/cdi");
        cJSON_Delete(o);
}

/* Quotes, backslashes and control characters in the message and in a
 * field come back unchanged from a JSON parser. */
Test(log, escaping_round_trips) {
        const char *msg = "say \"hi\"\\ then\nnew line\ttab \x01\x1f\x7f end \xc3\xa9";
        const char *res = "ex\"am\\ple\n.com/x";
        log_with(LOG_INFO, &(struct log_fields){ .resource = res }, "%s", msg);
        cJSON *o = logged_json();
        cr_assert_str_eq(field(o, "message"), msg);
        cr_assert_str_eq(field(o, "resource"), res);
        cJSON_Delete(o);
}

/* A message longer than the line's room is cut, still one valid object,
 * even when every byte needs an escape. */
Test(log, a_long_message_is_cut_not_broken) {
        char big[4096];
        memset(big, '"', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        char path[1024];
        memset(path, '\x01', sizeof(path) - 1);
        path[sizeof(path) - 1] = '\0';
        log_with(LOG_INFO,
                 &(struct log_fields){
                         .resource = path, .device = path, .path = path, .file = path },
                 "%s", big);
        cJSON *o = logged_json();
        cr_assert_gt(strlen(field(o, "message")), 500);
        cr_assert_lt(strlen(field(o, "message")), sizeof(big) - 1);
        cr_assert_not_null(field(o, "path"));
        cJSON_Delete(o);
}

/* Text lines are "cdiplug: <level>: <message>", fields or not. */
Test(log, text_lines_carry_no_fields) {
        log_set_json(false);
        log_with(LOG_WARN, &(struct log_fields){ .resource = "r", .path = "/p", .err = EIO },
                 "resource \"r\": x");
        log_error("plain %d", 7);
        char *s = logged();
        cr_assert_str_eq(s, "cdiplug: warning: resource \"r\": x\ncdiplug: error: plain 7\n");
        free(s);
}

Test(log, debug_lines_only_when_verbose) {
        log_set_json(false);
        log_debug("hidden");
        char *s = logged();
        cr_assert_str_eq(s, "");
        free(s);
        log_set_level(LOG_DEBUG);
        log_debug("shown");
        s = logged();
        cr_assert_str_eq(s, "cdiplug: debug: shown\n");
        free(s);
}
