/* SPDX-License-Identifier: Apache-2.0 */
/* What the metrics endpoint reads from others: HTTP request heads
 * (strict: smuggling shapes refused), PodResources answers walked in
 * place (malformed ones refused, never read past), and label values made
 * valid UTF-8. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "podresources.pb-c.h"

static int parse(const char *head, struct dp_http_request *req) {
        return dp_http_parse_head(head, strlen(head), req);
}

Test(http_request, good_heads) {
        struct dp_http_request r;

        cr_assert_eq(parse("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*", &r), 0);
        cr_assert_eq(r.method, DP_HTTP_GET);
        cr_assert_eq(r.path_len, 8);
        cr_assert(strncmp(r.path, "/metrics", 8) == 0);
        cr_assert(!r.close && !r.http10);

        cr_assert_eq(
                parse("HEAD /healthz HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, Close", &r), 0);
        cr_assert_eq(r.method, DP_HTTP_HEAD);
        cr_assert(r.close);

        /* HTTP/1.0 needs no Host and closes unless asked not to. */
        cr_assert_eq(parse("GET /readyz HTTP/1.0", &r), 0);
        cr_assert(r.http10 && r.close);
        cr_assert_eq(parse("GET /readyz HTTP/1.0\r\nConnection: keep-alive", &r), 0);
        cr_assert(!r.close);

        /* absolute-form names the path after the authority. */
        cr_assert_eq(parse("GET http://h:1/healthz HTTP/1.1\r\nHost: h", &r), 0);
        cr_assert_eq(r.path_len, 8);
        cr_assert(strncmp(r.path, "/healthz", 8) == 0);
        /* ...and with no path after it, an empty one, still inside the head
         * (the fuzzer found it pointing at a string of ours). */
        const char *bare = "HEAD http://h:1 HTTP/1.0";
        cr_assert_eq(dp_http_parse_head(bare, strlen(bare), &r), 0);
        cr_assert_eq(r.path_len, 0);
        cr_assert(r.path >= bare && r.path <= bare + strlen(bare));

        cr_assert_eq(parse("BREW /pot HTTP/1.1\r\nHost: a\r\nContent-Length: 3", &r), 0);
        cr_assert_eq(r.method, DP_HTTP_OTHER);
        cr_assert_eq(r.content_length, 3);
        /* The same length twice is one length. */
        cr_assert_eq(
                parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 4", &r),
                0);
}

Test(http_request, refused_heads) {
        static const struct {
                const char *head;
                int status;
        } bad[] = {
                { "", 400 },
                { "GET /metrics", 400 },
                { "GET  /metrics HTTP/1.1\r\nHost: a", 400 },
                { "GET /metrics HTTP/1.1 \r\nHost: a", 400 },
                { "G(T / HTTP/1.1\r\nHost: a", 400 },
                { "GET / HTTP/2.0\r\nHost: a", 505 },
                { "GET / HTTP/1.1", 400 },                       /* no Host */
                { "GET / HTTP/1.1\r\nHost: a\r\nHost: b", 400 }, /* two */
                { "GET / HTTP/1.1\r\nHost: a\r\n folded", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nX: a\nb", 400 }, /* bare LF */
                { "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb", 400 }, /* bare CR */
                { "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nno colon", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: ", 400 },
                { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1025", 413 },
                { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999", 413 },
                { "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked", 501 },
                { "GET / HTTP/1.1\r\nHost: a\r\n\r\nX: 1", 400 }, /* an empty line inside */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                struct dp_http_request r;
                cr_assert_eq(parse(bad[i].head, &r), bad[i].status, "\"%s\"", bad[i].head);
        }
        /* A NUL inside the head. */
        struct dp_http_request r;
        cr_assert_eq(dp_http_parse_head("GET / HTTP/1.1\r\nHost: a\0b", 25, &r), 400);
}

static void utf8_is(const char *in, size_t len, const char *want) {
        struct dp_mbuf b = { 0 };
        dp_mbuf_utf8(&b, in, len);
        dp_mbuf_put(&b, "", 0);
        cr_assert_eq(b.err, 0);
        cr_assert_str_eq(b.s ? b.s : "", want);
        dp_mbuf_free(&b);
}

#define FFFD "\xef\xbf\xbd"

Test(http_request, label_values_become_utf8) {
        utf8_is("caf\xc3\xa9", 5, "caf\xc3\xa9");
        utf8_is("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80");
        utf8_is("a\xff"
                "b",
                3, "a" FFFD "b");
        utf8_is("a\xc3", 2, "a" FFFD);                       /* cut short */
        utf8_is("\xc0\xaf", 2, FFFD FFFD);                   /* overlong */
        utf8_is("\xe0\x80\xaf", 3, FFFD FFFD FFFD);          /* overlong */
        utf8_is("\xed\xa0\x80", 3, FFFD FFFD FFFD);          /* a surrogate */
        utf8_is("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD); /* past U+10FFFF */
        utf8_is("a\0b", 3, "a" FFFD "b");                    /* NUL */

        /* Through a label, escaping kept. */
        struct dp_mbuf b = { 0 };
        dp_metric_start(&b, "x");
        dp_metric_label(&b, "pod", "w\xfe\"0");
        dp_metric_u64(&b, 1);
        cr_assert_str_eq(b.s, "x{pod=\"w" FFFD "\\\"0\"} 1\n");
        dp_mbuf_free(&b);
}

Test(http_request, floats_print_shortest) {
        struct dp_mbuf b = { 0 };
        dp_metric_start(&b, "a");
        dp_metric_double(&b, 0.06);
        dp_metric_start(&b, "b");
        dp_metric_double(&b, 1795614047.71);
        dp_metric_start(&b, "c");
        dp_metric_double(&b, 0.1 + 0.2); /* needs all 17 digits */
        cr_assert_str_eq(b.s, "a 0.06\nb 1795614047.71\nc 0.30000000000000004\n");
        dp_mbuf_free(&b);
}

struct seen {
        char text[4096];
};

static int record(void *arg, const struct dp_podres_devices *dv) {
        struct seen *s = arg;
        struct dp_podres_str id;
        size_t pos = 0;
        int r;
        char line[512];

        snprintf(line, sizeof(line), "%.*s/%.*s/%.*s/%.*s:", (int)dv->namespace_.len,
                 dv->namespace_.s, (int)dv->pod.len, dv->pod.s, (int)dv->container.len,
                 dv->container.s, (int)dv->resource.len, dv->resource.s);
        strcat(s->text, line);
        while ((r = dp_podres_next_id(dv, &pos, &id)) > 0) {
                snprintf(line, sizeof(line), " %.*s", (int)id.len, id.s);
                strcat(s->text, line);
        }
        strcat(s->text, "\n");
        return r;
}

Test(http_request, pod_resources_walked_in_place) {
        V1__ContainerDevices a = V1__CONTAINER_DEVICES__INIT, b = V1__CONTAINER_DEVICES__INIT;
        char *a_ids[] = { "fuse-0", "fuse-3" }, *b_ids[] = { "gpu0" };
        a.resource_name = "example.com/fuse";
        a.n_device_ids = 2;
        a.device_ids = a_ids;
        b.resource_name = "vendor.example/gpu";
        b.n_device_ids = 1;
        b.device_ids = b_ids;
        V1__ContainerDevices *devs[] = { &a, &b };
        int64_t cpus[] = { 1, 2 };
        V1__ContainerResources ctr = V1__CONTAINER_RESOURCES__INIT;
        ctr.name = "app";
        ctr.n_devices = 2;
        ctr.devices = devs;
        ctr.n_cpu_ids = 2;
        ctr.cpu_ids = cpus;
        V1__ContainerResources *ctrs[] = { &ctr };
        V1__PodResources pod = V1__POD_RESOURCES__INIT, idle = V1__POD_RESOURCES__INIT;
        pod.name = "web-0";
        pod.namespace_ = "shop";
        pod.n_containers = 1;
        pod.containers = ctrs;
        idle.name = "idle";
        idle.namespace_ = "default";
        V1__PodResources *pods[] = { &pod, &idle };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 2;
        resp.pod_resources = pods;
        size_t len = v1__list_pod_resources_response__get_packed_size(&resp);
        uint8_t *wire = malloc(len);
        v1__list_pod_resources_response__pack(&resp, wire);

        struct seen s = { "" };
        cr_assert_eq(dp_podres_walk(wire, len, record, &s), 0);
        cr_assert_str_eq(s.text, "shop/web-0/app/example.com/fuse: fuse-0 fuse-3\n"
                                 "shop/web-0/app/vendor.example/gpu: gpu0\n");

        /* Every cut of the answer short of its end is malformed or a
         * shorter answer, never a read past it (ASan watches). */
        for (size_t cut = 0; cut < len; cut++) {
                uint8_t *part = malloc(cut ? cut : 1);
                memcpy(part, wire, cut);
                struct seen t = { "" };
                int r = dp_podres_walk(part, cut, record, &t);
                cr_assert(r == 0 || r == -EBADMSG, "cut at %zu: %d", cut, r);
                free(part);
        }
        /* A length past the end of its message. */
        static const uint8_t overrun[] = { 0x0a, 0x04, 0x1a, 0x10, 0x12, 0x00 };
        struct seen u = { "" };
        cr_assert_eq(dp_podres_walk(overrun, sizeof(overrun), record, &u), -EBADMSG);
        /* Fields in another order: the pod's name after its containers,
         * the resource after the IDs. */
        static const uint8_t ordered[] = {
                0x0a, 0x12,                                 /* pod_resources, 18 bytes */
                0x1a, 0x0a,                                 /* containers, 10 bytes */
                0x12, 0x08,                                 /* devices, 8 bytes */
                0x12, 0x01, 'i', 0x0a, 0x03, 'r', '/', 'x', /* id "i", then resource */
                0x0a, 0x01, 'p', 0x12, 0x01, 'n',           /* name "p", namespace "n" */
        };
        cr_assert_eq(dp_podres_walk(ordered, sizeof(ordered), record, &u), 0);
        cr_assert_str_eq(u.text, "n/p//r/x: i\n");
        /* A group, long gone from protobuf. */
        static const uint8_t group[] = { 0x0b, 0x0c };
        cr_assert_eq(dp_podres_walk(group, sizeof(group), record, &u), -EBADMSG);
        free(wire);
}
