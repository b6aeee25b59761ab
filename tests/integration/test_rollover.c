/* SPDX-License-Identifier: Apache-2.0 */
/* Two instances on one node, as a rolling update with maxSurge runs them:
 * the new one registers beside the old one (its own socket names, from
 * POD_UID), and the old one, stopped, leaves every socket of the new one
 * in place, so the kubelet keeps an endpoint that answers. Without a pod
 * UID both use the same names: the newer takes them over and the older,
 * stopping, still removes nothing it did not bind. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "config.h"
#include "dra.h"
#include "env.h"
#include "fakeapi.h"
#include "http.h"
#include "kubelet.h"
#include "logwait.h"
#include "rpc.h"

#define DRIVER "cdiplug.example.com"
#define NODE "node1"
#define POOL NODE "/example.com/serial"
#define USB "example.com/usb"
#define UID_A "5b0c7d1e-0000-4000-8000-00000000000a"
#define UID_B "5b0c7d1e-0000-4000-8000-00000000000b"
#define WAIT_MS 10000

static struct env e;
static struct tk *tk;
static struct tk_dra *kd;
static struct fakeapi *api;
static char *kroot, *kubeconfig, *log_a;
static pid_t pid_a;

static void stop(void) {
        if (pid_a > 0) {
                kill(pid_a, SIGKILL);
                waitpid(pid_a, NULL, 0);
        }
        tk_dra_stop(kd);
        tk_stop(tk);
        env_cleanup(&e);
        fakeapi_free(api);
        free(kroot);
        free(kubeconfig);
        free(log_a);
        unsetenv("POD_UID");
}

TestSuite(rollover, .fini = stop, .timeout = 90);

static const char config[] =
        "{ \"dra\": { \"driver\": \"" DRIVER "\" }, \"resources\": ["
        " { \"name\": \"example.com/serial\", \"api\": \"dra\","
        " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] },"
        " { \"name\": \"" USB "\", \"match\": [ { \"path\": \"/dev/bus/usb/*/*\" } ] } ] }";

/* Where the next instance spawned serves /metrics ("": it does not). */
static char metrics_addr[32];

/* One instance, with POD_UID uid (NULL: unset), logging to the env's log. */
static void spawn(const char *uid) {
        if (uid)
                cr_assert_eq(setenv("POD_UID", uid, 1), 0);
        else
                unsetenv("POD_UID");
        /* Without a metrics address the arguments end (NULL) before it. */
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  *metrics_addr ? "--metrics-address" : NULL, metrics_addr, NULL);
}

/* Instance A runs and is registered both ways; the env is then B's. */
static void start_a(const char *uid) {
        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_touch(&e, "dev/bus/usb/001/001");
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "token-one");
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
        cr_assert_eq(asprintf(&kroot, "%s/kubelet-root", e.root) > 0, true);
        cr_assert_eq(mkdir(kroot, 0755), 0);
        env_write(&e, "config.json", config);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        spawn(uid);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 1, WAIT_MS), 0, "A never registered");
        cr_assert_eq(tk_wait_registered(tk, USB, 1, WAIT_MS), 0);
        pid_a = e.pid;
        log_a = e.log;
        cr_assert_eq(asprintf(&e.log, "%s/daemon-b.log", e.root) > 0, true);
}

/* SIGTERM to A, which must exit cleanly. */
static void stop_a(void) {
        int status = -1;

        cr_assert_eq(kill(pid_a, SIGTERM), 0);
        for (int i = 0; i < WAIT_MS / 10 && waitpid(pid_a, &status, WNOHANG) == 0; i++)
                usleep(10000); /* bounded wait for a child; waitpid has no timeout */
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "A: status %d", status);
        pid_a = 0;
}

/* The three sockets of the instance whose tag is tag (NULL: none). */
struct socks {
        char *reg, *dra, *dp;
};

static struct socks socks_of(const char *tag) {
        struct socks s = { 0 };
        char *dp = NULL;

        cr_assert_eq(dp_socket_name_instance(e.kubelet_dir, USB, tag, &dp), 0);
        cr_assert(asprintf(&s.reg, "%s/plugins_registry/" DRIVER "%s%s-reg.sock", kroot,
                           tag ? "-" : "", tag ? tag : "") > 0);
        cr_assert(asprintf(&s.dra, "%s/plugins/" DRIVER "/dra%s%s.sock", kroot, tag ? "-" : "",
                           tag ? tag : "") > 0);
        cr_assert(asprintf(&s.dp, "%s/%s", e.kubelet_dir, dp) > 0);
        free(dp);
        return s;
}

static void socks_free(struct socks *s) {
        free(s->reg);
        free(s->dra);
        free(s->dp);
}

/* Someone listens on path: what the kubelet needs of it. */
static bool answers(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0)
                close(fd);
        return ok;
}

static void expect_answering(const struct socks *s, const char *who) {
        cr_expect(answers(s->reg), "%s: %s", who, s->reg);
        cr_expect(answers(s->dra), "%s: %s", who, s->dra);
        cr_expect(answers(s->dp), "%s: %s", who, s->dp);
}

static void add_claim(const char *name, const char *uid) {
        _cleanup_free_ char *dev = NULL, *text = NULL;

        cr_assert_eq(dra_device_name("ttyS0", &dev), 0);
        cr_assert(asprintf(&text,
                           "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                           "\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\"},"
                           "\"status\":{\"allocation\":{\"devices\":{\"results\":["
                           "{\"request\":\"r\",\"driver\":\"" DRIVER "\",\"pool\":\"" POOL "\","
                           "\"device\":\"%s\"}]}}}}",
                           name, uid, dev) > 0);
        fakeapi_add_claim(api, cJSON_Parse(text));
}

/* Prepare through the endpoint the kubelet registered last. */
static void expect_prepare(const char *name, const char *uid) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r = NULL;
        struct tk_dra_claim c = { "ns", name, uid };

        add_claim(name, uid);
        cr_assert_eq(tk_dra_prepare(kd, DRIVER, "v1", &c, 1, &r), GRPC_STATUS_OK);
        cr_assert_eq(r->n_claims, 1);
        cr_expect_str_eq(r->claims[0]->value->error, "", "%s", r->claims[0]->value->error);
        cr_expect_eq(r->claims[0]->value->n_devices, 1);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
}

Test(rollover, two_instances_register_side_by_side_and_the_old_one_leaves_the_new) {
        char tag_a[9], tag_b[9];
        Pluginregistration__PluginInfo *info = NULL;

        cfg_instance_tag(UID_A, tag_a);
        cfg_instance_tag(UID_B, tag_b);
        start_a(UID_A);
        struct socks a = socks_of(tag_a), b = socks_of(tag_b);
        expect_answering(&a, "A");
        expect_prepare("before", "uid-before");

        spawn(UID_B);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        cr_assert_eq(tk_wait_registered(tk, USB, 2, WAIT_MS), 0);
        /* Side by side: the kubelet may call either. */
        expect_answering(&a, "A beside B");
        expect_answering(&b, "B");
        cr_assert_eq(tk_dra_info(kd, DRIVER, &info), 0);
        cr_expect_str_eq(info->endpoint, b.dra);
        pluginregistration__plugin_info__free_unpacked(info, NULL);
        expect_prepare("during", "uid-during");

        stop_a();
        /* A took its own sockets along and nothing of B's. */
        cr_expect_eq(access(a.reg, F_OK), -1, "%s", a.reg);
        cr_expect_eq(access(a.dra, F_OK), -1, "%s", a.dra);
        cr_expect_eq(access(a.dp, F_OK), -1, "%s", a.dp);
        expect_answering(&b, "B after A stopped");
        cr_expect_eq(tk_dra_probe(kd, DRIVER, NULL), GRPC_STATUS_OK);
        expect_prepare("after", "uid-after");
        /* B did not register again: nothing it serves was disturbed. */
        cr_expect_eq(tk_dra_registrations(kd, DRIVER), 2);
        cr_expect_eq(tk_registrations(tk, USB), 2);
        socks_free(&a);
        socks_free(&b);
}

Test(rollover, without_a_pod_uid_the_newer_takes_the_names_and_the_older_leaves_them) {
        start_a(NULL);
        struct socks s = socks_of(NULL);
        expect_answering(&s, "A");

        spawn(NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        cr_assert_eq(tk_wait_registered(tk, USB, 2, WAIT_MS), 0);
        stop_a();
        cr_expect_eq(log_wait(log_a, "is another instance's socket now; left in place", WAIT_MS),
                     0);
        /* The names are B's and still answer. */
        expect_answering(&s, "B after A stopped");
        cr_expect_eq(tk_dra_probe(kd, DRIVER, NULL), GRPC_STATUS_OK);
        expect_prepare("after", "uid-after");
        socks_free(&s);
}

/* A pod UID that cannot name a socket is refused before anything starts. */
Test(rollover, a_bad_pod_uid_is_a_usage_error) {
        char *out = NULL;

        env_init(&e);
        env_write(&e, "config.json", config);
        cr_assert_eq(setenv("POD_UID", "../x", 1), 0);
        int rc = env_run(&e, &out, "serve", "--config", e.config, "--node-name", NODE, NULL);
        cr_expect_eq(rc, 2, "exit %d: %s", rc, out);
        cr_expect_not_null(strstr(out, "POD_UID \"../x\""), "%s", out);
        free(out);
}

/* A kubelet before 1.36, when the old instance's stream ends, cancels the
 * new instance's stream too and forgets it: the new one registers again
 * and its devices are listed again; a stream the daemon ends itself, or
 * one the kubelet replaces after a Register of ours, brings no Register. */
Test(rollover, a_stream_the_kubelet_drops_is_answered_with_a_register) {
        V1beta1__ListAndWatchResponse *list = NULL;

        start_a(UID_A);
        unsigned lists = tk_lists(tk, USB);
        cr_assert_eq(tk_drop(tk, USB), 1);
        cr_assert_eq(tk_wait_registered(tk, USB, 2, WAIT_MS), 0, "never registered again");
        cr_assert_eq(tk_wait_lists(tk, USB, lists + 1, WAIT_MS, &list), 0);
        cr_expect_eq(list->n_devices, 1);
        v1beta1__list_and_watch_response__free_unpacked(list, NULL);
        cr_expect_eq(log_wait(log_a, "the kubelet ended its ListAndWatch stream", WAIT_MS), 0);
        /* Dropped again at once: again, and no more than that. */
        cr_assert_eq(tk_wait_streams(tk, USB, 1, WAIT_MS), 0);
        cr_assert_eq(tk_drop(tk, USB), 1);
        cr_assert_eq(tk_wait_registered(tk, USB, 3, WAIT_MS), 0);
        cr_assert_eq(tk_wait_streams(tk, USB, 1, WAIT_MS), 0);
        usleep(300 * 1000); /* a Register more would come within 20 ms */
        cr_expect_eq(tk_registrations(tk, USB), 3);
}

/* doctor on the host (no POD_UID) finds a pod's sockets under their
 * instance names; in the pod (its POD_UID) it checks that pod's own. */
Test(rollover, doctor_finds_the_sockets_of_an_instance) {
        char *out = NULL;

        start_a(UID_A);
        unsetenv("POD_UID");
        int rc = env_run(&e, &out, "doctor", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                         "--host-root", e.host, NULL);
        cr_expect_not_null(strstr(out, "the daemon serves all 1 resources"), "exit %d:\n%s", rc,
                           out);
        cr_expect_null(strstr(out, "is missing: cdiplug is not serving it"), "%s", out);
        free(out);
        cr_assert_eq(setenv("POD_UID", UID_B, 1), 0);
        rc = env_run(&e, &out, "doctor", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                     "--host-root", e.host, NULL);
        cr_expect_not_null(strstr(out, "is missing: cdiplug is not serving it"),
                           "another pod's doctor finds its own socket missing: exit %d:\n%s", rc,
                           out);
        free(out);
}

/* A Prepare or Unprepare of one claim on the DRA socket at path, whoever
 * the kubelet calls: the old instance still answers the calls it got. */
static void call_on(const char *path, const char *name, const char *uid, bool prepare) {
        static const char *const methods[2] = {
                "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
                "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        };
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest req =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim c =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT;
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cp = &c;
        grpc_byte_buffer *recv = NULL;
        grpc_channel *ch = dp_channel_unix(path);

        if (prepare)
                add_claim(name, uid);
        c.namespace_ = "ns";
        c.name = (char *)name;
        c.uid = (char *)uid;
        req.claims = &cp;
        req.n_claims = 1;
        cr_assert_not_null(ch);
        cr_assert_eq(dp_call_unary_raw(ch, methods[prepare], &req.base, WAIT_MS, &recv, NULL),
                     GRPC_STATUS_OK, "%s of %s on %s", prepare ? "Prepare" : "Unprepare", uid,
                     path);
        grpc_byte_buffer_destroy(recv);
        grpc_channel_destroy(ch);
}

/* The uids in the checkpoint, sorted and joined by ','. */
static char *checkpoint_uids(void) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        struct dra_claim *claims = NULL;
        char *msg = NULL, *out = NULL, *names[16];
        size_t n = 0, len = 0;
        FILE *f;

        cr_assert(asprintf(&path, "%s/plugins/" DRIVER "/checkpoint.json", kroot) > 0);
        text = env_read(path);
        cr_assert_not_null(text);
        cr_assert_eq(dra_checkpoint_decode(text, strlen(text), &claims, &n, &msg), 0, "%s", msg);
        cr_assert_leq(n, 16);
        for (size_t i = 0; i < n; i++)
                names[i] = claims[i].uid;
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                        char *t = names[j];
                        names[j] = names[j - 1];
                        names[j - 1] = t;
                }
        f = open_memstream(&out, &len);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? "," : "", names[i]);
        fclose(f);
        dra_claims_free(claims, n);
        return out;
}

/* Both instances change the one checkpoint, each under its lock after
 * reading it: what either prepared and what either unprepared is the
 * file, whichever instance the kubelet asks. B unprepares uid-2, which A
 * prepared after B started, as its first call since: it must leave the
 * file, and not come back when A writes next. */
Test(rollover, the_two_instances_share_one_checkpoint) {
        char tag_a[9], tag_b[9];
        _cleanup_free_ char *got = NULL;

        cfg_instance_tag(UID_A, tag_a);
        cfg_instance_tag(UID_B, tag_b);
        start_a(UID_A);
        struct socks a = socks_of(tag_a), b = socks_of(tag_b);
        call_on(a.dra, "c1", "uid-1", true);
        spawn(UID_B); /* reads uid-1 */
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        call_on(a.dra, "c2", "uid-2", true);  /* a late call to A */
        call_on(b.dra, "c2", "uid-2", false); /* B unprepares it, never having read it */
        call_on(b.dra, "c3", "uid-3", true);
        call_on(b.dra, "c1", "uid-1", false); /* B unprepares uid-1 */
        call_on(a.dra, "c4", "uid-4", true);  /* A brings neither back */
        stop_a();
        got = checkpoint_uids();
        cr_expect_str_eq(got, "uid-3,uid-4");
        socks_free(&a);
        socks_free(&b);
}

/* Whether the page at port says n claims are prepared, within WAIT_MS. */
static bool wait_prepared_claims(int port, int n) {
        char want[64];

        snprintf(want, sizeof(want), "\ncdiplug_dra_prepared_claims %d\n", n);
        for (int i = 0; i < WAIT_MS / 20; i++) {
                _cleanup_free_ char *body = NULL;
                if (http_get(port, "/metrics", &body) == 200 && strstr(body, want))
                        return true;
                usleep(20000); /* a bounded wait for a condition, not a timing */
        }
        return false;
}

/* Between its own calls, A follows what B does to the checkpoint (it
 * reads it again on each rename into place): what A counts, and keeps in
 * its CDI specs for prepared claims, is never a call behind. */
Test(rollover, the_old_instance_follows_the_new_ones_checkpoint_between_calls) {
        char tag_b[9];
        int port = http_free_port();

        snprintf(metrics_addr, sizeof(metrics_addr), "127.0.0.1:%d", port);
        start_a(UID_A);
        metrics_addr[0] = '\0';
        cr_assert_eq(log_wait(log_a, "metrics: serving", WAIT_MS), 0);
        cr_assert(wait_prepared_claims(port, 0));
        cfg_instance_tag(UID_B, tag_b);
        spawn(UID_B);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        struct socks b = socks_of(tag_b);
        call_on(b.dra, "c1", "uid-1", true);
        call_on(b.dra, "c2", "uid-2", true);
        cr_expect(wait_prepared_claims(port, 2), "A never saw B prepare two claims");
        call_on(b.dra, "c1", "uid-1", false);
        cr_expect(wait_prepared_claims(port, 1), "A never saw B unprepare one");
        socks_free(&b);
}

/* ---- both instances at once, one of them killed and started again ---- */

#define STRESS_UIDS 48
#define STRESS_WORKERS 4
#define STRESS_CALLS 300 /* per worker: 1,200 calls */

enum held { HELD_OUT, HELD_IN, HELD_UNKNOWN };

struct stress {
        const char *dra[2]; /* A's and B's DRA sockets */
        pthread_mutex_t mu;
        unsigned done, ok, failed;
        enum held held[STRESS_UIDS];
};

/* One call of one claim: 0 when it answered with no error, else -1 with
 * the claim's error (or the status) in err. */
static int claim_call(const char *path, const char *name, const char *uid, bool prepare,
                      char err[256]) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest req =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim c =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT;
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cp = &c;
        ProtobufCMessage *resp = NULL;
        grpc_channel *ch = dp_channel_unix(path);
        grpc_status_code st;
        const char *why = "no answer";

        c.namespace_ = "ns";
        c.name = (char *)name;
        c.uid = (char *)uid;
        req.claims = &cp;
        req.n_claims = 1;
        if (!ch)
                return -1;
        st = dp_call_unary(
                ch,
                prepare ? "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
                        : "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
                &req.base,
                prepare ? &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor
                        : &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
                &resp, NULL, WAIT_MS);
        if (st == GRPC_STATUS_OK && prepare) {
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r =
                        (void *)resp;
                if (r->n_claims == 1)
                        why = *r->claims[0]->value->error      ? r->claims[0]->value->error
                              : r->claims[0]->value->n_devices ? NULL
                                                               : "no device";
        } else if (st == GRPC_STATUS_OK) {
                K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *r =
                        (void *)resp;
                if (r->n_claims == 1)
                        why = *r->claims[0]->value->error ? r->claims[0]->value->error : NULL;
        }
        if (err)
                snprintf(err, 256, "%s", why ? why : "");
        if (resp)
                protobuf_c_message_free_unpacked(resp, NULL);
        grpc_channel_destroy(ch);
        return why ? -1 : 0;
}

static bool stress_call(const char *path, unsigned i, bool prepare) {
        char name[16], uid[16];

        snprintf(name, sizeof(name), "s%u", i);
        snprintf(uid, sizeof(uid), "uid-s%u", i);
        return claim_call(path, name, uid, prepare, NULL) == 0;
}

struct worker {
        struct stress *st;
        unsigned w;
};

/* Each worker owns the claims i % STRESS_WORKERS == w, so the calls of
 * one claim come in order while the workers' calls overlap; each call
 * goes to either instance at random, so each unprepares what the other
 * prepared. */
static void *stress_run(void *arg) {
        struct worker *wk = arg;
        struct stress *st = wk->st;
        unsigned seed = 0x5eed + wk->w;

        for (unsigned k = 0; k < STRESS_CALLS; k++) {
                unsigned i = wk->w + STRESS_WORKERS * ((unsigned)rand_r(&seed) %
                                                       (STRESS_UIDS / STRESS_WORKERS));
                pthread_mutex_lock(&st->mu);
                enum held h = st->held[i];
                pthread_mutex_unlock(&st->mu);
                bool prepare = h == HELD_UNKNOWN ? rand_r(&seed) % 2 : h == HELD_OUT;
                bool ok = stress_call(st->dra[rand_r(&seed) % 2], i, prepare);
                pthread_mutex_lock(&st->mu);
                st->held[i] = ok ? (prepare ? HELD_IN : HELD_OUT) : HELD_UNKNOWN;
                st->done++;
                if (ok)
                        st->ok++;
                else
                        st->failed++;
                pthread_mutex_unlock(&st->mu);
        }
        return NULL;
}

static unsigned stress_done(struct stress *st) {
        pthread_mutex_lock(&st->mu);
        unsigned n = st->done;
        pthread_mutex_unlock(&st->mu);
        return n;
}

/* A started again under its pod UID, logging to a file of its own; the
 * env stays B's. */
static void respawn_a(void) {
        char *log_b = e.log;
        pid_t pid_b = e.pid;

        cr_assert(asprintf(&e.log, "%s/daemon-a2.log", e.root) > 0);
        spawn(UID_A);
        pid_a = e.pid;
        free(log_a);
        log_a = e.log;
        e.log = log_b;
        e.pid = pid_b;
}

/* The rolling update under load: Prepares and Unprepares on both
 * instances at once, A killed with SIGKILL in the middle and started
 * again. The checkpoint then holds exactly the claims whose last
 * successful call was a Prepare: none lost, none back. */
Test(rollover, overlapping_calls_on_both_instances_lose_and_resurrect_nothing, .timeout = 180) {
        char tag_a[9], tag_b[9];
        static struct stress st = { .mu = PTHREAD_MUTEX_INITIALIZER };
        struct worker wk[STRESS_WORKERS];
        pthread_t th[STRESS_WORKERS];
        struct dra_claim *claims = NULL;
        unsigned lost = 0, back = 0, unknown = 0;
        size_t n = 0;

        cfg_instance_tag(UID_A, tag_a);
        cfg_instance_tag(UID_B, tag_b);
        start_a(UID_A);
        struct socks a = socks_of(tag_a), b = socks_of(tag_b);
        for (unsigned i = 0; i < STRESS_UIDS; i++) {
                char name[16], uid[16];
                snprintf(name, sizeof(name), "s%u", i);
                snprintf(uid, sizeof(uid), "uid-s%u", i);
                add_claim(name, uid);
        }
        spawn(UID_B);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        st.dra[0] = a.dra;
        st.dra[1] = b.dra;
        for (unsigned w = 0; w < STRESS_WORKERS; w++) {
                wk[w] = (struct worker){ &st, w };
                cr_assert_eq(pthread_create(&th[w], NULL, stress_run, &wk[w]), 0);
        }
        while (stress_done(&st) < STRESS_WORKERS * STRESS_CALLS / 3)
                usleep(1000); /* polling a counter the workers raise */
        kill(pid_a, SIGKILL);
        waitpid(pid_a, NULL, 0);
        respawn_a();
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 3, WAIT_MS), 0, "A never came back");
        for (unsigned w = 0; w < STRESS_WORKERS; w++)
                pthread_join(th[w], NULL);
        /* A claim whose last call failed is settled with one more. */
        for (unsigned i = 0; i < STRESS_UIDS; i++)
                if (st.held[i] == HELD_UNKNOWN) {
                        unknown++;
                        cr_assert(stress_call(b.dra, i, false), "uid-s%u: Unprepare on B", i);
                        st.held[i] = HELD_OUT;
                }
        _cleanup_free_ char *path = NULL, *text = NULL, *msg = NULL;
        cr_assert(asprintf(&path, "%s/plugins/" DRIVER "/checkpoint.json", kroot) > 0);
        text = env_read(path);
        cr_assert_not_null(text);
        cr_assert_eq(dra_checkpoint_decode(text, strlen(text), &claims, &n, &msg), 0, "%s", msg);
        for (unsigned i = 0; i < STRESS_UIDS; i++) {
                char uid[16];
                bool in = false;
                snprintf(uid, sizeof(uid), "uid-s%u", i);
                for (size_t k = 0; k < n; k++)
                        in = in || strcmp(claims[k].uid, uid) == 0;
                lost += st.held[i] == HELD_IN && !in;
                back += st.held[i] == HELD_OUT && in;
        }
        cr_log_info("%u calls (%u ok, %u failed, A killed once), %u claims settled after: %u lost, "
                    "%u resurrected",
                    st.done, st.ok, st.failed, unknown, lost, back);
        fprintf(stderr,
                "rollover stress: %u calls (%u ok, %u failed, A killed once), %u claims settled "
                "after: %u lost, %u resurrected\n",
                st.done, st.ok, st.failed, unknown, lost, back);
        cr_expect_geq(st.done, 1000);
        cr_expect_eq(lost, 0, "%u prepared claims lost", lost);
        cr_expect_eq(back, 0, "%u unprepared claims back", back);
        /* Most calls worked: A was down only for its restart. */
        cr_expect_gt(st.ok, st.done / 2, "%u of %u ok", st.ok, st.done);
        dra_claims_free(claims, n);
        socks_free(&a);
        socks_free(&b);
}

/* Replace path's content by a rename, as any writer of it does. */
static void put_file(const char *path, const char *text) {
        _cleanup_free_ char *tmp = NULL;
        FILE *f;

        cr_assert(asprintf(&tmp, "%s.test-tmp", path) > 0);
        f = fopen(tmp, "w");
        cr_assert_not_null(f);
        cr_assert_eq(fputs(text, f) >= 0, true);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(rename(tmp, path), 0);
}

/* A new instance finding the checkpoint corrupt writes nothing over it,
 * and neither does the running one: both fail their calls' claims naming
 * the file, doctor says what it is and what to do, and once it reads
 * again nothing either held is lost. */
Test(rollover, a_corrupt_checkpoint_wipes_no_claims_of_either_instance) {
        char tag_a[9], tag_b[9], err[256];
        _cleanup_free_ char *path = NULL, *good = NULL, *got = NULL, *out = NULL;
        const char *bad = "{\"version\": 1, \"claims\": {\"uid-1\": ";

        cfg_instance_tag(UID_A, tag_a);
        cfg_instance_tag(UID_B, tag_b);
        start_a(UID_A);
        struct socks a = socks_of(tag_a), b = socks_of(tag_b);
        call_on(a.dra, "c1", "uid-1", true);
        cr_assert(asprintf(&path, "%s/plugins/" DRIVER "/checkpoint.json", kroot) > 0);
        good = env_read(path);
        cr_assert_not_null(good);
        put_file(path, bad);
        spawn(UID_B);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        cr_expect_eq(log_wait(e.log, "is unusable", WAIT_MS), 0);
        add_claim("c2", "uid-2");
        cr_expect_eq(claim_call(b.dra, "c2", "uid-2", true, err), -1);
        cr_expect(strstr(err, "checkpoint.json cannot be read"), "B: %s", err);
        cr_expect_eq(claim_call(a.dra, "c2", "uid-2", true, err), -1);
        cr_expect(strstr(err, "checkpoint.json cannot be read"), "A: %s", err);
        cr_expect_eq(claim_call(b.dra, "c1", "uid-1", false, err), -1);
        cr_expect(strstr(err, "checkpoint.json cannot be read"), "B: %s", err);
        _cleanup_free_ char *still = env_read(path);
        cr_expect_str_eq(still, bad, "the corrupt file was written over");
        unsetenv("POD_UID");
        env_run(&e, &out, "doctor", "--config", e.config, "--kubelet-dir", e.kubelet_dir,
                "--kubelet-root", kroot, "--host-root", e.host, NULL);
        cr_expect_not_null(strstr(out, "is corrupt"), "%s", out);
        cr_expect_not_null(strstr(out, "checkpoint.json.bad"), "%s", out);
        /* Good again: both serve, and uid-1 is still prepared. */
        put_file(path, good);
        cr_expect_eq(claim_call(b.dra, "c2", "uid-2", true, err), 0, "B: %s", err);
        cr_expect_eq(claim_call(a.dra, "c1", "uid-1", true, err), 0, "A: %s", err);
        stop_a();
        got = checkpoint_uids();
        cr_expect_str_eq(got, "uid-1,uid-2");
        socks_free(&a);
        socks_free(&b);
}

/* An instance killed with SIGKILL leaves its three sockets, which refuse
 * every connect: the next instance removes them at start, and leaves a
 * live instance's (two_instances_register_side_by_side). */
Test(rollover, a_killed_instances_sockets_are_removed_by_the_next) {
        char tag_a[9], tag_b[9];

        cfg_instance_tag(UID_A, tag_a);
        cfg_instance_tag(UID_B, tag_b);
        start_a(UID_A);
        struct socks a = socks_of(tag_a), b = socks_of(tag_b);
        kill(pid_a, SIGKILL);
        waitpid(pid_a, NULL, 0);
        pid_a = 0;
        cr_assert_eq(access(a.reg, F_OK), 0, "%s", a.reg);
        cr_assert_eq(access(a.dra, F_OK), 0, "%s", a.dra);
        cr_assert_eq(access(a.dp, F_OK), 0, "%s", a.dp);
        cr_assert(!answers(a.reg) && !answers(a.dra) && !answers(a.dp));
        spawn(UID_B);
        cr_assert_eq(tk_dra_wait_registered(kd, DRIVER, 2, WAIT_MS), 0, "B never registered");
        cr_assert_eq(tk_wait_registered(tk, USB, 2, WAIT_MS), 0);
        cr_expect_eq(access(a.reg, F_OK), -1, "%s is left", a.reg);
        cr_expect_eq(access(a.dra, F_OK), -1, "%s is left", a.dra);
        cr_expect_eq(access(a.dp, F_OK), -1, "%s is left", a.dp);
        cr_expect_eq(log_wait(e.log, "no process listens on it any more", WAIT_MS), 0);
        expect_answering(&b, "B");
        socks_free(&a);
        socks_free(&b);
}

/* A driver name of 63 characters with a pod UID: the registration socket
 * takes a hashed name that fits, check accepts what serve binds, and the
 * kubelet registers the driver. A kubelet root too long for the DRA
 * socket is refused by check, naming the field. */
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
        (void)st;
        (void)flag;
        (void)f;
        return remove(path);
}

#define LONG_DRIVER "a123456789b123456789c123456789d123456789e123456789f12345678.com"

Test(rollover, a_63_character_driver_name_registers_under_a_hashed_name) {
        char tmpl[] = "/tmp/k-XXXXXX", tag[9], hash[9];
        _cleanup_free_ char *out = NULL, *reg = NULL, *long_root = NULL;
        Pluginregistration__PluginInfo *info = NULL;

        cr_assert_eq(strlen(LONG_DRIVER), 63);
        env_init(&e);
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"dra\": { \"driver\": \"" LONG_DRIVER "\" }, \"resources\": ["
                  " { \"name\": \"example.com/serial\", \"api\": \"dra\","
                  " \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }");
        cr_assert_not_null(mkdtemp(tmpl));
        kroot = strdup(tmpl);
        cr_assert_eq(setenv("POD_UID", UID_A, 1), 0);
        int rc = env_run(&e, &out, "check", "--config", e.config, "--kubelet-root", kroot,
                         "--host-root", e.host, NULL);
        cr_expect_eq(rc, 0, "check: exit %d: %s", rc, out);
        cr_assert_eq(tk_dra_start(kroot, &kd), 0);
        api = fakeapi_new(true);
        fakeapi_add_node(api, NODE, "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(api, "token-one");
        kubeconfig = fakeapi_write_kubeconfig(api, e.root, "token-one");
        cr_assert_not_null(kubeconfig);
        env_spawn(&e, "--kubelet-root", kroot, "--node-name", NODE, "--kubeconfig", kubeconfig,
                  NULL);
        cr_assert_eq(tk_dra_wait_registered(kd, LONG_DRIVER, 1, WAIT_MS), 0, "never registered");
        cr_assert_eq(tk_dra_info(kd, LONG_DRIVER, &info), 0);
        cr_expect_str_eq(info->name, LONG_DRIVER);
        pluginregistration__plugin_info__free_unpacked(info, NULL);
        cfg_instance_tag(UID_A, tag);
        snprintf(hash, sizeof(hash), "%08x", base_fnv1a32(LONG_DRIVER));
        cr_assert(asprintf(&reg, "%s/plugins_registry/%.*s-%s-%s-reg.sock", kroot,
                           (int)(107 - strlen(kroot) - strlen("/plugins_registry/") - 27),
                           LONG_DRIVER, hash, tag) > 0);
        cr_expect(answers(reg), "%s", reg);
        cr_expect_eq(tk_dra_probe(kd, LONG_DRIVER, NULL), GRPC_STATUS_OK);
        /* A kubelet root that leaves no room for the DRA socket. */
        free(out);
        out = NULL;
        cr_assert(asprintf(&long_root, "%s/%040d", kroot, 0) > 0);
        rc = env_run(&e, &out, "check", "--config", e.config, "--kubelet-root", long_root,
                     "--host-root", e.host, NULL);
        cr_expect_eq(rc, 2, "exit %d: %s", rc, out);
        cr_expect_not_null(strstr(out, "dra.driver \"" LONG_DRIVER "\""), "%s", out);
        /* The root is outside the env's dir: emptied here. */
        cr_expect_eq(env_stop(&e, SIGTERM, WAIT_MS), 0);
        cr_expect_eq(nftw(kroot, rm_one, 8, FTW_DEPTH | FTW_PHYS), 0);
}
