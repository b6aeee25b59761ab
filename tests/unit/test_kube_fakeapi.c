/* SPDX-License-Identifier: Apache-2.0 */
/* The fake API server itself (tests/helpers/fakeapi.c), driven with plain
 * libcurl easy handles over real HTTPS: the kube tests trust it, so it
 * must answer as the API server does. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <string.h>

#include "fakeapi.h"

#define SLICES "/apis/resource.k8s.io/v1/resourceslices"

struct reply {
        long code;
        char *body;
        size_t len;
        char retry_after[16];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
        struct reply *r = ud;
        char *nb = realloc(r->body, r->len + size * n + 1);

        cr_assert_not_null(nb);
        memcpy(nb + r->len, p, size * n);
        r->len += size * n;
        nb[r->len] = '\0';
        r->body = nb;
        return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
        struct reply *r = ud;

        if (size * n > 13 && strncasecmp(p, "Retry-After: ", 13) == 0)
                snprintf(r->retry_after, sizeof(r->retry_after), "%.*s",
                         (int)strcspn(p + 13, "\r\n"), p + 13);
        return size * n;
}

/* One request; returns the curl result, fills *r. */
static CURLcode req(struct fakeapi *f, const char *ca, const char *method, const char *path,
                    const char *body, const char *token, struct reply *r) {
        CURL *c = curl_easy_init();
        struct curl_slist *h = NULL;
        char url[512], auth[256];
        CURLcode rc;

        memset(r, 0, sizeof(*r));
        snprintf(url, sizeof(url), "%s%s", fakeapi_url(f), path);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CAINFO, ca ? ca : fakeapi_ca_file(f));
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                h = curl_slist_append(h, "Content-Type: application/json");
        }
        if (token) {
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
                h = curl_slist_append(h, auth);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        return rc;
}

static const char *slice_json(const char *name, const char *node, const char *rv) {
        static char buf[1024];

        snprintf(
                buf, sizeof(buf),
                "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\","
                "\"metadata\":{\"name\":\"%s\"%s%s%s},\"spec\":{\"driver\":\"cdiplug.example.com\","
                "\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s/r\",\"generation\":1,"
                "\"resourceSliceCount\":1},\"devices\":[{\"name\":\"d0\"}]}}",
                name, rv ? ",\"resourceVersion\":\"" : "", rv ? rv : "", rv ? "\"" : "", node,
                node);
        return buf;
}

static void init(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

TestSuite(fakeapi, .init = init, .timeout = 30);

Test(fakeapi, list_create_conflict_update_delete) {
        struct fakeapi *f = fakeapi_new(true);
        struct reply r;
        cJSON *o;
        char rv[32];

        cr_assert_eq(req(f, NULL, "GET", SLICES, NULL, NULL, &r), CURLE_OK);
        cr_assert_eq(r.code, 200);
        o = cJSON_Parse(r.body);
        cr_assert_str_eq(cJSON_GetObjectItem(o, "kind")->valuestring, "ResourceSliceList");
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "items")), 0);
        cJSON_Delete(o);
        free(r.body);

        cr_assert_eq(req(f, NULL, "POST", SLICES, slice_json("a", "n1", NULL), NULL, &r), 0);
        cr_assert_eq(r.code, 201, "%s", r.body);
        o = cJSON_Parse(r.body);
        snprintf(rv, sizeof(rv), "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion")
                         ->valuestring);
        cJSON_Delete(o);
        free(r.body);
        req(f, NULL, "POST", SLICES, slice_json("a", "n1", NULL), NULL, &r);
        cr_assert_eq(r.code, 409);
        cr_assert(strstr(r.body, "AlreadyExists"));
        free(r.body);
        req(f, NULL, "POST", SLICES, slice_json("b", "n2", NULL), NULL, &r);
        free(r.body);

        req(f, NULL, "GET",
            SLICES "?fieldSelector=spec.nodeName%3Dn2%2Cspec.driver%3Dcdiplug.example.com", NULL,
            NULL, &r);
        o = cJSON_Parse(r.body);
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "items")), 1);
        cJSON_Delete(o);
        free(r.body);

        req(f, NULL, "PUT", SLICES "/a", slice_json("a", "n1", "1"), NULL, &r);
        cr_assert_eq(r.code, 409);
        free(r.body);
        req(f, NULL, "PUT", SLICES "/a", slice_json("a", "n1", rv), NULL, &r);
        cr_assert_eq(r.code, 200, "%s", r.body);
        free(r.body);
        req(f, NULL, "DELETE", SLICES "/a", NULL, NULL, &r);
        cr_assert_eq(r.code, 200);
        free(r.body);
        req(f, NULL, "DELETE", SLICES "/a", NULL, NULL, &r);
        cr_assert_eq(r.code, 404);
        free(r.body);
        cr_assert_eq(fakeapi_count(f, "POST"), 3);
        cr_assert_eq(fakeapi_count(f, "DELETE"), 2);
        fakeapi_free(f);
}

Test(fakeapi, too_many_devices_is_invalid) {
        struct fakeapi *f = fakeapi_new(true);
        cJSON *s = cJSON_Parse(slice_json("a", "n1", NULL));
        cJSON *devs = cJSON_GetObjectItem(cJSON_GetObjectItem(s, "spec"), "devices");
        struct reply r;
        char *txt;

        cJSON_DeleteItemFromArray(devs, 0);
        for (int i = 0; i < 129; i++) {
                cJSON *d = cJSON_CreateObject();
                char name[16];
                snprintf(name, sizeof(name), "d%d", i);
                cJSON_AddStringToObject(d, "name", name);
                cJSON_AddItemToArray(devs, d);
        }
        txt = cJSON_PrintUnformatted(s);
        req(f, NULL, "POST", SLICES, txt, NULL, &r);
        cr_assert_eq(r.code, 422);
        free(r.body);
        free(txt);
        cJSON_Delete(s);
        fakeapi_free(f);
}

Test(fakeapi, watch_streams_events_then_times_out) {
        struct fakeapi *f = fakeapi_new(true);
        struct reply r;
        cJSON *o;
        char path[256];

        req(f, NULL, "GET", SLICES, NULL, NULL, &r);
        o = cJSON_Parse(r.body);
        snprintf(path, sizeof(path), SLICES "?watch=true&timeoutSeconds=1&resourceVersion=%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion")
                         ->valuestring);
        cJSON_Delete(o);
        free(r.body);
        req(f, NULL, "POST", SLICES, slice_json("a", "n1", NULL), NULL, &r);
        free(r.body);
        fakeapi_wipe(f, "n1");
        cr_assert_eq(req(f, NULL, "GET", path, NULL, NULL, &r), CURLE_OK);
        cr_assert_eq(r.code, 200);
        cr_assert(strstr(r.body, "{\"type\":\"ADDED\",\"object\":{"), "%s", r.body);
        cr_assert(strstr(r.body, "\n{\"type\":\"DELETED\",\"object\":{"), "%s", r.body);
        free(r.body);

        fakeapi_expire(f, false);
        cr_assert_eq(req(f, NULL, "GET", path, NULL, NULL, &r), CURLE_OK);
        cr_assert(strstr(r.body, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\""), "%s",
                  r.body);
        cr_assert(strstr(r.body, "\"code\":410"));
        free(r.body);
        fakeapi_expire(f, true);
        req(f, NULL, "GET", path, NULL, NULL, &r);
        cr_assert_eq(r.code, 410);
        free(r.body);
        cr_assert_eq(fakeapi_count(f, "WATCH"), 3);
        fakeapi_free(f);
}

Test(fakeapi, token_faults_fixtures_and_tls) {
        struct fakeapi *f = fakeapi_new(true), *other = fakeapi_new(true);
        struct reply r;

        fakeapi_set_token(f, "t1");
        req(f, NULL, "GET", SLICES, NULL, NULL, &r);
        cr_assert_eq(r.code, 401);
        free(r.body);
        req(f, NULL, "GET", SLICES, NULL, "t2", &r);
        cr_assert_eq(r.code, 401);
        free(r.body);
        req(f, NULL, "GET", SLICES, NULL, "t1", &r);
        cr_assert_eq(r.code, 200);
        free(r.body);

        fakeapi_fault(f, "GET", "/api/", 1, 429, 3);
        fakeapi_add_node(f, "n1", "uid-1");
        req(f, NULL, "GET", "/api/v1/nodes/n1", NULL, "t1", &r);
        cr_assert_eq(r.code, 429);
        cr_assert_str_eq(r.retry_after, "3");
        free(r.body);
        req(f, NULL, "GET", "/api/v1/nodes/n1", NULL, "t1", &r);
        cr_assert_eq(r.code, 200);
        cr_assert(strstr(r.body, "\"uid\":\"uid-1\""));
        free(r.body);
        fakeapi_fault(f, NULL, NULL, 1, 0, 0);
        cr_assert_neq(req(f, NULL, "GET", "/api/v1/nodes/n1", NULL, "t1", &r), CURLE_OK);
        free(r.body);

        fakeapi_add_claim(
                f,
                cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"u\"}}"));
        req(f, NULL, "GET", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c", NULL, "t1",
            &r);
        cr_assert_eq(r.code, 200);
        free(r.body);
        req(f, NULL, "GET", "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/d", NULL, "t1",
            &r);
        cr_assert_eq(r.code, 404);
        free(r.body);

        /* Another CA's server is refused by a verifying client. */
        cr_assert_eq(req(other, fakeapi_ca_file(f), "GET", SLICES, NULL, NULL, &r),
                     CURLE_PEER_FAILED_VERIFICATION);
        free(r.body);
        fakeapi_free(other);
        fakeapi_free(f);
}

Test(fakeapi, refuses_until_listening) {
        struct fakeapi *f = fakeapi_new(false);
        struct reply r;

        cr_assert_eq(req(f, NULL, "GET", SLICES, NULL, NULL, &r), CURLE_COULDNT_CONNECT);
        free(r.body);
        fakeapi_listen(f);
        cr_assert_eq(req(f, NULL, "GET", SLICES, NULL, NULL, &r), CURLE_OK);
        cr_assert_eq(r.code, 200);
        free(r.body);
        fakeapi_free(f);
}
