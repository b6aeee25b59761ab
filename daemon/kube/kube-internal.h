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

/* Is want contained in have: every member of every object in want is in
 * have with an equal value, arrays of the same length element by element
 * (the API server may add defaults). */
bool kube_json_subset(const cJSON *want, const cJSON *have);

/* ---- claim.c ---- */

/* Parse a ResourceClaim answer for driver and uid (NULL: unchecked) into
 * *ret (err/msg/results set; returns ret->err). */
int kube_claim_parse(const char *body, const char *driver, const char *uid, struct kube_claim *ret);
