/* SPDX-License-Identifier: Apache-2.0 */
/* The user-space resolution used where the kernel lacks openat2 must
 * resolve exactly as RESOLVE_IN_ROOT does: same file or same error, and
 * never a file outside the root. Compared here on one tree of links. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "faketree.h"
#include "res-internal.h"

static char *root, *outside;
static int rootfd = -1;

static void setup(void) {
        root = ft_new();
        outside = ft_new();
        cr_assert(root && outside);
        cr_assert_eq(ft_file(root, "dev/ttyUSB0", "in"), 0);
        cr_assert_eq(ft_file(root, "etc/passwd", "in"), 0);
        cr_assert_eq(ft_file(outside, "secret", "out"), 0);
        cr_assert_eq(ft_symlink(root, "dev/serial/by-id/rel", "../../ttyUSB0"), 0);
        cr_assert_eq(ft_symlink(root, "dev/serial/by-id/abs", "/dev/ttyUSB0"), 0);
        cr_assert_eq(
                ft_symlink(root, "dev/serial/by-id/dotdot", "../../../../../../../../etc/passwd"),
                0);
        cr_assert_eq(ft_symlink(root, "dev/serial/by-id/dangling", "../../ttyUSB7"), 0);
        cr_assert_eq(ft_symlink(root, "dev/loop", "loop"), 0);
        cr_assert_eq(ft_symlink(root, "dev/chain1", "chain2"), 0);
        cr_assert_eq(ft_symlink(root, "dev/chain2", "/dev/serial/by-id/abs"), 0);
        cr_assert_eq(ft_symlink(root, "dev/dirabs", "/dev/serial"), 0);
        cr_assert_eq(ft_symlink(root, "dev/dirrel", "../dev/./serial/"), 0);
        /* The real outside dir, absolutely and relatively: inside the root
         * neither exists. */
        char *abs = ft_path(outside, "");
        cr_assert_eq(ft_symlink(root, "dev/out-abs", abs), 0);
        free(abs);
        char *rel;
        const char *base = strrchr(outside, '/') + 1;
        cr_assert(asprintf(&rel, "../../%s", base) > 0);
        cr_assert_eq(ft_symlink(root, "dev/out-rel", rel), 0);
        free(rel);
        rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert(rootfd >= 0);
}

static void teardown(void) {
        close(rootfd);
        ft_free(root);
        ft_free(outside);
}

TestSuite(inroot, .init = setup, .fini = teardown);

/* Open path both ways: same inode, or the same error. */
static void same(const char *path, int flags) {
        int a = res_open_in_root(rootfd, path, flags);
        int b = res_open_in_root_compat(rootfd, path, flags);
        if (a < 0 || b < 0) {
                cr_expect_eq(a, b, "%s: openat2 gives %d, user space %d", path, a, b);
        } else {
                struct stat sa, sb;
                cr_assert_eq(fstat(a, &sa), 0);
                cr_assert_eq(fstat(b, &sb), 0);
                cr_expect(sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino, "%s: different files",
                          path);
        }
        if (a >= 0)
                close(a);
        if (b >= 0)
                close(b);
}

Test(inroot, resolves_like_resolve_in_root) {
        const char *paths[] = {
                "/dev/ttyUSB0",
                "dev/ttyUSB0",
                "/dev/serial/by-id/rel",
                "/dev/serial/by-id/abs",
                "/dev/serial/by-id/dotdot",
                "/dev/serial/by-id/dangling",
                "/dev/loop",
                "/dev/chain1",
                "/dev/dirabs/by-id/rel",
                "/dev/dirrel/by-id/abs",
                "/dev/dirabs/../ttyUSB0",
                "/../../../etc/passwd",
                "/dev/out-abs",
                "/dev/out-rel",
                "/dev/out-abs/secret",
                "/dev/out-rel/secret",
                "/",
                "",
                "/dev/",
                "/dev//serial///by-id/rel",
        };
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                same(paths[i], O_PATH);
                same(paths[i], O_RDONLY);
        }
        same("/dev/dirabs", O_PATH | O_DIRECTORY);
        same("/dev/serial/by-id/abs", O_PATH | O_NOFOLLOW);
}

Test(inroot, never_opens_a_file_outside_the_root) {
        char buf[8] = { 0 };
        const char *paths[] = { "/dev/out-abs/secret", "/dev/out-rel/secret",
                                "/dev/serial/by-id/dotdot" };
        for (size_t i = 0; i < 3; i++) {
                int fd = res_open_in_root_compat(rootfd, paths[i], O_RDONLY);
                if (fd < 0)
                        continue;
                cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
                cr_expect_str_eq(buf, "in", "%s read %s", paths[i], buf);
                close(fd);
        }
        int fd = res_open_in_root_compat(rootfd, "/dev/loop", O_RDONLY);
        cr_expect_eq(fd, -ELOOP);
}
