/* SPDX-License-Identifier: Apache-2.0 */
/* resources: res_device_identity, the USB or PCI device behind a device
 * node, on fake /sys trees shaped like the kernel's (real char nodes, so
 * the lookup goes through st_rdev and /sys/dev/char as on a host). */
#include <errno.h>
#include <stdio.h>

#include "../resources/res_test.h"
#include "tfmt.h"

static char *root;

static void setup(void) {
        root = ft_new();
        cr_assert_not_null(root);
}

static void teardown(void) {
        ft_free(root);
        root = NULL;
}

TestSuite(resources_identity, .init = setup, .fini = teardown);

/* A device directory: the chain only counts dirs with a uevent file. */
static void devdir(const char *dir, const char *const *attrs) {
        char *p = tfmt("%s/uevent", dir);
        mk(root, p, "");
        free(p);
        for (size_t i = 0; attrs && attrs[i]; i += 2) {
                p = tfmt("%s/%s", dir, attrs[i]);
                mk(root, p, attrs[i + 1]);
                free(p);
        }
}

/* dev/<name>, a char node whose /sys/dev/char link leads to sysdir. */
static void node(const char *name, const char *sysdir) {
        unsigned maj, min;
        ft_next_devnum(&maj, &min);
        char *dev = tfmt("dev/%s", name);
        int r = ft_chrdev(root, dev, maj, min);
        free(dev);
        if (r == -EPERM)
                cr_skip_test("mknod not permitted here");
        cr_assert_eq(r, 0, "mknod: %s", strerror(-r));
        char *link = tfmt("sys/dev/char/%u:%u", maj, min);
        char *target = tfmt("../../%s", sysdir + strlen("sys/"));
        mkln(root, link, target);
        free(link), free(target);
}

static const char *const pci_host[] = { "vendor", "0x8086\n", "device", "0xa36d\n", NULL };

/* An FTDI adapter on an xHCI controller: the tty sits under the USB
 * interface, which sits under the USB device. */
static void usb_tty(const char *serial) {
        const char *usb = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1";
        const char *attrs[] = {
                "idVendor", "0403\n", "idProduct", "6001\n", serial ? "serial" : NULL, serial, NULL
        };
        devdir("sys/devices/pci0000:00/0000:00:14.0", pci_host);
        devdir(usb, attrs);
        devdir("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0",
               (const char *[]){ "bInterfaceNumber", "00\n", NULL });
        devdir("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0", NULL);
        devdir("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0", NULL);
        node("ttyUSB0", "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0");
}

Test(resources_identity, tty_under_usb_device) {
        struct res_identity id;
        usb_tty("FT1XYZ\n");
        int r = res_device_identity(root, "/dev/ttyUSB0", &id);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        cr_expect_eq(id.bus, RES_BUS_USB, "the USB device, not the PCI controller above it");
        cr_expect_eq(id.vendor, 0x0403);
        cr_expect_eq(id.product, 0x6001);
        cr_expect_str_eq(id.serial, "FT1XYZ");
        cr_expect_str_eq(id.address, "");
}

Test(resources_identity, usb_serial_absent_or_too_long) {
        struct res_identity id;
        usb_tty(NULL);
        cr_assert_eq(res_device_identity(root, "/dev/ttyUSB0", &id), 0);
        cr_expect_str_eq(id.serial, "");
        ft_free(root);
        root = ft_new();
        char long_serial[RES_SERIAL_MAX + 3];
        memset(long_serial, 'A', RES_SERIAL_MAX + 1);
        strcpy(long_serial + RES_SERIAL_MAX + 1, "\n");
        usb_tty(long_serial);
        cr_assert_eq(res_device_identity(root, "/dev/ttyUSB0", &id), 0);
        cr_expect_eq(id.vendor, 0x0403);
        cr_expect_str_eq(id.serial, "", "a serial past RES_SERIAL_MAX is left out");
}

Test(resources_identity, drm_node_under_pci_function) {
        struct res_identity id;
        const char *gpu = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
        devdir("sys/devices/pci0000:00/0000:00:01.0",
               (const char *[]){ "vendor", "0x8086\n", "device", "0x1901\n", NULL });
        devdir(gpu, (const char *[]){ "vendor", "0x1002\n", "device", "0x73bf\n", NULL });
        char *card = tfmt("%s/drm/card1", gpu);
        devdir(card, NULL);
        node("dri/card1", card);
        free(card);
        int r = res_device_identity(root, "/dev/dri/card1", &id);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        cr_expect_eq(id.bus, RES_BUS_PCI);
        cr_expect_eq(id.vendor, 0x1002, "the GPU, not the bridge above it");
        cr_expect_eq(id.product, 0x73bf);
        cr_expect_str_eq(id.address, "0000:01:00.0");
        cr_expect_str_eq(id.serial, "");
}

Test(resources_identity, neither_is_enoent) {
        struct res_identity id = { .bus = RES_BUS_USB, .vendor = 7 };
        /* A virtual device, and a platform one whose dir has vendor and
         * device files but is no PCI address. */
        devdir("sys/devices/virtual/misc/foo", NULL);
        node("foo", "sys/devices/virtual/misc/foo");
        devdir("sys/devices/platform/soc",
               (const char *[]){ "vendor", "0x1\n", "device", "0x2\n", NULL });
        devdir("sys/devices/platform/soc/bar", NULL);
        node("bar", "sys/devices/platform/soc/bar");
        cr_expect_eq(res_device_identity(root, "/dev/foo", &id), -ENOENT);
        cr_expect_eq(res_device_identity(root, "/dev/bar", &id), -ENOENT);
        /* A node without a /sys/dev entry, and no node at all. */
        mk(root, "dev/plain", NULL);
        cr_expect_eq(res_device_identity(root, "/dev/plain", &id), -ENOENT);
        cr_expect_eq(res_device_identity(root, "/dev/missing", &id), -ENOENT);
        cr_expect_eq(id.bus, RES_BUS_USB, "untouched on failure");
        cr_expect_eq(id.vendor, 7);
}
