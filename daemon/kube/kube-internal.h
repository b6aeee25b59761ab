/* SPDX-License-Identifier: Apache-2.0 */
/* kube internals: credentials (creds.c, kubeconfig.c), slice naming and
 * chunking (slices.c), claim parsing (claim.c) and the client thread
 * (client.c). Not for use outside daemon/kube/ and its tests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube.h"

static inline void kube_cjson_deletep(cJSON **p) {
        cJSON_Delete(*p);
}

/* What went wrong, for the log line or the test: names the file and the
 * key. */
struct kube_error {
        char msg[512];
};

/* Caps on what we read: a kubeconfig is a few KiB, certificates and
 * tokens less. */
#define KUBE_KUBECONFIG_MAX (1024 * 1024)
#define KUBE_KUBECONFIG_DEPTH 32
#define KUBE_TOKEN_MAX (64 * 1024)
#define KUBE_PEM_MAX (1024 * 1024)
/* A rotated service-account token is picked up this often (and at once
 * after a 401). */
#define KUBE_TOKEN_REREAD_MS 60000

struct kube_blob {
        char *data;
        size_t len;
};

struct kube_creds {
        char *source; /* the kubeconfig path, or "in-cluster", for messages */
        char *server; /* https://HOST[:PORT][/prefix], no trailing '/' */
        char *host;   /* as in the URL (IPv6 without brackets) */
        unsigned port;
        char *ca_file;          /* certificate-authority, or NULL */
        struct kube_blob ca;    /* certificate-authority-data (PEM), or empty */
        char *cert_file;        /* client-certificate, or NULL */
        struct kube_blob cert;  /* client-certificate-data */
        char *key_file;         /* client-key */
        struct kube_blob key;   /* client-key-data */
        char *token_file;       /* tokenFile / the service account's token, or NULL */
        char *token;            /* the current token, or NULL */
        uint64_t token_read_ms; /* when token_file was last read */
};

void kube_creds_clear(struct kube_creds *c);

/* Parse a kubeconfig (current-context → context → cluster, user). Paths
 * in it are relative to its directory. insecure-skip-tls-verify and
 * exec/auth-provider users are refused. */
int kube_creds_kubeconfig(const char *path, struct kube_creds *ret, struct kube_error *err);

/* In-cluster: KUBERNETES_SERVICE_HOST/_PORT and the service account's
 * token and ca.crt under root (NULL: "/") +
 * /var/run/secrets/kubernetes.io/serviceaccount/. */
int kube_creds_in_cluster(const char *root, struct kube_creds *ret, struct kube_error *err);

/* The token to send (NULL for none), re-read from token_file when force
 * or when the last read is KUBE_TOKEN_REREAD_MS old. A failed re-read
 * keeps the old token and returns the error (the caller logs it once). */
int kube_creds_token(struct kube_creds *c, uint64_t now_ms, bool force, const char **ret);

/* Decode base64 (RFC 4648, padding optional, whitespace skipped). */
int kube_base64_decode(const char *in, size_t len, struct kube_blob *ret);

/* Read a whole regular file of at most max bytes (NUL-terminated). */
int kube_read_file(const char *path, size_t max, struct kube_blob *ret);

/* kube_new with the in-cluster root made injectable, for the tests. */
int kube_new_at(const struct kube_settings *s, const char *root, struct kube **ret);

/* ---- slices.c ---- */

#define KUBE_SLICE_DEVICES 128

/* The name of slice index of pool: "<node>-<pool's resource part>" made
 * DNS-subdomain-safe and cut to fit, then "-<8 hex FNV-1a of driver and
 * pool>-<index>": deterministic, unique per driver and pool, <= 253. */
int kube_slice_name(const char *node, const char *driver, const char *pool, size_t index,
                    char **ret);

/* One slice of a pool: devices[index*128 ...] of a pool of count slices. */
struct kube_slice_args {
        const char *name, *node, *node_uid, *driver, *pool;
        uint64_t generation;
        size_t index, count;
        const cJSON *devices;
};
int kube_slice_json(const struct kube_slice_args *a, cJSON **ret);

/* Is want contained in have: every member of every object in want is in
 * have with an equal value, arrays of the same length element by element
 * (the API server may add defaults). */
bool kube_json_subset(const cJSON *want, const cJSON *have);

/* ---- claim.c ---- */

/* Parse a ResourceClaim answer for driver and uid (NULL: unchecked) into
 * *ret (err/msg/results set; returns ret->err). */
int kube_claim_parse(const char *body, const char *driver, const char *uid, struct kube_claim *ret);

/* ---- the client: xfer.c, client.c, reconcile.c ---- */

#include "curl-dl.h"
#include <pthread.h>

/* Answers we read at most (the rest is refused: bounded memory per peer). */
#define KUBE_PAGE_MAX (4 * 1024 * 1024)   /* one page of the list */
#define KUBE_OBJECT_MAX (4 * 1024 * 1024) /* one slice (128 devices) or a Node */
#define KUBE_CLAIM_MAX (1024 * 1024)
#define KUBE_EVENT_MAX (1024 * 1024) /* one watch event line */
/* And what we parse: a JSON text of more values than this is refused
 * before it is parsed (base_json_values), so no answer makes a tree of
 * more than ~10 MiB whatever its bytes are ("[0,0,...]" is 40 times its
 * size as a tree). A page of KUBE_LIST_PAGE slices of 128 devices with
 * a dozen values each stays well below. */
#define KUBE_PARSE_VALUES_MAX 131072
/* The list is read in pages of this many slices (limit/continue). */
#define KUBE_LIST_PAGE 50
/* A page's continue token is sent back in the next request's URL: the
 * API server's are a few hundred bytes; longer is refused (the text for
 * the message, which names the bound). */
#define KUBE_CONTINUE_MAX 16384
#define KUBE_CONTINUE_MAX_TEXT "16384"
/* At most this many of this node's slices of our driver are kept in view
 * besides the pools' own (leftovers to delete, whatever a server sends);
 * past it the rest waits for the next list. */
#define KUBE_SLICES_MAX 1024
/* A watch that ends (or is answered 410 from a fresh list's version)
 * sooner than this after it started counts as a failure: back-off, not
 * a list+watch loop. */
#define KUBE_WATCH_MIN_MS 1000
/* A watch that delivered an event or bookmark, or lasted this long, was
 * healthy: the failures before it are forgiven. */
#define KUBE_WATCH_HEALTHY_MS 60000
/* Lookups in flight at once; the rest wait in the queue. */
#define KUBE_CLAIMS_RUNNING 4
/* A watch asks the server to end it after a time uniform in this range
 * (as client-go's reflector), and is restarted: a fleet's watches do not
 * all renew in the same second. */
#define KUBE_WATCH_SECONDS_MIN 300
#define KUBE_WATCH_SECONDS_MAX 600
/* Back-off between failed attempts (kube_backoff_next): the first retry
 * after a run of successes waits uniform in 0..KUBE_FIRST_RETRY_MS (a
 * fleet whose connections were all cut at once comes back spread over a
 * second), then doubling from KUBE_BACKOFF_MIN_MS with jitter, up to
 * KUBE_BACKOFF_MAX_MS for an answer, or KUBE_BACKOFF_CONNECT_MAX_MS when
 * there was none (a restarting server: probing it costs it nothing, and
 * we must be back within seconds of it being ready). The longest a
 * Retry-After is obeyed. */
#define KUBE_FIRST_RETRY_MS 1000
#define KUBE_BACKOFF_MIN_MS 250
#define KUBE_BACKOFF_MAX_MS 30000
#define KUBE_BACKOFF_CONNECT_MAX_MS 4000
#define KUBE_RETRY_AFTER_MAX_S 600
/* A wait at least this long is said at info, once per outage. */
#define KUBE_LOG_WAIT_MS 3000
/* A list is given up after this many pages without an end: 64 pages of
 * KUBE_LIST_PAGE are 3,200 slices, three times the KUBE_SLICES_MAX kept
 * in view, so a real list never gets near it; a continue token that
 * never ends (a broken server or proxy) costs 64 requests, then back-off. */
#define KUBE_LIST_PAGES_MAX 64

enum kube_xkind { KX_NODE, KX_LIST, KX_WRITE, KX_WATCH, KX_CLAIM };
enum kube_wop { KW_CREATE, KW_UPDATE, KW_DELETE };

struct kube_claim_req {
        char *ns, *name, *uid;
        kube_claim_fn *fn;
        void *ctx;
        bool retried;   /* once after a 401, with a re-read token */
        bool cancelled; /* kube_claim_cancel() (under k->mu) */
        struct kube_claim_req *next;
};

struct kube_xfer {
        struct kube *k;
        CURLM *multi; /* the thread's it runs on */
        CURL *h;
        struct curl_slist *resolve; /* its own copy of the pinned addresses */
        enum kube_xkind kind;
        struct curl_slist *headers;
        char *body_out;
        char *buf; /* the answer (the current line for a watch) */
        size_t len, cap, limit;
        bool too_big;
        enum kube_wop op;             /* KX_WRITE */
        char *slice;                  /* KX_WRITE: the slice's name */
        char *pool;                   /* KX_WRITE: its pool */
        struct kube_claim_req *claim; /* KX_CLAIM */
        int watch_end;                /* KX_WATCH: 0, or why the stream must be given up */
        bool from_list;               /* KX_WATCH: from a list's resourceVersion */
        bool delivered;               /* KX_WATCH: an event or bookmark came */
        uint64_t started_ms;          /* when it was made */
        const char *bad;              /* a 2xx answer we could not use: why (static) */
        /* A streamed answer (the watch): each piece goes here as it comes,
         * instead of into buf; set by whoever made the transfer, so this
         * file never calls up into the one that reads the stream. */
        size_t (*stream)(struct kube_xfer *x, const char *p, size_t n);
};

/* One pool as the thread sees it. */
struct kube_pool {
        char *name;
        cJSON *want;       /* the devices; NULL: pool gone, delete its slices */
        uint64_t gen;      /* spec.pool.generation of want */
        bool changed;      /* want differs from what gen was chosen for */
        bool done;         /* its slices were as wanted when last compared */
        uint64_t since_ns; /* first kube_pool_set not yet published, 0: none */
        struct kube_pool *next;
};

/* Another writer changing our slices (another instance with another
 * config, a Helm install beside a unit): each repair of its change after
 * the first waits longer, from KUBE_REPAIR_MIN_MS doubling with jitter up
 * to KUBE_REPAIR_MAX_MS; a war is over after KUBE_REPAIR_QUIET_MS without
 * a repair. A wipe (a deletion) is not a change: repaired at once. */
#define KUBE_REPAIR_MIN_MS 1000
#define KUBE_REPAIR_MAX_MS 60000
#define KUBE_REPAIR_QUIET_MS 300000
/* The field manager: "cdiplug-<start, ms since the epoch>-<instance>";
 * the API allows 128 characters. */
#define KUBE_MANAGER_PREFIX "cdiplug-"

/* A kube_pool_set() not yet taken by the thread. */
struct kube_inbox {
        char *pool; /* NULL: kube_pools_complete() */
        cJSON *devices;
        uint64_t at_ns;
        struct kube_inbox *next;
};

enum kube_state { KS_NODE, KS_LIST, KS_SYNCED };

/* One watch's health, for the log (said once per outage) and /metrics. */
struct kube_watch_log {
        bool up;           /* its stream is open (HTTP 200) */
        bool down_said;    /* the failure that began this outage was logged */
        bool wait_said;    /* a long wait in this outage was logged */
        bool back_said;    /* its coming back was logged */
        uint64_t down_ms;  /* when this outage began, 0: none */
        unsigned attempts; /* failed attempts in this outage */
};

struct kube {
        char *node, *driver;
        uint64_t rng;         /* dp_random's state, seeded per process */
        char *manager;        /* our fieldManager (KUBE_MANAGER_PREFIX) */
        uint64_t start_ms;    /* in it: a newer instance's is higher */
        bool hold_leftovers;  /* kube_settings; until kube_pools_complete() */
        bool resolve_named;   /* the server is a name, not an address */
        struct kube_dns *dns; /* cdiplug-dns, for a name; NULL: none */
        CURLM *multi;         /* cdiplug-kube's: slices, labels */
        pthread_t thread;
        bool started;
        /* cdiplug-claims (claim.c): the lookups' own thread and multi
         * handle, so that no work on cdiplug-kube (a list's pages, a label
         * storm, the labels' callback) ever holds a Prepare up. NULL
         * without a driver. */
        CURLM *claims_multi;
        pthread_t claims_thread;
        bool claims_started;

        /* What both threads read to make a transfer (xfer.c, resolve.c). */
        pthread_mutex_t net_mu;
        struct kube_creds creds;    /* the token in it; the rest is fixed */
        bool token_stale;           /* re-read before the next request */
        bool token_warned;          /* a failed re-read was logged */
        struct curl_slist *resolve; /* the pinned addresses, NULL: none yet */
        bool resolve_due;           /* look it up again (cdiplug-dns) */
        bool resolve_warned;
        uint64_t resolve_next_ms; /* not before (at most once a second) */

        pthread_mutex_t mu; /* the fields down to stats */
        bool stop;
        struct kube_inbox *inbox;
        struct kube_claim_req *queue, **queue_tail;
        size_t queued;
        struct kube_claim_req *running[KUBE_CLAIMS_RUNNING]; /* claim_x[i]'s, for a cancel */
        struct kube_stats stats;

        /* cdiplug-kube only: */
        enum kube_state state;
        struct kube_pool *pools;
        char *node_uid;
        cJSON *seen;            /* our slices by name, as the API server last told us */
        cJSON *gone;            /* name → resourceVersion of its deletion, since the list */
        cJSON *list_seen;       /* the list's pages so far, NULL: none read */
        char *list_continue;    /* the next page's continue token, NULL: first page */
        bool slices_over;       /* more of our slices than KUBE_SLICES_MAX were offered */
        unsigned over_failures; /* lists in a row that found too many */
        unsigned list_pages;    /* pages of the list read so far */
        bool list_endless_said; /* a list without end was logged (until one ends) */
        bool rv_from_list;      /* rv is a list's, no event moved it since */
        struct kube_watch_log wlog[KUBE_WATCH_N];
        cJSON *mine;      /* name → resourceVersion our last write of it made ("": deleted) */
        unsigned repairs; /* of other writers' changes, in this war */
        uint64_t repair_due_ms;  /* the next repair not before, 0: now */
        uint64_t repair_last_ms; /* the last one */
        bool repair_said;        /* this war was logged */
        char *yielded_to;        /* a newer cdiplug's manager: we write no slice */
        char *rv;                /* resourceVersion to watch from */
        struct kube_xfer *ctl;   /* the node, list or write in flight */
        struct kube_xfer *watch; /* the watch in flight */
        unsigned ctl_failures, watch_failures;
        uint64_t ctl_due_ms, watch_due_ms; /* not before (back-off), 0: now */
        bool ctl_wait_said;                /* a long wait was logged in this run of failures */
        /* labels.c's: the node's labels, followed when labels_fn is set. */
        kube_labels_fn *labels_fn;
        void *labels_ctx;
        cJSON *labels;              /* as last told to labels_fn, or NULL */
        struct kube_xfer *labels_x; /* the watch in flight */
        unsigned labels_failures;
        uint64_t labels_due_ms;

        /* cdiplug-claims only: */
        struct kube_xfer *claim_x[KUBE_CLAIMS_RUNNING]; /* lookups in flight */
};

/* seen.c: what the API server told us of our slices, bounded. */
const cJSON *kube_member(const cJSON *o, const char *a, const char *b);
const char *kube_str_member(const cJSON *o, const char *a, const char *b);
const char *kube_slice_pool(const cJSON *s);
uint64_t kube_slice_gen(const cJSON *s);
/* resourceVersion is opaque to clients, but an etcd revision in practice:
 * compared as numbers when both are, to drop events older than an answer
 * already applied. */
bool kube_rv_older(const char *a, const char *b);
bool kube_ours(const struct kube *k, const cJSON *s); /* this node and driver */
void kube_set_rv(struct kube *k, const char *rv);
/* Is name the name of one of the slices pool wants now? */
bool kube_wanted_name(const struct kube *k, const char *pool, const char *name);
/* Record slice s (taken) in seen (k->seen, or a list being read): whole
 * when we write that name, else as a light record. -E2BIG (and
 * k->slices_over) when seen holds KUBE_SLICES_MAX already. */
int kube_seen_put(struct kube *k, cJSON *seen, cJSON *s);
/* name was deleted at rv (NULL: by us); pool (NULL: from the record) says
 * whether a tombstone is worth keeping. */
void kube_seen_drop(struct kube *k, const char *name, const char *rv, const char *pool);
void kube_gone_clear(struct kube *k);
/* Another writer's field manager in s's metadata.managedFields (the
 * latest by time), NULL when only ours is there or none is. */
const char *kube_slice_writer(const struct kube *k, const cJSON *s);
/* Was s, as it is, written by us (its resourceVersion is our last
 * write's)? */
bool kube_slice_mine(const struct kube *k, const cJSON *s);
/* rv "": we deleted it; NULL: forget the name. */
void kube_mine_set(struct kube *k, const char *name, const char *rv);
/* s carries the field manager of a newer cdiplug instance: a rolling
 * update's new pod. We stop writing (k->yielded_to, said once). */
void kube_check_newer(struct kube *k, const cJSON *s);
/* May a write (kind) of slice name be made now? Always unless it undoes
 * another writer's change: the first such repair of a war at once, each
 * further one only after a wait growing from KUBE_REPAIR_MIN_MS, and one
 * warning names the writer. So two writers that disagree make a few
 * writes a minute, not hundreds a second. */
bool kube_repair_allowed(struct kube *k, enum kube_wop kind, const char *name, uint64_t now_ms);
/* The start time in a cdiplug field manager, 0 when m is not one. */
uint64_t kube_manager_start(const char *m);

/* resolve.c: pin the API server's addresses for libcurl. kube_resolve at
 * start (before the lock-down): 0, or -EHOSTUNREACH (logged; not fatal),
 * -ENOMEM. start/stop the cdiplug-dns thread that looks a name up again
 * (started after the lock-down; stop never waits for a lookup in
 * progress). step, on cdiplug-kube: asks for a lookup when resolve_due
 * (at most once a second), and pins what a finished one found, or keeps
 * the last address that worked. due: when step must run next (0: none). */
int kube_resolve(struct kube *k);
int kube_resolve_start(struct kube *k);
void kube_resolve_stop(struct kube *k);
void kube_resolve_step(struct kube *k, uint64_t now_ms);
uint64_t kube_resolve_due(struct kube *k, uint64_t now_ms);
/* On either thread: a copy of the pinned addresses for one transfer
 * (*ret NULL: none needed, the server is an address), or -EHOSTUNREACH
 * when a name never resolved yet (a lookup is asked for); -ENOMEM. */
int kube_resolve_pins(struct kube *k, struct curl_slist **ret);
/* On either thread: a connection failed, the name may have moved: look
 * it up again before the next attempt (cdiplug-kube is woken for it). */
void kube_resolve_ask(struct kube *k);

/* claim.c: start cdiplug-claims (with a driver); stop and join it (after
 * k->stop was set; also when it never started), then answer every lookup
 * still waiting or in flight with -ECANCELED. */
int kube_claims_start(struct kube *k);
void kube_claims_stop(struct kube *k);

/* xfer.c */
/* kube_free() began: the threads end their loops. */
bool kube_stopping(struct kube *k);
/* On either thread: the token is re-read before the next request (after
 * a 401). */
void kube_token_stale(struct kube *k);
/* Parse an answer of len bytes after checking its cost: -E2BIG past
 * KUBE_PARSE_VALUES_MAX values, -EBADMSG when it is not JSON. */
int kube_parse(const char *buf, size_t len, cJSON **ret);
int kube_xfer_new(struct kube *k, enum kube_xkind kind, const char *method, const char *path,
                  char *body, size_t limit, struct kube_xfer **ret);
void kube_xfer_free(struct kube_xfer *x); /* removes it from the multi handle */
long kube_xfer_code(const struct kube_xfer *x);
/* A watch's stream writer: a 200's bytes split into lines, each handed to
 * event (line NUL-terminated, len bytes) as it completes, each bounded by
 * x->limit (past it the stream ends, -EMSGSIZE); any other answer kept,
 * cut at x->limit, for the log. Returns what libcurl takes: n, or 0 to end
 * the transfer (event set x->watch_end, the client stops, no memory). */
size_t kube_xfer_lines(struct kube_xfer *x, const char *p, size_t n,
                       void (*event)(struct kube_xfer *x, const char *line, size_t len));
/* The error class of a finished transfer, or -1 for a 2xx answer. */
int kube_xfer_class(const struct kube_xfer *x, CURLcode rc);
/* Retry-After of the answer in ms (capped), 0 if none. */
uint64_t kube_xfer_retry_after_ms(const struct kube_xfer *x);
/* One failed request, by class and by HTTP code: x's answer (NULL: none
 * to read, a watch's ERROR event or a 410 it sent). */
void kube_count_error(struct kube *k, int cls, const struct kube_xfer *x);
/* A short description of a failure for the log (no secrets): the HTTP
 * status and message, or how the transfer ended (refused, closed,
 * reset, timed out), also after a 200. */
void kube_xfer_describe(const struct kube_xfer *x, CURLcode rc, char *buf, size_t size);
/* The wait before retrying after one more failure (*failures counted up):
 * see KUBE_FIRST_RETRY_MS; cap_ms the longest; never less than x's
 * Retry-After (x NULL: none). */
uint64_t kube_backoff_next(struct kube *k, unsigned *failures, uint64_t cap_ms,
                           const struct kube_xfer *x);
/* A uniform random wait in 0..max_ms. */
uint64_t kube_jitter_ms(struct kube *k, uint64_t max_ms);
/* Watch w's stream is open: said at info when it was down, once. */
void kube_watch_up(struct kube *k, enum kube_watch_id w, uint64_t now_ms);
/* Watch w proved healthy (see KUBE_WATCH_HEALTHY_MS): an outage is over,
 * the next failure begins a new one (and is said again). Until then a
 * watch that flaps is said once. */
void kube_watch_healthy(struct kube *k, enum kube_watch_id w);
/* Watch w failed (why; the next attempt in wait_ms): the first failure of
 * an outage at warning, a wait of KUBE_LOG_WAIT_MS or more once at info,
 * the rest at debug. why NULL: it is down, already said by the caller. */
void kube_watch_down(struct kube *k, enum kube_watch_id w, const char *why, uint64_t wait_ms,
                     uint64_t now_ms);

/* labels.c: do two label objects hold the same keys with the same
 * values, in any order (n log n). */
bool kube_labels_equal(const cJSON *a, const cJSON *b);
/* labels.c: on cdiplug-kube. due: when the next watch may start (0:
 * now, or one is running). */
void kube_labels_step(struct kube *k, uint64_t now_ms);
uint64_t kube_labels_due(const struct kube *k, uint64_t now_ms);
void kube_labels_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now_ms);

/* reconcile.c: on cdiplug-kube. */
void kube_reconcile_step(struct kube *k, uint64_t now_ms);
void kube_reconcile_done(struct kube *k, struct kube_xfer *x, CURLcode rc, uint64_t now_ms);
void kube_pool_apply(struct kube *k, struct kube_inbox *in);
void kube_pools_free(struct kube *k);
