/* SPDX-License-Identifier: Apache-2.0 */
/* A kubeconfig file (YAML, read with libyaml): current-context → context
 * → cluster (server, certificate-authority[-data]) and user (token,
 * tokenFile, client-certificate[-data], client-key[-data]). Relative paths
 * are relative to the file's directory, as kubectl resolves them. TLS is
 * always verified: insecure-skip-tls-verify is refused, not ignored, so
 * nobody believes it took effect. exec and auth-provider users are
 * refused too: the sandbox runs no programs.
 */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kube-internal.h"
#include "log.h"

struct kc {
        const char *path;
        char *dir;
        yaml_document_t doc;
        struct kube_error *err;
};

_printf_(3, 4) static int fail(struct kc *kc, int r, const char *fmt, ...) {
        char what[400];
        va_list ap;

        va_start(ap, fmt);
        /* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is right above */
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        snprintf(kc->err->msg, sizeof(kc->err->msg), "kubeconfig %s: %s", kc->path, what);
        return r;
}

static yaml_node_t *node_at(struct kc *kc, int i) {
        return i ? yaml_document_get_node(&kc->doc, i) : NULL;
}

static const char *scalar(const yaml_node_t *n) {
        return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *map_get(struct kc *kc, const yaml_node_t *map, const char *key) {
        if (!map || map->type != YAML_MAPPING_NODE)
                return NULL;
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
             p++) {
                const char *k = scalar(node_at(kc, p->key));
                if (k && strcmp(k, key) == 0)
                        return node_at(kc, p->value);
        }
        return NULL;
}

/* The `sub` mapping of the entry named name in the list at key. */
static yaml_node_t *named(struct kc *kc, const char *key, const char *name, const char *sub) {
        yaml_node_t *list = map_get(kc, yaml_document_get_root_node(&kc->doc), key);

        if (!list || list->type != YAML_SEQUENCE_NODE)
                return NULL;
        for (yaml_node_item_t *i = list->data.sequence.items.start;
             i < list->data.sequence.items.top; i++) {
                yaml_node_t *e = node_at(kc, *i);
                const char *n = scalar(map_get(kc, e, "name"));
                if (n && strcmp(n, name) == 0)
                        return map_get(kc, e, sub);
        }
        return NULL;
}

/* libyaml has no nesting limit of its own: walk the events once and refuse
 * a document nested deeper than any kubeconfig is. */
static int check_depth(struct kc *kc, const struct kube_blob *b) {
        yaml_parser_t p;
        int depth = 0, r = 0;
        bool done = false;

        if (!yaml_parser_initialize(&p))
                return fail(kc, -ENOMEM, "out of memory");
        yaml_parser_set_input_string(&p, (const unsigned char *)b->data, b->len);
        while (!done) {
                yaml_event_t ev;

                if (!yaml_parser_parse(&p, &ev)) {
                        r = fail(kc, -EINVAL, "not YAML: %s at line %zu",
                                 p.problem ? p.problem : "syntax error", p.problem_mark.line + 1);
                        break;
                }
                if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
                        depth++;
                else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
                        depth--;
                done = ev.type == YAML_STREAM_END_EVENT;
                yaml_event_delete(&ev);
                if (depth > KUBE_KUBECONFIG_DEPTH) {
                        r = fail(kc, -EINVAL, "nested deeper than %d levels",
                                 KUBE_KUBECONFIG_DEPTH);
                        break;
                }
        }
        yaml_parser_delete(&p);
        return r;
}

static int load(struct kc *kc, const struct kube_blob *b) {
        yaml_parser_t p;
        int r = 0;

        if (!yaml_parser_initialize(&p))
                return fail(kc, -ENOMEM, "out of memory");
        yaml_parser_set_input_string(&p, (const unsigned char *)b->data, b->len);
        if (!yaml_parser_load(&p, &kc->doc))
                r = fail(kc, -EINVAL, "not YAML: %s", p.problem ? p.problem : "syntax error");
        else if (!yaml_document_get_root_node(&kc->doc)) {
                yaml_document_delete(&kc->doc);
                r = fail(kc, -EINVAL, "empty");
        } else if (yaml_document_get_root_node(&kc->doc)->type != YAML_MAPPING_NODE) {
                yaml_document_delete(&kc->doc);
                r = fail(kc, -EINVAL, "not a mapping at the top");
        }
        yaml_parser_delete(&p);
        return r;
}

static int resolve_path(struct kc *kc, const char *p, char **ret) {
        if (p[0] == '/')
                *ret = strdup(p);
        else if (xasprintf(ret, "%s/%s", kc->dir, p) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

/* A file path or inline base64 data for one of the PEM items. */
static int file_or_data(struct kc *kc, const yaml_node_t *map, const char *where, const char *key,
                        char **ret_file, struct kube_blob *ret_data) {
        char datakey[64];
        const char *file = scalar(map_get(kc, map, key)), *data;
        int r;

        snprintf(datakey, sizeof(datakey), "%s-data", key);
        data = scalar(map_get(kc, map, datakey));
        if (file && *file && data && *data)
                return fail(kc, -EINVAL, "%s: %s and %s are both given; give one", where, key,
                            datakey);
        if (data && *data) {
                r = kube_base64_decode(data, strlen(data), ret_data);
                if (r < 0)
                        return fail(kc, r, "%s.%s: not base64", where, datakey);
                if (ret_data->len == 0)
                        return fail(kc, -EINVAL, "%s.%s: empty", where, datakey);
                return 0;
        }
        if (file && *file) {
                r = resolve_path(kc, file, ret_file);
                if (r < 0)
                        return fail(kc, r, "out of memory");
                if (access(*ret_file, R_OK) < 0)
                        return fail(kc, -errno, "%s.%s: %s: %s", where, key, *ret_file,
                                    strerror(errno));
        }
        return 0;
}

static bool truthy(const char *s) {
        return s && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0 ||
                     strcmp(s, "yes") == 0 || strcmp(s, "on") == 0);
}

static int parse_server(struct kc *kc, const char *where, const char *server,
                        struct kube_creds *c) {
        char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
        CURLU *u;
        int r;

        /* libcurl's URL parser: loaded here too, as doctor and the tests
         * read a kubeconfig without kube_new (logged by the loader). */
        r = kube_curl_load();
        if (r < 0)
                return fail(kc, r, "%s.server: libcurl (%s) cannot be loaded", where,
                            KUBE_CURL_SONAME);
        u = sym_curl_url();
        if (!u)
                return fail(kc, -ENOMEM, "out of memory");
        if (sym_curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
            sym_curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            sym_curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            sym_curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
            sym_curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK || !scheme || !host ||
            !port || !path)
                r = fail(kc, -EINVAL, "%s.server \"%s\": not a URL", where, server);
        else if (strcmp(scheme, "https") != 0)
                r = fail(kc, -EINVAL, "%s.server \"%s\": must be https:// (TLS is always used)",
                         where, server);
        if (r == 0 && host && path && port) {
                size_t hl = strlen(host), pl = strlen(path);

                /* curl hands IPv6 hosts back in brackets. */
                if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
                        memmove(host, host + 1, hl - 2);
                        host[hl - 2] = '\0';
                }
                while (pl > 0 && path[pl - 1] == '/')
                        path[--pl] = '\0';
                c->port = (unsigned)strtoul(port, NULL, 10);
                if (!(c->host = strdup(host)) ||
                    xasprintf(&c->server,
                              strchr(host, ':') ? "https://[%s]:%u%s" : "https://%s:%u%s", host,
                              c->port, path) < 0)
                        r = fail(kc, -ENOMEM, "out of memory");
        }
        sym_curl_free(scheme);
        sym_curl_free(host);
        sym_curl_free(port);
        sym_curl_free(path);
        sym_curl_url_cleanup(u);
        return r;
}

static int parse_cluster(struct kc *kc, const char *name, struct kube_creds *c) {
        char where[320];
        yaml_node_t *cl = named(kc, "clusters", name, "cluster");
        const char *server;
        int r;

        snprintf(where, sizeof(where), "clusters[name=\"%s\"].cluster", name);
        if (!cl)
                return fail(kc, -EINVAL, "%s: missing", where);
        server = scalar(map_get(kc, cl, "server"));
        if (!server || !*server)
                return fail(kc, -EINVAL, "%s.server: missing", where);
        if (truthy(scalar(map_get(kc, cl, "insecure-skip-tls-verify"))))
                return fail(
                        kc, -EINVAL,
                        "%s.insecure-skip-tls-verify: refused: cdiplug always verifies the API server's certificate",
                        where);
        r = parse_server(kc, where, server, c);
        if (r < 0)
                return r;
        return file_or_data(kc, cl, where, "certificate-authority", &c->ca_file, &c->ca);
}

static int parse_user(struct kc *kc, const char *name, struct kube_creds *c) {
        static const char *const refused[] = { "exec", "auth-provider", "username", "password" };
        char where[320];
        yaml_node_t *u = named(kc, "users", name, "user");
        const char *token, *token_file;
        int r;

        snprintf(where, sizeof(where), "users[name=\"%s\"].user", name);
        if (!u)
                return fail(kc, -EINVAL, "%s: missing", where);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (map_get(kc, u, refused[i]))
                        return fail(
                                kc, -EOPNOTSUPP,
                                "%s.%s: not supported (use token, tokenFile or a client certificate)",
                                where, refused[i]);
        r = file_or_data(kc, u, where, "client-certificate", &c->cert_file, &c->cert);
        if (r < 0)
                return r;
        r = file_or_data(kc, u, where, "client-key", &c->key_file, &c->key);
        if (r < 0)
                return r;
        if ((c->cert_file || c->cert.data) != (c->key_file || c->key.data))
                return fail(kc, -EINVAL, "%s: client-certificate and client-key go together",
                            where);

        token = scalar(map_get(kc, u, "token"));
        token_file = scalar(map_get(kc, u, "tokenFile"));
        if (token && *token) {
                /* Checked like a token file's content: it goes into a header. */
                for (const char *t = token; *t; t++)
                        if (*t < 0x21 || *t > 0x7e)
                                return fail(kc, -EINVAL, "%s.token: not one line of printable text",
                                            where);
                if (!(c->token = strdup(token)))
                        return fail(kc, -ENOMEM, "out of memory");
        }
        if (token_file && *token_file) {
                const char *tok;

                r = resolve_path(kc, token_file, &c->token_file);
                if (r < 0)
                        return fail(kc, r, "out of memory");
                /* client-go: the file, once read, wins over token. */
                r = kube_creds_token(c, 0, true, &tok);
                if (r < 0)
                        return fail(kc, r, "%s.tokenFile: %s: %s", where, c->token_file,
                                    r == -EINVAL ? "empty or not one line of printable text"
                                                 : strerror(-r));
        }
        return 0;
}

int kube_creds_kubeconfig(const char *path, struct kube_creds *ret, struct kube_error *err) {
        struct kc kc = { .path = path, .err = err };
        struct kube_creds c = { 0 };
        struct kube_blob b = { 0 };
        _cleanup_free_ char *dcopy = NULL;
        const char *ctx_name, *cluster, *user;
        yaml_node_t *ctx;
        int r;

        r = kube_read_file(path, KUBE_KUBECONFIG_MAX, &b);
        if (r < 0)
                return fail(&kc, r, "%s", r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
        r = check_depth(&kc, &b);
        if (r == 0)
                r = load(&kc, &b);
        free(b.data);
        if (r < 0)
                return r;
        dcopy = strdup(path);
        if (!dcopy || !(kc.dir = strdup(dirname(dcopy)))) {
                r = fail(&kc, -ENOMEM, "out of memory");
                goto out;
        }

        ctx_name = scalar(map_get(&kc, yaml_document_get_root_node(&kc.doc), "current-context"));
        if (!ctx_name || !*ctx_name) {
                r = fail(&kc, -EINVAL, "current-context: missing");
                goto out;
        }
        ctx = named(&kc, "contexts", ctx_name, "context");
        if (!ctx) {
                r = fail(&kc, -EINVAL,
                         "contexts[name=\"%s\"].context: missing (current-context names it)",
                         ctx_name);
                goto out;
        }
        cluster = scalar(map_get(&kc, ctx, "cluster"));
        user = scalar(map_get(&kc, ctx, "user"));
        if (!cluster || !*cluster) {
                r = fail(&kc, -EINVAL, "contexts[name=\"%s\"].context.cluster: missing", ctx_name);
                goto out;
        }
        if (!(c.source = strdup(path))) {
                r = fail(&kc, -ENOMEM, "out of memory");
                goto out;
        }
        r = parse_cluster(&kc, cluster, &c);
        if (r == 0 && user && *user)
                r = parse_user(&kc, user, &c);
out:
        if (r < 0)
                kube_creds_clear(&c);
        else
                *ret = c;
        free(kc.dir);
        yaml_document_delete(&kc.doc);
        return r;
}
