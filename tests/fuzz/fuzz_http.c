/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz what the metrics endpoint reads from others, all from one input:
 * as an HTTP request head (an answer is 0 with the path inside the head
 * and a small body, or a status the endpoint sends before closing), as a
 * PodResources List answer walked in place (0 or -EBADMSG, every string
 * inside the input), and as a label value made UTF-8 (valid UTF-8 with no
 * NUL, so doing it again changes nothing). */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "metrics.h"

struct bounds {
        const char *start, *end;
        size_t ids;
};

static void inside(const struct bounds *b, struct dp_podres_str s) {
        FUZZ_CHECK(s.len == 0 || (s.s >= b->start && s.s + s.len <= b->end));
}

static int check_devices(void *arg, const struct dp_podres_devices *dv) {
        struct bounds *b = arg;
        struct dp_podres_str id;
        size_t pos = 0;
        int r;

        inside(b, dv->namespace_);
        inside(b, dv->pod);
        inside(b, dv->container);
        inside(b, dv->resource);
        inside(b, dv->devices);
        while ((r = dp_podres_next_id(dv, &pos, &id)) > 0) {
                inside(b, id);
                FUZZ_CHECK(pos <= dv->devices.len);
                b->ids++;
        }
        FUZZ_CHECK(r == 0 || r == -EBADMSG);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *)data;
        struct dp_http_request req;
        int st = dp_http_parse_head(s, size, &req);

        FUZZ_CHECK(st == 0 || st == 400 || st == 413 || st == 501 || st == 505);
        if (st == 0) {
                FUZZ_CHECK(req.path >= s && req.path + req.path_len <= s + size);
                FUZZ_CHECK(req.content_length <= DP_HTTP_MAX_BODY);
                FUZZ_CHECK(req.method == DP_HTTP_GET || req.method == DP_HTTP_HEAD ||
                           req.method == DP_HTTP_OTHER);
        }

        struct bounds b = { s, s + size, 0 };
        int r = dp_podres_walk(data, size, check_devices, &b);
        FUZZ_CHECK(r == 0 || r == -EBADMSG);
        FUZZ_CHECK(b.ids <= size);

        struct dp_mbuf once = { 0 }, twice = { 0 };
        dp_mbuf_utf8(&once, s, size);
        dp_mbuf_put(&once, "", 0);
        FUZZ_CHECK(once.err == 0);
        FUZZ_CHECK(!once.s || memchr(once.s, '\0', once.len) == NULL);
        dp_mbuf_utf8(&twice, once.s ? once.s : "", once.len);
        dp_mbuf_put(&twice, "", 0);
        FUZZ_CHECK(twice.len == once.len && (!once.len || memcmp(once.s, twice.s, once.len) == 0));
        dp_mbuf_free(&once);
        dp_mbuf_free(&twice);
        return 0;
}
