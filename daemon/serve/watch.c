/* SPDX-License-Identifier: Apache-2.0 */
/* inotify: the kubelet's dir (restarts) and the resources' device dirs
 * (hotplug). The kernel tells us; the one timer here is the grace period
 * below.
 *
 * The kubelet, when it starts, deletes every socket in its dir and then
 * creates kubelet.sock. We may see these in either order, so each half is
 * handled on its own. A new kubelet.sock re-creates any socket of ours
 * that is missing and gets every serving resource registered. A deleted
 * socket of ours is re-created at once only when it predates the newest
 * kubelet.sock (that kubelet is clearing the dir it now serves, and is
 * about to dial back); with kubelet.sock gone it waits
 * for the kubelet, and with the old kubelet.sock still there it waits a
 * short grace period first: whoever empties the dir (the kubelet starting,
 * or an admin's `rm -rf`) would otherwise find our new socket in it and
 * fail with "Directory not empty". A deleted socket alone registers
 * nothing when the resource has already registered with the kubelet.sock
 * we know: in the kubelet's own order that file is the dead kubelet's,
 * about to go too; in the other order the new kubelet already has our
 * registration, and its connection outlives the file. Registering twice
 * per restart cost twice the work on both sides. When the dir itself is
 * missing we watch its nearest existing ancestor until it appears.
 *
 * The config file (for live reload, reload.c): its directory is watched,
 * not the file: editors write a temp
 * file and rename it over the old one (IN_MOVED_TO), `>` rewrites it in
 * place (IN_CLOSE_WRITE, so half a file is never parsed), and a
 * Kubernetes ConfigMap volume swaps its "..data" symlink to a new
 * timestamped dir, leaving "config.json -> ..data/config.json" as it was
 * (IN_MOVED_TO "..data"). An inode watched on the first open would see
 * none of the later versions. When the path is a symlink, the dir where
 * the file really lives is watched too (by name, resolved again after
 * every reload, so after every swap): a write in place there
 * ("..data/config.json", or the target of /etc/cdiplug/config.json
 * linked elsewhere) changes nothing in the link's dir. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "serve-internal.h"
#include "resources.h"
#include "log.h"

#define CONFIG_MASK                                                                                \
        (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF |   \
         IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD)

/* The ConfigMap volume's atomic writer renames this symlink into place. */
#define CONFIGMAP_DATA "..data"

/* Symlinks a config path may chain through, as the kernel allows. */
#define CONFIG_MAX_LINKS 40

/* Longer than an `rm -rf` of the kubelet dir takes; short enough that a
 * kubelet re-dialling a socket deleted alone finds it back soon. */
#define RELISTEN_GRACE_MS 200

#define KUBELET_MASK                                                                               \
        (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF |     \
         IN_ONLYDIR | IN_MASK_ADD)
#define ANCESTOR_MASK                                                                              \
        (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD)
#define DEVICE_MASK                                                                                \
        (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB | IN_ONLYDIR | IN_MASK_ADD)

/* inotify gives one watch per inode: the ancestor may also be the config
 * file's dir (reload.c), whose watch must outlive this one. */
static void ancestor_unwatch(struct dp_daemon *d) {
        if (d->watch.ancestor_wd != d->watch.config_wd)
                inotify_rm_watch(d->watch.inotify_fd, d->watch.ancestor_wd);
}

/* Watch the nearest existing ancestor of the missing kubelet dir. */
static int watch_ancestor(struct dp_daemon *d) {
        _cleanup_free_ char *path = strdup(d->opts->kubelet_dir);
        int wd;

        if (!path)
                return -ENOMEM;
        for (;;) {
                char *slash = strrchr(path, '/');
                if (!slash)
                        return -ENOENT;
                if (slash == path)
                        slash[1] = '\0';
                else
                        *slash = '\0';
                wd = inotify_add_watch(d->watch.inotify_fd, path, ANCESTOR_MASK);
                if (wd >= 0)
                        break;
                if ((errno != ENOENT && errno != ENOTDIR) || strcmp(path, "/") == 0)
                        return -errno;
        }
        if (d->watch.ancestor_wd >= 0 && d->watch.ancestor_wd != wd)
                ancestor_unwatch(d);
        d->watch.ancestor_wd = wd;
        log_with(LOG_INFO, &(struct log_fields){ .path = d->opts->kubelet_dir },
                 "kubelet dir %s does not exist yet, waiting for it (watching %s)",
                 d->opts->kubelet_dir, path);
        return 0;
}

/* Watch the kubelet dir, or its nearest existing ancestor when it is
 * missing. Returns 1 when the dir itself is watched, 0 when waiting. */
static int watch_kubelet_dir(struct dp_daemon *d) {
        bool ancestor_watched = false;

        for (;;) {
                int wd = inotify_add_watch(d->watch.inotify_fd, d->opts->kubelet_dir, KUBELET_MASK);
                if (wd >= 0) {
                        d->watch.kubelet_wd = wd;
                        if (d->watch.ancestor_wd >= 0 && d->watch.ancestor_wd != wd)
                                ancestor_unwatch(d);
                        d->watch.ancestor_wd = -1;
                        return 1;
                }
                if (errno != ENOENT && errno != ENOTDIR)
                        return -errno;
                if (ancestor_watched)
                        return 0;
                int r = watch_ancestor(d);
                if (r < 0)
                        return r;
                /* A dir made before the ancestor's watch existed makes no
                 * event there: look once more, now that one would. */
                ancestor_watched = true;
        }
}

static bool has_dir(char **dirs, const char *dir) {
        for (char **p = dirs; p && *p; p++)
                if (strcmp(*p, dir) == 0)
                        return true;
        return false;
}

/* inotify_add_watch takes a path and follows every symlink in it as the
 * daemon sees the file system, so /host/dev/x -> /etc would watch our
 * own /etc. The dir is resolved inside the host root first (openat2
 * RESOLVE_IN_ROOT) and the watch added on the descriptor's magic link,
 * which names exactly what was resolved. Returns the wd or -errno. */
static int watch_in_root(struct dp_daemon *d, const char *dir) {
        char proc[32];
        int fd, wd, r = res_open_watch_dir(d->opts->host_root, dir, &fd);

        if (r < 0)
                return r;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        wd = inotify_add_watch(d->watch.inotify_fd, proc, DEVICE_MASK);
        r = wd < 0 ? -errno : wd;
        close(fd);
        return r;
}

/* Watch one device dir (once, whoever needs it). Returns 1 when a new
 * watch was added, 0 when it already existed or could not be added. */
static int dev_watch_add(struct dp_daemon *d, const char *dir, const char *resource) {
        size_t slot = d->watch.dev_wd_dirs.n;
        int wd;

        for (size_t i = 0; i < d->watch.dev_wd_dirs.n; i++)
                if (strcmp(d->watch.dev_wd_dirs.v[i], dir) == 0) {
                        if (d->watch.dev_wds[i] >= 0)
                                return 0;
                        slot = i; /* watched before, removed since: reuse */
                }
        wd = watch_in_root(d, dir);
        if (wd < 0) {
                log_with(LOG_WARN,
                         &(struct log_fields){ .resource = resource, .path = dir, .err = wd },
                         "resource \"%s\": cannot watch %s for hotplug: %s; continuing without",
                         resource, dir, strerror(-wd));
                return 0;
        }
        if (slot == d->watch.dev_wd_dirs.n) {
                int *wds = realloc(d->watch.dev_wds, (d->watch.dev_wd_dirs.n + 1) * sizeof(int));
                if (wds)
                        d->watch.dev_wds = wds;
                if (!wds || base_strvec_push_dup(&d->watch.dev_wd_dirs, dir) < 0) {
                        inotify_rm_watch(d->watch.inotify_fd, wd);
                        return -ENOMEM;
                }
        }
        d->watch.dev_wds[slot] = wd;
        log_with(LOG_DEBUG, &(struct log_fields){ .resource = resource, .path = dir },
                 "resource \"%s\": watching %s", resource, dir);
        return 1;
}

int dp_watch_setup(struct dp_daemon *d) {
        int r = watch_kubelet_dir(d);
        if (r < 0) {
                log_with(LOG_ERR, &(struct log_fields){ .path = d->opts->kubelet_dir, .err = r },
                         "cannot watch kubelet dir %s: %s", d->opts->kubelet_dir, strerror(-r));
                return r;
        }
        for (size_t i = 0; i < d->n_res; i++)
                for (char **dir = d->res[i]->watch_dirs; dir && *dir; dir++)
                        if (dev_watch_add(d, *dir, d->res[i]->cfg->name) < 0)
                                return -ENOMEM;
        return 0;
}

/* A resource added by a reload: its device dirs, like one from start-up. */
void dp_watch_resource(struct dp_daemon *d, struct dp_resource *res) {
        for (char **dir = res->watch_dirs; dir && *dir; dir++)
                if (dev_watch_add(d, *dir, res->cfg->name) < 0)
                        log_with(
                                LOG_WARN,
                                &(struct log_fields){ .resource = res->cfg->name, .path = *dir },
                                "resource \"%s\": cannot watch %s: out of memory; continuing without hotplug",
                                res->cfg->name, *dir);
}

/* The re-creation timer set to the earliest any deleted socket waits for. */
static void relisten_timer_set(struct dp_daemon *d) {
        uint64_t next = 0;
        for (size_t i = 0; i < d->n_res; i++)
                next = dp_due_min(next, d->res[i]->relisten.at_ms);
        dp_timer_set(&d->relisten_timer, next);
}

/* Re-create a deleted socket; register only with a kubelet that has not
 * seen this resource yet. */
static void relisten(struct dp_resource *res) {
        res->relisten.at_ms = 0;
        if (dp_server_listen(res) < 0)
                return;
        if (res->registration.gen != res->d->kubelet.gen)
                dp_register(res);
        else
                dp_register_relistened(res);
}

/* A new kubelet: a fresh connection for its Registers, since the old one
 * leads to a dead kubelet, then every socket is made again and everyone
 * registers. */
static void kubelet_appeared(struct dp_daemon *d) {
        dp_kubelet_new_gen(d);
        for (size_t i = 0; i < d->n_res; i++) {
                d->res[i]->relisten.at_ms = 0;
                if (d->watch.kubelet_wd >= 0)
                        dp_server_listen(d->res[i]);
                dp_register(d->res[i]);
        }
}

static void kubelet_dir_appeared(struct dp_daemon *d) {
        if (!dp_kubelet_present(d)) {
                log_with(LOG_INFO, &(struct log_fields){ .path = d->opts->kubelet_dir },
                         "kubelet dir %s is there; waiting for kubelet.sock before serving",
                         d->opts->kubelet_dir);
                return;
        }
        log_with(LOG_INFO, &(struct log_fields){ .path = d->opts->kubelet_dir },
                 "kubelet dir %s is there with kubelet.sock, serving", d->opts->kubelet_dir);
        dp_kubelet_sock_created(d);
        kubelet_appeared(d);
        dp_kubelet_sock_note(d);
}

static void kubelet_dir_gone(struct dp_daemon *d) {
        log_with(LOG_WARN, &(struct log_fields){ .path = d->opts->kubelet_dir },
                 "kubelet dir %s was removed; sockets stop until it is back", d->opts->kubelet_dir);
        d->watch.kubelet_wd = -1;
        for (size_t i = 0; i < d->n_res; i++) {
                d->res[i]->relisten.at_ms = 0;
                dp_server_unlisten(d->res[i], false);
        }
        if (watch_kubelet_dir(d) == 1)
                kubelet_dir_appeared(d);
}

static void socket_gone(struct dp_resource *res) {
        struct dp_daemon *d = res->d;
        struct stat st;

        /* Our own re-listening makes the same events; a socket that is
         * there again is the new one. */
        if (res->srv.listen_fd < 0 || stat(res->socket_path, &st) == 0)
                return;
        dp_server_unlisten(res, false);
        if (!dp_kubelet_present(d)) {
                log_with(
                        LOG_INFO,
                        &(struct log_fields){ .resource = res->cfg->name,
                                              .path = res->socket_path },
                        "resource \"%s\": socket %s was removed and kubelet.sock is gone; waiting for the "
                        "kubelet before re-creating it",
                        res->cfg->name, res->socket_path);
                return;
        }
        if (res->srv.listen_gen != d->kubelet.gen) {
                log_with(
                        LOG_INFO,
                        &(struct log_fields){ .resource = res->cfg->name,
                                              .path = res->socket_path },
                        "resource \"%s\": socket %s was removed by the kubelet that started since, "
                        "re-creating it",
                        res->cfg->name, res->socket_path);
                relisten(res);
                return;
        }
        log_with(
                LOG_INFO,
                &(struct log_fields){ .resource = res->cfg->name, .path = res->socket_path },
                "resource \"%s\": socket %s was removed; re-creating it in %d ms unless its dir goes",
                res->cfg->name, res->socket_path, RELISTEN_GRACE_MS);
        res->relisten.at_ms = dp_now_ms() + RELISTEN_GRACE_MS;
        relisten_timer_set(d);
}

void dp_watch_due(void *ctx) {
        struct dp_daemon *d = ctx;
        uint64_t now = dp_now_ms();

        for (size_t i = 0; i < d->n_res; i++) {
                struct dp_resource *res = d->res[i];
                if (!res->relisten.at_ms || res->relisten.at_ms > now)
                        continue;
                res->relisten.at_ms = 0;
                /* A socket at the name now was bound since ours went: a
                 * second instance with the same name (no POD_UID) took it
                 * over, and taking it back would only start a tug of war. */
                if (access(res->socket_path, F_OK) == 0) {
                        log_with(LOG_INFO,
                                 &(struct log_fields){ .resource = res->cfg->name,
                                                       .path = res->socket_path },
                                 "resource \"%s\": %s is another instance's socket now; "
                                 "leaving it to that instance",
                                 res->cfg->name, res->socket_path);
                        continue;
                }
                if (d->watch.kubelet_wd >= 0 && res->srv.listen_fd < 0 && dp_kubelet_present(d))
                        relisten(res);
        }
        relisten_timer_set(d);
}

/* dir/name of what path names once its last component's links are
 * followed (links inside dirs are the kernel's to follow when the dir is
 * watched). The path itself when it is no link, or is missing. */
static int split_real(const char *path, char **ret_dir, char **ret_name) {
        _cleanup_free_ char *cur = strdup(path), *target = malloc(PATH_MAX);

        if (!cur || !target)
                return -ENOMEM;
        for (unsigned links = 0; links < CONFIG_MAX_LINKS; links++) {
                ssize_t n = readlinkat(AT_FDCWD, cur, target, PATH_MAX);
                if (n < 0 || n >= PATH_MAX)
                        break;
                target[n] = '\0';
                const char *slash = strrchr(cur, '/');
                char *next = NULL;
                if (target[0] == '/' || !slash)
                        next = strdup(target);
                else if (xasprintf(&next, "%.*s/%s", (int)(slash - cur), cur, target) < 0)
                        next = NULL;
                if (!next)
                        return -ENOMEM;
                free(cur);
                cur = next;
        }
        const char *slash = strrchr(cur, '/');
        char *dir = NULL, *name = strdup(slash ? slash + 1 : cur);
        if (name && xasprintf(&dir, "%.*s", slash ? (slash == cur ? 1 : (int)(slash - cur)) : 1,
                              slash ? cur : ".") < 0)
                dir = NULL;
        if (!name || !dir) {
                free(name);
                free(dir);
                return -ENOMEM;
        }
        *ret_dir = dir;
        *ret_name = name;
        return 0;
}

/* Whether wd is also one of the daemon's other watches: inotify gives one
 * watch per inode, so removing it would end theirs too. */
static bool wd_shared(const struct dp_daemon *d, int wd) {
        if (wd == d->watch.config_wd || wd == d->watch.kubelet_wd || wd == d->watch.ancestor_wd ||
            wd == d->dra.wd || wd == d->dra.root_wd || wd == d->dra.ck_wd)
                return true;
        for (size_t i = 0; i < d->watch.dev_wd_dirs.n; i++)
                if (d->watch.dev_wds[i] == wd)
                        return true;
        return false;
}

static void unwatch_real(struct dp_daemon *d) {
        if (d->watch.config_real_wd >= 0 && !wd_shared(d, d->watch.config_real_wd))
                inotify_rm_watch(d->watch.inotify_fd, d->watch.config_real_wd);
        d->watch.config_real_wd = -1;
}

/* Watch the dir where the config file really lives, if that is not the
 * path's own: resolved again each time, as a ConfigMap swap or a new link
 * moves it. */
void dp_watch_config_real(struct dp_daemon *d) {
        const char *path = d->opts->config_path;
        _cleanup_free_ char *dir = NULL, *name = NULL;
        struct stat st;

        if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode) || split_real(path, &dir, &name) < 0) {
                unwatch_real(d);
                return;
        }
        int wd = inotify_add_watch(d->watch.inotify_fd, dir, CONFIG_MASK);
        if (wd < 0) {
                log_with(
                        LOG_WARN, &(struct log_fields){ .path = dir, .err = errno },
                        "config: cannot watch %s, where %s leads: %m; a write in place there needs "
                        "SIGHUP",
                        dir, path);
                unwatch_real(d);
                return;
        }
        if (wd != d->watch.config_real_wd || !d->watch.config_real_name ||
            strcmp(name, d->watch.config_real_name) != 0)
                log_with(LOG_INFO, &(struct log_fields){ .path = path },
                         "config: %s leads to %s/%s; watching %s too", path, dir, name, dir);
        if (wd != d->watch.config_real_wd)
                unwatch_real(d);
        d->watch.config_real_wd = wd;
        free(d->watch.config_real_name);
        d->watch.config_real_name = TAKE_PTR(name);
}

int dp_watch_config_setup(struct dp_daemon *d) {
        const char *path = d->opts->config_path;
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *dir = NULL;

        if (xasprintf(&dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".") < 0)
                return -ENOMEM;
        if (!*dir) { /* "/config.json" */
                free(dir);
                dir = strdup("/");
                if (!dir)
                        return -ENOMEM;
        }
        d->watch.config_name = strdup(slash ? slash + 1 : path);
        if (!d->watch.config_name)
                return -ENOMEM;
        d->watch.config_wd = inotify_add_watch(d->watch.inotify_fd, dir, CONFIG_MASK);
        if (d->watch.config_wd < 0) {
                /* The daemon can serve without it; an operator can still
                 * send SIGHUP. */
                log_with(LOG_WARN, &(struct log_fields){ .path = dir, .err = errno },
                         "config: cannot watch %s for changes: %m; only SIGHUP reloads %s", dir,
                         path);
                return 0;
        }
        log_with(LOG_INFO, &(struct log_fields){ .path = dir },
                 "config: watching %s for changes to %s (SIGHUP reloads too)", dir,
                 d->watch.config_name);
        dp_watch_config_real(d);
        return 0;
}

/* An event in the dir where the config really lives. */
static void real_event(struct dp_daemon *d, const struct inotify_event *ev) {
        /* That dir is gone (an old ConfigMap dir after a swap, whose
         * reload resolves the path again). */
        if (ev->mask & IN_IGNORED) {
                d->watch.config_real_wd = -1;
                return;
        }
        if (!ev->len || !d->watch.config_real_name ||
            strcmp(ev->name, d->watch.config_real_name) != 0)
                return;
        /* A new file is still being written: its IN_CLOSE_WRITE follows. */
        if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM))
                d->watch.reload_due = true;
}

static void config_event(struct dp_daemon *d, const struct inotify_event *ev) {
        const char *path = d->opts->config_path;
        struct stat st;

        if (ev->wd == d->watch.config_real_wd)
                real_event(d, ev);
        if (ev->wd != d->watch.config_wd)
                return;

        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                if (d->watch.config_wd >= 0)
                        log_with(
                                LOG_WARN, &(struct log_fields){ .path = path },
                                "config: the dir of %s was removed or moved; the running configuration stays, "
                                "and only SIGHUP reloads it now",
                                path);
                d->watch.config_wd = -1;
                return;
        }
        if (!ev->len)
                return;
        if (strcmp(ev->name, CONFIGMAP_DATA) == 0) {
                if (ev->mask & (IN_MOVED_TO | IN_CREATE))
                        d->watch.reload_due = true;
                return;
        }
        if (strcmp(ev->name, d->watch.config_name) != 0)
                return;
        /* Maybe an editor moving the old file aside before it writes the
         * new one (vim): the reload, after the whole batch of events,
         * tells that from a removal. */
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                d->watch.reload_due = true;
                return;
        }
        /* A new regular file is still being written: its IN_CLOSE_WRITE
         * follows. A new symlink is complete at once. */
        if ((ev->mask & IN_CREATE) && !(lstat(path, &st) == 0 && S_ISLNK(st.st_mode)))
                return;
        d->watch.reload_due = true;
}

static void kubelet_event(struct dp_daemon *d, const struct inotify_event *ev) {
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                if (d->watch.kubelet_wd >= 0)
                        kubelet_dir_gone(d);
                return;
        }
        if (!ev->len)
                return;
        if (strcmp(ev->name, "kubelet.sock") == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                /* Made between our watch and our look (at start-up, or
                 * as its dir appeared): we registered with it already. Registering again would
                 * re-create every socket under the kubelet's dial-back
                 * and count a restart that never was. */
                if (dp_kubelet_sock_is_noted(d)) {
                        log_debug("kubelet.sock appeared as we looked: registered already");
                        return;
                }
                log_info("kubelet.sock appeared: registering %zu resources", d->n_res);
                dp_kubelet_sock_created(d);
                kubelet_appeared(d);
                return;
        }
        if (strcmp(ev->name, "kubelet.sock") == 0 && (ev->mask & (IN_DELETE | IN_MOVED_FROM)))
                d->kubelet.noted_ino = 0; /* whatever comes next is new */
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
                for (size_t i = 0; i < d->n_res; i++)
                        if (strcmp(ev->name, d->res[i]->cfg->socket_name) == 0)
                                socket_gone(d->res[i]);
}

/* Rediscover; then watch any dir that has appeared (a new USB bus, a
 * /dev/dri created by a driver load) and look once more, for nodes made
 * in it before the watch existed. */
static void refresh(struct dp_resource *res) {
        struct dp_daemon *d = res->d;
        bool changed = false, again = false;
        char **dirs = NULL;

        if (dp_resource_refresh(res, &changed) < 0)
                return;
        if (res_watch_dirs(d->opts->host_root, res->cfg->selectors, res->cfg->n_selectors, &dirs) >=
            0) {
                for (char **dir = dirs; dir && *dir; dir++)
                        again |= dev_watch_add(d, *dir, res->cfg->name) > 0;
                base_strv_free(res->watch_dirs);
                res->watch_dirs = dirs;
        }
        if (again) {
                bool more = false;
                if (dp_resource_refresh(res, &more) >= 0)
                        changed |= more;
        }
        if (changed) {
                dp_server_push(res);
                dp_nfd_update(d);
        }
}

/* After a lost event nothing can be trusted: check everything. */
static void resync(struct dp_daemon *d) {
        log_warn("inotify queue overflowed; re-checking sockets, devices and the config");
        d->watch.reload_due = true;
        for (size_t i = 0; i < d->n_res; i++)
                socket_gone(d->res[i]);
        kubelet_appeared(d);
        for (size_t i = 0; i < d->n_res; i++)
                refresh(d->res[i]);
}

void dp_watch_handle(struct dp_daemon *d) {
        char buf[64 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
                __attribute__((aligned(__alignof__(struct inotify_event))));
        _cleanup_free_ bool *dirty = calloc(d->n_res + 1, sizeof(bool));
        ssize_t n;

        if (!dirty)
                return;
        while ((n = read(d->watch.inotify_fd, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                resync(d);
                                continue;
                        }
                        if (ev->wd == d->watch.kubelet_wd)
                                kubelet_event(d, ev);
                        dp_dra_event(d, ev);
                        if (ev->wd == d->watch.config_wd || ev->wd == d->watch.config_real_wd)
                                config_event(d, ev);
                        if (ev->wd == d->watch.ancestor_wd && watch_kubelet_dir(d) == 1)
                                kubelet_dir_appeared(d);
                        for (size_t w = 0; w < d->watch.dev_wd_dirs.n; w++) {
                                if (ev->wd != d->watch.dev_wds[w])
                                        continue;
                                /* The dir is gone; its parent's watch
                                 * (or a later refresh) brings it back. */
                                if (ev->mask & IN_IGNORED)
                                        d->watch.dev_wds[w] = -1;
                                for (size_t i = 0; i < d->n_res; i++)
                                        if (has_dir(d->res[i]->watch_dirs,
                                                    d->watch.dev_wd_dirs.v[w]))
                                                dirty[i] = true;
                        }
                }
        }
        /* One rediscovery per resource per batch of events. */
        for (size_t i = 0; i < d->n_res; i++)
                if (dirty[i] && !d->stopping)
                        refresh(d->res[i]);
}
