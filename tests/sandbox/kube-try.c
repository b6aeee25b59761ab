/* SPDX-License-Identifier: Apache-2.0 */
/* kube-try: the Kubernetes API client inside the daemon's real seccomp
 * filter. It makes a kube (before the lock-down, as the daemon does),
 * locks down with sbx_lockdown(), starts cdiplug-kube, publishes a pool of
 * three devices and looks one claim up; it prints the claim's outcome,
 * keeps the client running (the test wipes the slices and watches them
 * come back) until its stdin closes, then frees the kube and exits 0.
 * Test-only (tests/sandbox/extra.cmake), like sbx-try.
 *
 *   kube-try KUBECONFIG NODE DRIVER api|noapi
 *
 * "noapi" locks down without the "dra" groups: the client must fail to
 * connect (and the lookup says so) rather than the process dying.
 * A second line says what glibc's resolver would get under the filter: a
 * UDP socket and sendmmsg to 127.0.0.1:9, 0 or -errno each. A third what
 * socket() gets for each protocol by number: TCP and UDP named, UDP-Lite
 * and MPTCP (which share their types), 0 or -errno each.
 * Exit status: 0, 125 when the lock-down failed, 126 for bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kube.h"
#include "sandbox.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool answered;
static struct kube_claim got;

/* What re-resolving the API server's name needs (api-sockets, api-dns). */
static void udp_line(void) {
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9) };
        struct iovec iov = { .iov_base = (char[]){ "x" }, .iov_len = 1 };
        struct mmsghdr m = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), sock = fd < 0 ? -errno : 0;
        int sent = -EBADF;

        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0)
                sent = sendmmsg(fd, &m, 1, MSG_NOSIGNAL) == 1 ? 0 : -errno;
        printf("udp socket=%d sendmmsg=%d\n", sock, sent);
        if (fd >= 0)
                close(fd);
}

static int try_socket(int type, int proto) {
        int fd = socket(AF_INET6, type | SOCK_CLOEXEC, proto);

        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

/* Only what the API client needs passes the filter: the protocol too. */
static void protocols_line(void) {
        printf("tcp=%d udp=%d udplite=%d mptcp=%d\n", try_socket(SOCK_STREAM, IPPROTO_TCP),
               try_socket(SOCK_DGRAM, IPPROTO_UDP), try_socket(SOCK_DGRAM, 136),
               try_socket(SOCK_STREAM, 262));
}

static void on_claim(void *ctx, struct kube_claim *c) {
        (void)ctx;
        pthread_mutex_lock(&mu);
        got = *c;
        answered = true;
        pthread_cond_signal(&cond);
        pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv) {
        struct kube_settings s;
        struct sbx_options o = { 0 };
        struct sbx_error e = { 0 };
        struct kube *k = NULL;
        cJSON *devs;
        char buf[64];
        int r;

        if (argc != 5 || (strcmp(argv[4], "api") != 0 && strcmp(argv[4], "noapi") != 0))
                return 126;
        s = (struct kube_settings){ .kubeconfig = argv[1],
                                    .node_name = argv[2],
                                    .driver = argv[3] };
        r = kube_new(&s, &k);
        if (r < 0) {
                fprintf(stderr, "kube-try: kube_new: %s\n", strerror(-r));
                return 126;
        }
        o.api_access = strcmp(argv[4], "api") == 0;
        r = sbx_lockdown(&o, &e);
        if (r < 0) {
                fprintf(stderr, "kube-try: lock-down at %s: %s\n", e.step, strerror(-r));
                return 125;
        }
        devs = cJSON_Parse("[{\"name\":\"d0\"},{\"name\":\"d1\"},{\"name\":\"d2\"}]");
        if (kube_pool_set(k, "node1/example.com/serial", devs) < 0 || kube_start(k) < 0 ||
            kube_claim_get(k, "default", "c", "u", on_claim, NULL) < 0)
                return 126;
        pthread_mutex_lock(&mu);
        while (!answered)
                pthread_cond_wait(&cond, &mu);
        pthread_mutex_unlock(&mu);
        printf("claim err=%d results=%zu\n", got.err, got.n_results);
        udp_line();
        protocols_line();
        fflush(stdout);
        kube_claim_clear(&got);
        while (read(0, buf, sizeof(buf)) > 0)
                ;
        kube_free(k);
        return 0;
}
