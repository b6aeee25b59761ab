/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: the report, its output, and the kubelet and kernel checks. */
#include "doctor-internal.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "resources.h"
#include "sandbox.h"
#include "log.h"

/* Watches and instances the daemon needs beyond the device dirs: the
 * kubelet dir (or its nearest existing ancestor while it is missing) and
 * the config's dir for live reload; one inotify instance for each. */
#define DAEMON_EXTRA_WATCHES 2
#define DAEMON_INSTANCES 2
/* How long a socket whose backlog is full may keep doctor waiting; the
 * text in socket_state() says the same. */
#define SOCKET_TIMEOUT_MS 2000

int doc_read_small(const char *path, char *buf, size_t max) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        ssize_t n;
        if (fd < 0)
                return -errno;
        do
                n = read(fd, buf, max - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
                n--;
        buf[n] = '\0';
        return 0;
}

/* --- config --- */

static void node_finding(void *ctx, const struct cfg_resource *res, size_t idx,
                         enum cfg_node_verdict v, const char *why) {
        struct doc_ctx *c = ctx;
        const char *node = c->o->node_name ? c->o->node_name : "(no --node-name)";

        if (v == CFG_NODE_UNDECIDED)
                doc_add(c, "nodes", DOC_WARN,
                        res->nodes->names && !c->o->node_name
                                ? "pass --node-name (serve takes it from NODE_NAME)"
                                : "pass the node's labels with --node-labels KEY=VALUE,...",
                        "node \"%s\" cannot tell whether it serves \"%s\" (resources[%zu]): %s",
                        node, res->name, idx, why);
        else
                doc_add(c, "nodes", v == CFG_NODE_SERVES ? DOC_OK : DOC_INFO, NULL,
                        "node \"%s\" %s \"%s\" (resources[%zu]): %s", node,
                        v == CFG_NODE_SERVES ? "serves" : "does not serve", res->name, idx, why);
}

/* serve opens the NFD features dir before the lock-down and writes its
 * feature file there: a missing or read-only dir stops it at start. */
static void check_nfd(struct doc_ctx *c) {
        const char *dir = c->cfg->nfd_features_dir;
        struct stat st;
        int r;

        if (!dir)
                return;
        r = stat(dir, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (r < 0)
                doc_add(c, "nfd", DOC_PROBLEM,
                        "create it, or install Node Feature Discovery (its nfd-worker reads it)",
                        "nfd.features_dir %s: %s", dir, strerror(-r));
        else if (access(dir, W_OK) < 0)
                doc_add(c, "nfd", DOC_PROBLEM, "let the serving identity write it",
                        "nfd.features_dir %s: not writable: %s", dir, strerror(errno));
        else
                doc_add(c, "nfd", DOC_OK, NULL,
                        "nfd.features_dir %s: serve keeps its feature file \"cdiplug\" there", dir);
}

/* For the node doctor is asked about: what it serves, and why not the
 * rest; the rest of doctor's checks then see only what it serves. */
static void check_nodes(struct doc_ctx *c) {
        struct base_field_error err = { 0 };
        int r = cfg_nodes_select(c->cfg, c->o->node_name, c->o->node_labels, node_finding, c, &err);

        if (r == -EINVAL)
                doc_add(c, "nodes", DOC_PROBLEM, "make the resources' \"nodes\" exclusive",
                        "%s: %s: %s", c->o->config_path, err.field ? err.field : "",
                        err.msg ? err.msg : "invalid");
        else if (r < 0)
                c->oom = true;
        base_field_error_clear(&err);
}

static void check_config(struct doc_ctx *c) {
        const char *path = c->o->config_path;
        struct base_field_error err = { 0 };
        int r = cfg_load(path, &c->cfg, &err);

        if (r == -EINVAL)
                doc_add(c, "config", DOC_PROBLEM, "fix the field, then run \"cdiplug check\"",
                        "%s: %s%s%s", path, err.field && *err.field ? err.field : "",
                        err.field && *err.field ? ": " : "", err.msg ? err.msg : "invalid");
        else if (r < 0)
                doc_add(c, "config", DOC_PROBLEM, "pass the config with --config FILE",
                        "%s: cannot read it: %s", path, strerror(-r));
        base_field_error_clear(&err);
        if (r < 0)
                return;
        check_nodes(c);
        check_nfd(c);
        /* As check does: kinds, spec files and sockets under the kubelet
         * dir; what it finds wrong it logs on stderr. */
        r = dp_names_prepare_instance(c->cfg, c->o->kubelet_dir, c->o->instance, true);
        if (r == -EINVAL)
                doc_add(c, "config", DOC_PROBLEM, "rename the resources the messages above name",
                        "%s: the resources' names cannot be served as they are", path);
        else if (r < 0)
                doc_add(c, "config", DOC_PROBLEM, NULL,
                        "%s: cannot work out the resources' names: %s", path, strerror(-r));
        else
                doc_add(c, "config", DOC_OK, NULL, "%s: valid, %zu resources", path,
                        c->cfg->n_resources);
        if (c->cfg->n_resources == 0)
                doc_add(c, "config", DOC_WARN,
                        "add resources to it (see cdiplug(8), and the example config.json "
                        "in cdiplug's doc dir)",
                        "%s configures no resources: cdiplug serves nothing", path);

        if (c->cfg->user) {
                struct sbx_options ids = { 0 };
                const char *problem = NULL;
                r = sbx_resolve_user(c->cfg->user, &ids, &problem);
                if (r < 0)
                        doc_add(c, "config", DOC_PROBLEM, "create the user or name an existing one",
                                "user \"%s\" cannot be resolved: %s", c->cfg->user,
                                problem ? problem : strerror(-r));
                else {
                        c->uid = ids.uid;
                        c->gid = ids.gid;
                }
        }
}

/* --- kubelet --- */

/* 0 when something accepts connections on the unix socket; -EAGAIN when
 * its listen backlog stayed full for SOCKET_TIMEOUT_MS (a listener that
 * no longer accepts: a hung kubelet or daemon), else a negative errno. */
static int socket_alive(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = SOCKET_TIMEOUT_MS / 1000,
                              .tv_usec = (SOCKET_TIMEOUT_MS % 1000) * 1000 };
        _cleanup_close_ int fd = -1;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* A unix connect() waits while the listener's backlog is full, and
         * a non-blocking one fails at once with EAGAIN, which cannot tell
         * a busy listener from a hung one. SO_SNDTIMEO bounds the kernel's
         * wait: room in the backlog within it is a connection, none is
         * EAGAIN. */
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        return 0;
}

/* Why a socket does not take a connection, for "%s is %s". */
static const char *socket_state(int r) {
        return r == -EAGAIN ? "not answering: its listen backlog stayed full for 2 s, nothing "
                              "accepts connections (a hung process)"
                            : "stale: nothing listens on it";
}

static void check_kubelet_socket(struct doc_ctx *c, const char *dir) {
        _cleanup_free_ char *sock = NULL;
        struct stat st;
        int r;

        if (xasprintf(&sock, "%s/kubelet.sock", dir) < 0) {
                c->oom = true;
                return;
        }
        if (lstat(sock, &st) < 0)
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "start the kubelet, or point --kubelet-dir at its device-plugins dir",
                        "%s is missing: no kubelet is serving device plugins there", sock);
        else if (!S_ISSOCK(st.st_mode))
                doc_add(c, "kubelet", DOC_PROBLEM, "remove it and restart the kubelet",
                        "%s is not a socket", sock);
        else if ((r = socket_alive(sock)) < 0)
                doc_add(c, "kubelet", DOC_PROBLEM, "restart the kubelet", "%s is %s", sock,
                        socket_state(r));
        else if (!doc_can_write(&st, c->uid, c->gid, false))
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "serve as uid 0 (no \"user\"), or give the user write access to the socket",
                        "%s is not writable by uid %u: cdiplug cannot register", sock,
                        (unsigned)c->uid);
        else
                doc_add(c, "kubelet", DOC_OK, NULL, "%s: the kubelet listens", sock);
}

/* The socket of name another instance serves: "<name less .sock>-<8 hex
 * digits>.sock" (POD_UID, the DaemonSets' pods), for a doctor run on the
 * host, which has no POD_UID, and finds no socket under the plain name.
 * The newest such socket, or NULL. */
static char *instance_socket(const char *dir, const char *name) {
        size_t stem = strlen(name) - strlen(".sock"), want = strlen(name) + 9;
        struct timespec newest = { 0 };
        char *found = NULL;
        struct dirent *e;
        struct stat st;
        DIR *d = opendir(dir);

        if (!d)
                return NULL;
        while ((e = readdir(d))) {
                const char *n = e->d_name;
                if (strlen(n) != want || strncmp(n, name, stem) != 0 || n[stem] != '-' ||
                    strspn(n + stem + 1, "0123456789abcdef") != 8 ||
                    strcmp(n + stem + 9, ".sock") != 0 ||
                    fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode))
                        continue;
                if (found &&
                    (st.st_ctim.tv_sec < newest.tv_sec ||
                     (st.st_ctim.tv_sec == newest.tv_sec && st.st_ctim.tv_nsec <= newest.tv_nsec)))
                        continue;
                free(found);
                found = NULL;
                if (xasprintf(&found, "%s/%s", dir, n) < 0)
                        found = NULL;
                newest = st.st_ctim;
        }
        closedir(d);
        return found;
}

static void check_daemon_sockets(struct doc_ctx *c, const char *dir) {
        size_t serving = 0, device_plugins = 0;

        for (size_t i = 0; i < c->cfg->n_resources; i++) {
                const struct cfg_resource *rc = &c->cfg->resources[i];
                _cleanup_free_ char *sock = NULL;
                struct stat st;
                int r;

                /* A DRA resource has no socket here (doctor_dra.c). */
                if (rc->api == CFG_API_DRA)
                        continue;
                device_plugins++;
                if (xasprintf(&sock, "%s/%s", dir, rc->socket_name) < 0) {
                        c->oom = true;
                        return;
                }
                if (!c->o->instance && lstat(sock, &st) < 0) {
                        char *other = instance_socket(dir, rc->socket_name);
                        if (other) {
                                free(sock);
                                sock = other;
                        }
                }
                if (lstat(sock, &st) < 0)
                        doc_add(c, "kubelet", DOC_PROBLEM,
                                "start the daemon (systemctl start cdiplug, or the DaemonSet) and see its log",
                                "resource \"%s\": %s is missing: cdiplug is not serving it",
                                rc->name, sock);
                else if (!S_ISSOCK(st.st_mode))
                        doc_add(c, "kubelet", DOC_PROBLEM, "remove it and restart the daemon",
                                "resource \"%s\": %s is not a socket", rc->name, sock);
                else if ((r = socket_alive(sock)) < 0)
                        doc_add(c, "kubelet", DOC_PROBLEM, "restart the daemon and see its log",
                                "resource \"%s\": %s is %s", rc->name, sock, socket_state(r));
                else
                        serving++;
        }
        if (serving == device_plugins && serving > 0)
                doc_add(c, "kubelet", DOC_OK, NULL, "the daemon serves all %zu resources", serving);
        /* Registration is only known to the daemon (and the kubelet): ask
         * its /readyz at its metrics address, which doctor takes like serve
         * does (--metrics-address, else the config's). */
        const char *addr = c->o->metrics_address ? c->o->metrics_address : c->cfg->metrics_address;
        _cleanup_free_ char *local = NULL;
        if (addr && addr[0] == ':' && xasprintf(&local, "127.0.0.1%s", addr) >= 0)
                addr = local; /* ":port" listens on every IPv4 address */
        if (addr && *addr)
                doc_check_readyz(c, addr);
        else
                doc_add(c, "kubelet", DOC_INFO, NULL,
                        "registration with the kubelet not checked: no metrics address whose /readyz could be "
                        "asked; give doctor the daemon's --metrics-address (the packaged unit's is "
                        "127.0.0.1:10391) or set metrics.address in the config");
}

static void check_kubelet(struct doc_ctx *c) {
        const char *dir = c->o->kubelet_dir;
        struct stat st;

        if (stat(dir, &st) < 0) {
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "is the kubelet running on this node? Otherwise pass its device-plugins dir with --kubelet-dir",
                        "%s: %s", dir, strerror(errno));
                return;
        }
        if (!S_ISDIR(st.st_mode)) {
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "pass the kubelet's device-plugins dir with --kubelet-dir",
                        "%s is not a directory", dir);
                return;
        }
        if (!doc_can_write(&st, c->uid, c->gid, true))
                doc_add(c, "kubelet", DOC_PROBLEM,
                        "serve as uid 0 (no \"user\"), or: chown the dir to the user, or give its group write access",
                        "%s is not writable by uid %u gid %u without capabilities: cdiplug cannot create its sockets",
                        dir, (unsigned)c->uid, (unsigned)c->gid);
        check_kubelet_socket(c, dir);
        if (c->cfg)
                check_daemon_sockets(c, dir);
}

/* --- kernel --- */

static int read_limit(struct doc_ctx *c, const char *name, long *ret) {
        char buf[64], *end;
        _cleanup_free_ char *path = NULL, *text = NULL;
        size_t len = 0;
        int r;

        if (xasprintf(&path, "/proc/sys/fs/inotify/%s", name) < 0)
                return -ENOMEM;
        r = doc_root_read(c, "kernel", path, sizeof(buf) - 1, &text, &len);
        if (r >= 0) {
                while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
                        len--;
                memcpy(buf, text, len);
                buf[len] = '\0';
        } else if (r == -ENOENT)
                /* A container may see the host root without its /proc:
                 * the limit is the same kernel's, in doctor's own /proc. */
                r = doc_read_small(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        errno = 0;
        long v = strtol(buf, &end, 10);
        if (errno || end == buf || *end)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static size_t watches_needed(struct doc_ctx *c) {
        size_t n = DAEMON_EXTRA_WATCHES;
        for (size_t i = 0; c->cfg && i < c->cfg->n_resources; i++) {
                const struct cfg_resource *rc = &c->cfg->resources[i];
                char **dirs = NULL;
                if (res_watch_dirs(c->o->host_root, rc->selectors, rc->n_selectors, &dirs) < 0)
                        continue;
                for (char **d = dirs; *d; d++)
                        n++;
                base_strv_free(dirs);
        }
        return n;
}

static void check_kernel(struct doc_ctx *c) {
        long watches = 0, instances = 0;
        size_t need = watches_needed(c);
        int r;

        r = read_limit(c, "max_user_watches", &watches);
        if (r < 0)
                doc_add(c, "kernel", DOC_WARN, NULL, "cannot read fs.inotify.max_user_watches: %s",
                        strerror(-r));
        else if ((size_t)watches < need)
                doc_add(c, "kernel", DOC_PROBLEM,
                        "raise it: sysctl -w fs.inotify.max_user_watches=524288 (and in /etc/sysctl.d)",
                        "fs.inotify.max_user_watches is %ld, the config needs %zu: hotplug and kubelet restarts "
                        "would go unseen",
                        watches, need);
        else
                doc_add(c, "kernel", DOC_OK, NULL,
                        "fs.inotify.max_user_watches %ld, the config needs %zu "
                        "(the limit is shared with every process of the same user)",
                        watches, need);

        r = read_limit(c, "max_user_instances", &instances);
        if (r < 0)
                doc_add(c, "kernel", DOC_WARN, NULL,
                        "cannot read fs.inotify.max_user_instances: %s", strerror(-r));
        else if (instances < DAEMON_INSTANCES)
                doc_add(c, "kernel", DOC_PROBLEM,
                        "raise it: sysctl -w fs.inotify.max_user_instances=512",
                        "fs.inotify.max_user_instances is %ld, cdiplug needs %d", instances,
                        DAEMON_INSTANCES);
        else
                doc_add(c, "kernel", DOC_OK, NULL,
                        "fs.inotify.max_user_instances %ld, cdiplug needs %d", instances,
                        DAEMON_INSTANCES);

        _cleanup_free_ char *devchar = doc_host_path(c, "/dev/char");
        struct stat st;
        if (!devchar)
                c->oom = true;
        else if (doc_root_stat(c, "/dev/char", &st) < 0 || !S_ISDIR(st.st_mode))
                doc_add(c, "kernel", DOC_WARN, "run udev (systemd-udevd), or mount the host's /dev",
                        "%s is missing: /dev is not managed by udev, or not the host's", devchar);
        else
                doc_add(c, "kernel", DOC_OK, NULL, "%s present", devchar);

        /* RESOLVE_IN_ROOT keeps symlinks under the host root inside it. */
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_IN_ROOT };
        long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd >= 0) {
                close((int)fd);
                doc_add(c, "kernel", DOC_OK, NULL, "openat2 available");
        } else if (errno == ENOSYS)
                doc_add(c, "kernel", DOC_WARN, "use Linux 5.6 or later",
                        "openat2 is missing (Linux before 5.6): symlinks under the host root resolve like the "
                        "container's own, not the host's");
        else
                doc_add(c, "kernel", DOC_WARN, NULL, "openat2 failed: %s", strerror(errno));
}

/* --- output --- */

static const char *level_name(enum doc_level l) {
        static const char *const names[] = { "ok", "info", "warning", "problem" };
        return names[l];
}

static int print_json(const struct doc_ctx *c, size_t problems, size_t warnings) {
        cJSON *root = cJSON_CreateObject(), *arr = NULL;
        char *text = NULL;

        if (root && cJSON_AddStringToObject(root, "config", c->o->config_path) &&
            cJSON_AddNumberToObject(root, "problems", (double)problems) &&
            cJSON_AddNumberToObject(root, "warnings", (double)warnings))
                arr = cJSON_AddArrayToObject(root, "findings");
        for (size_t i = 0; arr && i < c->n; i++) {
                cJSON *f = cJSON_CreateObject();
                if (!f || !cJSON_AddItemToArray(arr, f) ||
                    !cJSON_AddStringToObject(f, "check", c->v[i].check) ||
                    !cJSON_AddStringToObject(f, "level", level_name(c->v[i].level)) ||
                    !cJSON_AddStringToObject(f, "message", c->v[i].msg) ||
                    (c->v[i].fix && !cJSON_AddStringToObject(f, "fix", c->v[i].fix)))
                        arr = NULL;
        }
        if (arr)
                text = cJSON_Print(root);
        cJSON_Delete(root);
        if (!text)
                return -ENOMEM;
        printf("%s\n", text);
        free(text);
        return 0;
}

static void print_text(const struct doc_ctx *c, size_t problems, size_t warnings) {
        for (size_t i = 0; i < c->n; i++) {
                const struct doc_finding *f = &c->v[i];
                printf("%-7s %-8s %s\n", f->level == DOC_PROBLEM ? "PROBLEM" : level_name(f->level),
                       f->check, f->msg);
                if (f->fix)
                        printf("%-7s %-8s fix: %s\n", "", "", f->fix);
        }
        if (problems + warnings == 0)
                printf("doctor: no problems found\n");
        else
                printf("doctor: %zu problem%s, %zu warning%s\n", problems, problems == 1 ? "" : "s",
                       warnings, warnings == 1 ? "" : "s");
}

int doc_run(const struct doc_options *o) {
        struct doc_ctx c = { .o = o, .ownership_from_ctx = -1 };
        size_t problems = 0, warnings = 0;

        check_config(&c);
        if (c.cfg)
                doc_check_match(&c);
        check_kubelet(&c);
        doc_check_dra(&c);
        doc_check_runtime(&c);
        doc_check_cdi(&c);
        check_kernel(&c);

        for (size_t i = 0; i < c.n; i++) {
                problems += c.v[i].level == DOC_PROBLEM;
                warnings += c.v[i].level == DOC_WARN;
        }
        if (c.oom) {
                fprintf(stderr,
                        "cdiplug: error: doctor: out of memory, the report is incomplete\n");
                problems++;
        }
        if (o->json ? print_json(&c, problems, warnings) < 0
                    : (print_text(&c, problems, warnings), false))
                problems++;
        fflush(stdout);

        for (size_t i = 0; i < c.n; i++) {
                free(c.v[i].msg);
                free(c.v[i].fix);
        }
        free(c.v);
        base_strv_free(c.runtime_dirs);
        cfg_free(c.cfg);
        return problems > INT_MAX ? INT_MAX : (int)problems;
}
