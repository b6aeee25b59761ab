/* SPDX-License-Identifier: Apache-2.0 */
/* What is kept for pods that may still need it, decided by the kubelet's
 * PodResources List: the CDI specs of resources no longer configured, and
 * devices a reload no longer names (at the end of this file). What
 * prepared DRA claims hold keeps them too: retained_claims.c.
 *
 * CDI specs of resources no longer configured: removed by a reload, or
 * found at start-up in the ownership record with no resource of the
 * config behind them.
 *
 * Such a spec may still be needed: the kubelet keeps a pod's devices
 * (and the Allocate answer naming them) in its checkpoint, and starts a
 * crashed container again with the same CDI names, which the runtime
 * resolves through the spec file. So the spec stays while the kubelet's
 * PodResources List shows a pod holding a device of its resource, and
 * goes once it answers that none does. Resource names map to spec files
 * by fixed rules (cdi.h), so a spec found at start-up, whose resource's
 * name is long gone, is matched too.
 *
 * PodResources (v1) has no watch, and nothing else tells the daemon that
 * a pod went away, so the check is repeated on the daemon's timerfd while
 * such specs exist: after 1 s, doubling up to 5 minutes, asynchronously
 * on the completion queue (the daemon never blocks on the kubelet). A
 * spec costs only its file, so a late removal is cheap, and with nothing
 * retained nothing is armed. A reload (SIGHUP) asks again at once.
 *
 * Removing a spec that a pod still needs would break that pod's next
 * container start, so any doubt keeps it: no socket or no answer (the log
 * says how to remove it by hand), and a kubelet that started less than a
 * minute ago, since its List shows only the pods it has synced from its
 * sources so far (its pod-resources socket's mtime is when it bound it). */
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cdi.h"
#include "config.h"
#include "dra.h"
#include "dra_node.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"
#include "podresources.pb-c.h"
#include "rpc.h"
#include "serve-internal.h"

#define CHECK_MIN_MS 1000
#define CHECK_MAX_MS (5 * 60 * 1000)
/* Off the serving path and waited on by nothing: room for a busy kubelet. */
#define LIST_DEADLINE_MS 2000
#define SETTLE_S 60

/* What the log last said about a spec, so each news is said once. */
enum said { SAID_NOTHING, SAID_HELD, SAID_UNKNOWN };

struct kept {
        char *file;     /* in the CDI dir */
        char *resource; /* its resource, when known (removed by a reload) */
        char *label;    /* what the log calls it, after the path */
        enum said said;
};

struct dp_retained {
        struct dp_tag tag; /* first: the List's completion */
        struct kept *v;
        size_t n;
        grpc_channel *ch; /* of the List in flight */
        grpc_call *call;  /* NULL: none in flight */
        struct dp_unary u;
        bool again;      /* a check was asked for meanwhile */
        unsigned rounds; /* checks in a row that kept a spec */
        uint64_t due_ms; /* next check (CLOCK_MONOTONIC), 0: none */
};

static void on_listed(struct dp_daemon *d, struct dp_tag *tag, bool ok);

static void kept_clear(struct kept *k) {
        free(k->file);
        free(k->resource);
        free(k->label);
}

static void drop(struct dp_retained *rt, size_t i) {
        kept_clear(&rt->v[i]);
        memmove(&rt->v[i], &rt->v[i + 1], (rt->n - i - 1) * sizeof(*rt->v));
        rt->n--;
}

static struct dp_retained *rt_get(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;

        if (!rt) {
                rt = calloc(1, sizeof(*rt));
                if (!rt)
                        return NULL;
                rt->tag.fn = on_listed;
                d->retained_specs = rt;
        }
        return rt;
}

/* Something to ask PodResources about: retained specs, or devices a
 * reload left gone (below). */
static bool pending(const struct dp_daemon *d) {
        return d->retained_specs->n || dp_gone_any(d);
}

int dp_retained_add(struct dp_daemon *d, const char *file, const char *resource) {
        struct dp_retained *rt = rt_get(d);
        struct kept k = { 0 }, *v;

        if (!rt)
                return -ENOMEM;
        for (size_t i = 0; i < rt->n; i++)
                if (strcmp(rt->v[i].file, file) == 0)
                        return 0;
        k.file = strdup(file);
        if (resource) {
                k.resource = strdup(resource);
                if (xasprintf(&k.label, "of resource \"%s\", removed from the config", resource) <
                    0)
                        k.label = NULL;
        } else
                k.label = strdup("of a resource no longer configured");
        v = k.file && (k.resource || !resource) && k.label
                    ? realloc(rt->v, (rt->n + 1) * sizeof(*v))
                    : NULL;
        if (!v) {
                kept_clear(&k);
                return -ENOMEM;
        }
        rt->v = v;
        rt->v[rt->n++] = k;
        return 0;
}

const char *dp_retained_resource(const struct dp_daemon *d, const char *file) {
        const struct dp_retained *rt = d->retained_specs;

        for (size_t i = 0; rt && i < rt->n; i++)
                if (strcmp(rt->v[i].file, file) == 0)
                        return rt->v[i].resource;
        return NULL;
}

/* Whether a configured resource writes the file again (re-added by a
 * reload): then it is its spec, not a retained one. */
static bool configured(const struct dp_daemon *d, const char *file) {
        for (size_t i = 0; i < d->n_res; i++) {
                if (strcmp(d->res[i]->plugin->cfg->spec_file, file) == 0)
                        return true;
        }
        return false;
}

/* Specs that need no more checking: owned again, or removed by hand. */
static void prune(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;
        const char *dir = d->opts->cdi_dir;

        for (size_t i = 0; i < rt->n;) {
                const struct kept *k = &rt->v[i];
                _cleanup_free_ char *path = NULL;
                struct stat st;
                bool removed;

                if (configured(d, k->file)) {
                        log_with(LOG_DEBUG, &(struct log_fields){ .path = dir, .file = k->file },
                                 "CDI spec %s/%s belongs to a configured resource again", dir,
                                 k->file);
                        drop(rt, i);
                        continue;
                }
                if (xasprintf(&path, "%s/%s", dir, k->file) < 0 || lstat(path, &st) == 0 ||
                    errno != ENOENT) {
                        i++;
                        continue;
                }
                /* Its claim in the record goes too. */
                if (cdi_spec_remove(dir, k->file, &removed) < 0)
                        log_with(LOG_DEBUG, &(struct log_fields){ .path = dir, .file = k->file },
                                 "cannot drop the claim on %s from the record in %s", k->file, dir);
                log_with(
                        LOG_INFO, &(struct log_fields){ .resource = k->resource, .path = path },
                        "CDI spec %s (%s) is gone (removed by hand, or it had no devices): nothing to keep",
                        path, k->label);
                drop(rt, i);
        }
}

/* The command line wins over the config; "" switches it off. */
const char *dp_podres_socket(const struct dp_daemon *d) {
        const char *podres = d->opts->pod_resources_socket  ? d->opts->pod_resources_socket
                             : d->cfg->pod_resources_socket ? d->cfg->pod_resources_socket
                                                            : DP_DEFAULT_PODRES_SOCKET;
        return *podres ? podres : NULL;
}

/* The retained specs' timer set to their next check. */
static void retained_timer_set(struct dp_daemon *d) {
        dp_timer_set(&d->retained_timer, d->retained_specs ? d->retained_specs->due_ms : 0);
}

static uint64_t next_delay(const struct dp_retained *rt) {
        return dp_backoff_ms(CHECK_MIN_MS, CHECK_MAX_MS, rt->rounds);
}

static void schedule(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;

        rt->due_ms = dp_now_ms() + next_delay(rt);
        rt->rounds++;
        retained_timer_set(d);
}

/* PodResources cannot be asked: every spec stays, and the operator hears
 * once per spec how to remove it. */
static void unknown(struct dp_daemon *d, const char *why, bool retry) {
        struct dp_retained *rt = d->retained_specs;
        const char *dir = d->opts->cdi_dir;
        _cleanup_free_ char *when = NULL;

        /* On failure when stays NULL and the line says less. */
        if ((retry ? xasprintf(&when, "cdiplug asks again in %llu s",
                               (unsigned long long)(next_delay(rt) / 1000))
                   : xasprintf(&when, "cdiplug asks again on the next reload (SIGHUP)")) < 0)
                when = NULL;
        for (size_t i = 0; i < rt->n; i++) {
                struct kept *k = &rt->v[i];
                if (k->said == SAID_UNKNOWN)
                        continue;
                k->said = SAID_UNKNOWN;
                log_with(
                        LOG_WARN,
                        &(struct log_fields){
                                .resource = k->resource, .path = dir, .file = k->file },
                        "CDI spec %s/%s (%s) kept: cannot ask the kubelet's PodResources whether a pod holds "
                        "one of its devices (%s); %s. To remove it by hand once no pod on this node holds one: "
                        "rm %s/%s",
                        dir, k->file, k->label, why, when ? when : "", dir, k->file);
        }
        if (retry)
                schedule(d);
}

static int start_list(struct dp_daemon *d, const char *socket) {
        struct dp_retained *rt = d->retained_specs;
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;

        rt->ch = dp_channel_unix(socket);
        if (!rt->ch)
                return -ENOMEM;
        dp_unary_init(&rt->u, dp_pack(&req.base));
        rt->call = dp_unary_begin(rt->ch, d->cq, DP_METHOD_PODRES_LIST, LIST_DEADLINE_MS, &rt->u,
                                  &rt->tag);
        if (!rt->call) {
                dp_unary_clear(&rt->u);
                grpc_channel_destroy(rt->ch);
                rt->ch = NULL;
                return -EIO;
        }
        d->live++;
        return 0;
}

static void unprepared(void *ctx) {
        dp_retained_check(ctx);
}

static void check(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;
        const char *socket = dp_podres_socket(d);
        _cleanup_free_ char *why = NULL;
        struct stat st;
        time_t age;

        rt->due_ms = 0;
        prune(d);
        if (!pending(d) || d->stopping)
                return;
        /* Specs and devices kept for prepared claims may go once one is
         * unprepared: asked again at once then. */
        dra_node_on_unprepared(d->dra.node, unprepared, d);
        if (rt->call) {
                rt->again = true;
                return;
        }
        if (!socket) {
                unknown(d, "PodResources is switched off: \"metrics.pod_resources_socket\" is \"\"",
                        false);
                return;
        }
        if (stat(socket, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                if (xasprintf(&why, "no socket at %s", socket) < 0)
                        why = NULL;
                unknown(d, why ? why : socket, true);
                return;
        }
        /* A socket from the future: the clock was set back since the
         * kubelet bound it, which is no sign of a young kubelet. */
        age = time(NULL) - st.st_mtim.tv_sec;
        if (age >= 0 && age < SETTLE_S) {
                log_with(
                        LOG_DEBUG, &(struct log_fields){ .path = socket },
                        "PodResources on %s: the kubelet started %lld s ago and may not list every pod yet; "
                        "%zu retained CDI specs stay, asking again in %lld s",
                        socket, (long long)age, rt->n, (long long)(SETTLE_S - age));
                rt->due_ms = dp_now_ms() + (uint64_t)(SETTLE_S - age) * 1000;
                retained_timer_set(d);
                return;
        }
        if (start_list(d, socket) < 0)
                unknown(d, "cannot start a List call", true);
}

void dp_retained_check(struct dp_daemon *d) {
        if (!d->retained_specs)
                return;
        d->retained_specs->rounds = 0;
        check(d);
}

void dp_retained_due(void *ctx) {
        struct dp_daemon *d = ctx;
        struct dp_retained *rt = d->retained_specs;

        if (rt && rt->due_ms && rt->due_ms <= dp_now_ms())
                check(d);
        retained_timer_set(d);
}

/* The first pod found holding a device of a kept spec's resource, and
 * that device (copies: the answer's bytes go first). */
struct holder {
        char *namespace_, *pod, *device;
};

struct find {
        const struct dp_retained *rt;
        struct holder *h; /* one per kept spec */
};

static void holder_clear(struct holder *h) {
        free(h->namespace_);
        free(h->pod);
        free(h->device);
}

/* A log line's copy of a name from the answer: bounded, and at most the
 * longest name Kubernetes allows. */
static char *name_copy(struct dp_podres_str s) {
        return strndup(s.s, s.len < 253 ? s.len : 253);
}

/* A claim device's CDI devices (dynamic_resources) of a kept spec: a
 * pod runs with it, whatever our checkpoint says (it may have been lost). */
static int find_dynamic(struct find *f, const struct dp_podres_devices *dv) {
        struct dp_podres_str cdi;
        size_t pos = 0;
        int r;

        while ((r = dp_podres_next_cdi(dv, &pos, &cdi)) > 0) {
                _cleanup_free_ char *kind = NULL, *file = NULL, *name = name_copy(cdi);
                if (!name)
                        return -ENOMEM;
                kind = strndup(name, strcspn(name, "="));
                if (!kind)
                        return -ENOMEM;
                if (cdi_spec_file_name(kind, &file) < 0)
                        continue;
                for (size_t i = 0; i < f->rt->n; i++) {
                        struct holder *h = &f->h[i];
                        if (h->pod || strcmp(file, f->rt->v[i].file) != 0)
                                continue;
                        h->namespace_ = name_copy(dv->namespace_);
                        h->pod = name_copy(dv->pod);
                        h->device = strdup(name);
                        if (!h->namespace_ || !h->pod || !h->device)
                                return -ENOMEM;
                }
        }
        return r;
}

static int find_one(void *arg, const struct dp_podres_devices *dv) {
        struct find *f = arg;
        _cleanup_free_ char *kind = NULL, *name = NULL;
        struct dp_podres_str id;
        char resource[320];
        size_t pos = 0;
        int r;

        if (dv->dynamic)
                return find_dynamic(f, dv);
        r = dp_podres_next_id(dv, &pos, &id);

        /* No ID, or a name too long to be a resource's: not a holder. */
        if (r <= 0 || dv->resource.len >= sizeof(resource))
                return r;
        memcpy(resource, dv->resource.s, dv->resource.len);
        resource[dv->resource.len] = '\0';
        if (cfg_names_of(resource, &kind, &name) < 0)
                return 0;
        for (size_t i = 0; i < f->rt->n; i++) {
                struct holder *h = &f->h[i];
                if (h->pod || strcmp(name, f->rt->v[i].file) != 0)
                        continue;
                h->namespace_ = name_copy(dv->namespace_);
                h->pod = name_copy(dv->pod);
                h->device = name_copy(id);
                if (!h->namespace_ || !h->pod || !h->device)
                        return -ENOMEM;
        }
        return 0;
}

/* The holders of the kept specs in a List answer, read in place (as the
 * metrics endpoint does, podres_wire.c): a big answer costs a flat copy
 * of its bytes for the walk, not its decoded form. */
static int find_holders(const struct dp_retained *rt, const grpc_slice *wire,
                        struct holder *holders) {
        struct find f = { .rt = rt, .h = holders };

        return dp_podres_walk_all(GRPC_SLICE_START_PTR(*wire), GRPC_SLICE_LENGTH(*wire), find_one,
                                  &f);
}

/* The answer's bytes in one piece (an empty answer, no pods, is none). */
static int flatten(grpc_byte_buffer *recv, grpc_slice *ret) {
        grpc_byte_buffer_reader reader;

        if (!recv) {
                *ret = grpc_empty_slice();
                return 0;
        }
        if (!grpc_byte_buffer_reader_init(&reader, recv))
                return -EBADMSG;
        *ret = grpc_byte_buffer_reader_readall(&reader);
        grpc_byte_buffer_reader_destroy(&reader);
        return 0;
}

/* A kept spec a prepared claim holds: said once, asked again later. */
static void held_by_claim(struct dp_daemon *d, struct kept *k, const struct dra_claim *c,
                          const char *dev) {
        const char *dir = d->opts->cdi_dir;

        if (k->said != SAID_HELD)
                log_with(LOG_INFO,
                         &(struct log_fields){ .resource = k->resource,
                                               .device = dev,
                                               .path = dir,
                                               .file = k->file },
                         "CDI spec %s/%s (%s) kept: DRA claim %s/%s (uid %s) is prepared with its "
                         "device \"%s\"; it goes once the kubelet unprepares the claim",
                         dir, k->file, k->label, c->ns, c->name, c->uid, dev);
        k->said = SAID_HELD;
}

static void judge(struct dp_daemon *d, struct holder *holders, const grpc_slice *wire,
                  const char *socket) {
        struct dp_retained *rt = d->retained_specs;
        const char *dir = d->opts->cdi_dir;
        unsigned long long s = (unsigned long long)(next_delay(rt) / 1000);
        bool again = false;

        for (size_t i = 0; i < rt->n;) {
                struct kept *k = &rt->v[i];
                const struct log_fields f = { .resource = k->resource,
                                              .path = dir,
                                              .file = k->file };
                const struct holder *pod = &holders[i];
                const struct dra_claim *claim;
                const char *dev = NULL;
                bool removed = false;
                int r;

                if (!pod->pod && (claim = dp_claim_holding(d, k->file, NULL, &dev))) {
                        again = true;
                        held_by_claim(d, k, claim, dev);
                        i++;
                        continue;
                }

                if (pod->pod) {
                        again = true;
                        if (k->said != SAID_HELD)
                                log_with(
                                        LOG_INFO,
                                        &(struct log_fields){ .resource = k->resource,
                                                              .device = pod->device,
                                                              .path = dir,
                                                              .file = k->file },
                                        "CDI spec %s/%s (%s) kept: pod %s/%s holds its device \"%s\"; cdiplug "
                                        "asks PodResources again in %llu s and removes it once no pod holds one",
                                        dir, k->file, k->label, pod->namespace_, pod->pod,
                                        pod->device, s);
                        k->said = SAID_HELD;
                        i++;
                        continue;
                }
                r = cdi_spec_remove(dir, k->file, &removed);
                if (r < 0) {
                        /* A write error: the next check tries again. */
                        again = true;
                        log_with(LOG_ERR, &f,
                                 "cannot remove CDI spec %s/%s (%s): %s; trying again in %llu s",
                                 dir, k->file, k->label, strerror(-r), s);
                        i++;
                        continue;
                }
                log_with(
                        LOG_INFO, &f,
                        "removed CDI spec %s/%s (%s): no pod holds one of its devices (PodResources on %s)",
                        dir, k->file, k->label, socket);
                drop(rt, i);
                /* holders stays parallel to rt->v. */
                holder_clear(&holders[i]);
                memmove(&holders[i], &holders[i + 1], (rt->n - i) * sizeof(*holders));
                holders[rt->n] = (struct holder){ 0 };
        }
        if (dp_gone_judge(d, GRPC_SLICE_START_PTR(*wire), GRPC_SLICE_LENGTH(*wire)))
                again = true;
        if (again)
                schedule(d);
}

static void on_listed(struct dp_daemon *d, struct dp_tag *tag, bool ok) {
        struct dp_retained *rt = (struct dp_retained *)tag;
        _cleanup_free_ char *why = NULL;
        const char *socket = dp_podres_socket(d);
        grpc_status_code status = rt->u.status;
        size_t n_kept = rt->n;
        /* One per spec kept now; prune() below only shortens the list. */
        struct holder *holders = calloc(n_kept ? n_kept : 1, sizeof(*holders));
        grpc_slice wire = grpc_empty_slice();
        int r = -EIO;

        if (!holders)
                r = -ENOMEM;
        else if (ok && status == GRPC_STATUS_OK && (r = flatten(rt->u.recv, &wire)) >= 0)
                r = find_holders(rt, &wire, holders);
        if (r < 0) {
                char *details = grpc_slice_to_c_string(rt->u.details);
                if (xasprintf(&why, "%s on %s: %s",
                              status == GRPC_STATUS_OK ? "no valid answer" : "List failed",
                              socket ? socket : "?",
                              details && *details ? details : strerror(-r)) < 0)
                        why = NULL;
                gpr_free(details);
        }
        grpc_call_unref(rt->call);
        rt->call = NULL;
        dp_unary_clear(&rt->u);
        grpc_channel_destroy(rt->ch);
        rt->ch = NULL;
        d->live--;

        if (!d->stopping) {
                /* The holders were found for the specs kept before the
                 * prune: ask again rather than match them up. */
                prune(d);
                if (pending(d) && r < 0)
                        unknown(d, why ? why : "no answer", true);
                else if (rt->n != n_kept)
                        rt->again = true;
                else if (pending(d))
                        judge(d, holders, &wire, socket ? socket : "?");
                if (rt->again) {
                        rt->again = false;
                        rt->rounds = 0;
                        check(d);
                }
        }
        for (size_t i = 0; holders && i < n_kept; i++)
                holder_clear(&holders[i]);
        free(holders);
        grpc_slice_unref(wire);
        dp_maybe_finish(d);
}

void dp_retained_devices(struct dp_daemon *d) {
        if (!rt_get(d)) {
                log_error("out of memory: devices no longer configured stay in their CDI specs");
                return;
        }
        dp_retained_check(d);
}

void dp_retained_stop(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;

        if (rt && rt->call)
                grpc_call_cancel(rt->call, NULL);
}

void dp_retained_free(struct dp_daemon *d) {
        struct dp_retained *rt = d->retained_specs;

        if (!rt)
                return;
        for (size_t i = 0; i < rt->n; i++)
                kept_clear(&rt->v[i]);
        free(rt->v);
        free(rt);
        d->retained_specs = NULL;
}

/* Devices a reload no longer names (plugin.c's "gone"): out of the list at
 * once, so node capacity drops, but kept in the resource's CDI spec while
 * a pod may hold one, since the kubelet starts a crashed container again
 * with the CDI names it allocated. The same PodResources List that
 * decides retained specs (retained.c) decides them, device by device:
 * one that no pod holds leaves the spec with its next write. */
bool dp_gone_any(const struct dp_daemon *d) {
        for (size_t i = 0; i < d->n_res; i++)
                if (dp_plugin_has_gone(d->res[i]->plugin))
                        return true;
        return false;
}

struct held {
        const struct dp_plugin *p;
        bool *held; /* per device */
};

/* Marks every device of ours some pod holds an ID of. */
/* Marks every gone device of ours a claim device's CDI devices name. */
static int mark_dynamic(struct held *h, const struct dp_podres_devices *dv) {
        const char *kind = h->p->cfg->kind;
        size_t klen = strlen(kind), pos = 0;
        struct dp_podres_str cdi;
        int r;

        while ((r = dp_podres_next_cdi(dv, &pos, &cdi)) > 0) {
                if (cdi.len <= klen || memcmp(cdi.s, kind, klen) != 0 || cdi.s[klen] != '=')
                        continue;
                for (size_t i = 0; i < h->p->n_devs; i++) {
                        _cleanup_free_ char *q = NULL;
                        if (!h->p->devs[i].gone || h->held[i])
                                continue;
                        if (dp_plugin_qualified(h->p, i, &q) < 0)
                                return -ENOMEM;
                        h->held[i] = dp_podres_str_eq(cdi, q);
                }
        }
        return r;
}

static int mark_held(void *arg, const struct dp_podres_devices *dv) {
        struct held *h = arg;
        struct dp_podres_str id;
        size_t pos = 0, dev;
        char buf[256];
        int r;

        if (dv->dynamic)
                return mark_dynamic(h, dv);
        if (!dp_podres_str_eq(dv->resource, h->p->cfg->name))
                return 0;
        while ((r = dp_podres_next_id(dv, &pos, &id)) > 0) {
                /* Longer than any ID of ours: someone else's. */
                if (id.len >= sizeof(buf))
                        continue;
                memcpy(buf, id.s, id.len);
                buf[id.len] = '\0';
                if (dp_plugin_find_id(h->p, buf, &dev) == 0)
                        h->held[dp_plugin_id_dev(h->p, dev)] = true;
        }
        return r;
}

/* One resource: its gone devices no pod holds, and no prepared claim,
 * leave its spec. Whether one is still held (ask again later). */
static bool judge_resource(struct dp_resource *res, const void *wire, size_t len) {
        struct dp_plugin *p = res->plugin;
        _cleanup_free_ bool *held = calloc(p->n_devs + 1, sizeof(bool));
        _cleanup_free_ bool *forget = calloc(p->n_devs + 1, sizeof(bool));
        bool again = false, any = false;

        if (!held || !forget) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": out of memory; its gone devices stay in its CDI spec",
                         res->cfg->name);
                return true;
        }
        if (dp_podres_walk_all(wire, len, mark_held, &(struct held){ p, held }) < 0)
                return true; /* cannot tell: ask again */
        for (size_t i = 0; i < p->n_devs; i++) {
                if (!p->devs[i].gone)
                        continue;
                if (!held[i])
                        held[i] = dp_gone_prepared(res, i);
                again |= held[i];
                forget[i] = !held[i];
                any |= forget[i];
        }
        if (!any)
                return again;
        _cleanup_strvec_ struct base_strvec ids = { 0 };
        for (size_t i = 0; i < p->n_devs; i++)
                if (forget[i] && base_strvec_push_dup(&ids, dp_device_id(p, i)) < 0)
                        break;
        if (ids.n != 0 && dp_plugin_forget(p, forget) < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = res->cfg->name },
                         "resource \"%s\": out of memory; its gone devices stay in its CDI spec",
                         res->cfg->name);
                return true;
        }
        /* A failed write is logged and retried on the timer (publish.c);
         * the list itself does not change. */
        bool written = dp_spec_publish(res) >= 0;
        for (size_t i = 0; i < ids.n; i++)
                log_with(LOG_INFO,
                         &(struct log_fields){ .resource = res->cfg->name,
                                               .device = ids.v[i],
                                               .path = res->d->opts->cdi_dir },
                         "resource \"%s\": device \"%s\", no longer named by the config, %s its "
                         "CDI spec in %s: no pod holds it",
                         res->cfg->name, ids.v[i], written ? "left" : "leaves",
                         res->d->opts->cdi_dir);
        return again;
}

bool dp_gone_judge(struct dp_daemon *d, const void *wire, size_t len) {
        bool again = false;

        for (size_t i = 0; i < d->n_res; i++)
                if (dp_plugin_has_gone(d->res[i]->plugin))
                        again |= judge_resource(d->res[i], wire, len);
        return again;
}
