/* SPDX-License-Identifier: Apache-2.0 */
/* The list never advertises what the CDI spec on disk does not define:
 * a CDI dir that fills up or turns read-only during hotplug holds the
 * list back, and spec and list catch up by themselves once it is
 * writable again. The CDI dir is a tiny tmpfs in a private mount
 * namespace of the test's own process, which the daemon inherits. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"

#define RESOURCE "example.com/serial"
#define SPEC_FILE "example.com-serial.json"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        tk = NULL;
        /* The mount point itself could not be removed with the tmpfs on it. */
        if (e.cdi_dir)
                umount2(e.cdi_dir, MNT_DETACH);
        env_cleanup(&e);
}

TestSuite(specfull, .fini = stop, .timeout = 60);

static void private_tmpfs_cdi_dir(void) {
        /* Criterion runs each test in a process of its own: the namespace
         * and the mount die with it. */
        if (unshare(CLONE_NEWNS) < 0)
                cr_skip_test("cannot unshare the mount namespace: %s", strerror(errno));
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                cr_skip_test("cannot make mounts private: %s", strerror(errno));
        if (mount("tmpfs", e.cdi_dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") < 0)
                cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
}

static char *spec_text(void) {
        char path[512];
        snprintf(path, sizeof(path), "%s/" SPEC_FILE, e.cdi_dir);
        char *s = env_read(path);
        return s ? s : strdup("");
}

/* Every ID of l is a device of the spec file as it is now: the spec is
 * written before a list goes out, never after. */
static void assert_spec_defines(const V1beta1__ListAndWatchResponse *l) {
        char *spec = spec_text();
        for (size_t i = 0; i < l->n_devices; i++) {
                char quoted[96];
                snprintf(quoted, sizeof(quoted), "\"%s\"", l->devices[i]->id);
                cr_assert(strstr(spec, quoted), "device %s is listed but the spec lacks it:\n%s",
                          l->devices[i]->id, spec);
        }
        free(spec);
}

static bool lists_id(const V1beta1__ListAndWatchResponse *l, const char *id) {
        for (size_t i = 0; i < l->n_devices; i++)
                if (strcmp(l->devices[i]->id, id) == 0)
                        return true;
        return false;
}

static void assert_no_temp_files(void) {
        DIR *dir = opendir(e.cdi_dir);
        struct dirent *de;
        cr_assert_not_null(dir);
        while ((de = readdir(dir)))
                cr_assert_null(strstr(de->d_name, "tmp"), "temp file %s left in %s", de->d_name,
                               e.cdi_dir);
        closedir(dir);
}

/* Fill the tmpfs up: returns the filler's path. */
static char *fill_cdi_dir(void) {
        static char buf[4096];
        char *path;
        cr_assert(asprintf(&path, "%s/filler", e.cdi_dir) > 0);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert(fd >= 0);
        while (write(fd, buf, sizeof(buf)) > 0)
                ;
        cr_assert_eq(errno, ENOSPC);
        close(fd);
        return path;
}

static void set_read_only(bool ro) {
        unsigned long flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0);
        cr_assert_eq(mount(NULL, e.cdi_dir, NULL, flags, NULL), 0, "remount: %s", strerror(errno));
}

/* The daemon serves ttyS0; the CDI dir breaks (how), ttyS1 is plugged;
 * while broken no list names ttyS1; once repaired (undo) the spec gains
 * ttyS1 and a list with it follows, with no retry prompted by the test. */
static void hold_then_catch_up(void (*breaks)(void), void (*undo)(void), const char *errtext) {
        env_init(&e);
        private_tmpfs_cdi_dir();
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"" RESOURCE
                  "\", \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, RESOURCE, 1, 10000), 0);
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = lw_next(s, 5000);
        cr_assert_not_null(l);
        cr_assert_eq(l->n_devices, 1);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        unsigned before = tk_lists(tk, RESOURCE);
        breaks();
        env_touch(&e, "dev/ttyS1");
        cr_assert_eq(log_wait(e.log, "cannot write CDI spec", 10000), 0,
                     "the failed write is not logged");
        cr_assert_eq(log_wait(e.log, errtext, 1000), 0, "the log does not say %s", errtext);
        cr_assert_eq(log_wait(e.log, e.cdi_dir, 1000), 0, "the log does not name the CDI dir");
        char *spec = spec_text();
        cr_assert_null(strstr(spec, "ttyS1"));
        free(spec);
        /* The hotplug still sends a list (the change is real), without it. */
        V1beta1__ListAndWatchResponse *k = NULL;
        cr_assert_eq(tk_wait_lists(tk, RESOURCE, before + 1, 5000, &k), 0);
        cr_assert_not(lists_id(k, "ttyS1"), "the kubelet was offered ttyS1 without a spec");
        v1beta1__list_and_watch_response__free_unpacked(k, NULL);

        undo();
        bool seen = false;
        while (!seen) {
                l = lw_next(s, 15000);
                cr_assert_not_null(l, "no list with ttyS1 after the CDI dir was writable again");
                assert_spec_defines(l);
                seen = lists_id(l, "ttyS1");
                v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        }
        cr_assert_eq(log_wait(e.log, "CDI spec written into", 1000), 0);
        assert_no_temp_files();
        lw_close(s);
        grpc_channel_destroy(ch);
}

static char *filler;
static void fill(void) {
        filler = fill_cdi_dir();
}
static void unfill(void) {
        cr_assert_eq(unlink(filler), 0);
        free(filler);
}
static void ro(void) {
        set_read_only(true);
}
static void rw(void) {
        set_read_only(false);
}

Test(specfull, a_full_cdi_dir_holds_the_list_until_the_spec_is_written) {
        hold_then_catch_up(fill, unfill, "No space left on device");
}

Test(specfull, a_read_only_cdi_dir_holds_the_list_until_the_spec_is_written) {
        hold_then_catch_up(ro, rw, "Read-only file system");
}

/* A full CDI dir at start-up: the spec an earlier run wrote (ttyS0) is
 * still on disk, ttyS1 was plugged meanwhile. Before, the held list
 * offered nothing at all, and Allocate handed out ttyS1, whose CDI name
 * no runtime can resolve. Now the list offers what the file defines, and
 * Allocate refuses what is not offered. */
Test(specfull, a_full_cdi_dir_at_start_up_offers_what_the_spec_on_disk_defines) {
        env_init(&e);
        private_tmpfs_cdi_dir();
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"" RESOURCE
                  "\", \"match\": [ { \"path\": \"/dev/ttyS*\" } ] } ] }");
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, RESOURCE, 1, 10000), 0);
        char *spec = spec_text();
        cr_assert_not_null(strstr(spec, "\"ttyS0\""), "%s", spec);
        free(spec);
        cr_assert_eq(env_stop(&e, SIGTERM, 5000), 0);

        env_touch(&e, "dev/ttyS1");
        char *filler_path = fill_cdi_dir();
        env_spawn(&e, NULL);
        cr_assert_eq(tk_wait_registered(tk, RESOURCE, 2, 10000), 0);
        cr_assert_eq(log_wait(e.log, "No space left on device", 5000), 0);
        grpc_channel *ch = tk_dial(tk, RESOURCE);
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = lw_next(s, 5000);
        cr_assert_not_null(l);
        cr_assert_eq(l->n_devices, 1, "the held list offers %zu devices, want ttyS0 only",
                     l->n_devices);
        cr_assert_str_eq(l->devices[0]->id, "ttyS0");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        char *msg = NULL;
        V1beta1__AllocateResponse *r = NULL;
        cr_assert_eq(call_allocate(ch, &r, &msg, "ttyS1", NULL, NULL),
                     GRPC_STATUS_INVALID_ARGUMENT);
        cr_assert_not_null(msg);
        cr_assert_not_null(strstr(msg, "not advertised"), "%s", msg);
        free(msg);
        cr_assert_eq(call_allocate(ch, &r, NULL, "ttyS0", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);

        /* Room again: the spec gains ttyS1 and so does the list. */
        cr_assert_eq(unlink(filler_path), 0);
        free(filler_path);
        bool seen = false;
        while (!seen) {
                l = lw_next(s, 15000);
                cr_assert_not_null(l, "no list with ttyS1 after the CDI dir had room again");
                assert_spec_defines(l);
                seen = lists_id(l, "ttyS1");
                v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        }
        lw_close(s);
        grpc_channel_destroy(ch);
}
