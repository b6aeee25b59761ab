/* SPDX-License-Identifier: Apache-2.0 */
/* NodePrepareResources and NodeUnprepareResources (DRAPlugin v1 and
 * v1beta1: the same fields with the same numbers, but for v1's share_id,
 * which we never set; one set of generated types serves both).
 *
 * A Prepare request carries only each claim's namespace, name and uid; the
 * allocation is looked up on the API server (on the API client's thread),
 * mapped to the CDI IDs Allocate answers, checkpointed, and the request is
 * answered once every claim has an outcome. A problem with one claim is
 * that claim's error string, never a gRPC error: the kubelet would drop
 * the whole answer.
 *
 * The checkpoint file is the one truth the instances of a rolling update
 * share: read at the start of every call, and changed only under its
 * lock, after the lookups (checkpoint_io.c).
 *
 * Idempotent: a claim already prepared (same uid) answers what the
 * checkpoint holds, without asking the API server. A uid names one claim
 * object, whose allocation cannot change while it is reserved for a pod,
 * and the kubelet repeats Prepare for every running pod after it
 * restarts: answering from the checkpoint keeps those pods starting when
 * the API server is slow or down. */
#include <errno.h>
#include <string.h>

#include "dra-node-internal.h"
#include "dra_v1.pb-c.h"
#include "log.h"
#include "loop.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
        PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareClaim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
        UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareClaim;

/* A claim's error when not even that can be copied: no failed claim is
 * ever answered as prepared. */
static const char oom[] = "out of memory";
/* The kubelet sends one request per pod, of a few claims: bounded so
 * that one request's lookups keep the next Prepare waiting a moment at
 * most (16,384 of them held it 5 s). */
#define MAX_CLAIMS 1024

/* One claim of a Prepare: its lookup, then its outcome. */
struct dra_lookup {
        struct dra_prep *prep;
        char *ns, *name, *uid;
        bool done;         /* it has an outcome (the lookup may still be running) */
        bool fresh;        /* looked up: to be added to the checkpoint */
        bool in_flight;    /* dra_node_claim_done is still to come */
        char *error;       /* the claim's error, or NULL */
        bool error_static; /* the error is oom (no memory for a copy) */
        struct dra_device *devices;
        size_t n_devices;
};

struct dra_prep {
        struct dra_node *n;
        struct dra_call *c; /* NULL once answered */
        struct dra_lookup *claims;
        size_t n_claims;
        size_t pending; /* claims without an outcome */
        unsigned refs;  /* 1 until answered, +1 per lookup in flight */
        uint64_t deadline_ms;
        bool dirty; /* the prepared set changed: the checkpoint before the answer */
        enum dra_call_version version; /* for the stats */
        struct dra_prep *next;
};

static void message_freep(ProtobufCMessage **m) {
        if (*m)
                protobuf_c_message_free_unpacked(*m, NULL);
}

static void free_pools(struct dra_node *n) {
        for (size_t i = 0; i < n->n_pools; i++) {
                free((char *)n->pools[i].name);
                dra_index_free(n->pools[i].index);
        }
        free(n->pools);
        n->pools = NULL;
        n->n_pools = 0;
}

void dra_prepare_free(struct dra_node *n) {
        free_pools(n);
        dra_claims_free(n->prepared, n->n_prepared);
        n->prepared = NULL;
        n->n_prepared = 0;
}

static int find_prepared(const struct dra_node *n, const char *uid, size_t *ret) {
        for (size_t i = 0; i < n->n_prepared; i++)
                if (strcmp(n->prepared[i].uid, uid) == 0) {
                        *ret = i;
                        return 0;
                }
        return -ENOENT;
}

static void prep_unref(struct dra_prep *p) {
        if (--p->refs > 0)
                return;
        for (size_t i = 0; i < p->n_claims; i++) {
                struct dra_lookup *l = &p->claims[i];
                free(l->ns);
                free(l->name);
                free(l->uid);
                free(l->error);
                for (size_t k = 0; k < l->n_devices; k++)
                        dra_device_clear(&l->devices[k]);
                free(l->devices);
        }
        free(p->claims);
        free(p);
}

static void unlink_prep(struct dra_prep *p) {
        for (struct dra_prep **pp = &p->n->preps; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        return;
                }
}

/* The devices of a prepared claim, as the kubelet is answered. */
static int fill_devices(PrepareClaim *pc, const struct dra_device *devs, size_t n_devs) {
        pc->devices = calloc(n_devs + 1, sizeof(*pc->devices));
        if (!pc->devices)
                return -ENOMEM;
        for (size_t k = 0; k < n_devs; k++) {
                Device *d = calloc(1, sizeof(*d));
                if (!d)
                        return -ENOMEM;
                k8s__io__kubelet__pkg__apis__dra__v1__device__init(d);
                pc->devices[pc->n_devices++] = d;
                d->request_names = (char **)&devs[k].request;
                d->n_request_names = 1;
                d->pool_name = devs[k].pool;
                d->device_name = devs[k].device;
                for (char **id = devs[k].cdi_ids; *id; id++)
                        d->n_cdi_device_ids++;
                d->cdi_device_ids = devs[k].cdi_ids;
        }
        return 0;
}

static void free_answer(PrepareResponse *resp) {
        for (size_t i = 0; i < resp->n_claims; i++) {
                PrepareEntry *e = resp->claims[i];
                if (!e)
                        continue;
                if (e->value) {
                        for (size_t k = 0; k < e->value->n_devices; k++)
                                free(e->value->devices[k]);
                        free(e->value->devices);
                        free(e->value);
                }
                free(e);
        }
        free(resp->claims);
}

static int record(struct dra_node *n, const struct dra_lookup *l, char **ret_msg);

static const char save_failed[] =
        "cannot write the checkpoint of prepared claims (see cdiplug's log)";

/* The claims looked up, added to the checkpoint as it is now: lock, read,
 * change, write, unlock. NULL, or why the fresh claims fail (valid until
 * the next call into n). What failed leaves n->prepared as the file. */
static const char *commit(struct dra_prep *p) {
        struct dra_node *n = p->n;
        const char *why = NULL;
        int r = dra_checkpoint_lock(n);

        if (r < 0)
                return "cannot lock the checkpoint of prepared claims (see cdiplug's log)";
        r = dra_checkpoint_read(n);
        if (r == -EBADMSG)
                why = n->ck_error;
        for (size_t i = 0; r >= 0 && i < p->n_claims; i++)
                if (p->claims[i].fresh)
                        r = record(n, &p->claims[i], NULL);
        if (r >= 0)
                r = dra_checkpoint_save(n);
        if (r < 0 && r != -EBADMSG) {
                why = save_failed;
                (void)dra_checkpoint_read(n);
        }
        dra_checkpoint_unlock(n);
        return why;
}

/* Every claim has its outcome: checkpoint what changed, then answer. A
 * checkpoint that cannot be written fails the claims it would have held:
 * Unprepare after a restart could not know them. */
static void answer(struct dra_prep *p) {
        struct dra_node *n = p->n;
        struct dra_call *c = p->c;
        PrepareResponse resp =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
        const char *save_error = NULL;
        bool claim_error = false;
        int r = 0;

        /* Only a request still in n->preps is answered, and it has its
         * call until then. */
        if (!c) {
                unlink_prep(p);
                return;
        }
        if (p->dirty)
                save_error = commit(p);
        resp.claims = calloc(p->n_claims + 1, sizeof(*resp.claims));
        if (!resp.claims)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < p->n_claims; i++) {
                struct dra_lookup *l = &p->claims[i];
                PrepareEntry *e = calloc(1, sizeof(*e));
                PrepareClaim *pc = calloc(1, sizeof(*pc));
                if (!e || !pc) {
                        free(e);
                        free(pc);
                        r = -ENOMEM;
                        break;
                }
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
                        e);
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(pc);
                e->key = l->uid;
                e->value = pc;
                resp.claims[resp.n_claims++] = e;
                if (l->error || l->error_static)
                        pc->error = l->error ? l->error : (char *)oom;
                else if (save_error && l->fresh)
                        pc->error = (char *)save_error;
                else
                        r = fill_devices(pc, l->devices, l->n_devices);
                /* protobuf-c initialises a string to "", not NULL. */
                claim_error = claim_error || (pc->error && *pc->error);
        }
        if (r >= 0)
                c->sc.send = dp_pack(&resp.base);
        n->stats.calls[DRA_CALL_PREPARE][p->version][!c->sc.send   ? DRA_CALL_FAILED
                                                     : claim_error ? DRA_CALL_CLAIM_ERROR
                                                                   : DRA_CALL_OK]++;
        free_answer(&resp);
        unlink_prep(p);
        p->c = NULL;
        c->prep = NULL;
        if (c->sc.send)
                dra_call_finish(c, GRPC_STATUS_OK, NULL);
        else
                dra_call_finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        prep_unref(p);
}

static void claim_failed(struct dra_lookup *l, const char *what) {
        l->done = true;
        l->error = strdup(what);
        l->error_static = !l->error;
        l->prep->pending--;
}

static int copy_devices(const struct dra_device *src, size_t n, struct dra_device **ret) {
        struct dra_device *d = calloc(n + 1, sizeof(*d));

        if (!d)
                return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
                size_t ids = 0;
                while (src[k].cdi_ids[ids])
                        ids++;
                d[k].request = strdup(src[k].request);
                d[k].pool = strdup(src[k].pool);
                d[k].device = strdup(src[k].device);
                d[k].cdi_ids = calloc(ids + 1, sizeof(char *));
                bool ok = d[k].request && d[k].pool && d[k].device && d[k].cdi_ids;
                for (size_t j = 0; ok && j < ids; j++)
                        ok = (d[k].cdi_ids[j] = strdup(src[k].cdi_ids[j])) != NULL;
                if (!ok) {
                        for (size_t j = 0; j <= k; j++)
                                dra_device_clear(&d[j]);
                        free(d);
                        return -ENOMEM;
                }
        }
        *ret = d;
        return 0;
}

/* l's devices as a claim, checked to fit the checkpoint: -EINVAL with
 * *ret_msg otherwise. */
static int claim_of(const struct dra_lookup *l, struct dra_claim *ret, char **ret_msg) {
        struct dra_claim c = { 0 };
        int r;

        c.uid = strdup(l->uid);
        c.ns = strdup(l->ns);
        c.name = strdup(l->name);
        if (!c.uid || !c.ns || !c.name || copy_devices(l->devices, l->n_devices, &c.devices) < 0) {
                dra_claim_clear(&c);
                return -ENOMEM;
        }
        c.n_devices = l->n_devices;
        r = dra_checkpoint_check_claim(&c, ret_msg);
        if (r < 0) {
                dra_claim_clear(&c);
                return r;
        }
        *ret = c;
        return 0;
}

/* Record l's devices as prepared (replacing what its uid had). */
static int record(struct dra_node *n, const struct dra_lookup *l, char **ret_msg) {
        _cleanup_free_ char *msg = NULL;
        struct dra_claim c;
        size_t at;
        int r = claim_of(l, &c, ret_msg ? ret_msg : &msg);

        if (r < 0)
                return r;
        if (find_prepared(n, l->uid, &at) == 0) {
                dra_claim_clear(&n->prepared[at]);
                n->prepared[at] = c;
                return 0;
        }
        struct dra_claim *more = reallocarray(n->prepared, n->n_prepared + 1, sizeof(*more));
        if (!more) {
                dra_claim_clear(&c);
                return -ENOMEM;
        }
        n->prepared = more;
        n->prepared[n->n_prepared++] = c;
        return 0;
}

static const char *lookup_error(int err) {
        switch (err) {
        case -ENOENT:
                return "no such ResourceClaim";
        case -ESTALE:
                return "the ResourceClaim has another uid (it was deleted and created again)";
        case -ENODATA:
                return "the ResourceClaim is not allocated";
        default:
                return strerror(-err);
        }
}

void dra_node_claim_done(struct dra_lookup *l, int err, const char *msg,
                         const struct dra_result *results, size_t n_results) {
        struct dra_prep *p = l->prep;
        struct dra_node *n = p->n;
        _cleanup_free_ char *map_msg = NULL;

        pthread_mutex_lock(n->lock);
        l->in_flight = false;
        if (!l->done && p->c) {
                if (err < 0)
                        claim_failed(l, msg && *msg ? msg : lookup_error(err));
                else if (n_results > DRA_MAX_RESULTS)
                        claim_failed(l, "more allocated devices than cdiplug prepares");
                else {
                        int r = dra_prepare_devices(n->pools, n->n_pools, results, n_results,
                                                    &l->devices, &l->n_devices, &map_msg);
                        struct dra_claim check = { 0 };
                        /* Checked now, recorded under the lock in answer(). */
                        if (r >= 0)
                                r = claim_of(l, &check, &map_msg);
                        dra_claim_clear(&check);
                        if (r < 0)
                                claim_failed(l, map_msg ? map_msg : strerror(-r));
                        else {
                                l->done = true;
                                l->fresh = true;
                                p->pending--;
                                p->dirty = true;
                        }
                }
                if (p->pending == 0)
                        answer(p);
        }
        prep_unref(p);
        pthread_mutex_unlock(n->lock);
}

static bool claim_fields_ok(struct dra_lookup *l, const Claim *c) {
        if (!c->uid || !*c->uid || !c->namespace_ || !*c->namespace_ || !c->name || !*c->name) {
                claim_failed(l, "the claim lacks its namespace, name or uid");
                return false;
        }
        return true;
}

/* Each claim: answered from the checkpoint, or looked up. */
static void start_claims(struct dra_prep *p, const PrepareRequest *req) {
        struct dra_node *n = p->n;
        /* Without the lock: every write is a rename, so a read sees one
         * whole file. */
        int rd = dra_checkpoint_read(n);

        for (size_t i = 0; i < p->n_claims; i++) {
                struct dra_lookup *l = &p->claims[i];
                const Claim *c = req->claims[i];
                size_t at;

                l->prep = p;
                l->uid = strdup(c->uid ? c->uid : "");
                l->ns = strdup(c->namespace_ ? c->namespace_ : "");
                l->name = strdup(c->name ? c->name : "");
                if (!l->uid || !l->ns || !l->name) {
                        claim_failed(l, "out of memory");
                        continue;
                }
                if (!claim_fields_ok(l, c))
                        continue;
                if (rd < 0) {
                        claim_failed(l, rd == -EBADMSG ? n->ck_error : oom);
                        continue;
                }
                if (find_prepared(n, l->uid, &at) == 0) {
                        const struct dra_claim *pc = &n->prepared[at];
                        if (copy_devices(pc->devices, pc->n_devices, &l->devices) < 0) {
                                claim_failed(l, "out of memory");
                                continue;
                        }
                        l->n_devices = pc->n_devices;
                        l->done = true;
                        p->pending--;
                        continue;
                }
                p->refs++;
                l->in_flight = true;
                int r = n->lookup(n->lookup_ctx, l->ns, l->name, l->uid, l);
                if (r < 0) {
                        l->in_flight = false;
                        p->refs--;
                        _cleanup_free_ char *why = NULL;
                        xasprintf(&why, "cannot look the ResourceClaim up: %s", strerror(-r));
                        claim_failed(l, why ? why : oom);
                }
        }
}

static grpc_status_code prepare(struct dra_call *c, enum dra_call_version version, char **ret_msg) {
        struct dra_node *n = c->n;
        _cleanup_(message_freep) ProtobufCMessage *m = NULL;
        const PrepareRequest *req;
        struct dra_prep *p;
        int r;

        r = dp_unpack(
                c->sc.recv,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
                &m);
        if (r < 0) {
                xasprintf(ret_msg, "cannot decode NodePrepareResourcesRequest: %s", strerror(-r));
                return dp_status_from_errno(r);
        }
        req = (const PrepareRequest *)m;
        if (req->n_claims > MAX_CLAIMS) {
                xasprintf(ret_msg, "%zu claims in one request, more than %d", req->n_claims,
                          MAX_CLAIMS);
                return GRPC_STATUS_INVALID_ARGUMENT;
        }
        p = calloc(1, sizeof(*p));
        if (p)
                p->claims = calloc(req->n_claims + 1, sizeof(*p->claims));
        if (!p || !p->claims) {
                free(p);
                return GRPC_STATUS_RESOURCE_EXHAUSTED;
        }
        p->n = n;
        p->c = c;
        p->version = version;
        c->prep = p;
        p->n_claims = p->pending = req->n_claims;
        p->refs = 1;
        p->deadline_ms = dp_now_ms() + n->lookup_timeout_ms;
        p->next = n->preps;
        n->preps = p;
        start_claims(p, req);
        if (p->pending == 0)
                answer(p);
        else if (n->deadline_set)
                n->deadline_set(n->deadline_ctx, p->deadline_ms);
        return GRPC_STATUS_OK;
}

/* The uids of req leave the checkpoint as it is now (lock, read, change,
 * write, unlock): NULL, or why every claim fails. */
static const char *forget(struct dra_node *n, const UnprepareRequest *req, bool *ret_changed) {
        const char *why = NULL;
        bool changed = false;
        int r = dra_checkpoint_lock(n);

        if (r < 0)
                return "cannot lock the checkpoint of prepared claims (see cdiplug's log)";
        r = dra_checkpoint_read(n);
        if (r < 0)
                why = r == -EBADMSG ? n->ck_error : oom;
        for (size_t i = 0; r >= 0 && i < req->n_claims; i++) {
                size_t at;
                const char *uid = req->claims[i]->uid ? req->claims[i]->uid : "";
                if (*uid && find_prepared(n, uid, &at) == 0) {
                        dra_claim_clear(&n->prepared[at]);
                        n->prepared[at] = n->prepared[--n->n_prepared];
                        changed = true;
                }
        }
        if (changed && dra_checkpoint_save(n) < 0) {
                why = save_failed;
                changed = false;
                (void)dra_checkpoint_read(n); /* back to what the file holds */
        }
        dra_checkpoint_unlock(n);
        *ret_changed = changed;
        return why;
}

/* Unprepare needs nothing from the API server: the claim may be gone. An
 * unknown uid was never prepared (by either instance), or its Unprepare
 * already ran: success either way. */
static grpc_status_code unprepare(struct dra_call *c, bool *ret_claim_error, char **ret_msg) {
        struct dra_node *n = c->n;
        _cleanup_(message_freep) ProtobufCMessage *m = NULL;
        UnprepareResponse resp =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
        UnprepareClaim ok =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
        UnprepareClaim failed =
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
        _cleanup_free_ UnprepareEntry *entries = NULL;
        _cleanup_free_ UnprepareEntry **ptrs = NULL;
        const UnprepareRequest *req;
        const char *why;
        bool changed = false;
        int r;

        r = dp_unpack(
                c->sc.recv,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
                &m);
        if (r < 0) {
                xasprintf(ret_msg, "cannot decode NodeUnprepareResourcesRequest: %s", strerror(-r));
                return dp_status_from_errno(r);
        }
        req = (const UnprepareRequest *)m;
        if (req->n_claims > MAX_CLAIMS) {
                xasprintf(ret_msg, "%zu claims in one request, more than %d", req->n_claims,
                          MAX_CLAIMS);
                return GRPC_STATUS_INVALID_ARGUMENT;
        }
        entries = calloc(req->n_claims + 1, sizeof(*entries));
        ptrs = calloc(req->n_claims + 1, sizeof(*ptrs));
        if (!entries || !ptrs)
                return GRPC_STATUS_RESOURCE_EXHAUSTED;
        why = req->n_claims ? forget(n, req, &changed) : NULL;
        failed.error = (char *)why;
        /* What they held may leave the CDI specs now. */
        if (changed && n->unprepared)
                n->unprepared(n->unprepared_ctx);
        for (size_t i = 0; i < req->n_claims; i++) {
                k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
                        &entries[i]);
                entries[i].key = req->claims[i]->uid ? req->claims[i]->uid : (char *)"";
                entries[i].value = why ? &failed : &ok;
                ptrs[i] = &entries[i];
        }
        resp.claims = ptrs;
        resp.n_claims = req->n_claims;
        *ret_claim_error = why != NULL;
        c->sc.send = dp_pack(&resp.base);
        return c->sc.send ? GRPC_STATUS_OK : GRPC_STATUS_RESOURCE_EXHAUSTED;
}

bool dra_prepare_method(struct dra_call *c, const char *method) {
        _cleanup_free_ char *msg = NULL;
        grpc_status_code st;
        bool claim_error = false;
        enum dra_call_version v = strcmp(method, DRA_METHOD_PREPARE_V1BETA1) == 0 ||
                                                  strcmp(method, DRA_METHOD_UNPREPARE_V1BETA1) == 0
                                          ? DRA_CALL_V1BETA1
                                          : DRA_CALL_V1;
        bool prep = strcmp(method, DRA_METHOD_PREPARE_V1) == 0 ||
                    strcmp(method, DRA_METHOD_PREPARE_V1BETA1) == 0;
        bool unprep = strcmp(method, DRA_METHOD_UNPREPARE_V1) == 0 ||
                      strcmp(method, DRA_METHOD_UNPREPARE_V1BETA1) == 0;

        /* Without a way to look claims up, the service is not served. */
        if ((!prep && !unprep) || !c->n->lookup)
                return false;
        /* A request read after the stop began would start lookups that
         * hold the stop up: the kubelet asks again. */
        if (!c->n->up) {
                c->n->stats
                        .calls[prep ? DRA_CALL_PREPARE : DRA_CALL_UNPREPARE][v][DRA_CALL_FAILED]++;
                dra_call_finish(c, GRPC_STATUS_UNAVAILABLE, "cdiplug is stopping");
                return true;
        }
        st = prep ? prepare(c, v, &msg) : unprepare(c, &claim_error, &msg);
        if (prep && st == GRPC_STATUS_OK)
                return true; /* answered by answer(), now or once the lookups are done */
        c->n->stats.calls[prep ? DRA_CALL_PREPARE : DRA_CALL_UNPREPARE][v]
                         [st != GRPC_STATUS_OK ? DRA_CALL_FAILED
                          : claim_error        ? DRA_CALL_CLAIM_ERROR
                                               : DRA_CALL_OK]++;
        if (st != GRPC_STATUS_OK)
                log_with(LOG_WARN, &(struct log_fields){ .path = "" }, "dra: %s refused: %s",
                         method, msg ? msg : "out of memory");
        dra_call_finish(c, st, msg);
        return true;
}

void dra_node_expire(struct dra_node *n, uint64_t now_ms, uint64_t *ret_next_ms) {
        uint64_t next = 0;

        for (struct dra_prep *p = n->preps, *nx; p; p = nx) {
                nx = p->next;
                if (p->deadline_ms > now_ms) {
                        next = dp_due_min(next, p->deadline_ms);
                        continue;
                }
                for (size_t i = 0; i < p->n_claims; i++) {
                        if (!p->claims[i].done)
                                claim_failed(&p->claims[i],
                                             "the ResourceClaim lookup did not finish in time");
                        /* Its slot goes to the claims that come next. */
                        if (p->claims[i].in_flight && n->cancel)
                                n->cancel(n->lookup_ctx, &p->claims[i]);
                }
                answer(p);
        }
        dra_health_expire(n, now_ms, &next);
        *ret_next_ms = next;
}

/* Stopping: what waits is answered now with errors (the kubelet retries). */
void dra_prepare_stop(struct dra_node *n) {
        while (n->preps) {
                struct dra_prep *p = n->preps;
                for (size_t i = 0; i < p->n_claims; i++)
                        if (!p->claims[i].done)
                                claim_failed(&p->claims[i], "cdiplug is stopping");
                answer(p);
        }
}

int dra_node_pools_set(struct dra_node *n, const struct dra_node_pool *pools, size_t count) {
        struct dra_pool *v;

        /* None: cannot fail, so an owner out of memory can always drop
         * plugins it is about to free. */
        if (count == 0) {
                free_pools(n);
                return 0;
        }
        v = calloc(count + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < count; i++) {
                v[i].name = strdup(pools[i].name);
                v[i].p = pools[i].plugin;
                if (!v[i].name) {
                        for (size_t k = 0; k < i; k++)
                                free((char *)v[k].name);
                        free(v);
                        return -ENOMEM;
                }
        }
        free_pools(n);
        n->pools = v;
        n->n_pools = count;
        return 0;
}

size_t dra_node_prepared(const struct dra_node *n) {
        return n->n_prepared;
}

void dra_node_stats(const struct dra_node *n, struct dra_node_stats *ret) {
        *ret = n->stats;
}

void dra_node_on_unprepared(struct dra_node *n, void (*fn)(void *ctx), void *ctx) {
        if (!n)
                return;
        n->unprepared = fn;
        n->unprepared_ctx = ctx;
}

const struct dra_claim *dra_node_prepared_claims(const struct dra_node *n, size_t *ret_n) {
        *ret_n = n ? n->n_prepared : 0;
        return n ? n->prepared : NULL;
}
