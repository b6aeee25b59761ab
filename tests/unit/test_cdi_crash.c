/* SPDX-License-Identifier: Apache-2.0 */
/* Crash safety of cdi_spec_write: a writer process (tests/cdi/cdi-writer.c)
 * rewrites one spec in a loop and is SIGKILLed at random moments, hundreds
 * of times. Runtimes may read the directory at any instant, so after every
 * kill each "*.json" there must be a complete spec. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cdi.h"

#ifndef CDI_WRITER
#error "CDI_WRITER must name the cdi-writer helper (tests/cdi/extra.cmake)"
#endif

#define KIND "example.com/crash"
#define FILE_NAME "example.com-crash.json"
#define ROUNDS 300

static char dir[4096];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(p);
}

static char *slurp(int dfd, const char *name) {
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
        char *buf = NULL;
        size_t len = 0, cap = 0;
        ssize_t n;

        cr_assert(fd >= 0, "open %s: %s", name, strerror(errno));
        do {
                if (len == cap) {
                        cap = cap ? cap * 2 : 65536;
                        buf = realloc(buf, cap + 1);
                        cr_assert_not_null(buf);
                }
                n = read(fd, buf + len, cap - len);
                cr_assert(n >= 0);
                len += (size_t)n;
        } while (n > 0);
        buf[len] = '\0';
        close(fd);
        return buf;
}

/* A complete spec of ours: parses, right kind, and as many devices as the
 * generation recorded in its env says. */
static void assert_complete(int dfd, const char *name, unsigned round) {
        char *text = slurp(dfd, name);
        cJSON *root = cJSON_Parse(text), *env, *it;
        long want = -1;

        cr_assert_not_null(root, "round %u: %s does not parse (%zu bytes)", round, name,
                           strlen(text));
        cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "kind")), KIND, "round %u",
                         round);
        env = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "containerEdits"), "env");
        cJSON_ArrayForEach(it, env) {
                const char *s = cJSON_GetStringValue(it);
                if (s && strncmp(s, "CDI_TEST_DEVICES=", 17) == 0)
                        want = strtol(s + 17, NULL, 10);
        }
        cr_assert_gt(want, 0, "round %u: device count missing", round);
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), want,
                     "round %u: spec mixes generations", round);
        cJSON_Delete(root);
        free(text);
}

static void check_dir(unsigned round, bool must_exist) {
        DIR *d = opendir(dir);
        struct dirent *de;
        bool seen = false;

        cr_assert_not_null(d);
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) {
                        cr_assert_str_eq(de->d_name, FILE_NAME, "round %u: stray spec file", round);
                        assert_complete(dirfd(d), de->d_name, round);
                        seen = true;
                }
                cr_assert(l <= 5 || strcmp(de->d_name + l - 5, ".yaml") != 0);
        }
        closedir(d);
        if (must_exist)
                cr_assert(seen, "round %u: spec vanished after a completed write", round);
}

static pid_t spawn_writer(int *ret_fd) {
        int p[2];
        pid_t pid;

        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execl(CDI_WRITER, CDI_WRITER, dir, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}

Test(cdi_crash, sigkill_mid_write_never_leaves_partial_spec, .timeout = 120) {
        const char *base = getenv("TMPDIR");
        const char *keep[] = { KIND, NULL };
        bool written = false;
        unsigned seed;
        char **removed = NULL;
        DIR *d;
        struct dirent *de;

        cr_assert(snprintf(dir, sizeof(dir), "%s/cdi-crash-XXXXXX", base && *base ? base : "/tmp") >
                  0);
        cr_assert_not_null(mkdtemp(dir));
        cr_assert_eq(getrandom(&seed, sizeof(seed), 0), (ssize_t)sizeof(seed));
        cr_log_info("seed %u", seed);
        srandom(seed);

        for (unsigned round = 0; round < ROUNDS; round++) {
                int fd, status;
                long tokens = random() % 3, spin = random() % 200000;
                pid_t pid = spawn_writer(&fd);
                char c;

                /* Let 0-2 writes complete, then burn a random number of
                 * syscalls so the kill lands anywhere in the next one. */
                for (long t = 0; t < tokens; t++) {
                        ssize_t n = read(fd, &c, 1);
                        cr_assert_eq(n, 1, "round %u: writer died early", round);
                        written = true;
                }
                for (volatile long s = 0; s < spin; s++)
                        if (s % 64 == 0)
                                getppid();
                cr_assert_eq(kill(pid, SIGKILL), 0);
                cr_assert_eq(waitpid(pid, &status, 0), pid);
                /* Exited by itself means a write failed: not what we test. */
                cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                          "round %u: writer status %#x", round, status);
                /* Writes it finished before we read the pipe count too. */
                if (read(fd, &c, 1) == 1)
                        written = true;
                close(fd);
                check_dir(round, written);
        }
        cr_assert(written, "the writer never finished a write");

        /* Killed writers leave temp files; clean-up takes them and keeps
         * the spec. */
        cr_assert_eq(cdi_remove_stale(dir, keep, &removed), 0);
        cr_expect_null(removed[0]);
        base_strv_free(removed);
        d = opendir(dir);
        cr_assert_not_null(d);
        while ((de = readdir(d)))
                cr_expect(strncmp(de->d_name, ".cdiplug-tmp.", 13) != 0, "left over: %s",
                          de->d_name);
        closedir(d);
        check_dir(ROUNDS, true);
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
