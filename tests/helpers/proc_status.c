/* SPDX-License-Identifier: Apache-2.0 */
/* Reading /proc/<pid>/task/<tid>/status, for the sandbox's tests and the
 * daemon's integration tests. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_status.h"

static int status_path(pid_t pid, pid_t tid, char *buf, size_t size) {
        int n = tid > 0 ? snprintf(buf, size, "/proc/%d/task/%d/status", (int)pid, (int)tid)
                        : snprintf(buf, size, "/proc/%d/status", (int)pid);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int proc_status_field(pid_t pid, pid_t tid, const char *field, char **ret_value) {
        char path[64];
        char *line = NULL;
        size_t cap = 0, flen = strlen(field);
        FILE *f;
        int r = status_path(pid, tid, path, sizeof(path));

        if (r < 0)
                return r;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        r = -ENOENT;
        while (getline(&line, &cap, f) > 0) {
                if (strncmp(line, field, flen) != 0 || line[flen] != ':')
                        continue;
                char *v = line + flen + 1;
                v += strspn(v, " \t");
                v[strcspn(v, "\n")] = '\0';
                char *copy = strdup(v);
                if (!copy) {
                        r = -ENOMEM;
                        break;
                }
                *ret_value = copy;
                r = 0;
                break;
        }
        free(line);
        fclose(f);
        return r;
}

__attribute__((format(printf, 2, 3))) static void set_msg(char **ret_msg, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (!ret_msg)
                return;
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        *ret_msg = m;
}

static const struct {
        const char *field;
        const char *want;
} confined[] = {
        { "CapInh", "0000000000000000" },
        { "CapPrm", "0000000000000000" },
        { "CapEff", "0000000000000000" },
        { "CapBnd", "0000000000000000" },
        { "CapAmb", "0000000000000000" },
        { "NoNewPrivs", "1" },
        { "Seccomp", "2" },
};

static int thread_exists(pid_t pid, pid_t tid) {
        char path[64];

        return status_path(pid, tid, path, sizeof(path)) == 0 && access(path, F_OK) == 0;
}

static int check_thread(pid_t pid, pid_t tid, char **ret_msg) {
        for (size_t i = 0; i < sizeof(confined) / sizeof(confined[0]); i++) {
                char *v = NULL;
                int r = proc_status_field(pid, tid, confined[i].field, &v);

                /* The thread ended after readdir(): nothing left to check. */
                if (r == -ENOENT && !thread_exists(pid, tid))
                        return 0;
                if (r < 0) {
                        set_msg(ret_msg, "pid %d thread %d: cannot read %s: %s", (int)pid, (int)tid,
                                confined[i].field, strerror(-r));
                        return r;
                }
                int ok = strcmp(v, confined[i].want) == 0;
                if (!ok)
                        set_msg(ret_msg, "pid %d thread %d: %s is %s, want %s", (int)pid, (int)tid,
                                confined[i].field, v, confined[i].want);
                free(v);
                if (!ok)
                        return -EPERM;
        }
        return 0;
}

int proc_check_confined(pid_t pid, char **ret_msg) {
        char path[64];
        struct dirent *de;
        unsigned threads = 0;
        DIR *d;
        int n = snprintf(path, sizeof(path), "/proc/%d/task", (int)pid), r = 0;

        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        d = opendir(path);
        if (!d) {
                r = -errno;
                set_msg(ret_msg, "%s: %s", path, strerror(-r));
                return r;
        }
        while (r == 0 && (de = readdir(d))) {
                char *end;
                long tid;

                if (de->d_name[0] == '.')
                        continue;
                errno = 0;
                tid = strtol(de->d_name, &end, 10);
                if (errno != 0 || *end != '\0' || tid <= 0)
                        continue;
                threads++;
                r = check_thread(pid, (pid_t)tid, ret_msg);
        }
        closedir(d);
        if (r == 0 && threads == 0) {
                set_msg(ret_msg, "%s: no threads", path);
                r = -ESRCH;
        }
        return r;
}

long proc_thread_switches(pid_t pid, const char *const *names, int *ret_threads) {
        char path[64];
        long total = 0;
        int threads = 0;
        struct dirent *de;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char comm[64] = "", p[300];
                bool wanted = false;
                FILE *f;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/proc/%d/task/%s/comm", (int)pid, de->d_name);
                f = fopen(p, "re");
                if (!f)
                        continue; /* the thread ended */
                if (fgets(comm, sizeof(comm), f))
                        comm[strcspn(comm, "\n")] = '\0';
                fclose(f);
                for (size_t i = 0; names[i]; i++)
                        wanted |= strcmp(comm, names[i]) == 0;
                if (!wanted)
                        continue;
                threads++;
                for (int vol = 0; vol < 2; vol++) {
                        char *v = NULL;
                        pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
                        if (proc_status_field(pid, tid,
                                              vol ? "voluntary_ctxt_switches"
                                                  : "nonvoluntary_ctxt_switches",
                                              &v) == 0)
                                total += strtol(v, NULL, 10);
                        free(v);
                }
        }
        closedir(d);
        if (ret_threads)
                *ret_threads = threads;
        return total;
}
