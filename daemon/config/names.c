/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "cdi.h"
#include "log.h"

bool cfg_is_dns_subdomain(const char *s, size_t len) {
        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool edge = i == 0 || i == len - 1 || s[i - 1] == '.' || s[i + 1] == '.';
                if (c == '.' ? edge
                             : !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
                if (edge && c == '-')
                        return false;
        }
        return true;
}

static const char sock_prefix[] = "cdiplug-", sock_suffix[] = ".sock";

int cfg_socket_name_full(const char *resource, char **ret_name) {
        char *full = NULL;
        int r = xasprintf(&full, "%s%s%s", sock_prefix, resource, sock_suffix);

        if (r < 0)
                return r;
        /* The kubelet takes the bare file name as the endpoint; '/' cannot
         * appear in it, and the name stays recognisably ours. */
        for (char *c = full; *c; c++)
                if (*c == '/')
                        *c = '-';
        *ret_name = full;
        return 0;
}

int dp_socket_name(const char *kubelet_dir, const char *resource, char **ret_name) {
        return dp_socket_name_instance(kubelet_dir, resource, NULL, ret_name);
}

int dp_socket_name_instance(const char *kubelet_dir, const char *resource, const char *instance,
                            char **ret_name) {
        const char *prefix = sock_prefix;
        _cleanup_free_ char *suffix = NULL, *full = NULL;
        struct sockaddr_un sa;
        size_t room, keep, hashed;
        int r;

        /* The instance goes last, so every instance's name of a resource
         * starts alike and sorts together in a listing. */
        r = instance ? xasprintf(&suffix, "-%s%s", instance, sock_suffix)
                     : xasprintf(&suffix, "%s", sock_suffix);
        if (r < 0)
                return r;
        hashed = strlen(prefix) + 8 + strlen(suffix);
        /* The kubelet joins its dir and our endpoint with one '/'. */
        if (strlen(kubelet_dir) + 1 >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        room = sizeof(sa.sun_path) - 1 - strlen(kubelet_dir) - 1;
        r = cfg_socket_name_full(resource, &full);
        if (r < 0)
                return r;
        if (instance) {
                /* ".sock" off, the instance's suffix on. */
                full[strlen(full) - strlen(sock_suffix)] = '\0';
                char *with = NULL;
                if (xasprintf(&with, "%s%s", full, suffix) < 0)
                        return -ENOMEM;
                free(full);
                full = with;
        }
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

static bool pod_uid_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
}

const char *cfg_pod_uid_problem(const char *uid) {
        size_t len = strlen(uid);

        if (len == 0 || len > CFG_POD_UID_MAX)
                return "must hold 1 to 128 characters (a pod's UID from the downward API, "
                       "metadata.uid)";
        for (size_t i = 0; i < len; i++)
                if (!pod_uid_char(uid[i]))
                        return "may hold only letters, digits, '-', '_' and '.' (a pod's UID "
                               "from the downward API, metadata.uid)";
        return NULL;
}

void cfg_instance_tag(const char *uid, char ret[static 9]) {
        snprintf(ret, 9, "%08x", base_fnv1a32(uid));
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

int cfg_names_of(const char *resource, char **ret_kind, char **ret_spec_file) {
        _cleanup_free_ char *kind = NULL, *file = NULL;
        int r = cdi_kind_from_resource(resource, &kind);

        if (r >= 0 && ret_spec_file)
                r = cdi_spec_file_name(kind, &file);
        if (r < 0)
                return r;
        if (ret_spec_file)
                *ret_spec_file = TAKE_PTR(file);
        *ret_kind = TAKE_PTR(kind);
        return 0;
}

/* rc's kind and spec file, stored as soon as known: a resource refused
 * later (a clash, its socket) still has them. */
static int prepare_one(struct cfg_resource *rc, const char *kubelet_dir, const char *instance,
                       bool sockets) {
        _cleanup_free_ char *kind = NULL, *file = NULL;
        const char *slash;
        int r;

        r = cdi_kind_from_resource(rc->name, &kind);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = rc->name, .err = r },
                         "resource \"%s\": has no valid CDI kind: %s", rc->name, strerror(-r));
                return -EINVAL;
        }
        if (strcmp(kind, rc->name) != 0)
                log_with(LOG_INFO, &(struct log_fields){ .resource = rc->name },
                         "resource \"%s\": CDI kind is \"%s\" (%s); CDI users outside Kubernetes "
                         "name its devices \"%s=<device>\"",
                         rc->name, kind, kind_rewrite_reason(rc->name), kind);
        slash = strchr(kind, '/');
        if (strchr(slash + 1, '.'))
                log_with(
                        LOG_WARN, &(struct log_fields){ .resource = rc->name },
                        "resource \"%s\": the '.' in the CDI class \"%s\" needs cdiVersion 0.6.0, which "
                        "podman 4.3 and containerd 1.7 cannot read (a CDI library before 0.6 "
                        "refuses the whole spec); a name part without '.' keeps cdiVersion 0.3.0",
                        rc->name, slash + 1);
        r = cdi_spec_file_name(kind, &file);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .resource = rc->name, .err = r },
                         "resource \"%s\": no CDI spec file name for kind \"%s\": %s", rc->name,
                         kind, strerror(-r));
                return r == -ENOMEM ? r : -EINVAL;
        }
        free(rc->kind);
        free(rc->spec_file);
        rc->kind = TAKE_PTR(kind);
        rc->spec_file = TAKE_PTR(file);
        if (sockets) {
                _cleanup_free_ char *sock = NULL;
                r = dp_socket_name_instance(kubelet_dir, rc->name, instance, &sock);
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
                /* The instance's name starts as the full name does, less
                 * ".sock"; only a hashed one is worth a line. */
                size_t stem = strlen(rc->socket_name) - strlen(sock_suffix);
                if (strcmp(sock, rc->socket_name) != 0 && strncmp(sock, rc->socket_name, stem) != 0)
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
        return 0;
}

static int clash(const struct cfg_resource *a, const struct cfg_resource *b, const char *what,
                 const char *name) {
        log_error("resources \"%s\" and \"%s\" would share the %s \"%s\": rename one of them",
                  a->name, b->name, what, name);
        return -EINVAL;
}

int dp_names_prepare(struct cfg_config *cfg, const char *kubelet_dir, bool sockets) {
        return dp_names_prepare_instance(cfg, kubelet_dir, NULL, sockets);
}

int dp_names_prepare_instance(struct cfg_config *cfg, const char *kubelet_dir, const char *instance,
                              bool sockets) {
        size_t i = 0;
        int r = 0;

        for (; i < cfg->n_resources && r >= 0; i++) {
                struct cfg_resource *a = &cfg->resources[i];
                r = prepare_one(a, kubelet_dir, instance, sockets);
                for (size_t j = 0; j < i && r >= 0; j++) {
                        const struct cfg_resource *b = &cfg->resources[j];
                        if (strcmp(a->kind, b->kind) == 0)
                                r = clash(b, a, "CDI kind", a->kind);
                        else if (strcmp(a->spec_file, b->spec_file) == 0)
                                r = clash(b, a, "CDI spec file", a->spec_file);
                        else if (sockets && strcmp(a->socket_name, b->socket_name) == 0)
                                r = clash(b, a, "socket", a->socket_name);
                }
        }
        /* Past the first one refused (the only one logged): what the rest
         * are called, for doctor, which reports on past a refused config. */
        for (; i < cfg->n_resources; i++) {
                struct cfg_resource *rc = &cfg->resources[i];
                free(rc->kind);
                free(rc->spec_file);
                rc->kind = rc->spec_file = NULL;
                (void)cfg_names_of(rc->name, &rc->kind, &rc->spec_file);
        }
        return r;
}
