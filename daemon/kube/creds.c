/* SPDX-License-Identifier: Apache-2.0 */
/* Credentials for the API server: the in-cluster service account, the
 * token's re-reading (it rotates: the kubelet refreshes the projected
 * token file well before it expires), and small readers shared with
 * kubeconfig.c. The token is never logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube-internal.h"
#include "log.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static void blob_clear(struct kube_blob *b) {
        free(b->data);
        b->data = NULL;
        b->len = 0;
}

void kube_creds_clear(struct kube_creds *c) {
        if (!c)
                return;
        free(c->source);
        free(c->server);
        free(c->host);
        free(c->ca_file);
        blob_clear(&c->ca);
        free(c->cert_file);
        blob_clear(&c->cert);
        free(c->key_file);
        blob_clear(&c->key);
        free(c->token_file);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        memset(c, 0, sizeof(*c));
}

int kube_read_file(const char *path, size_t max, struct kube_blob *ret) {
        char *buf;
        size_t len;
        /* A token being rotated may change size under us: the reader
         * judges by what came, not by the size it saw first. */
        int r = base_read_file_at(AT_FDCWD, path, 0, max, &buf, &len);

        if (r < 0)
                return r;
        ret->data = buf;
        ret->len = len;
        return 0;
}

static int b64_value(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int kube_base64_decode(const char *in, size_t len, struct kube_blob *ret) {
        _cleanup_free_ char *out = malloc(len / 4 * 3 + 4);
        size_t n = 0, pad = 0;
        unsigned acc = 0, bits = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                char c = in[i];
                int v;

                if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
                        continue;
                if (c == '=') {
                        pad++;
                        continue;
                }
                v = b64_value(c);
                if (v < 0 || pad > 0)
                        return -EINVAL;
                acc = (acc << 6) | (unsigned)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (char)((acc >> bits) & 0xff);
                }
        }
        /* Leftover bits must be the zero padding of the last group. */
        if (pad > 2 || bits >= 6 || (acc & ((1u << bits) - 1)) != 0)
                return -EINVAL;
        out[n] = '\0';
        ret->data = TAKE_PTR(out);
        ret->len = n;
        return 0;
}

static void trim_token(char *t) {
        size_t n = strlen(t);

        while (n > 0 &&
               (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
                t[--n] = '\0';
}

/* A token is one line of printable ASCII: anything else would break the
 * Authorization header (or smuggle another header into it). */
static bool token_ok(const char *t) {
        if (!*t)
                return false;
        for (; *t; t++)
                if (*t < 0x21 || *t > 0x7e)
                        return false;
        return true;
}

int kube_creds_token(struct kube_creds *c, uint64_t now_ms, bool force, const char **ret) {
        struct kube_blob b = { 0 };
        int r;

        if (!c->token_file ||
            (!force && c->token && now_ms - c->token_read_ms < KUBE_TOKEN_REREAD_MS)) {
                *ret = c->token;
                return 0;
        }
        c->token_read_ms = now_ms;
        r = kube_read_file(c->token_file, KUBE_TOKEN_MAX, &b);
        if (r < 0)
                return r;
        if (!b.data)
                return -ENOMEM;
        trim_token(b.data);
        if (!token_ok(b.data)) {
                explicit_bzero(b.data, b.len);
                blob_clear(&b);
                return -EINVAL;
        }
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
        }
        c->token = b.data;
        *ret = c->token;
        return 0;
}

int kube_creds_in_cluster(const char *root, struct kube_creds *ret, struct kube_error *err) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        struct kube_creds c = { 0 };
        const char *tok;
        char *end;
        unsigned long p;
        int r;

        if (!root || strcmp(root, "/") == 0)
                root = "";
        if (!host || !*host || !port || !*port) {
                snprintf(
                        err->msg, sizeof(err->msg),
                        "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
                        "(not in a pod? give --kubeconfig)");
                return -ENOENT;
        }
        errno = 0;
        p = strtoul(port, &end, 10);
        if (errno || *end || p == 0 || p > 65535) {
                snprintf(err->msg, sizeof(err->msg),
                         "in-cluster: KUBERNETES_SERVICE_PORT \"%s\": not a port", port);
                return -EINVAL;
        }
        if (strpbrk(host, "/@?#[] ")) {
                snprintf(err->msg, sizeof(err->msg),
                         "in-cluster: KUBERNETES_SERVICE_HOST \"%s\": not a host", host);
                return -EINVAL;
        }
        /* An IPv6 address goes in brackets in the URL (RFC 3986). */
        if (xasprintf(&c.server, strchr(host, ':') ? "https://[%s]:%lu" : "https://%s:%lu", host,
                      p) < 0 ||
            !(c.host = strdup(host)) || !(c.source = strdup("in-cluster")) ||
            xasprintf(&c.ca_file, "%s" SA_DIR "/ca.crt", root) < 0 ||
            xasprintf(&c.token_file, "%s" SA_DIR "/token", root) < 0) {
                kube_creds_clear(&c);
                snprintf(err->msg, sizeof(err->msg), "in-cluster: out of memory");
                return -ENOMEM;
        }
        c.port = (unsigned)p;
        if (access(c.ca_file, R_OK) < 0) {
                r = -errno;
                snprintf(err->msg, sizeof(err->msg), "in-cluster: CA %s: %s", c.ca_file,
                         strerror(-r));
                kube_creds_clear(&c);
                return r;
        }
        r = kube_creds_token(&c, 0, true, &tok);
        if (r < 0) {
                snprintf(err->msg, sizeof(err->msg), "in-cluster: token %s: %s", c.token_file,
                         r == -EINVAL ? "empty or not one line of printable text" : strerror(-r));
                kube_creds_clear(&c);
                return r;
        }
        *ret = c;
        return 0;
}
