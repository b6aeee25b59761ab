/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "cdi.h"
#include "log.h"

int dp_socket_name(const char *kubelet_dir, const char *resource, char **ret_name) {
        static const char prefix[] = "cdiplug-", suffix[] = ".sock";
        const size_t hashed = strlen(prefix) + 8 + strlen(suffix);
        struct sockaddr_un sa;
        _cleanup_free_ char *full = NULL;
        size_t room, keep;
        int r;

        /* The kubelet joins its dir and our endpoint with one '/'. */
        if (strlen(kubelet_dir) + 1 >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        room = sizeof(sa.sun_path) - 1 - strlen(kubelet_dir) - 1;
        r = xasprintf(&full, "%s%s%s", prefix, resource, suffix);
        if (r < 0)
                return r;
        for (char *c = full; *c; c++)
                if (*c == '/')
                        *c = '-';
        if (strlen(full) <= room) {
                *ret_name = TAKE_PTR(full);
                return 0;
        }
        if (room < hashed || !strchr(resource, '/'))
                return -ENAMETOOLONG;
        /* A readable start, "-" and the hash. The start is the name part:
         * the domain is usually the same for all of an operator's
         * resources. At most 32 characters of it, so the file name does not
         * change with every dir length. */
        if (room < hashed + 2)
                return xasprintf(ret_name, "%s%08x%s", prefix, base_fnv1a32(resource), suffix);
        keep = room - hashed - 1;
        if (keep > 32)
                keep = 32;
        return xasprintf(ret_name, "%s%.*s-%08x%s", prefix, (int)keep, strchr(resource, '/') + 1,
                         base_fnv1a32(resource), suffix);
}

/* Why a resource name is not used as its kind unchanged. */
static const char *kind_rewrite_reason(const char *resource) {
        const char *slash = strchr(resource, '/');
        size_t dlen = (size_t)(slash - resource), nlen = strlen(slash + 1);
        bool dletter = (resource[0] >= 'a' && resource[0] <= 'z') ||
                       (resource[0] >= 'A' && resource[0] <= 'Z');
        bool nletter = (slash[1] >= 'a' && slash[1] <= 'z') || (slash[1] >= 'A' && slash[1] <= 'Z');

        if (!dletter)
                return "a CDI vendor must start with a letter";
        if (!nletter)
                return "a CDI class must start with a letter";
        if (dlen < 2 || nlen < 2)
                return "a one-character CDI vendor or class crashes the reference CDI parser";
        return "a CDI vendor or class is longer than CDI allows";
}

struct names {
        char *kind;
        char *spec_file;
};

static int prepare_one(struct cfg_resource *rc, const char *kubelet_dir, bool sockets,
                       struct names *ret) {
        const char *slash;
        int r;

        r = cdi_kind_from_resource(rc->name, &ret->kind);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = rc->name, .err = r },
                         "resource \"%s\": has no valid CDI kind: %s", rc->name, strerror(-r));
                return -EINVAL;
        }
        if (strcmp(ret->kind, rc->name) != 0)
                log_with(LOG_INFO, &(struct log_fields){ .resource = rc->name },
                         "resource \"%s\": CDI kind is \"%s\" (%s); CDI users outside Kubernetes "
                         "name its devices \"%s=<device>\"",
                         rc->name, ret->kind, kind_rewrite_reason(rc->name), ret->kind);
        slash = strchr(ret->kind, '/');
        if (strchr(slash + 1, '.'))
                log_with(
                        LOG_WARN, &(struct log_fields){ .resource = rc->name },
                        "resource \"%s\": the '.' in the CDI class \"%s\" needs cdiVersion 0.6.0, which "
                        "podman 4.3 and containerd 1.7 cannot read (a CDI library before 0.6 "
                        "refuses the whole spec); a name part without '.' keeps cdiVersion 0.3.0",
                        rc->name, slash + 1);
        r = cdi_spec_file_name(ret->kind, &ret->spec_file);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = rc->name, .err = r },
                         "resource \"%s\": no CDI spec file name for kind \"%s\": %s", rc->name,
                         ret->kind, strerror(-r));
                return r == -ENOMEM ? r : -EINVAL;
        }
        if (sockets) {
                _cleanup_free_ char *sock = NULL;
                r = dp_socket_name(kubelet_dir, rc->name, &sock);
                if (r == -ENAMETOOLONG) {
                        log_with(
                                LOG_ERR,
                                &(struct log_fields){ .resource = rc->name, .path = kubelet_dir },
                                "resource \"%s\": kubelet dir %s is too long for any socket in it: a unix "
                                "socket path holds at most %zu bytes; use a shorter --kubelet-dir",
                                rc->name, kubelet_dir,
                                sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
                if (strcmp(sock, rc->socket_name) != 0) {
                        log_with(
                                LOG_INFO,
                                &(struct log_fields){
                                        .resource = rc->name, .path = kubelet_dir, .file = sock },
                                "resource \"%s\": socket %s/%s (the full name would not fit a unix "
                                "socket path)",
                                rc->name, kubelet_dir, sock);
                        free(rc->socket_name);
                        rc->socket_name = TAKE_PTR(sock);
                }
        }
        return 0;
}

static int clash(const struct cfg_resource *a, const struct cfg_resource *b, const char *what,
                 const char *name) {
        log_error("resources \"%s\" and \"%s\" would share the %s \"%s\": rename one of them",
                  a->name, b->name, what, name);
        return -EINVAL;
}

int dp_names_prepare(struct cfg_config *cfg, const char *kubelet_dir, bool sockets) {
        struct names *n = calloc(cfg->n_resources + 1, sizeof(*n));
        int r = 0;

        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_resources && r >= 0; i++) {
                struct cfg_resource *a = &cfg->resources[i];
                r = prepare_one(a, kubelet_dir, sockets, &n[i]);
                for (size_t j = 0; j < i && r >= 0; j++) {
                        const struct cfg_resource *b = &cfg->resources[j];
                        if (strcmp(n[i].kind, n[j].kind) == 0)
                                r = clash(b, a, "CDI kind", n[i].kind);
                        else if (strcmp(n[i].spec_file, n[j].spec_file) == 0)
                                r = clash(b, a, "CDI spec file", n[i].spec_file);
                        else if (sockets && strcmp(a->socket_name, b->socket_name) == 0)
                                r = clash(b, a, "socket", a->socket_name);
                }
        }
        for (size_t i = 0; i < cfg->n_resources; i++) {
                free(n[i].kind);
                free(n[i].spec_file);
        }
        free(n);
        return r;
}
