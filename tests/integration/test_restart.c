/* SPDX-License-Identifier: Apache-2.0 */
/* Kubelet restarts: the kubelet deletes every socket in its dir and makes
 * a new kubelet.sock; every resource must come back, every time. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"

static const char config[] =
        "{ \"resources\": [\n"
        "  { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },\n"
        "  { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ], \"shares\": 8 },\n"
        "  { \"name\": \"example.com/kvm\", \"match\": [ { \"path\": \"/dev/kvm\" } ] } ] }\n";

static const char *const resources[] = { "example.com/serial", "example.com/fuse",
                                         "example.com/kvm" };

static void setup(struct env *e) {
        env_init(e);
        env_write(e, "config.json", config);
        env_touch(e, "dev/ttyUSB0");
        env_touch(e, "dev/fuse");
        env_touch(e, "dev/kvm");
}

static void all_registered(struct tk *tk, unsigned n, int round) {
        for (size_t i = 0; i < 3; i++)
                cr_assert_eq(tk_wait_registered(tk, resources[i], n, 10000), 0,
                             "round %d: %s registered %u times, want %u", round, resources[i],
                             tk_registrations(tk, resources[i]), n);
}

Test(restart, fifty_kubelet_restarts_reregister_every_resource, .timeout = 240) {
        struct env e;
        struct tk *tk;
        int fds_early = 0;

        setup(&e);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 0);
        fds_early = env_fd_count(e.pid);
        for (int round = 1; round <= 50; round++) {
                unsigned before[3];
                for (size_t i = 0; i < 3; i++)
                        before[i] = tk_registrations(tk, resources[i]);
                /* Both orders the kubelet's events can arrive in. */
                cr_assert_eq(tk_restart(tk, round % 2 == 0), 0);
                for (size_t i = 0; i < 3; i++)
                        cr_assert_eq(tk_wait_registered(tk, resources[i], before[i] + 1, 10000), 0,
                                     "round %d: %s did not re-register", round, resources[i]);
        }
        /* grpc closes a dead kubelet's connections asynchronously (slower
         * under ASan), so give it a bounded while to settle; a leak of one
         * fd per restart would stay 50 above the count before them forever. */
        cr_assert_gt(fds_early, 0);
        int fds_late = env_wait_fds(e.pid, fds_early, 10000);
        cr_assert_leq(fds_late, fds_early, "open fds grew from %d to %d over 50 restarts",
                      fds_early, fds_late);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
        env_cleanup(&e);
}

/* Registrations that arrive within a while after the expected ones. */
static void no_more_registrations(struct tk *tk, const unsigned *want, const char *why) {
        /* A second Register followed the first within milliseconds when
         * the daemon still made them; 300 ms is ample to see one. */
        usleep(300000);
        for (size_t i = 0; i < 3; i++)
                cr_assert_eq(tk_registrations(tk, resources[i]), want[i],
                             "%s: %s registered %u times, want %u", why, resources[i],
                             tk_registrations(tk, resources[i]), want[i]);
}

/* The kubelet deletes in name order, so our sockets go while the dead
 * kubelet's kubelet.sock is still there; the new one comes last. One
 * Register per resource per restart, not one for each event. */
Test(restart, the_kubelets_own_order_registers_each_resource_once, .timeout = 60) {
        struct env e;
        struct tk *tk;
        unsigned want[3];

        setup(&e);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 0);
        for (int round = 1; round <= 3; round++) {
                cr_assert_eq(tk_restart(tk, false), 0);
                all_registered(tk, (unsigned)round + 1, round);
                for (size_t i = 0; i < 3; i++)
                        want[i] = (unsigned)round + 1;
                no_more_registrations(tk, want, "after a kubelet restart");
        }
        tk_stop(tk);
        env_cleanup(&e);
}

/* Someone deletes one of our sockets while the kubelet runs: the socket
 * comes back and serves, and the kubelet, whose connection outlives the
 * file, is not asked to register again. */
Test(restart, a_socket_deleted_alone_is_recreated_without_registering_again, .timeout = 60) {
        struct env e;
        struct tk *tk;
        unsigned want[3];
        char *path;
        struct stat st;

        setup(&e);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 0);
        for (size_t i = 0; i < 3; i++)
                want[i] = tk_registrations(tk, resources[i]);
        cr_assert(asprintf(&path, "%s/cdiplug-example.com-kvm.sock", e.kubelet_dir) > 0);
        cr_assert_eq(unlink(path), 0);
        int waited = 0;
        while (stat(path, &st) != 0 && waited++ < 500)
                usleep(10000);
        cr_assert(S_ISSOCK(st.st_mode), "%s was not re-created", path);
        no_more_registrations(tk, want, "after deleting one socket");
        /* The new socket serves: a fresh connection gets an answer. */
        grpc_channel *ch = tk_dial(tk, "example.com/kvm");
        V1beta1__AllocateResponse *resp = NULL;
        cr_assert_eq(call_allocate(ch, &resp, NULL, "kvm", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(resp, NULL);
        grpc_channel_destroy(ch);
        free(path);
        tk_stop(tk);
        env_cleanup(&e);
}

Test(restart, waits_for_a_kubelet_dir_that_does_not_exist_yet, .timeout = 60) {
        struct env e;
        struct tk *tk;

        setup(&e);
        char *nested;
        cr_assert(asprintf(&nested, "%s/not/yet", e.kubelet_dir) > 0);
        free(e.kubelet_dir);
        e.kubelet_dir = nested;
        env_spawn(&e, NULL);
        /* The daemon is up and waiting on inotify; now the kubelet comes. */
        char *parent;
        cr_assert(asprintf(&parent, "%s/kubelet", e.root) > 0);
        mkdir(parent, 0755);
        char *mid;
        cr_assert(asprintf(&mid, "%s/not", parent) > 0);
        mkdir(mid, 0755);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 0);
        free(parent);
        free(mid);
        tk_stop(tk);
        env_cleanup(&e);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st, (void)flag, (void)ftw;
        return remove(path);
}

Test(restart, survives_the_kubelet_dir_being_removed_and_recreated, .timeout = 60) {
        struct env e;
        struct tk *tk;

        setup(&e);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 0);
        tk_stop(tk);
        nftw(e.kubelet_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        all_registered(tk, 1, 1);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
        env_cleanup(&e);
}

/* A kubelet.sock bound and not listening: what a starting kubelet shows
 * between its bind and its listen, or a dead one leaves behind. */
static int refusing_socket(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert_geq(fd, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s", path);
        return fd;
}

/* The delay of the first "retrying in N ms" after the last "kubelet.sock
 * appeared" in the log, waiting for it. */
static long retry_after_appeared(const struct env *e) {
        for (unsigned n = log_count(e->log, "retrying in") + 1;; n++) {
                cr_assert_geq(log_wait_count(e->log, "retrying in", n, 10000), 0,
                              "no Register retried after the new kubelet.sock");
                FILE *f = fopen(e->log, "r");
                char line[1024];
                long ms = -1;
                bool after = false;
                cr_assert_not_null(f);
                while (fgets(line, sizeof(line), f)) {
                        const char *p = strstr(line, "retrying in ");
                        if (strstr(line, "kubelet.sock appeared"))
                                after = true, ms = -1;
                        else if (after && p && ms < 0)
                                ms = strtol(p + strlen("retrying in "), NULL, 10);
                }
                fclose(f);
                if (ms >= 0)
                        return ms;
        }
}

/* A kubelet restart on a real node: the old kubelet.sock refuses while the
 * kubelet is down (every Register fails, the back-off grows), then the new
 * kubelet binds its socket, which refuses until it listens. That refusal
 * is retried in milliseconds: what failed against the dead kubelet says
 * nothing about the new one (it used to wait out 2 s of back-off). */
Test(restart, a_new_kubelet_sock_that_refuses_is_retried_at_once, .timeout = 60) {
        struct env e;
        struct tk *tk;
        char *sock;

        env_init(&e);
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": "
                  "\"/dev/fuse\" } ], \"shares\": 8 } ] }");
        env_touch(&e, "dev/fuse");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        cr_assert(asprintf(&sock, "%s/kubelet.sock", e.kubelet_dir) > 0);
        tk_stop(tk);

        /* The dead kubelet's socket: six refusals, the back-off at 64 ms. */
        int fd = refusing_socket(sock);
        cr_assert_geq(log_wait_count(e.log, "retrying in", 6, 10000), 0);
        close(fd);
        cr_assert_eq(unlink(sock), 0);
        /* The new kubelet, bound, not yet listening. */
        fd = refusing_socket(sock);
        cr_assert_geq(log_wait_count(e.log, "kubelet.sock appeared", 2, 10000), 0);
        long ms = retry_after_appeared(&e);
        cr_assert_lt(ms, 100, "the new kubelet's first refusal waits %ld ms", ms);
        close(fd);
        cr_assert_eq(unlink(sock), 0);

        /* It listens: registered. */
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, "example.com/fuse", 1, 10000), 0);
        tk_stop(tk);
        free(sock);
        env_cleanup(&e);
}
