/* SPDX-License-Identifier: Apache-2.0 */
/* Non-root pods: a real runtime (podman with runc, as containerd and CRI-O
 * would use it) consumes the spec the daemon wrote, and a container running
 * as uid 1000 opens a node that is 0600 root on the host. That works only
 * because the spec leaves the node's uid/gid unset: the reference CDI
 * library then gives the node the container process's uid and gid. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"

#define PODMAN "/usr/bin/podman"
#define RUNC "/usr/sbin/runc"
#define BUSYBOX "/bin/busybox"

static struct env e;
static char node[64];

static void stop(void) {
        env_cleanup(&e);
        if (*node)
                unlink(node);
}

TestSuite(podman, .fini = stop, .timeout = 120);

static void need_podman(void) {
        if (geteuid() != 0)
                cr_skip_test("podman runs containers as root here; not root");
        if (access(PODMAN, X_OK) != 0 || access(RUNC, X_OK) != 0)
                cr_skip_test("podman and runc are not installed (tests/deps.sh installs them)");
        if (access(BUSYBOX, X_OK) != 0)
                cr_skip_test("busybox-static is not installed (tests/deps.sh installs it)");
}

static void copy_file(const char *from, const char *to, mode_t mode) {
        char buf[65536];
        ssize_t n;
        int in = open(from, O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        cr_assert(in >= 0 && out >= 0, "copy %s to %s: %s", from, to, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t)n), n);
        cr_assert_eq(n, 0);
        close(in);
        close(out);
}

/* A root file system uid 1000 can read: busybox and its sh. */
static char *make_rootfs(void) {
        char *rootfs, *bin, *box, *sh;

        cr_assert_geq(asprintf(&rootfs, "%s/rootfs", e.root), 0);
        cr_assert_geq(asprintf(&bin, "%s/bin", rootfs), 0);
        cr_assert_geq(asprintf(&box, "%s/busybox", bin), 0);
        cr_assert_geq(asprintf(&sh, "%s/sh", bin), 0);
        cr_assert_eq(mkdir(rootfs, 0755), 0);
        cr_assert_eq(mkdir(bin, 0755), 0);
        /* The env's temp dir is 0700: uid 1000 never looks through it, the
         * runtime mounts the rootfs for the container. */
        copy_file(BUSYBOX, box, 0755);
        cr_assert_eq(symlink("busybox", sh), 0);
        free(bin);
        free(box);
        free(sh);
        return rootfs;
}

/* Run podman in a private mount namespace whose CDI dirs are our CDI dir
 * only, so no spec of the host's is seen and none of ours leaks to it.
 * Returns the wait status; *ret_out gets stdout+stderr. */
static int run_podman(const char *const *args, char **ret_out) {
        int fds[2];
        pid_t pid;
        char *out = NULL;
        size_t len = 0;
        int status;

        cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                dup2(fds[1], 1);
                dup2(fds[1], 2);
                if (unshare(CLONE_NEWNS) != 0 ||
                    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
                        perror("private mount namespace");
                        _exit(126);
                }
                mkdir("/var/run/cdi", 0755);
                mkdir("/etc/cdi", 0755);
                if (mount(e.cdi_dir, "/var/run/cdi", NULL, MS_BIND, NULL) != 0 ||
                    mount(e.cdi_dir, "/etc/cdi", NULL, MS_BIND, NULL) != 0) {
                        perror("bind the CDI dir");
                        _exit(126);
                }
                execv(PODMAN, (char *const *)args);
                perror("exec podman");
                _exit(127);
        }
        close(fds[1]);
        for (;;) {
                struct pollfd p = { .fd = fds[0], .events = POLLIN };
                char buf[4096];
                ssize_t n;

                if (poll(&p, 1, 90000) <= 0) {
                        kill(pid, SIGKILL);
                        break;
                }
                n = read(fds[0], buf, sizeof(buf));
                if (n <= 0)
                        break;
                out = realloc(out, len + (size_t)n + 1);
                cr_assert_not_null(out);
                memcpy(out + len, buf, (size_t)n);
                len += (size_t)n;
        }
        close(fds[0]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        if (!out)
                out = strdup("");
        else
                out[len] = '\0';
        *ret_out = out;
        return status;
}

/* Serve the root-only node (with the selector keys in extra, after a
 * comma, unless NULL), allocate it, and have uid 1000 write to it in a
 * container: its uid, then the node's owner and mode as the container
 * sees them, go to *ret_out, the spec to *ret_spec. Returns podman's wait
 * status. */
static int write_as_1000(const char *extra, char **ret_out, char **ret_spec) {
        V1beta1__AllocateResponse *resp = NULL;
        char *msg = NULL, *config, *rootfs, *spec;
        struct tk *tk;

        env_init(&e);
        /* A real node on the real /dev (the runtime stats the host path),
         * the null device's numbers so writes succeed, root-only. */
        snprintf(node, sizeof(node), "/dev/cdiplug-test-%d", (int)getpid());
        unlink(node);
        cr_assert_eq(mknod(node, S_IFCHR | 0600, makedev(1, 3)), 0, "mknod %s: %s", node,
                     strerror(errno));
        cr_assert_eq(chmod(node, 0600), 0);
        cr_assert_geq(asprintf(&config,
                               "{ \"resources\": [ { \"name\": \"example.com/nonroot\","
                               " \"match\": [ { \"path\": \"%s\"%s%s } ] } ] }",
                               node, extra ? ", " : "", extra ? extra : ""),
                      0);
        env_write(&e, "config.json", config);
        env_spawn(&e, "--host-root", "/", NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/nonroot", 1, 10000), 0);
        grpc_channel *ch = tk_dial(tk, "example.com/nonroot");
        cr_assert_eq(call_allocate(ch, &resp, &msg, node + strlen("/dev/"), NULL, NULL),
                     GRPC_STATUS_OK, "%s", msg ? msg : "");
        cr_assert_eq(resp->n_container_responses, 1);
        cr_assert_eq(resp->container_responses[0]->n_cdi_devices, 1);
        const char *cdi_name = resp->container_responses[0]->cdi_devices[0]->name;
        cr_assert_geq(asprintf(&spec, "%s/example.com-nonroot.json", e.cdi_dir), 0);
        *ret_spec = env_read(spec);
        cr_assert_not_null(*ret_spec);

        rootfs = make_rootfs();
        /* The node sits at its host path inside the container too. */
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "id -u; stat -c 'NODE %%u %%a' %s; echo data > %s && echo WROTE",
                 node, node);
        const char *args[] = {
                PODMAN,
                "--runtime",
                RUNC,
                "run",
                "--rm",
                "--network",
                "none",
                /* This sandbox's root lacks CAP_SYS_RESOURCE: keep the
                 * limits below the inherited hard ones. */
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
                "--user",
                "1000:1000",
                "--device",
                cdi_name,
                "--rootfs",
                rootfs,
                "/bin/busybox",
                "sh",
                "-c",
                cmd,
                NULL,
        };
        int status = run_podman(args, ret_out);
        free(spec);
        free(rootfs);
        free(config);
        free(msg);
        v1beta1__allocate_response__free_unpacked(resp, NULL);
        grpc_channel_destroy(ch);
        tk_stop(tk);
        return status;
}

Test(podman, uid_1000_opens_a_root_only_node_through_the_allocated_cdi_name) {
        char *out = NULL, *spec = NULL;
        struct stat st;

        need_podman();
        int status = write_as_1000(NULL, &out, &spec);
        /* The spec leaves ownership to the runtime. */
        cr_assert_null(strstr(spec, "\"uid\""), "no uid in the spec: %s", spec);
        cr_assert_null(strstr(spec, "\"gid\""), "no gid in the spec: %s", spec);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "podman failed (%d): %s", status,
                  out);
        cr_assert_not_null(strstr(out, "1000\n"), "container runs as uid 1000: %s", out);
        cr_assert_not_null(strstr(out, "WROTE"), "uid 1000 could not write the node: %s", out);

        /* On the host the node stays root-only. */
        cr_assert_eq(stat(node, &st), 0);
        cr_assert_eq(st.st_uid, 0);
        cr_assert_eq(st.st_mode & 07777, 0600);
        free(out);
        free(spec);
}

Test(podman, mode_0600_keeps_the_node_the_container_users) {
        char *out = NULL, *spec = NULL;

        need_podman();
        int status = write_as_1000("\"mode\": \"0600\"", &out, &spec);
        /* 0600 is 384; ownership still left to the runtime. */
        cr_assert_not_null(strstr(spec, "\"fileMode\":\t384"), "%s", spec);
        cr_assert_null(strstr(spec, "\"uid\""), "%s", spec);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "podman failed (%d): %s", status,
                  out);
        cr_assert_not_null(strstr(out, "NODE 1000 600\n"), "the node is uid 1000's, mode 0600: %s",
                           out);
        cr_assert_not_null(strstr(out, "WROTE"), "uid 1000 could not write the node: %s", out);
        free(out);
        free(spec);
}

Test(podman, owner_0_with_mode_0600_locks_uid_1000_out) {
        char *out = NULL, *spec = NULL;

        need_podman();
        int status = write_as_1000("\"mode\": \"0600\", \"owner\": 0", &out, &spec);
        cr_assert_not_null(strstr(spec, "\"uid\":\t0"), "%s", spec);
        cr_assert(WIFEXITED(status), "podman failed (%d): %s", status, out);
        cr_assert_not_null(strstr(out, "NODE 0 600\n"), "the override holds in the container: %s",
                           out);
        cr_assert_null(strstr(out, "WROTE"), "uid 1000 wrote a root-only node: %s", out);
        free(out);
        free(spec);
}
