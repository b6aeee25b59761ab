/* SPDX-License-Identifier: Apache-2.0 */
/* tk: a test kubelet written with grpc core. It serves Registration on
 * <dir>/kubelet.sock like the kubelet's device manager: on Register it
 * dials the plugin back, calls GetDevicePluginOptions before answering, and
 * then keeps a ListAndWatch stream open, recording every list it gets. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <grpc/grpc.h>

#include "deviceplugin.pb-c.h"

struct tk;

int tk_start(const char *dir, struct tk **ret);
void tk_stop(struct tk *tk);

/* Restart like the kubelet does: drop every stream, delete every socket in
 * the dir, and serve a new kubelet.sock. With sock_first, kubelet.sock is
 * re-created before the plugins' sockets are deleted (the other order). */
int tk_restart(struct tk *tk, bool sock_first);

/* Registrations of a resource so far (0 when never seen). */
unsigned tk_registrations(struct tk *tk, const char *resource);
/* Wait until the resource has registered at least count times and its
 * stream has delivered a list since; -ETIMEDOUT otherwise. */
int tk_wait_registered(struct tk *tk, const char *resource, unsigned count, int timeout_ms);

/* Wait until the resource's streams delivered at least n lists in all, then
 * return a copy of the newest (free with
 * v1beta1__list_and_watch_response__free_unpacked). */
int tk_wait_lists(struct tk *tk, const char *resource, unsigned n, int timeout_ms,
                  V1beta1__ListAndWatchResponse **ret);
unsigned tk_lists(struct tk *tk, const char *resource);
/* Wait until exactly n ListAndWatch streams of the resource (of any
 * resource with NULL) are open: a stream counts until its status came. */
int tk_wait_streams(struct tk *tk, const char *resource, unsigned n, int timeout_ms);

/* The RegisterRequest most recently received for the resource (a copy),
 * and the options its GetDevicePluginOptions answered. */
int tk_last_register(struct tk *tk, const char *resource, V1beta1__RegisterRequest **ret_req,
                     V1beta1__DevicePluginOptions **ret_opts);

/* A channel to the resource's registered endpoint, for test calls. */
grpc_channel *tk_dial(struct tk *tk, const char *resource);

/* What a kubelet before 1.36 does to the endpoint it holds when another
 * instance's stream for the resource ends: it cancels the resource's
 * ListAndWatch streams and never dials it again (the plugin must
 * register again). The number of streams cancelled. */
int tk_drop(struct tk *tk, const char *resource);

/* Total registrations across all resources. */
unsigned tk_total_registrations(struct tk *tk);

/* CLOCK_MONOTONIC nanoseconds: when the last restart deleted the sockets,
 * and when the resource's latest Register arrived (0 if never). */
uint64_t tk_restarted_at_ns(struct tk *tk);
uint64_t tk_registered_at_ns(struct tk *tk, const char *resource);
/* When the request of the resource's latest successful Register arrived,
 * before the kubelet dialled back (0 if never). */
uint64_t tk_register_arrived_at_ns(struct tk *tk, const char *resource);
/* When the resource's newest list arrived on its stream (0 if never). */
uint64_t tk_list_at_ns(struct tk *tk, const char *resource);

/* The kubelet's PodResourcesLister (podresources/v1) on its own socket,
 * as /var/lib/kubelet/pod-resources/kubelet.sock. tk_pr_stop() deletes
 * the socket; starting again on the same path is a kubelet restart. */
#include "podresources.pb-c.h"

struct tk_pr;
enum tk_pr_mode {
        TK_PR_ANSWER,  /* List answers what tk_pr_set() gave */
        TK_PR_GARBAGE, /* List answers bytes that do not decode */
        TK_PR_SILENT,  /* List never answers (a hung kubelet) */
};
int tk_pr_start(const char *path, struct tk_pr **ret);
void tk_pr_stop(struct tk_pr *pr);
/* Answer resp (copied) from now on, and switch to TK_PR_ANSWER. */
void tk_pr_set(struct tk_pr *pr, const V1__ListPodResourcesResponse *resp);
/* Add pod to what List answers (after tk_pr_set). */
void tk_pr_add_pod(struct tk_pr *pr, const V1__PodResources *pod);
void tk_pr_mode(struct tk_pr *pr, enum tk_pr_mode mode);
/* Calls answered (or left unanswered) so far. */
unsigned tk_pr_calls(struct tk_pr *pr);
/* Answer one pod ns/pod whose container holds device id of resource; with
 * resource NULL, no pod at all. */
void tk_pr_hold(struct tk_pr *pr, const char *ns, const char *pod, const char *resource,
                const char *id);
/* Answer one pod ns/pod whose container "app" holds a DRA claim's device
 * (driver, pool, device; its CDI device cdi), as kubelets from 1.34 list
 * it in dynamic_resources. */
void tk_pr_hold_claim(struct tk_pr *pr, const char *ns, const char *pod, const char *driver,
                      const char *pool, const char *device, const char *cdi);
/* Date the socket back (its mtime), as a kubelet that started that many
 * seconds ago: cdiplug trusts the pod list of a settled kubelet only. */
int tk_pr_age(struct tk_pr *pr, int seconds);

/* tk_dra: the kubelet's plugin manager and DRA client (dra.c). Like the
 * kubelet it watches <root>/plugins_registry with inotify: on each new
 * socket (names starting with '.' are ignored) it calls GetInfo, dials the
 * endpoint GetInfo names, and calls NotifyRegistrationStatus, accepting or
 * refusing as the test chose. Tests then call the endpoint and open
 * health streams. */
#include "pluginregistration.pb-c.h"

struct tk_dra;
struct tk_dra_health;

/* Watch root/plugins_registry (made if missing) and register what appears
 * there, what is there already first. */
int tk_dra_start(const char *root, struct tk_dra **ret);
void tk_dra_stop(struct tk_dra *k);
/* From now on, refuse registrations with reason (copied); NULL accepts. */
void tk_dra_refuse(struct tk_dra *k, const char *reason);
/* Wait until driver has been through NotifyRegistrationStatus at least
 * count times (accepted or refused). */
int tk_dra_wait_registered(struct tk_dra *k, const char *driver, unsigned count, int timeout_ms);
unsigned tk_dra_registrations(struct tk_dra *k, const char *driver);
/* CLOCK_MONOTONIC (ns) as driver's latest NotifyRegistrationStatus was
 * sent, 0 if none: what a request to the fake API server is ordered by. */
uint64_t tk_dra_notified_ns(struct tk_dra *k, const char *driver);
/* A copy of the GetInfo answer of driver's latest registration. */
int tk_dra_info(struct tk_dra *k, const char *driver, Pluginregistration__PluginInfo **ret);
/* GetInfo again on the registry socket (the kubelet never calls it again
 * once registered: this asks whether the socket still answers):
 * the gRPC status; the answer in *ret when OK and ret is non-NULL. */
grpc_status_code tk_dra_probe(struct tk_dra *k, const char *driver,
                              Pluginregistration__PluginInfo **ret);
/* The channel to driver's endpoint (the fake kubelet's: do not destroy). */
grpc_channel *tk_dra_channel(struct tk_dra *k, const char *driver);
/* Like the kubelet's start: every socket in plugins_registry deleted. The
 * registrations seen so far are kept; a socket made again registers
 * again. */
int tk_dra_restart(struct tk_dra *k);

/* Whether driver's latest GetInfo lists service in supported_versions. */
bool tk_dra_advertises(struct tk_dra *k, const char *driver, const char *service);
/* A NodeWatchResources stream of driver, version "v1alpha1" or "v1",
 * recording every list it gets. As kubelets from 1.37 do, "v1" is opened
 * only when GetInfo advertises "v1.DRAResourceHealth" (-EPROTONOSUPPORT
 * otherwise); "v1alpha1" always, as 1.34 to 1.36 do. */
int tk_dra_health_open(struct tk_dra *k, const char *driver, const char *version,
                       struct tk_dra_health **ret);
/* Wait until the stream got at least n lists; *ret (malloc'd, when ret is
 * non-NULL) is the newest as "pool/device=HEALTHY" entries joined by ','
 * in the order sent. */
int tk_dra_health_wait(struct tk_dra_health *h, unsigned n, int timeout_ms, char **ret);
unsigned tk_dra_health_lists(struct tk_dra_health *h);
/* What the kubelet shows now, from every list so far: "pool/device=STATE"
 * joined by ',' in the order first heard of, STATE Unknown once a device's
 * last report is older than its health_check_timeout_seconds (30 s when
 * unset, and always on v1alpha1, as 1.34 to 1.36 read it). */
int tk_dra_health_view(struct tk_dra_health *h, char **ret);
/* A device's ("pool/device") timeout and message from its last report;
 * -ENOENT when never reported. */
int tk_dra_health_detail(struct tk_dra_health *h, const char *key, int64_t *ret_timeout_s,
                         char **ret_message);
/* Wait until the stream ended; its status. */
int tk_dra_health_wait_end(struct tk_dra_health *h, int timeout_ms, grpc_status_code *ret);
void tk_dra_health_close(struct tk_dra_health *h);

/* NodePrepareResources / NodeUnprepareResources on driver's endpoint, as
 * version "v1" or "v1beta1" (the answer is decoded with that version's
 * types first, then handed back as v1's). The gRPC status; *ret when OK. */
#include "dra_v1.pb-c.h"
struct tk_dra_claim {
        const char *ns, *name, *uid;
};
grpc_status_code tk_dra_prepare(
        struct tk_dra *k, const char *driver, const char *version,
        const struct tk_dra_claim *claims, size_t n,
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse **ret);
grpc_status_code tk_dra_unprepare(
        struct tk_dra *k, const char *driver, const char *version,
        const struct tk_dra_claim *claims, size_t n,
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse **ret);
