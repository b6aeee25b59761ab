/* SPDX-License-Identifier: Apache-2.0 */
/* doctor's DRA credentials check in a pod: the service's address from the
 * environment, the token and CA in the service account's dir (here a temp
 * dir standing in for /var/run/secrets/kubernetes.io/serviceaccount);
 * the token's text never in a finding. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor-internal.h"

#define TOKEN "eyJhbGciOiJSUzI1NiJ9.SECRET-PAYLOAD.sig"

static char dir[] = "/tmp/cdiplug-sa.XXXXXX";

static void put(const char *name, const char *text, mode_t mode) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
        cr_assert_eq(chmod(path, mode), 0);
}

static void start(void) {
        cr_assert_not_null(mkdtemp(dir));
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
}

static void stop(void) {
        char path[256];
        snprintf(path, sizeof(path), "%s/token", dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/ca.crt", dir);
        unlink(path);
        rmdir(dir);
}

TestSuite(doctor_dra, .init = start, .fini = stop);

/* The findings as one text, each "LEVEL msg\n"; the context freed. */
static char *run(uid_t uid) {
        struct doc_options o = { 0 };
        struct doc_ctx c = { .o = &o, .uid = uid, .gid = uid };
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        doc_check_credentials(&c, dir);
        cr_assert(!c.oom);
        for (size_t i = 0; i < c.n; i++) {
                cr_assert_str_eq(c.v[i].check, "dra");
                fprintf(f, "%s %s\n", c.v[i].level == DOC_OK ? "ok" : "PROBLEM", c.v[i].msg);
                free(c.v[i].msg);
                free(c.v[i].fix);
        }
        free(c.v);
        fclose(f);
        return text;
}

Test(doctor_dra, in_a_pod_the_token_and_ca_are_found_and_never_shown) {
        put("token", TOKEN, 0644);
        put("ca.crt", "-----BEGIN CERTIFICATE-----\n", 0644);
        char *out = run(0);
        cr_assert_not_null(strstr(out, "ok in-cluster credentials: API server 10.96.0.1:443"), "%s",
                           out);
        cr_assert_null(strstr(out, "PROBLEM"), "%s", out);
        cr_assert_null(strstr(out, "SECRET-PAYLOAD"), "%s", out);
        free(out);
}

Test(doctor_dra, each_missing_piece_is_named) {
        unsetenv("KUBERNETES_SERVICE_PORT");
        put("token", "", 0644);
        char *out = run(0);
        cr_assert_not_null(strstr(out, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
                                       "not both set"),
                           "%s", out);
        cr_assert_not_null(strstr(out, "the service account token"), "%s", out);
        cr_assert_not_null(strstr(out, "/token is empty"), "%s", out);
        cr_assert_not_null(strstr(out, "ca.crt cannot be read: No such file or directory"), "%s",
                           out);
        cr_assert_null(strstr(out, "ok in-cluster"), "%s", out);
        free(out);
}

/* serve re-reads a rotated token with no capability left: mode bits
 * decide, for the serving identity. */
Test(doctor_dra, a_token_the_serving_user_cannot_read) {
        put("token", TOKEN, 0600);
        put("ca.crt", "x", 0644);
        char *out = run(65534);
        cr_assert_not_null(strstr(out, "token is not readable by uid 65534 gid 65534"), "%s", out);
        cr_assert_null(strstr(out, "SECRET-PAYLOAD"), "%s", out);
        free(out);
        out = run(0);
        cr_assert_null(strstr(out, "PROBLEM"), "root owns it: %s", out);
        free(out);
}
