/* SPDX-License-Identifier: Apache-2.0 */
#include "env.h"
#include "faketree.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char *join(const char *a, const char *b) {
        char *s;
        cr_assert(asprintf(&s, "%s/%s", a, b) > 0);
        return s;
}

void env_init(struct env *e) {
        char tmpl[] = "/tmp/cdiplug-test-XXXXXX";
        memset(e, 0, sizeof(*e));
        cr_assert_not_null(mkdtemp(tmpl));
        e->root = strdup(tmpl);
        e->host = join(e->root, "host");
        e->kubelet_dir = join(e->root, "kubelet");
        e->cdi_dir = join(e->root, "cdi");
        e->config = join(e->root, "config.json");
        e->log = join(e->root, "daemon.log");
        e->podres = join(e->root, "pod-resources.sock");
        mkdir(e->host, 0755);
        char *dev = join(e->host, "dev");
        mkdir(dev, 0755);
        free(dev);
        mkdir(e->cdi_dir, 0755);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st, (void)flag, (void)ftw;
        return remove(path);
}

void env_cleanup(struct env *e) {
        if (e->pid > 0)
                env_stop(e, SIGKILL, 5000);
        if (e->root)
                nftw(e->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(e->root);
        free(e->host);
        free(e->kubelet_dir);
        free(e->cdi_dir);
        free(e->config);
        free(e->log);
        free(e->podres);
        memset(e, 0, sizeof(*e));
}

static void mkparents(char *path) {
        for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = '\0';
                mkdir(path, 0755);
                *p = '/';
        }
}

void env_write(const struct env *e, const char *rel, const char *text) {
        char *path = join(e->root, rel);
        mkparents(path);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(text, f);
        fclose(f);
        free(path);
}

void env_touch(const struct env *e, const char *host_rel) {
        char *path = join(e->host, host_rel);
        mkparents(path);
        /* Only char/block nodes are devices, one node one device: numbers
         * of their own that no driver answers (faketree.h). */
        unsigned major, minor;
        if (geteuid() != 0)
                cr_skip_test("making fake device nodes (mknod) needs root");
        ft_next_devnum(&major, &minor);
        cr_assert(mknod(path, S_IFCHR | 0666, makedev(major, minor)) == 0, "cannot mknod %s: %s",
                  path, strerror(errno));
        free(path);
}

void env_rm(const struct env *e, const char *host_rel) {
        char *path = join(e->host, host_rel);
        cr_assert_eq(unlink(path), 0, "cannot remove %s", path);
        free(path);
}

static void collect(va_list ap, char **argv, int *argc, int max) {
        const char *a;
        while ((a = va_arg(ap, const char *)) && *argc < max - 1)
                argv[(*argc)++] = (char *)a;
        argv[*argc] = NULL;
}

void env_spawn(struct env *e, ...) {
        char *argv[32] = { (char *)CDIPLUG_BIN,
                           "serve",
                           "--config",
                           e->config,
                           "--kubelet-dir",
                           e->kubelet_dir,
                           "--cdi-dir",
                           e->cdi_dir,
                           "--host-root",
                           e->host,
                           "--verbose",
                           "--pod-resources-socket",
                           e->podres };
        int argc = 13;
        posix_spawn_file_actions_t fa;
        va_list ap;

        /* The lock-down needs root (to drop what root holds); without it,
         * or to debug a failing test, run unconfined. The confinement
         * tests skip then. */
        if (getenv("CDIPLUG_TEST_NO_SANDBOX") || geteuid() != 0)
                argv[argc++] = "--no-sandbox";
        va_start(ap, e);
        collect(ap, argv, &argc, 32);
        va_end(ap);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, e->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        cr_assert_eq(posix_spawn(&e->pid, CDIPLUG_BIN, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
}

int env_stop(struct env *e, int sig, int timeout_ms) {
        int status;
        struct timespec ts = { 0, 1000000 };

        if (e->pid <= 0)
                return -1;
        kill(e->pid, sig);
        for (int waited = 0; waited <= timeout_ms; waited++) {
                pid_t r = waitpid(e->pid, &status, WNOHANG);
                if (r == e->pid) {
                        e->pid = 0;
                        return status;
                }
                nanosleep(&ts, NULL); /* bounded wait for a child; waitpid has no timeout */
        }
        kill(e->pid, SIGKILL);
        waitpid(e->pid, &status, 0);
        e->pid = 0;
        return -1;
}

int env_run(const struct env *e, char **out, ...) {
        char *argv[32] = { (char *)CDIPLUG_BIN };
        int argc = 1, status;
        char *log = join(e->root, "run.out");
        posix_spawn_file_actions_t fa;
        pid_t pid;
        va_list ap;

        va_start(ap, out);
        collect(ap, argv, &argc, 32);
        va_end(ap);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        cr_assert_eq(posix_spawn(&pid, CDIPLUG_BIN, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        waitpid(pid, &status, 0);
        if (out)
                *out = env_read(log);
        unlink(log);
        free(log);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

char *env_read(const char *path) {
        FILE *f = fopen(path, "r");
        char *buf = NULL;
        size_t len = 0;
        if (!f)
                return NULL;
        FILE *m = open_memstream(&buf, &len);
        int c;
        while ((c = fgetc(f)) != EOF)
                fputc(c, m);
        fclose(m);
        fclose(f);
        return buf;
}

int env_dir_entries(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;
        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

int env_fd_count(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        return env_dir_entries(path);
}

int env_wait_fds(pid_t pid, int max, int timeout_ms) {
        struct timespec ts = { 0, 10000000 };
        int n = env_fd_count(pid);
        for (int waited = 0; n > max && waited < timeout_ms; waited += 10) {
                nanosleep(&ts, NULL); /* /proc has no change notification */
                n = env_fd_count(pid);
        }
        return n;
}
