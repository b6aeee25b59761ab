/* SPDX-License-Identifier: Apache-2.0 */
/* Hotplug through the running daemon: nodes that appear in dirs that did
 * not exist at start, USB devices plugged and unplugged, and health. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "env.h"
#include "kubelet.h"
#include "logwait.h"
#include "proc_status.h"

static struct env e;
static struct tk *tk;

static void stop(void) {
        tk_stop(tk);
        env_cleanup(&e);
}

TestSuite(hotplug, .fini = stop, .timeout = 60);

/* Write the config, start the daemon and the test kubelet, and wait for
 * the resource to register: the fake host tree is ready before. */
static void serve(const char *resource, const char *config) {
        env_write(&e, "config.json", config);
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, resource, 1, 10000), 0);
}

/* The next list on s, which must hold n devices. */
static V1beta1__ListAndWatchResponse *next_with(struct lw_stream *s, size_t n) {
        V1beta1__ListAndWatchResponse *l = lw_next(s, 5000);
        cr_assert_not_null(l, "no list pushed");
        cr_assert_eq(l->n_devices, n, "list has %zu devices, want %zu", l->n_devices, n);
        return l;
}

Test(hotplug, sees_nodes_in_dirs_created_after_start) {
        env_init(&e);
        env_touch(&e, "dev/bus/usb/001/001");
        serve("example.com/usbraw",
              "{ \"resources\": [ { \"name\": \"example.com/usbraw\", \"match\": [ { \"path\": \"/dev/bus/usb/*/*\" } ] } ] }");
        grpc_channel *ch = tk_dial(tk, "example.com/usbraw");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "bus-usb-001-001");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* A new bus dir, then a node in it. */
        env_touch(&e, "dev/bus/usb/002/005");
        l = lw_next(s, 5000);
        cr_assert_not_null(l);
        if (l->n_devices == 1) { /* the dir first, its node in the next list */
                v1beta1__list_and_watch_response__free_unpacked(l, NULL);
                l = lw_next(s, 5000);
                cr_assert_not_null(l);
        }
        cr_assert_eq(l->n_devices, 2);
        cr_assert_str_eq(l->devices[1]->id, "bus-usb-002-005");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* And one more in the now-watched dir. */
        env_touch(&e, "dev/bus/usb/002/006");
        l = next_with(s, 3);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        lw_close(s);
        grpc_channel_destroy(ch);
}

static void usb_sysfs(const char *port, const char *vendor, const char *product, int bus, int dev) {
        char path[256], val[16];
        const char *attrs[][2] = { { "idVendor", vendor }, { "idProduct", product } };
        for (size_t i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "host/sys/bus/usb/devices/%s/%s", port, attrs[i][0]);
                snprintf(val, sizeof(val), "%s\n", attrs[i][1]);
                env_write(&e, path, val);
        }
        snprintf(path, sizeof(path), "host/sys/bus/usb/devices/%s/busnum", port);
        snprintf(val, sizeof(val), "%d\n", bus);
        env_write(&e, path, val);
        snprintf(path, sizeof(path), "host/sys/bus/usb/devices/%s/devnum", port);
        snprintf(val, sizeof(val), "%d\n", dev);
        env_write(&e, path, val);
}

Test(hotplug, usb_device_plugged_unplugged_and_back) {
        env_init(&e);
        usb_sysfs("1-1", "046d", "0825", 1, 2);
        env_touch(&e, "dev/bus/usb/001/002");
        serve("example.com/webcam",
              "{ \"resources\": [ { \"name\": \"example.com/webcam\", "
              "\"match\": [ { \"usb\": { \"vendor\": \"046d\", \"product\": \"0825\" } } ] } ] }");
        grpc_channel *ch = tk_dial(tk, "example.com/webcam");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "usb-1-1");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* Unplugged: the node goes; the device stays listed, Unhealthy. */
        env_rm(&e, "dev/bus/usb/001/002");
        l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->health, "Unhealthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* Back in the same port with a new device number: same ID, healthy,
         * and Allocate answers with a CDI name whose spec has the new node. */
        usb_sysfs("1-1", "046d", "0825", 1, 3);
        env_touch(&e, "dev/bus/usb/001/003");
        l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "usb-1-1");
        cr_assert_str_eq(l->devices[0]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        V1beta1__AllocateResponse *r = NULL;
        cr_assert_eq(call_allocate(ch, &r, NULL, "usb-1-1", NULL, NULL), GRPC_STATUS_OK);
        cr_assert_str_eq(r->container_responses[0]->cdi_devices[0]->name,
                         "example.com/webcam=usb-1-1");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        char *path;
        cr_assert(asprintf(&path, "%s/example.com-webcam.json", e.cdi_dir) > 0);
        char *spec = env_read(path);
        cr_assert_not_null(strstr(spec, "/dev/bus/usb/001/003"), "%s", spec);
        cr_assert_null(strstr(spec, "/dev/bus/usb/001/002"), "%s", spec);
        free(spec);
        free(path);
        lw_close(s);
        grpc_channel_destroy(ch);
}

/* Context switches of the daemon's own threads (the main completion-queue
 * loop and the watcher); grpc's threads are grpc's (see docs/design.md). The
 * metrics endpoint's thread has its test in test_metrics.c. */
static long own_switches(pid_t pid) {
        static const char *const own[] = { "cdiplug", "cdiplug-watch", NULL };
        int threads = 0;
        long n = proc_thread_switches(pid, own, &threads);
        cr_assert_geq(n, 0);
        cr_assert_eq(threads, 2, "cdiplug's own threads: %d found, 2 expected", threads);
        return n;
}

Test(hotplug, no_wakeups_while_nothing_happens) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        serve("example.com/serial",
              "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        /* Settle: the registration's last completions drain. */
        struct timespec settle = { 0, 300000000 }, idle = { 2, 0 };
        nanosleep(&settle, NULL);
        long before = own_switches(e.pid);
        nanosleep(&idle, NULL); /* the point: two seconds in which nothing happens */
        long after = own_switches(e.pid);
        cr_assert_eq(after, before, "cdiplug's own threads woke %ld times in 2 s of idleness",
                     after - before);
        /* And they do wake for an event. */
        env_touch(&e, "dev/ttyUSB1");
        cr_assert_eq(tk_wait_lists(tk, "example.com/serial", 2, 5000, NULL), 0);
        cr_assert_gt(own_switches(e.pid), after);
}

/* A FIFO where a USB device's idProduct should be. Before, discovery
 * opened it for reading and blocked for a writer: at start-up the daemon
 * never registered; on hotplug the watcher blocked holding the daemon's
 * lock and every Allocate timed out. Now it is a mismatch. */
static void usb_fifo_product(const char *port) {
        char *path;
        cr_assert(asprintf(&path, "%s/sys/bus/usb/devices/%s/idProduct", e.host, port) > 0);
        cr_assert_eq(unlink(path), 0, "%s", path);
        cr_assert_eq(mkfifo(path, 0644), 0, "%s", path);
        free(path);
}

Test(hotplug, a_fifo_in_sysfs_is_a_mismatch_not_a_hang) {
        env_init(&e);
        usb_sysfs("1-1", "046d", "0825", 1, 2);
        env_touch(&e, "dev/bus/usb/001/002");
        usb_sysfs("1-2", "046d", "0825", 1, 4);
        usb_fifo_product("1-2");
        env_touch(&e, "dev/bus/usb/001/004");
        serve("example.com/webcam",
              "{ \"resources\": [ { \"name\": \"example.com/webcam\", "
              "\"match\": [ { \"usb\": { \"vendor\": \"046d\", \"product\": \"0825\" } } ] } ] }");
        grpc_channel *ch = tk_dial(tk, "example.com/webcam");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 1);
        cr_assert_str_eq(l->devices[0]->id, "usb-1-1");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        /* Plugged while serving: one more with a FIFO, then a good one,
         * whose list shows the watcher got past the FIFO. */
        usb_sysfs("1-3", "046d", "0825", 1, 5);
        usb_fifo_product("1-3");
        env_touch(&e, "dev/bus/usb/001/005");
        usb_sysfs("1-4", "046d", "0825", 1, 6);
        env_touch(&e, "dev/bus/usb/001/006");
        l = next_with(s, 2);
        cr_assert_str_eq(l->devices[1]->id, "usb-1-4");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        V1beta1__AllocateResponse *r = NULL;
        cr_assert_eq(call_allocate(ch, &r, NULL, "usb-1-4", NULL, NULL), GRPC_STATUS_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        lw_close(s);
        grpc_channel_destroy(ch);
}

/* One node reached by several paths is one device. Before, /dev/ttyUSB*
 * plus /dev/serial/by-id/ * listed the port twice, both Healthy, and the
 * kubelet could give it to two pods. */
Test(hotplug, one_node_by_several_paths_is_listed_once) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/ttyUSB1");
        char *link;
        env_write(&e, "host/dev/serial/by-id/.keep", ""); /* the dir; '*' skips dotfiles */
        cr_assert(asprintf(&link, "%s/dev/serial/by-id/usb-FTDI_A-port0", e.host) > 0);
        cr_assert_eq(symlink("../../ttyUSB0", link), 0);
        free(link);
        serve("example.com/serial",
              "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ "
              "{ \"path\": \"/dev/ttyUSB*\" }, { \"path\": \"/dev/serial/by-id/*\" } ] } ] }");
        grpc_channel *ch = tk_dial(tk, "example.com/serial");
        struct lw_stream *s = lw_open(ch);
        V1beta1__ListAndWatchResponse *l = next_with(s, 2);
        cr_assert_str_eq(l->devices[0]->id, "ttyUSB0");
        cr_assert_str_eq(l->devices[1]->id, "ttyUSB1");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        cr_assert_eq(log_wait(e.log,
                              "match[0]: /dev/ttyUSB0, /dev/serial/by-id/usb-FTDI_A-port0 are one "
                              "device node",
                              5000),
                     0);

        /* A second link to ttyUSB1 appears: still two devices, and the list
         * that goes out says so. */
        cr_assert(asprintf(&link, "%s/dev/serial/by-id/usb-FTDI_B-port0", e.host) > 0);
        cr_assert_eq(symlink("/dev/ttyUSB1", link), 0);
        free(link);
        cr_assert_eq(
                log_wait(e.log, "/dev/ttyUSB1, /dev/serial/by-id/usb-FTDI_B-port0 are one", 5000),
                0);
        env_touch(&e, "dev/ttyUSB2");
        l = next_with(s, 3);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        lw_close(s);
        grpc_channel_destroy(ch);
}
