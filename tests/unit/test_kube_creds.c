/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/kube credentials: every kubeconfig field and error (messages name
 * the file and the key), the in-cluster service account, token rotation. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube-internal.h"
#include "faketree.h"
#include "tfmt.h"

static char *dir;

static void mkdir_tmp(void) {
        dir = ft_new();
        cr_assert_not_null(dir);
}

static void rm_tmp(void) {
        ft_free(dir);
}

TestSuite(kube_creds, .init = mkdir_tmp, .fini = rm_tmp);

static char *write_file(const char *name, const char *content) {
        char *p = tfmt("%s/%s", dir, name);
        FILE *f = fopen(p, "w");

        cr_assert_not_null(f);
        fputs(content, f);
        cr_assert_eq(fclose(f), 0);
        return p;
}

/* A kubeconfig with one context "c" → cluster "k", user "u"; cluster and
 * user are given as YAML mapping bodies (indented by the caller). */
static char *kubeconfig(const char *cluster, const char *user) {
        char *text = tfmt("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          "contexts:\n- name: other\n  context: {cluster: nope, user: nope}\n"
                          "- name: c\n  context:\n    cluster: k\n    user: u\n"
                          "clusters:\n- name: k\n  cluster:\n%s\n"
                          "users:\n- name: u\n  user:\n%s\n",
                          cluster, user ? user : "    {}");
        char *p = write_file("config", text);
        free(text);
        return p;
}

static int load(const char *cluster, const char *user, struct kube_creds *c, struct kube_error *e) {
        char *p = kubeconfig(cluster, user);
        int r;

        memset(e, 0, sizeof(*e));
        r = kube_creds_kubeconfig(p, c, e);
        free(p);
        return r;
}

/* Fails to load; the message must name the file and contain want. */
static void refused(const char *cluster, const char *user, const char *want) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *path = tfmt("kubeconfig %s/config: ", dir);

        cr_assert_lt(load(cluster, user, &c, &e), 0, "loaded, want \"%s\"", want);
        cr_assert(strstr(e.msg, path), "message \"%s\" does not name the file", e.msg);
        cr_assert(strstr(e.msg, want), "message \"%s\" lacks \"%s\"", e.msg, want);
        cr_assert_null(c.server, "output written on failure");
        free(path);
}

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

Test(kube_creds, server_ca_file_relative_and_token) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *ca = write_file("ca.crt", CA_PEM);

        cr_assert_eq(
                load("    server: https://api.example:6443/\n    certificate-authority: ca.crt",
                     "    token: abc.def", &c, &e),
                0, "%s", e.msg);
        cr_assert_str_eq(c.server, "https://api.example:6443");
        cr_assert_str_eq(c.host, "api.example");
        cr_assert_eq(c.port, 6443);
        cr_assert_str_eq(c.ca_file, ca);
        cr_assert_str_eq(c.token, "abc.def");
        cr_assert_null(c.token_file);
        kube_creds_clear(&c);
        free(ca);
}

Test(kube_creds, default_port_ipv6_and_path_prefix) {
        struct kube_creds c = { 0 };
        struct kube_error e;

        cr_assert_eq(load("    server: https://[fd00::1]/prefix", NULL, &c, &e), 0, "%s", e.msg);
        cr_assert_str_eq(c.server, "https://[fd00::1]:443/prefix");
        cr_assert_str_eq(c.host, "fd00::1");
        cr_assert_eq(c.port, 443);
        cr_assert_null(c.token);
        kube_creds_clear(&c);
}

Test(kube_creds, ca_data_and_client_cert_data) {
        struct kube_creds c = { 0 };
        struct kube_error e;

        /* "hello" and "key!" */
        cr_assert_eq(load("    server: https://1.2.3.4\n    certificate-authority-data: aGVsbG8=",
                          "    client-certificate-data: aGVsbG8\n    client-key-data: a2V5IQ==", &c,
                          &e),
                     0, "%s", e.msg);
        cr_assert_eq(c.ca.len, 5);
        cr_assert_str_eq(c.ca.data, "hello");
        cr_assert_str_eq(c.cert.data, "hello");
        cr_assert_str_eq(c.key.data, "key!");
        kube_creds_clear(&c);
}

Test(kube_creds, client_cert_files) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *crt = write_file("c.crt", CA_PEM), *key = write_file("c.key", "k");
        char *user = tfmt("    client-certificate: %s\n    client-key: c.key", crt);

        cr_assert_eq(load("    server: https://1.2.3.4", user, &c, &e), 0, "%s", e.msg);
        free(user);
        cr_assert_str_eq(c.cert_file, crt);
        cr_assert_str_eq(c.key_file, key);
        kube_creds_clear(&c);
        free(crt);
        free(key);
}

Test(kube_creds, token_file_rotates) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        const char *tok;
        char *tf = write_file("tok", "one\n");

        cr_assert_eq(load("    server: https://1.2.3.4", "    token: static\n    tokenFile: tok",
                          &c, &e),
                     0, "%s", e.msg);
        cr_assert_str_eq(c.token_file, tf);
        cr_assert_str_eq(c.token, "one", "the file wins over token");
        free(write_file("tok", "two\n"));
        cr_assert_eq(kube_creds_token(&c, 1000, false, &tok), 0);
        cr_assert_str_eq(tok, "one", "re-read before a minute passed");
        cr_assert_eq(kube_creds_token(&c, KUBE_TOKEN_REREAD_MS + 1, false, &tok), 0);
        cr_assert_str_eq(tok, "two");
        free(write_file("tok", "three"));
        cr_assert_eq(kube_creds_token(&c, KUBE_TOKEN_REREAD_MS + 2, true, &tok), 0);
        cr_assert_str_eq(tok, "three", "forced (after a 401)");
        cr_assert_eq(unlink(tf), 0);
        cr_assert_lt(kube_creds_token(&c, 10 * KUBE_TOKEN_REREAD_MS, true, &tok), 0);
        cr_assert_str_eq(c.token, "three", "a failed re-read keeps the old token");
        kube_creds_clear(&c);
        free(tf);
}

Test(kube_creds, errors_name_the_key) {
        refused("    server: https://1.2.3.4\n    insecure-skip-tls-verify: true", NULL,
                "clusters[name=\"k\"].cluster.insecure-skip-tls-verify: refused");
        refused("    certificate-authority: x", NULL,
                "clusters[name=\"k\"].cluster.server: missing");
        refused("    server: http://1.2.3.4", NULL, ".server \"http://1.2.3.4\": must be https://");
        refused("    server: 'https://'", NULL, "cluster.server \"https://\": not a URL");
        refused("    server: https://1.2.3.4\n    certificate-authority: nope.crt", NULL,
                "clusters[name=\"k\"].cluster.certificate-authority: ");
        refused("    server: https://1.2.3.4\n    certificate-authority-data: '!!!'", NULL,
                "certificate-authority-data: not base64");
        refused("    server: https://1.2.3.4\n    certificate-authority-data: aGVsbG8=\n"
                "    certificate-authority: x",
                NULL, "certificate-authority and certificate-authority-data are both given");
        refused("    server: https://1.2.3.4", "    exec: {command: aws}",
                "users[name=\"u\"].user.exec: not supported");
        refused("    server: https://1.2.3.4", "    auth-provider: {name: gcp}",
                "user.auth-provider: not supported");
        refused("    server: https://1.2.3.4", "    client-certificate-data: aGVsbG8=",
                "users[name=\"u\"].user: client-certificate and client-key go together");
        refused("    server: https://1.2.3.4", "    tokenFile: missing-token",
                "users[name=\"u\"].user.tokenFile: ");
        refused("    server: https://1.2.3.4", "    token: \"a\\nInjected: header\"",
                "users[name=\"u\"].user.token: not one line");
}

Test(kube_creds, structure_errors) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *p;

        p = write_file("config", "clusters: []\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "current-context: missing"), "%s", e.msg);
        free(p);
        p = write_file("config", "current-context: x\ncontexts: []\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "contexts[name=\"x\"].context: missing"), "%s", e.msg);
        free(p);
        p = write_file("config",
                       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: k}\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "clusters[name=\"k\"].cluster: missing"), "%s", e.msg);
        free(p);
        p = write_file("config",
                       "current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "contexts[name=\"x\"].context.cluster: missing"), "%s", e.msg);
        free(p);
        p = write_file("config", "a: [b\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "not YAML"), "%s", e.msg);
        free(p);
        p = write_file("config", "- a\n");
        cr_assert_lt(kube_creds_kubeconfig(p, &c, &e), 0);
        cr_assert(strstr(e.msg, "not a mapping"), "%s", e.msg);
        free(p);
        cr_assert_eq(kube_creds_kubeconfig("/nonexistent/kubeconfig", &c, &e), -ENOENT);
        cr_assert(strstr(e.msg, "kubeconfig /nonexistent/kubeconfig: "), "%s", e.msg);
        cr_assert_null(c.server);
}

Test(kube_creds, bounded_size_and_depth) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *deep = calloc(1, 4096), *p;
        FILE *f;

        for (int i = 0; i < KUBE_KUBECONFIG_DEPTH + 1; i++)
                strcat(deep, "[");
        p = write_file("config", deep);
        cr_assert_eq(kube_creds_kubeconfig(p, &c, &e), -EINVAL);
        cr_assert(strstr(e.msg, "nested deeper than"), "%s", e.msg);
        free(p);
        free(deep);

        p = tfmt("%s/big", dir);
        f = fopen(p, "w");
        cr_assert_not_null(f);
        cr_assert_eq(ftruncate(fileno(f), KUBE_KUBECONFIG_MAX + 1), 0);
        fclose(f);
        cr_assert_eq(kube_creds_kubeconfig(p, &c, &e), -EFBIG);
        cr_assert(strstr(e.msg, "larger than 1 MiB"), "%s", e.msg);
        free(p);
}

Test(kube_creds, base64) {
        struct kube_blob b;

        cr_assert_eq(kube_base64_decode("Zm9vYmFy", 8, &b), 0);
        cr_assert_str_eq(b.data, "foobar");
        free(b.data);
        cr_assert_eq(kube_base64_decode("Zm9v\nYg==", 9, &b), 0);
        cr_assert_str_eq(b.data, "foob");
        free(b.data);
        cr_assert_eq(kube_base64_decode("Zm9=vYg", 7, &b), -EINVAL);
        cr_assert_eq(kube_base64_decode("Zh==", 4, &b), -EINVAL, "non-zero padding bits");
        cr_assert_eq(kube_base64_decode("Z", 1, &b), -EINVAL);
}

static void sa_files(const char *token) {
        cr_assert_eq(ft_dir(dir, "var/run/secrets/kubernetes.io/serviceaccount"), 0);
        free(write_file("var/run/secrets/kubernetes.io/serviceaccount/ca.crt", CA_PEM));
        if (token)
                free(write_file("var/run/secrets/kubernetes.io/serviceaccount/token", token));
}

Test(kube_creds, in_cluster) {
        struct kube_creds c = { 0 };
        struct kube_error e;
        char *ca = tfmt("%s/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", dir);

        sa_files("eyJtoken\n");
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), 0, "%s", e.msg);
        cr_assert_str_eq(c.server, "https://10.96.0.1:443");
        cr_assert_str_eq(c.ca_file, ca);
        cr_assert_str_eq(c.token, "eyJtoken");
        kube_creds_clear(&c);

        setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), 0, "%s", e.msg);
        cr_assert_str_eq(c.server, "https://[fd00:10:96::1]:443");
        cr_assert_str_eq(c.host, "fd00:10:96::1");
        kube_creds_clear(&c);
        free(ca);
}

Test(kube_creds, in_cluster_errors) {
        struct kube_creds c = { 0 };
        struct kube_error e;

        unsetenv("KUBERNETES_SERVICE_HOST");
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), -ENOENT);
        cr_assert(strstr(e.msg, "KUBERNETES_SERVICE_HOST"), "%s", e.msg);
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "https", 1);
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), -EINVAL);
        cr_assert(strstr(e.msg, "KUBERNETES_SERVICE_PORT \"https\""), "%s", e.msg);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), -ENOENT);
        cr_assert(strstr(e.msg, "ca.crt"), "%s", e.msg);
        sa_files(NULL);
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), -ENOENT);
        cr_assert(strstr(e.msg, "in-cluster: token "), "%s", e.msg);
        sa_files("\n");
        cr_assert_eq(kube_creds_in_cluster(dir, &c, &e), -EINVAL);
        cr_assert(strstr(e.msg, "empty"), "%s", e.msg);
        cr_assert_null(c.server);
}
