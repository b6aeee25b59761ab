/* SPDX-License-Identifier: Apache-2.0 */
/* --user: serving as an unprivileged identity that owns the two dirs; and
 * a lock-down that cannot be completed stops the daemon, loudly. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "proc_status.h"

static struct env e;

static void stop(void) {
        env_cleanup(&e);
}

TestSuite(identity, .fini = stop, .timeout = 60);

static const char config[] =
        "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }";

Test(identity, serves_as_the_configured_user) {
        if (geteuid() != 0)
                cr_skip_test("needs root to switch identity");
        env_init(&e);
        env_write(&e, "config.json", config);
        env_touch(&e, "dev/ttyUSB0");
        /* What cdiplug(8) tells operators: the user owns the two dirs. */
        chmod(e.root, 0755);
        mkdir(e.kubelet_dir, 0755);
        cr_assert_eq(chown(e.kubelet_dir, 65534, 65534), 0);
        cr_assert_eq(chown(e.cdi_dir, 65534, 65534), 0);
        struct tk *tk;
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        /* Connecting needs write permission on kubelet.sock, which a stock
         * kubelet creates root-owned 0755 (see cdiplug(8): --user). */
        char *sock;
        cr_assert(asprintf(&sock, "%s/kubelet.sock", e.kubelet_dir) > 0);
        cr_assert_eq(chmod(sock, 0666), 0);
        free(sock);
        env_spawn(&e, "--user", "65534:65534", NULL);
        int r = tk_wait_registered(tk, "example.com/serial", 1, 10000);
        char *log = env_read(e.log);
        cr_assert_eq(r, 0, "%s", log);
        free(log);
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        cr_assert_eq(call_allocate(ch, NULL, NULL, "ttyUSB0", NULL, NULL), GRPC_STATUS_OK);
        grpc_channel_destroy(ch);

        char *uid = NULL, *gid = NULL, *groups = NULL, *msg = NULL;
        cr_assert_eq(proc_status_field(e.pid, 0, "Uid", &uid), 0);
        cr_assert_eq(proc_status_field(e.pid, 0, "Gid", &gid), 0);
        cr_assert_eq(proc_status_field(e.pid, 0, "Groups", &groups), 0);
        cr_assert_str_eq(uid, "65534\t65534\t65534\t65534");
        cr_assert_str_eq(gid, "65534\t65534\t65534\t65534");
        cr_assert_str_eq(groups, "");
        cr_assert_eq(proc_check_confined(e.pid, &msg), 0, "%s", msg);
        char *path;
        struct stat st;
        cr_assert(asprintf(&path, "%s/example.com-serial.json", e.cdi_dir) > 0);
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_uid, 65534, "the spec is written by the serving identity");
        cr_assert_eq(st.st_mode & 07777, 0644);
        free(path);
        free(uid);
        free(gid);
        free(groups);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
}

Test(identity, refuses_to_serve_half_confined) {
        if (geteuid() != 0)
                cr_skip_test("needs root to start unprivileged");
        env_init(&e);
        env_write(&e, "config.json", config);
        chmod(e.root, 0755);
        chmod(e.config, 0644);
        /* Started without root's capabilities, the lock-down cannot verify
         * it dropped them: it must stop, naming the step, and not serve. */
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open(e.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                dup2(fd, 2);
                if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
                        _exit(99);
                execl(CDIPLUG_BIN, CDIPLUG_BIN, "serve", "--config", e.config, "--kubelet-dir",
                      e.kubelet_dir, "--cdi-dir", "/tmp", "--host-root", e.host, (char *)NULL);
                _exit(98);
        }
        int status;
        waitpid(pid, &status, 0);
        char *log = env_read(e.log);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, log);
        cr_assert_not_null(strstr(log, "sandbox:"), "%s", log);
        cr_assert_not_null(strstr(log, "failed"), "%s", log);
        cr_assert_eq(env_dir_entries(e.kubelet_dir) <= 0, 1, "nothing may be served");
        free(log);
}
