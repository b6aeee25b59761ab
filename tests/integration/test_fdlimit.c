/* SPDX-License-Identifier: Apache-2.0 */
/* Out of file descriptors: a client holding hundreds of connections to a
 * daemon with a low RLIMIT_NOFILE. accept fails with EMFILE while the
 * connections stay queued; the daemon must neither spin nor flood its log,
 * must keep answering on the connections it has, and must take new ones
 * once fds are free again. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"

#define RESOURCE "example.com/serial"
#define HELD 400

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(fdlimit, .fini = stop, .timeout = 90);

/* A connection that waits up to a second for room in the daemon's
 * backlog (a unix connect honours SO_SNDTIMEO); -1 once there is none. */
static int dial_raw(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = 1 };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert(fd >= 0, "socket: %s", strerror(errno));
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void allocate_ok(grpc_channel *ch, const char *when) {
        V1beta1__AllocateResponse *r = NULL;
        char *msg = NULL;
        grpc_status_code st = call_allocate(ch, &r, &msg, "ttyS0", NULL, NULL);
        cr_assert_eq(st, GRPC_STATUS_OK, "Allocate %s: status %d (%s)", when, st, msg ? msg : "");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        free(msg);
}

Test(fdlimit, out_of_fds_logs_little_and_keeps_serving) {
        struct rlimit ours = { HELD + 256, HELD + 256 }, theirs = { 256, 256 };
        int held[HELD], n_held = 0;
        char *sock;

        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"" RESOURCE
                  "\", \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }");
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &ours), 0, "%s", strerror(errno));
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, RESOURCE, 1, 10000), 0);
        cr_assert_eq(prlimit(e.pid, RLIMIT_NOFILE, &theirs, NULL), 0, "prlimit: %s",
                     strerror(errno));
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        allocate_ok(ch, "before the flood");

        cr_assert(asprintf(&sock, "%s/cdiplug-example.com-serial.sock", e.kubelet_dir) > 0);
        for (int i = 0; i < HELD; i++) {
                int fd = dial_raw(sock);
                if (fd < 0)
                        break; /* the daemon is out of fds and its backlog full */
                held[n_held++] = fd;
        }
        cr_assert_gt(n_held, 256, "only %d connections got through", n_held);
        cr_assert_eq(log_wait(e.log, "Too many open files", 10000), 0,
                     "the daemon never ran out of fds");

        /* The connection the daemon already has keeps working. */
        allocate_ok(ch, "while out of fds");

        for (int i = 0; i < n_held; i++)
                close(held[i]);
        /* Once fds are free, the queued connections (closed now) are
         * taken and a new one is served. A client that connects while the
         * backlog is still full is refused and retries, as the kubelet
         * does; the test waits for the daemon's word instead. */
        cr_assert_eq(log_wait(e.log, "accepting connections on", 10000), 0,
                     "accepting never resumed");
        grpc_channel *fresh = tk_dial(tk, RESOURCE);
        allocate_ok(fresh, "on a new connection after the flood");
        grpc_channel_destroy(fresh);
        grpc_channel_destroy(ch);

        unsigned lines = log_count(e.log, "Too many open files");
        cr_assert_leq(lines, 5, "the accept failure was logged %u times", lines);
        free(sock);
}
