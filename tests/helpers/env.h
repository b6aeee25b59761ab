/* SPDX-License-Identifier: Apache-2.0 */
/* Integration-test environment: a temp dir with a fake host root, a
 * kubelet dir and a CDI dir, and the real cdiplug binary run against them. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct env {
        char *root;        /* the temp dir */
        char *host;        /* fake host root: <root>/host */
        char *kubelet_dir; /* <root>/kubelet */
        char *cdi_dir;     /* <root>/cdi */
        char *config;      /* <root>/config.json */
        char *log;         /* <root>/daemon.log */
        /* <root>/pod-resources.sock: the daemon's PodResources socket,
         * never the host's; a test serves it with tk_pr_start(). */
        char *podres;
        pid_t pid;
};

void env_init(struct env *e);
void env_cleanup(struct env *e); /* stops the daemon, removes the dir */
void env_write(const struct env *e, const char *rel, const char *text);
void env_touch(const struct env *e, const char *host_rel); /* a fake device node */
void env_rm(const struct env *e, const char *host_rel);

/* Start `cdiplug serve` with the env's dirs plus extra args (NULL-ended). */
void env_spawn(struct env *e, ...);
/* Send sig and wait up to timeout_ms; returns the wait status, or -1. */
int env_stop(struct env *e, int sig, int timeout_ms);
/* Run cdiplug with args (NULL-ended), capturing stdout+stderr into *out. */
int env_run(const struct env *e, char **out, ...);
/* Whole file, or NULL. */
char *env_read(const char *path);
/* Number of open fds of a process. */
int env_fd_count(pid_t pid);
/* Wait up to timeout_ms for pid to hold at most max fds; returns the last count. */
int env_wait_fds(pid_t pid, int max, int timeout_ms);
/* Number of entries in a dir (not . and ..), -1 if missing. */
int env_dir_entries(const char *path);
