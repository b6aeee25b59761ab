/* SPDX-License-Identifier: Apache-2.0 */
/* A ListAndWatch stream that ends because its resource goes (a reload
 * removed it) or the daemon stops ends with a gRPC status the kubelet can
 * log, UNAVAILABLE with a message, seen here by a real gRPC client; not
 * with an HTTP/2 reset or a dropped connection. */
#include <criterion/criterion.h>
#include <grpc/support/alloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"
#include "stuck.h"
#include "rpc.h"

#define A "example.com/sa"
#define B "example.com/sb"
#define RES(name, dev) "{ \"name\": \"" name "\", \"match\": [ { \"path\": \"/dev/" dev "\" } ] }"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(stream_end, .fini = stop, .timeout = 60);

/* Serve A and B, and open a stream of our own on each, past its first list. */
static void serve(struct lw_stream **ret_a, struct lw_stream **ret_b, grpc_channel **ret_cha,
                  grpc_channel **ret_chb) {
        env_init(&e);
        env_touch(&e, "dev/sa0");
        env_touch(&e, "dev/sb0");
        env_write(&e, "config.json", "{ \"resources\": [ " RES(A, "sa0") ", " RES(B, "sb0") " ] }");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, A, 1, 10000), 0);
        cr_assert_eq(tk_wait_registered(tk, B, 1, 10000), 0);
        *ret_cha = tk_dial(tk, A);
        *ret_chb = tk_dial(tk, B);
        *ret_a = lw_open(*ret_cha);
        *ret_b = lw_open(*ret_chb);
        V1beta1__ListAndWatchResponse *la = lw_next(*ret_a, 5000), *lb = lw_next(*ret_b, 5000);
        cr_assert(la && lb, "no first list");
        v1beta1__list_and_watch_response__free_unpacked(la, NULL);
        v1beta1__list_and_watch_response__free_unpacked(lb, NULL);
}

/* Whether the stream ended UNAVAILABLE with msg_has in its message (it
 * must end UNAVAILABLE either way). */
static bool unavailable_with(struct lw_stream *s, const char *msg_has) {
        char *msg = NULL;
        grpc_status_code st = lw_status(s, &msg, 10000);
        cr_assert_eq(st, GRPC_STATUS_UNAVAILABLE, "status %d (%s), want UNAVAILABLE", st, msg);
        bool has = msg && strstr(msg, msg_has);
        if (!has)
                cr_log_warn("message \"%s\", want \"%s\"", msg, msg_has);
        gpr_free(msg);
        return has;
}

static void assert_unavailable(struct lw_stream *s, const char *msg_has) {
        cr_assert(unavailable_with(s, msg_has), "the stream's message lacks \"%s\"", msg_has);
}

Test(stream_end, a_removed_resource_ends_its_streams_with_unavailable) {
        struct lw_stream *a, *b;
        grpc_channel *cha, *chb;
        serve(&a, &b, &cha, &chb);

        env_write(&e, "config.json", "{ \"resources\": [ " RES(A, "sa0") " ] }");
        kill(e.pid, SIGHUP);
        assert_unavailable(b, "removed from cdiplug's configuration");
        cr_assert_geq(log_wait(e.log, "reload: 0 added, 0 changed, 1 removed", 10000), 0);

        /* A stays served. */
        V1beta1__AllocateResponse *r = NULL;
        cr_assert_eq(call_allocate(cha, &r, NULL, "sa0", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        cr_assert_eq(kill(e.pid, 0), 0, "the daemon is gone");

        lw_close(a);
        lw_close(b);
        grpc_channel_destroy(cha);
        grpc_channel_destroy(chb);
}

Test(stream_end, sigterm_ends_every_stream_with_unavailable) {
        struct lw_stream *a, *b;
        grpc_channel *cha, *chb;
        serve(&a, &b, &cha, &chb);

        /* The daemon exits once the statuses are out. A client that writes
         * to the closed socket before it has read its status (the ack of
         * the server's closing PING) sees the transport's own error instead,
         * which a loaded machine makes possible: so both streams must end
         * UNAVAILABLE, and the message must reach at least one of them. */
        kill(e.pid, SIGTERM);
        bool ma = unavailable_with(a, "cdiplug is stopping");
        bool mb = unavailable_with(b, "cdiplug is stopping");
        cr_assert(ma || mb, "neither stream was told \"cdiplug is stopping\"");
        int status = env_stop(&e, SIGTERM, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);

        lw_close(a);
        lw_close(b);
        grpc_channel_destroy(cha);
        grpc_channel_destroy(chb);
}

/* A stream that can take neither its list nor its status holds the
 * daemon's stop a bounded time only: then every call is cancelled. */
Test(stream_end, a_peer_that_never_reads_does_not_hold_up_sigterm) {
        struct lw_stream *a, *b;
        grpc_channel *cha, *chb;
        serve(&a, &b, &cha, &chb);
        char *sock;
        cr_assert(asprintf(&sock, "%s/cdiplug-example.com-sa.sock", e.kubelet_dir) > 0);
        int fd = stuck_stream(sock, DP_METHOD_LIST_AND_WATCH);
        /* The test kubelet's stream, ours above, and this one. */
        cr_assert_geq(log_wait_count(e.log, "\"" A "\": ListAndWatch stream opened", 3, 10000), 0);

        /* The daemon exits once the statuses are out. A client that writes
         * to the closed socket before it has read its status (the ack of
         * the server's closing PING) sees the transport's own error instead,
         * which a loaded machine makes possible: so both streams must end
         * UNAVAILABLE, and the message must reach at least one of them. */
        kill(e.pid, SIGTERM);
        bool ma = unavailable_with(a, "cdiplug is stopping");
        bool mb = unavailable_with(b, "cdiplug is stopping");
        cr_assert(ma || mb, "neither stream was told \"cdiplug is stopping\"");
        int status = env_stop(&e, SIGTERM, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);

        close(fd);
        free(sock);
        lw_close(a);
        lw_close(b);
        grpc_channel_destroy(cha);
        grpc_channel_destroy(chb);
}
