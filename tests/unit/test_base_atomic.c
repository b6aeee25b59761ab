/* SPDX-License-Identifier: Apache-2.0 */
/* The atomic file writer (base/atomic.c) the CDI specs, their ownership
 * record and the DRA checkpoint are written with, and the bounded reader
 * (base/read.c) on the real /proc. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

#define PREFIX ".t-tmp."

static int tmpdir(char *path, size_t sz) {
        const char *base = getenv("TMPDIR");

        cr_assert(snprintf(path, sz, "%s/base-atomic-XXXXXX", base && *base ? base : "/tmp") <
                  (int)sz);
        cr_assert_not_null(mkdtemp(path));
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        return fd;
}

/* The names in dfd other than . and .., sorted, joined by ' '. */
static void names(int dfd, char *out, size_t sz) {
        struct dirent **list;
        int n = scandirat(dfd, ".", &list, NULL, alphasort);

        cr_assert_geq(n, 0);
        out[0] = '\0';
        for (int i = 0; i < n; i++) {
                if (strcmp(list[i]->d_name, ".") != 0 && strcmp(list[i]->d_name, "..") != 0) {
                        if (out[0])
                                strncat(out, " ", sz - strlen(out) - 1);
                        strncat(out, list[i]->d_name, sz - strlen(out) - 1);
                }
                free(list[i]);
        }
        free(list);
}

static void expect_file(int dfd, const char *name, const char *content, mode_t mode) {
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len;

        cr_assert_eq(base_read_file_at(dfd, name, O_NOFOLLOW, 1 << 20, &buf, &len), 0);
        cr_expect_eq(len, strlen(content));
        cr_expect_str_eq(buf, content);
        cr_assert_eq(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        cr_expect_eq(st.st_mode & 07777, mode, "mode %o, want %o", st.st_mode & 07777, mode);
}

Test(base_atomic, the_file_appears_whole_with_its_mode_whatever_the_umask) {
        char dir[256], ls[256];
        _cleanup_close_ int dfd = tmpdir(dir, sizeof(dir));
        mode_t old = umask(0077);

        cr_assert_eq(base_write_atomic_at(dfd, "a.json", PREFIX, "{\"x\":1}", 7, 0644), 0);
        umask(old);
        expect_file(dfd, "a.json", "{\"x\":1}", 0644);
        names(dfd, ls, sizeof(ls));
        cr_expect_str_eq(ls, "a.json");

        /* Replacing: the new content and the new mode, no temp left. */
        cr_assert_eq(base_write_atomic_at(dfd, "a.json", PREFIX, "new", 3, 0600), 0);
        expect_file(dfd, "a.json", "new", 0600);
        cr_assert_eq(base_write_atomic_at(dfd, "empty", PREFIX, "", 0, 0640), 0);
        expect_file(dfd, "empty", "", 0640);
        names(dfd, ls, sizeof(ls));
        cr_expect_str_eq(ls, "a.json empty");
}

Test(base_atomic, a_failing_replace_leaves_the_old_and_no_temp) {
        char dir[256], ls[256];
        _cleanup_close_ int dfd = tmpdir(dir, sizeof(dir));

        /* A directory under the name: the rename fails, after the temp
         * was written. */
        cr_assert_eq(mkdirat(dfd, "d", 0755), 0);
        cr_assert_eq(mkdirat(dfd, "d/sub", 0755), 0);
        int r = base_write_atomic_at(dfd, "d", PREFIX, "data", 4, 0644);
        cr_expect(r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST, "r = %d", r);
        names(dfd, ls, sizeof(ls));
        cr_expect_str_eq(ls, "d");

        /* A name in a dir that does not exist: nothing made anywhere. */
        cr_expect_eq(base_write_atomic_at(dfd, "missing/x", PREFIX, "data", 4, 0644), -ENOENT);
        cr_expect_eq(base_write_atomic_at(-1, "x", PREFIX, "data", 4, 0644), -EBADF);
        cr_expect_eq(base_write_atomic_at(dfd, "x", "", "data", 4, 0644), -EINVAL);
        cr_expect_eq(base_write_atomic_at(dfd, "x", PREFIX, "data", 4, 010644), -EINVAL);
        names(dfd, ls, sizeof(ls));
        cr_expect_str_eq(ls, "d");
}

Test(base_atomic, remove_temps_takes_only_regular_files_with_the_prefix) {
        char dir[256], ls[256];
        _cleanup_close_ int dfd = tmpdir(dir, sizeof(dir));

        cr_assert_eq(base_write_atomic_at(dfd, "keep", PREFIX, "k", 1, 0644), 0);
        for (const char *const *n = (const char *const[]){ PREFIX "1", PREFIX "2", NULL }; *n;
             n++) {
                int fd = openat(dfd, *n, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                cr_assert_geq(fd, 0);
                close(fd);
        }
        cr_assert_eq(mkdirat(dfd, PREFIX "dir", 0755), 0);
        cr_assert_eq(symlinkat("keep", dfd, PREFIX "link"), 0);
        cr_expect_eq(base_remove_temps_at(dfd, PREFIX), 2);
        names(dfd, ls, sizeof(ls));
        cr_expect_str_eq(ls, PREFIX "dir " PREFIX "link keep");
        cr_expect_eq(base_remove_temps_at(dfd, PREFIX), 0);
        cr_expect_eq(base_remove_temps_at(dfd, ""), -EINVAL);
}

/* What one read of a large buffer gets from path: the text a sysctl gives. */
static size_t one_read(const char *path, char *buf, size_t sz) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
        ssize_t n = read(fd, buf, sz - 1);
        cr_assert_gt(n, 0, "%s", path);
        buf[n] = '\0';
        close(fd);
        return (size_t)n;
}

/* A sysctl answers only the read at offset 0 (EOF at any other) and says
 * size 0: read a byte at a time it is its first digit, "128" read as "1".
 * The reader gets the whole value, with a max as small as a caller's. */
Test(base_read, a_sysctl_is_read_whole_from_the_real_proc) {
        static const char *const files[] = { "/proc/sys/fs/inotify/max_user_instances",
                                             "/proc/sys/fs/inotify/max_user_watches",
                                             "/proc/sys/kernel/pid_max" };
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char want[256];
                size_t n = one_read(files[i], want, sizeof(want));
                char *buf = NULL;
                size_t len = 0;
                cr_assert_eq(base_read_file_at(AT_FDCWD, files[i], 0, 63, &buf, &len), 0, "%s",
                             files[i]);
                cr_assert_eq(len, n, "%s: read %zu bytes \"%s\", the file says \"%s\"", files[i],
                             len, buf, want);
                cr_assert_str_eq(buf, want, "%s", files[i]);
                free(buf);
                /* A value past max is refused, never cut. */
                cr_assert_eq(base_read_file_at(AT_FDCWD, files[i], 0, n - 1, &buf, &len), -EFBIG,
                             "%s", files[i]);
        }
}

/* A procfs file longer than one page is read to its end too. */
Test(base_read, a_long_proc_file_is_read_to_its_end) {
        char *buf = NULL;
        size_t len = 0;
        cr_assert_eq(base_read_file_at(AT_FDCWD, "/proc/self/maps", 0, 1 << 20, &buf, &len), 0);
        cr_assert_eq(strlen(buf), len);
        cr_assert_eq(buf[len - 1], '\n', "ends with a whole line");
        free(buf);
}
