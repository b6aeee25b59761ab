/* SPDX-License-Identifier: Apache-2.0 */
/* Nothing escapes --host-root: a device dir that is a symlink (absolute,
 * relative with "..", at start-up or made while serving) is followed
 * inside the host root, for discovery and for the inotify watch alike. A
 * same-named dir outside the host root holds a node that must never be
 * listed and must never be watched. The watches are read back from
 * /proc/<pid>/fdinfo, where the kernel lists each one's inode. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "faketree.h"
#include "kubelet.h"
#include "logwait.h"

#define RESOURCE "example.com/evil"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        env_cleanup(&e);
}

TestSuite(hostroot, .fini = stop, .timeout = 60);

static char *at(const char *base, const char *rel) {
        char *p;
        cr_assert(asprintf(&p, "%s/%s", base, rel) > 0);
        return p;
}

/* A character device node of its own (faketree.h), whatever env_touch
 * makes. */
static void mknode(const char *dir, const char *name) {
        char *p = at(dir, name);
        unsigned major, minor;
        ft_next_devnum(&major, &minor);
        cr_assert_eq(mknod(p, S_IFCHR | 0600, makedev(major, minor)), 0, "mknod %s: %s", p,
                     strerror(errno));
        free(p);
}

static void mkdirs(const char *path) {
        char *p = strdup(path);
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                mkdir(p, 0755);
                *s = '/';
        }
        mkdir(p, 0755);
        free(p);
}

static ino_t ino_of(const char *path) {
        struct stat st;
        cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
        return st.st_ino;
}

/* Whether the daemon has an inotify watch on inode ino. */
static bool watched(ino_t ino) {
        char path[320], target[64];
        bool found = false;
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)e.pid);
        DIR *d = opendir(path);
        cr_assert_not_null(d);
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)e.pid, de->d_name);
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        continue;
                target[n] = '\0';
                if (strcmp(target, "anon_inode:inotify") != 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)e.pid, de->d_name);
                FILE *f = fopen(path, "re");
                char line[512];
                while (f && fgets(line, sizeof(line), f)) {
                        const char *p = strstr(line, " ino:");
                        if (p && strncmp(line, "inotify", 7) == 0 &&
                            strtoull(p + 5, NULL, 16) == (unsigned long long)ino)
                                found = true;
                }
                if (f)
                        fclose(f);
        }
        closedir(d);
        return found;
}

static void serve(void) {
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"" RESOURCE
                  "\", \"match\": [ { \"path\": \"/dev/evil/*\" } ] } ] }");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, RESOURCE, 1, 10000), 0);
}

static V1beta1__ListAndWatchResponse *next_list(struct lw_stream *s, size_t n) {
        V1beta1__ListAndWatchResponse *l = lw_next(s, 5000);
        cr_assert_not_null(l, "no list");
        cr_assert_eq(l->n_devices, n, "list has %zu devices, want %zu", l->n_devices, n);
        return l;
}

/* The outside dir (<tmp>/outside) with node "stolen"; the same path
 * under the host root (where link leads when resolved inside it) with
 * node "ok". */
static void trees(char **ret_outside, char **ret_inside, const char *inside_rel) {
        char *outside = at(e.root, "outside");
        mkdirs(outside);
        mknode(outside, "stolen");
        char *inside = at(e.host, inside_rel);
        mkdirs(inside);
        mknode(inside, "ok");
        *ret_outside = outside;
        *ret_inside = inside;
}

/* With dev/evil -> target, only the inside dir is listed and watched, and
 * hotplug in it works. */
static void check_confined(const char *outside, const char *inside, struct lw_stream *s) {
        V1beta1__ListAndWatchResponse *l = next_list(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "evil-ok");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_assert(watched(ino_of(inside)),
                  "the dir the link leads to inside the host root is not watched");
        cr_assert_not(watched(ino_of(outside)), "a dir outside the host root is watched");
        /* The watch is the inside dir's: a node made there is seen. */
        mknode(inside, "ok2");
        l = next_list(s, 2);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
}

Test(hostroot, an_absolute_dir_link_at_start_up_stays_inside) {
        /* <tmp>/outside is a real dir; inside the root it means
         * <host><tmp>/outside. */
        env_init(&e);
        char *outside, *inside, *target = at(e.root, "outside"), *link = at(e.host, "dev/evil");
        char *in_rel = at(e.root + 1, "outside");
        trees(&outside, &inside, in_rel);
        cr_assert_eq(symlink(target, link), 0);
        serve();
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        struct lw_stream *s = lw_open(ch);
        check_confined(outside, inside, s);
        lw_close(s);
        grpc_channel_destroy(ch);
        free(outside);
        free(inside);
        free(target);
        free(link);
        free(in_rel);
}

Test(hostroot, a_relative_dotdot_link_at_start_up_stays_inside) {
        env_init(&e);
        /* From <host>/dev, ../../outside is <tmp>/outside; inside the root
         * ".." stops at the root: <host>/outside. */
        char *outside, *inside, *link = at(e.host, "dev/evil");
        trees(&outside, &inside, "outside");
        cr_assert_eq(symlink("../../outside", link), 0);
        serve();
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        struct lw_stream *s = lw_open(ch);
        check_confined(outside, inside, s);
        lw_close(s);
        grpc_channel_destroy(ch);
        free(outside);
        free(inside);
        free(link);
}

/* The link appears while serving: the hotplug path adds the watch. */
static void link_at_runtime(bool absolute) {
        env_init(&e);
        char *outside, *inside, *link = at(e.host, "dev/evil");
        char *in_rel = absolute ? at(e.root + 1, "outside") : strdup("outside");
        char *target = absolute ? at(e.root, "outside") : strdup("../../outside");
        trees(&outside, &inside, in_rel);
        serve();
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_list(s, 0);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_assert_eq(symlink(target, link), 0);
        check_confined(outside, inside, s);
        lw_close(s);
        grpc_channel_destroy(ch);
        free(outside);
        free(inside);
        free(link);
        free(in_rel);
        free(target);
}

Test(hostroot, an_absolute_dir_link_made_while_serving_stays_inside) {
        link_at_runtime(true);
}

Test(hostroot, a_relative_dotdot_link_made_while_serving_stays_inside) {
        link_at_runtime(false);
}
