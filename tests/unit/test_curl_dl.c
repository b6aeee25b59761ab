/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl is loaded on demand (daemon/kube/curl-dl.c): a process that never
 * makes an API client does not map it, kube_new() maps it, and a missing
 * or wrong library is an error naming it and what to install, never a
 * crash. This program must not link libcurl itself (tests/CMakeLists.txt
 * links it only into the test_kube* programs), or the maps prove nothing. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faketree.h"
#include "kube-internal.h"
#include "kube.h"
#include "tfmt.h"

/* Whether /proc/self/maps has a mapping whose path contains name. */
static bool mapped(const char *name) {
        FILE *f = fopen("/proc/self/maps", "re");
        char *line = NULL;
        size_t n = 0;
        bool found = false;

        cr_assert_not_null(f);
        while (!found && getline(&line, &n, f) > 0)
                found = strstr(line, name) != NULL;
        free(line);
        fclose(f);
        return found;
}

/* Criterion runs each test in a fresh process: nothing is loaded yet. */
Test(curl_dl, kube_new_maps_libcurl_and_nothing_before) {
        char *dir = ft_new();
        char *cfg = tfmt("%s/kubeconfig", dir);
        FILE *f = fopen(cfg, "we");
        struct kube_settings s = { .kubeconfig = cfg,
                                   .node_name = "node1",
                                   .driver = "cdiplug.example.com" };
        struct kube *k = NULL;

        cr_assert_not_null(f);
        fputs("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
              "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
              "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n"
              "users:\n- name: u\n  user:\n    token: abc.def\n",
              f);
        cr_assert_eq(fclose(f), 0);
        cr_assert_not(mapped("libcurl"), "libcurl is mapped before any API client");
        cr_assert_null(sym_curl_multi_init);
        cr_assert_eq(kube_new(&s, &k), 0);
        cr_assert(mapped("libcurl"), "kube_new did not load libcurl");
        cr_assert_not_null(sym_curl_multi_poll);
        cr_assert_geq(sym_curl_version_info(CURLVERSION_NOW)->version_num,
                      (unsigned)KUBE_CURL_MIN_VERSION);
        kube_free(k);
        /* Never unloaded: libcurl's global state stays for the process. */
        cr_assert(mapped("libcurl"));
        free(cfg);
        ft_free(dir);
}

Test(curl_dl, a_missing_library_is_named_with_what_to_install, .init = cr_redirect_stderr) {
        cr_assert_eq(kube_curl_load_from("libcurl-cdiplug-missing.so.4"), -ELIBACC);
        cr_assert_null(sym_curl_easy_init, "a pointer set by a failed load");
        fflush(stderr);
        /* The log line: which library, and the package. */
        char buf[1024] = "";
        FILE *e = cr_get_redirected_stderr();
        size_t n = fread(buf, 1, sizeof(buf) - 1, e);
        buf[n] = '\0';
        cr_assert(strstr(buf, "\"libcurl-cdiplug-missing.so.4\""), "%s", buf);
        cr_assert(strstr(buf, "libcurl >= " KUBE_CURL_MIN_TEXT), "%s", buf);
        cr_assert(strstr(buf, "install libcurl4"), "%s", buf);
}

/* A library that loads but is not libcurl: every pointer stays NULL. */
Test(curl_dl, a_library_without_curl_is_refused_whole, .init = cr_redirect_stderr) {
        cr_assert_eq(kube_curl_load_from("libz.so.1"), -ELIBACC);
        cr_assert_null(sym_curl_easy_cleanup);
        cr_assert_null(sym_curl_version_info);
        fflush(stderr);
        char buf[1024] = "";
        FILE *e = cr_get_redirected_stderr();
        size_t n = fread(buf, 1, sizeof(buf) - 1, e);
        buf[n] = '\0';
        cr_assert(strstr(buf, "\"libz.so.1\" has no curl_easy_cleanup"), "%s", buf);
}
