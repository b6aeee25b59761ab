/* SPDX-License-Identifier: Apache-2.0 */
/* The log writer alone: a JSON line carries exactly the fields its call
 * site passed, never one read out of the message text; escaping keeps
 * every line one valid JSON object; the text format is unchanged; and
 * the daemon's sources give a line about a resource or an errno its
 * fields. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <ftw.h>
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

/* The convention, checked over the daemon's sources: a line with no field
 * (log_error, log_warn, log_info, log_debug) is about no resource and no
 * errno, which the JSON format would otherwise leave out. */
static char *misses;
static size_t misses_len;

/* Past the ')' that closes the call whose '(' is at p. */
static const char *call_end(const char *p) {
        int depth = 0;
        for (char quote = 0; *p; p++) {
                if (quote) {
                        if (*p == '\\' && p[1])
                                p++;
                        else if (*p == quote)
                                quote = 0;
                } else if (*p == '"' || *p == '\'')
                        quote = *p;
                else if (*p == '(')
                        depth++;
                else if (*p == ')' && --depth == 0)
                        return p + 1;
        }
        return p;
}

/* `resource "%s"` as the source spells it, not `resources "%s"`. */
static bool names_a_resource(const char *call, size_t n) {
        static const char word[] = "resource \\\"%s\\\"";
        const char *end = call + n;
        for (const char *p = call; p < end; p++) {
                p = memmem(p, (size_t)(end - p), word, sizeof(word) - 1);
                if (!p)
                        return false;
                if (p[-1] == '"' || p[-1] == ' ')
                        return true;
        }
        return false;
}

/* One line per miss: the file and the call's start, spaces squeezed. */
static void miss(const char *file, const char *call, size_t n) {
        char shown[101];
        size_t k = 0;
        for (size_t i = 0; i < n && k < sizeof(shown) - 1; i++)
                if (!isspace((unsigned char)call[i]))
                        shown[k++] = call[i];
                else if (k && shown[k - 1] != ' ')
                        shown[k++] = ' ';
        shown[k] = '\0';
        char *line = NULL;
        int len = asprintf(&line, "%s: %s\n", file, shown);
        cr_assert_geq(len, 0);
        misses = realloc(misses, misses_len + (size_t)len + 1);
        cr_assert_not_null(misses);
        memcpy(misses + misses_len, line, (size_t)len + 1);
        misses_len += (size_t)len;
        free(line);
}

static void check_calls(const char *file, const char *text) {
        static const char *const names[] = { "log_error(", "log_warn(", "log_info(", "log_debug(" };
        for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
                for (const char *p = text; (p = strstr(p, names[i])); p++) {
                        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
                                continue;
                        size_t n = (size_t)(call_end(p + strlen(names[i]) - 1) - p);
                        if (memmem(p, n, "strerror(", 9) || memmem(p, n, "%m", 2) ||
                            names_a_resource(p, n))
                                miss(file, p, n);
                }
}

static int check_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        size_t len = strlen(path);
        (void)ftw;
        if (type != FTW_F || len < 2 || strcmp(path + len - 2, ".c") != 0)
                return 0;
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "%s", path);
        char *text = calloc(1, (size_t)st->st_size + 1);
        cr_assert_not_null(text);
        cr_assert_eq(fread(text, 1, (size_t)st->st_size, f), (size_t)st->st_size, "%s", path);
        fclose(f);
        check_calls(path + strlen(CDIPLUG_SRC_DIR) + 1, text);
        free(text);
        return 0;
}

Test(log, lines_about_a_resource_or_an_errno_pass_it_as_a_field) {
        cr_assert_eq(nftw(CDIPLUG_SRC_DIR "/daemon", check_file, 16, FTW_PHYS), 0);
        cr_assert_null(misses,
                       "log_with(level, &(struct log_fields){ .resource = ..., .err = "
                       "... }, ...) for these:\n%s",
                       misses);
}
