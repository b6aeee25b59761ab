/* SPDX-License-Identifier: Apache-2.0 */
/* Socket file names always fit sun_path under the kubelet dir in use. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"

static const char name63[] =
        "example.com/a23456789b23456789c23456789d23456789e23456789f23456789g23456789";

static void expect_fits(const char *dir, const char *name) {
        struct sockaddr_un sa;
        char *sock = NULL;
        cr_assert_eq(dp_socket_name(dir, name, &sock), 0, "%s under %s", name, dir);
        cr_expect_lt(strlen(dir) + 1 + strlen(sock), sizeof(sa.sun_path), "%s/%s", dir, sock);
        cr_expect_eq(strncmp(sock, "cdiplug-", 8), 0, "%s", sock);
        cr_expect_eq(strcmp(sock + strlen(sock) - 5, ".sock"), 0, "%s", sock);
        cr_expect_null(strchr(sock, '/'), "%s", sock);
        free(sock);
}

Test(socket_names, short_names_keep_the_full_form) {
        char *sock = NULL;
        cr_assert_eq(dp_socket_name("/var/lib/kubelet/device-plugins", "example.com/serial", &sock),
                     0);
        cr_expect_str_eq(sock, "cdiplug-example.com-serial.sock");
        free(sock);
}

Test(socket_names, long_names_get_a_readable_start_and_a_hash) {
        char *a = NULL, *b = NULL;
        cr_assert_eq(dp_socket_name("/var/lib/kubelet/device-plugins", name63, &a), 0);
        cr_expect_eq(strncmp(a, "cdiplug-a23456789b23456789c23456789d2345-", 41), 0, "%s", a);
        cr_expect_eq(strlen(a), 8 + 32 + 1 + 8 + 5, "%s", a);
        cr_assert_eq(dp_socket_name("/var/lib/kubelet/device-plugins", name63, &b), 0);
        cr_expect_str_eq(a, b, "stable");
        free(b);
        char other[sizeof(name63)];
        memcpy(other, name63, sizeof(name63));
        other[sizeof(other) - 2] = 'x';
        cr_assert_eq(dp_socket_name("/var/lib/kubelet/device-plugins", other, &b), 0);
        cr_expect_str_neq(a, b, "names differing past the cut stay apart");
        free(a);
        free(b);
}

Test(socket_names, every_dir_length_fits_or_is_refused) {
        char dir[128];
        for (size_t len = 1; len < sizeof(dir); len++) {
                char *sock = NULL;
                memset(dir, 'd', len);
                dir[0] = '/';
                dir[len] = '\0';
                int r = dp_socket_name(dir, name63, &sock);
                if (len + 1 + strlen("cdiplug-12345678.sock") <= 107) {
                        cr_expect_eq(r, 0, "dir of %zu", len);
                        expect_fits(dir, name63);
                        expect_fits(dir, "a/b");
                } else
                        cr_expect_eq(r, -ENAMETOOLONG, "dir of %zu", len);
                free(sock);
        }
}

/* Two instances (a rolling update's old and new pod) never share a socket
 * name, and each name still fits under any dir the single one fits. */
Test(socket_names, instances_get_their_own_names) {
        char a[9], b[9], *sa = NULL, *sb = NULL, *plain = NULL;
        cfg_instance_tag("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", a);
        cfg_instance_tag("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1", b);
        cr_assert_str_neq(a, b);
        cr_assert_eq(dp_socket_name_instance("/var/lib/kubelet/device-plugins",
                                             "example.com/serial", a, &sa),
                     0);
        cr_assert_eq(dp_socket_name_instance("/var/lib/kubelet/device-plugins",
                                             "example.com/serial", b, &sb),
                     0);
        cr_assert_eq(
                dp_socket_name("/var/lib/kubelet/device-plugins", "example.com/serial", &plain), 0);
        char want[64];
        snprintf(want, sizeof(want), "cdiplug-example.com-serial-%s.sock", a);
        cr_expect_str_eq(sa, want);
        cr_expect_str_neq(sa, sb);
        cr_expect_str_neq(sa, plain);
        free(sa);
        free(sb);
        free(plain);
        /* 9 bytes more than the single name: dirs up to 76 bytes. */
        for (size_t len = 1; len <= 76; len += 5) {
                char dir[96], *s = NULL;
                struct sockaddr_un un;
                memset(dir, 'd', len);
                dir[0] = '/';
                dir[len] = '\0';
                cr_assert_eq(dp_socket_name_instance(dir, name63, a, &s), 0, "%s", dir);
                cr_expect_lt(strlen(dir) + 1 + strlen(s), sizeof(un.sun_path), "%s/%s", dir, s);
                cr_expect_not_null(strstr(s, a), "%s keeps the instance", s);
                free(s);
        }
}

Test(socket_names, a_pod_uid_is_checked) {
        cr_expect_null(cfg_pod_uid_problem("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"));
        cr_expect_not_null(cfg_pod_uid_problem(""));
        cr_expect_not_null(cfg_pod_uid_problem("a/b"));
        cr_expect_not_null(cfg_pod_uid_problem("a b"));
        char longer[CFG_POD_UID_MAX + 2];
        memset(longer, 'a', sizeof(longer) - 1);
        longer[sizeof(longer) - 1] = '\0';
        cr_expect_not_null(cfg_pod_uid_problem(longer));
}
