/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug-bench "labels": what a node with 30,000 labels costs the API
 * client per Node event. The comparison itself (kube_labels_equal, sorted
 * once, against cJSON_Compare's lookup of every key, which it replaced),
 * and a whole event end to end: the fake API server sends the Node with
 * one label changed, cdiplug-kube parses and compares it and calls the
 * labels callback. Printed as it runs. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakeapi.h"
#include "kube-internal.h"
#include "kube.h"

#define LABELS 30000
#define EVENTS 20

void bench_labels(const char *root);

static uint64_t ns_now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* n labels; the first order, or another (the API server keeps none). */
static cJSON *labels(bool reorder, unsigned flip) {
        cJSON *o = cJSON_CreateObject();
        char key[64], value[32];

        for (size_t i = 0; i < LABELS; i++) {
                size_t j = reorder ? (i * 7919) % LABELS : i;
                snprintf(key, sizeof(key), "example.com/f%zu", j);
                snprintf(value, sizeof(value), "v%zu", j);
                cJSON_AddStringToObject(o, key, value);
        }
        snprintf(value, sizeof(value), "flip%u", flip);
        cJSON_AddStringToObject(o, "example.com/flip", value);
        return o;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned heard;

static void on_labels(void *ctx, const cJSON *l) {
        (void)ctx;
        (void)l;
        pthread_mutex_lock(&mu);
        heard++;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mu);
}

static bool wait_heard(unsigned n) {
        struct timespec ts;
        bool ok;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 60;
        pthread_mutex_lock(&mu);
        while (heard < n && pthread_cond_timedwait(&cond, &mu, &ts) == 0)
                ;
        ok = heard >= n;
        pthread_mutex_unlock(&mu);
        return ok;
}

static void time_compare(const char *what, const cJSON *a, const cJSON *b,
                         bool (*eq)(const cJSON *, const cJSON *)) {
        uint64_t t0 = ns_now();
        bool same = eq(a, b);
        uint64_t t1 = ns_now();

        printf("labels: %d labels, %s: %.2f ms (%s)\n", LABELS, what, (double)(t1 - t0) / 1e6,
               same ? "equal" : "DIFFERENT");
}

static bool cjson_equal(const cJSON *a, const cJSON *b) {
        return cJSON_Compare(a, b, true);
}

static void compare_only(void) {
        cJSON *a = labels(false, 0), *b = labels(false, 0), *c = labels(true, 0);

        time_compare("same order (kube_labels_equal)", a, b, kube_labels_equal);
        time_compare("another order (kube_labels_equal, sorted)", a, c, kube_labels_equal);
        time_compare("same order with cJSON_Compare (before)", a, b, cjson_equal);
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(c);
}

/* CPU time (ns) of this process's thread named name, from schedstat. */
static uint64_t thread_cpu_ns(const char *name) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        uint64_t ns = 0;

        while (d && (de = readdir(d))) {
                char path[300], comm[32] = "";
                FILE *f;

                snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (!fgets(comm, sizeof(comm), f))
                        comm[0] = '\0';
                fclose(f);
                comm[strcspn(comm, "\n")] = '\0';
                if (strcmp(comm, name) != 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", de->d_name);
                f = fopen(path, "re");
                if (f && fgets(path, sizeof(path), f))
                        ns = strtoull(path, NULL, 10);
                if (f)
                        fclose(f);
                break;
        }
        if (d)
                closedir(d);
        return ns;
}

void bench_labels(const char *root) {
        struct fakeapi *f = fakeapi_new(true);
        struct kube_settings s = { .node_name = "node1" };
        struct kube *k = NULL;
        char *kc = fakeapi_write_kubeconfig(f, root, "token-one");
        uint64_t sum = 0, max = 0, cpu0;

        compare_only();
        fakeapi_add_node(f, "node1", "6d1b3a4e-0000-4000-8000-000000000001");
        fakeapi_set_token(f, "token-one");
        fakeapi_set_node_labels(f, "node1", labels(false, 0));
        s.kubeconfig = kc;
        if (!kc || kube_new(&s, &k) < 0 || kube_labels_follow(k, on_labels, NULL) < 0 ||
            kube_start(k) < 0 || !wait_heard(1)) {
                fprintf(stderr, "labels: the client never heard the labels\n");
                exit(1);
        }
        cpu0 = thread_cpu_ns("cdiplug-kube");
        for (unsigned i = 1; i <= EVENTS; i++) {
                uint64_t t0 = ns_now(), d;

                fakeapi_set_node_labels(f, "node1", labels(false, i));
                if (!wait_heard(i + 1)) {
                        fprintf(stderr, "labels: event %u never heard\n", i);
                        exit(1);
                }
                d = ns_now() - t0;
                sum += d;
                max = d > max ? d : max;
        }
        printf("labels: %d events of %d labels: cdiplug-kube's CPU per event (read, parse, "
               "compare) %.2f ms; the fake server's change to the callback (it serialises the "
               "Node too): mean %.2f ms, max %.2f ms\n",
               EVENTS, LABELS, (double)(thread_cpu_ns("cdiplug-kube") - cpu0) / EVENTS / 1e6,
               (double)sum / EVENTS / 1e6, (double)max / 1e6);
        kube_free(k);
        fakeapi_free(f);
        free(kc);
}
