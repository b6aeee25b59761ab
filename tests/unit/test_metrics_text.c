/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text the metrics endpoint writes: label escaping,
 * headers, histograms; and the "metrics" config key. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "config.h"
#include "metrics.h"

Test(metrics_text, escapes_label_values) {
        struct dp_mbuf b = { 0 };
        dp_metric_start(&b, "x_info");
        dp_metric_label(&b, "pod", "a\"b\\c\nd");
        dp_metric_label(&b, "container", "");
        dp_metric_u64(&b, 1);
        cr_assert_eq(b.err, 0);
        cr_assert_str_eq(b.s, "x_info{pod=\"a\\\"b\\\\c\\nd\",container=\"\"} 1\n");
        dp_mbuf_free(&b);
}

/* A page grows from the heap into a mapping of its own and on by
 * remapping; what was written survives each move. */
Test(metrics_text, buffer_grows_into_a_mapping) {
        struct dp_mbuf b = { 0 };
        char line[64];
        size_t lines = 0;

        while (b.len < 3 * DP_MBUF_MAP_MIN) {
                int n = snprintf(line, sizeof(line), "line %zu\n", lines++);
                dp_mbuf_put(&b, line, (size_t)n);
                cr_assert_eq(b.err, 0);
        }
        cr_assert(b.mapped);
        cr_assert_geq(b.cap, b.len + 1);
        cr_assert_eq(b.s[b.len], '\0');
        char *p = b.s;
        for (size_t i = 0; i < lines; i++) {
                int n = snprintf(line, sizeof(line), "line %zu\n", i);
                cr_assert(strncmp(p, line, (size_t)n) == 0, "line %zu", i);
                p += n;
        }
        dp_mbuf_free(&b);
        cr_assert_null(b.s);

        /* Reserved big from the start, then written past the reserve. */
        dp_mbuf_reserve(&b, DP_MBUF_MAP_MIN + 1);
        cr_assert(b.mapped);
        size_t cap = b.cap;
        while (b.len <= cap)
                dp_mbuf_puts(&b, "0123456789abcdef");
        cr_assert_eq(b.err, 0);
        cr_assert_gt(b.cap, cap);
        cr_assert_eq(strspn(b.s, "0123456789abcdef"), b.len);
        dp_mbuf_free(&b);
}

/* The device lines, written in place: plain IDs, an ID that needs
 * escaping, NUMA nodes or none, and a buffer that must grow for them. */
Test(metrics_text, device_lines) {
        struct dp_mbuf pre = { 0 }, b = { 0 };
        dp_mbuf_puts(&pre, "cdiplug_device_info{resource=\"r\",device=\"");
        dp_metric_device_line(&b, &pre, "a", true, -1);
        dp_metric_device_line(&b, &pre, "b-0", false, 0);
        dp_metric_device_line(&b, &pre, "q\"x\\y\nz", true, 32767);
        dp_metric_device_line(&b, &pre, "", false, -1);
        cr_assert_eq(b.err, 0);
        cr_assert_str_eq(
                b.s,
                "cdiplug_device_info{resource=\"r\",device=\"a\",health=\"Healthy\"} 1\n"
                "cdiplug_device_info{resource=\"r\",device=\"b-0\",health=\"Unhealthy\",numa_node=\"0\"} 1\n"
                "cdiplug_device_info{resource=\"r\",device=\"q\\\"x\\\\y\\nz\",health=\"Healthy\","
                "numa_node=\"32767\"} 1\n"
                "cdiplug_device_info{resource=\"r\",device=\"\",health=\"Unhealthy\"} 1\n");
        size_t len = b.len;
        for (int i = 0; i < 5000; i++)
                dp_metric_device_line(&b, &pre, "dev", i % 2, i % 3 - 1);
        cr_assert_eq(b.err, 0);
        cr_assert(b.mapped);
        cr_assert_eq(strlen(b.s), b.len);
        static const char first[] =
                "cdiplug_device_info{resource=\"r\",device=\"dev\",health=\"Unhealthy\"} 1\n"
                "cdiplug_device_info{resource=\"r\",device=\"dev\",health=\"Healthy\",numa_node=\"0\"} 1\n";
        cr_assert(strncmp(b.s + len, first, strlen(first)) == 0, "%.200s", b.s + len);
        dp_mbuf_free(&b);
        dp_mbuf_free(&pre);
}

/* The le labels are written from a table, not formatted per scrape. */
Test(metrics_text, bucket_labels_match_the_bounds) {
        for (size_t i = 0; i < DP_HIST_BUCKETS; i++) {
                char le[32];
                snprintf(le, sizeof(le), "%g", dp_hist_bounds[i]);
                cr_assert_str_eq(dp_hist_bound_labels[i], le, "bucket %zu", i);
        }
}

Test(metrics_text, samples_without_labels_and_values) {
        struct dp_mbuf b = { 0 };
        dp_metric_header(&b, "up_total", "counter", "Help with a \\ and a\nnewline.");
        dp_metric_start(&b, "up_total");
        dp_metric_u64(&b, 18446744073709551615ull);
        dp_metric_start(&b, "t");
        dp_metric_double(&b, 0.25);
        dp_metric_start(&b, "inf");
        dp_metric_double(&b, INFINITY);
        cr_assert_str_eq(b.s, "# HELP up_total Help with a \\\\ and a\\nnewline.\n"
                              "# TYPE up_total counter\n"
                              "up_total 18446744073709551615\n"
                              "t 0.25\n"
                              "inf +Inf\n");
        dp_mbuf_free(&b);
}

Test(metrics_text, histogram_buckets_are_cumulative) {
        struct dp_histogram h = { 0 };
        struct dp_mbuf b = { 0 };

        dp_histogram_observe(&h, 0.00001); /* first bucket */
        dp_histogram_observe(&h, 0.0001);  /* exactly a bound: le includes it */
        dp_histogram_observe(&h, 0.003);   /* 0.005 */
        dp_histogram_observe(&h, 5);       /* only +Inf */
        dp_histogram_render(&b, "d_seconds", "resource", "r", &h);
        cr_assert_eq(b.err, 0);
        cr_assert_str_eq(b.s, "d_seconds_bucket{resource=\"r\",le=\"5e-05\"} 1\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.0001\"} 2\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.00025\"} 2\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.0005\"} 2\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.001\"} 2\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.0025\"} 2\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.005\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.01\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.025\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.05\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"0.1\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"1\"} 3\n"
                              "d_seconds_bucket{resource=\"r\",le=\"+Inf\"} 4\n"
                              "d_seconds_sum{resource=\"r\"} 5.00311\n"
                              "d_seconds_count{resource=\"r\"} 4\n");
        dp_mbuf_free(&b);
}

Test(metrics_text, grows_past_its_first_block) {
        struct dp_mbuf b = { 0 };
        for (int i = 0; i < 10000; i++) {
                dp_metric_start(&b, "m");
                dp_metric_label(&b, "i", "0123456789");
                dp_metric_u64(&b, (uint64_t)i);
        }
        cr_assert_eq(b.err, 0);
        cr_assert_eq(strlen(b.s), b.len);
        cr_assert_not_null(strstr(b.s, "m{i=\"0123456789\"} 9999\n"));
        dp_mbuf_free(&b);
}

Test(metrics_text, addresses) {
        struct sockaddr_storage ss;
        unsigned len;
        const char *msg = NULL;
        cr_assert_eq(dp_http_parse_address("127.0.0.1:9633", &ss, &len, &msg), 0);
        cr_assert_eq(dp_http_parse_address("[::1]:9633", &ss, &len, &msg), 0);
        cr_assert_eq(dp_http_parse_address(":9633", &ss, &len, &msg), 0);
        static const char *const bad[] = { "localhost:9633",  "127.0.0.1",   "127.0.0.1:0",
                                           "127.0.0.1:65536", "::1:9633",    "[::1]9633",
                                           "127.0.0.1:+80",   "1.2.3.4:80x", "" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                msg = NULL;
                cr_assert_eq(dp_http_parse_address(bad[i], &ss, &len, &msg), -EINVAL, "%s", bad[i]);
                cr_assert_not_null(msg, "%s has no message", bad[i]);
        }
}

static const char res[] =
        "\"resources\":[{\"name\":\"example.com/serial\",\"match\":[{\"path\":\"/dev/ttyUSB*\"}]}]";

Test(metrics_text, config_key) {
        char json[512];
        struct cfg_config *cfg = NULL;
        struct base_field_error err = { 0 };

        snprintf(
                json, sizeof(json),
                "{%s,\"metrics\":{\"address\":\"127.0.0.1:9633\",\"pod_resources_socket\":\"/run/pr.sock\"}}",
                res);
        cr_assert_eq(cfg_parse(json, strlen(json), &cfg, &err), 0, "%s: %s", err.field, err.msg);
        cr_assert_str_eq(cfg->metrics_address, "127.0.0.1:9633");
        cr_assert_str_eq(cfg->pod_resources_socket, "/run/pr.sock");
        cfg_free(cfg);

        static const struct {
                const char *metrics, *field, *has;
        } bad[] = {
                { "\"x\"", "metrics", "object" },
                { "{\"address\":\"localhost:80\"}", "metrics.address", "numeric" },
                { "{\"address\":80}", "metrics.address", "string" },
                { "{\"port\":80}", "metrics.port", "unknown key" },
                { "{\"pod_resources_socket\":\"relative.sock\"}", "metrics.pod_resources_socket",
                  "absolute" },
                { "{\"address\":\"\",\"address\":\"\"}", "metrics.address", "duplicate" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cfg = NULL;
                snprintf(json, sizeof(json), "{%s,\"metrics\":%s}", res, bad[i].metrics);
                cr_assert_eq(cfg_parse(json, strlen(json), &cfg, &err), -EINVAL, "%s", json);
                cr_assert_str_eq(err.field, bad[i].field, "%s", json);
                cr_assert_not_null(strstr(err.msg, bad[i].has), "%s: %s", json, err.msg);
                base_field_error_clear(&err);
        }
        /* "" switches the endpoint off. */
        snprintf(json, sizeof(json), "{%s,\"metrics\":{\"address\":\"\"}}", res);
        cr_assert_eq(cfg_parse(json, strlen(json), &cfg, &err), 0);
        cr_assert_str_eq(cfg->metrics_address, "");
        cfg_free(cfg);
}

/* On a node with many CPUs and interrupts, btime lies past the first
 * kilobytes of /proc/stat: process_start_time_seconds must still find it. */
Test(metrics_text, boot_time_far_into_proc_stat) {
        char path[] = "/tmp/cdiplug-stat-XXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        FILE *f = fdopen(fd, "w");
        cr_assert_not_null(f);
        fputs("cpu  1 2 3 4 5 6 7 0 0 0\n", f);
        for (int c = 0; c < 256; c++)
                fprintf(f, "cpu%d 1 2 3 4 5 6 7 0 0 0\n", c);
        fputs("intr 12345", f);
        for (int i = 0; i < 8000; i++)
                fputs(" 0", f);
        fputs("\nctxt 99\nbtime 1763900000\nprocesses 7\n", f);
        long size = ftell(f);
        fclose(f);
        cr_assert_gt(size, 16384, "the test file must be bigger than any small buffer");
        cr_assert_float_eq(dp_boot_time(path), 1763900000.0, 0.5);
        cr_assert_float_eq(dp_boot_time("/nonexistent/stat"), 0.0, 0.5);
        unlink(path);
}
