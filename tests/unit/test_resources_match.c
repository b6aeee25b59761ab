/* SPDX-License-Identifier: Apache-2.0 */
/* resources: sysfs matching (attrs, subsystem, driver, kernel), stable
 * IDs ("id"), stable link globs, NUMA from the nearest parent, what is no
 * device, and res_selector_explain, on fake sysfs trees shaped like the
 * kernel's: a USB serial adapter with its interface and device parents, a
 * DRM card under a PCI GPU, a /dev/serial/by-id link farm. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "../resources/res_test.h"
#include "res-internal.h"
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

TestSuite(resources_match, .init = setup, .fini = teardown);

static void attr(const char *dir, const char *name, const char *value) {
        char *p = tfmt("%s/%s", dir, name);
        mk(root, p, value);
        free(p);
}

static void link_to(const char *path, const char *target) {
        mkln(root, path, target);
}

/* A sysfs device dir with its subsystem (and driver) links. */
static void sysdev(const char *dir, const char *subsystem, const char *driver) {
        mkd(root, dir);
        attr(dir, "uevent", "");
        char *l = tfmt("%s/subsystem", dir), *t = tfmt("/sys/bus/%s", subsystem);
        link_to(l, t);
        free(l), free(t);
        if (driver) {
                l = tfmt("%s/driver", dir);
                t = tfmt("/sys/bus/%s/drivers/%s", subsystem, driver);
                link_to(l, t);
                free(l), free(t);
        }
}

/* /dev/<name> as char node maj:min, with /sys/dev/char/maj:min -> dir. */
static void node(const char *name, unsigned maj, unsigned min, const char *dir) {
        if (geteuid() != 0)
                cr_skip_test("making fake device nodes (mknod) needs root");
        char *p = tfmt("dev/%s", name);
        cr_assert_eq(ft_chrdev(root, p, maj, min), 0);
        free(p);
        if (!dir)
                return;
        char *l = tfmt("sys/dev/char/%u:%u", maj, min);
        /* Relative, as the kernel makes it: sys/dev/char -> ../../ */
        char *t = tfmt("../..%s", dir + 4);
        link_to(l, t);
        free(l), free(t);
}

#define XHCI "/sys/devices/pci0000:00/0000:00:14.0"

/* An FTDI adapter (serial A12B) and a Prolific one, each with a USB
 * device, an interface and a tty below; the controller is on NUMA node 1. */
static void usb_serial_tree(void) {
        sysdev(XHCI, "pci", "xhci_hcd");
        attr(XHCI, "numa_node", "1\n");
        sysdev(XHCI "/usb1", "usb", "usb");
        const char *ports[] = { "1-1", "1-2" };
        const char *vendors[] = { "0403", "067b" };
        const char *serials[] = { "A12B", "P77" };
        for (int i = 0; i < 2; i++) {
                char *dev = tfmt(XHCI "/usb1/%s", ports[i]);
                sysdev(dev, "usb", "usb");
                char *v = tfmt("%s\n", vendors[i]), *s = tfmt("%s\n", serials[i]);
                attr(dev, "idVendor", v);
                attr(dev, "idProduct", "6001\n");
                attr(dev, "serial", s);
                free(v), free(s);
                char *intf = tfmt("%s/%s:1.0", dev, ports[i]);
                sysdev(intf, "usb", i == 0 ? "ftdi_sio" : "pl2303");
                attr(intf, "bInterfaceNumber", "00\n");
                char *tty = tfmt("%s/ttyUSB%d/tty/ttyUSB%d", intf, i, i);
                sysdev(tty, "tty", NULL);
                char *name = tfmt("ttyUSB%d", i);
                node(name, 188, (unsigned)i, tty);
                free(name), free(tty), free(intf), free(dev);
        }
}

Test(resources_match, attrs_select_by_vendor_and_serial_glob) {
        usb_serial_tree();
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/ttyUSB*\", "
                               "\"attrs\": {\"idVendor\": \"0403\", \"serial\": \"A1*\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "ttyUSB0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/ttyUSB0", NULL });
        /* A tty has no numa_node: the xHCI controller's is its. */
        cr_expect_eq(l.devs[0].numa_node, 1);
        res_devlist_free(&l);
}

Test(resources_match, attrs_must_all_match_on_one_device) {
        usb_serial_tree();
        /* idVendor is on the USB device, bInterfaceNumber on the interface:
         * like udev's ATTRS{}, they never match together. */
        struct res_devlist l = discover(
                root, "[{\"path\": \"/dev/ttyUSB*\", \"optional\": true, "
                      "\"attrs\": {\"idVendor\": \"0403\", \"bInterfaceNumber\": \"00\"}}]");
        cr_expect_eq(l.n, 0);
        cr_expect_null(l.notes, "optional: silent");
        res_devlist_free(&l);
}

Test(resources_match, subsystem_driver_kernel_match_self_or_parents) {
        usb_serial_tree();
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"subsystem\": \"tty\", "
                               "\"driver\": \"pl2303\", \"kernel\": \"1-2\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "ttyUSB1");
        res_devlist_free(&l);
        l = discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"driver\": \"ftdi_*\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "ttyUSB0");
        res_devlist_free(&l);
}

Test(resources_match, id_serial_uses_usb_serial_and_interface) {
        usb_serial_tree();
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"id\": \"serial\"}]");
        cr_assert_eq(l.n, 2);
        cr_expect_str_eq(l.devs[0].id, "A12B-if00");
        cr_expect_str_eq(l.devs[1].id, "P77-if00");
        res_devlist_free(&l);
}

Test(resources_match, binary_and_unreadable_attrs_are_a_mismatch) {
        usb_serial_tree();
        attr(XHCI "/usb1/1-1", "product", "FT\x01\x02");
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"optional\": true, "
                                              "\"attrs\": {\"product\": \"*\"}}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
        /* A trailing newline is not part of the value. */
        l = discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"attrs\": {\"serial\": \"P77\"}}]");
        cr_expect_eq(l.n, 1);
        res_devlist_free(&l);
}

Test(resources_match, by_id_links_inject_the_node_and_name_the_id) {
        usb_serial_tree();
        link_to("dev/serial/by-id/usb-FTDI_FT232R_A12B-if00-port0", "../../ttyUSB0");
        link_to("dev/serial/by-id/usb-Prolific_P77-if00-port0", "../../ttyUSB1");
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/serial/by-id/*\", \"id\": \"link\", "
                               "\"attrs\": {\"idVendor\": \"0403\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "usb-FTDI_FT232R_A12B-if00-port0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/ttyUSB0", NULL });
        cr_expect_eq(l.devs[0].numa_node, 1);
        res_devlist_free(&l);
}

/* A GPU at 0000:3b:00.0 on NUMA node 0 with card1 and renderD129. */
#define GPU "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
static void drm_tree(void) {
        sysdev("/sys/devices/pci0000:3a/0000:3a:00.0", "pci", "pcieport");
        attr("/sys/devices/pci0000:3a/0000:3a:00.0", "numa_node", "1\n");
        sysdev(GPU, "pci", "i915");
        attr(GPU, "vendor", "0x8086\n");
        attr(GPU, "numa_node", "0\n");
        sysdev(GPU "/drm/card1", "drm", NULL);
        sysdev(GPU "/drm/renderD129", "drm", NULL);
        node("dri/card1", 226, 1, GPU "/drm/card1");
        node("dri/renderD129", 226, 129, GPU "/drm/renderD129");
        /* Another vendor's render node, no NUMA anywhere above it. */
        sysdev("/sys/devices/pci0000:00/0000:00:02.0", "pci", "nvidia");
        attr("/sys/devices/pci0000:00/0000:00:02.0", "vendor", "0x10de\n");
        sysdev("/sys/devices/pci0000:00/0000:00:02.0/drm/renderD128", "drm", NULL);
        node("dri/renderD128", 226, 128, "/sys/devices/pci0000:00/0000:00:02.0/drm/renderD128");
}

Test(resources_match, drm_render_node_of_one_vendor_with_numa_and_pci_id) {
        drm_tree();
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/dri/renderD*\", "
                               "\"attrs\": {\"vendor\": \"0x8086\"}, \"id\": \"serial\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "0000:3b:00.0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/dri/renderD129", NULL });
        /* The nearest numa_node (the GPU's 0), not the bridge's 1. */
        cr_expect_eq(l.devs[0].numa_node, 0);
        res_devlist_free(&l);
        l = discover(root, "[{\"path\": \"/dev/dri/renderD*\", \"driver\": \"nvidia\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_eq(l.devs[0].numa_node, -1);
        res_devlist_free(&l);
}

Test(resources_match, regular_files_are_no_devices) {
        mk(root, "dev/ttyUSB0", NULL);
        mk(root, "dev/ttyUSB1", "not a node");
        mkd(root, "dev/ttyUSB2");
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/ttyUSB*\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "ttyUSB0");
        cr_assert_not_null(l.notes);
        cr_expect_str_eq(l.notes[0],
                         "match[0]: /dev/ttyUSB1 is not a character or block device node; skipped");
        cr_expect_null(l.notes[1], "one note, nothing about the directory");
        res_devlist_free(&l);
}

Test(resources_match, empty_selector_notes_why_unless_optional) {
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/serial/by-id/*\"}, "
                                              "{\"path\": \"/dev/nothing*\", \"optional\": true}]");
        cr_expect_eq(l.n, 0);
        cr_assert_not_null(l.notes);
        cr_expect_str_eq(
                l.notes[0],
                "match[0]: finds no device: path: directory /dev/serial/by-id does not exist");
        cr_expect_null(l.notes[1]);
        res_devlist_free(&l);
}

static char *explain(const char *json, size_t *found) {
        struct sels s = sels_parse(json);
        char *msg = NULL;
        int r = res_selector_explain(root, s.v[0], &msg, found);
        cr_assert_eq(r, 0, "explain %s: %s", json, strerror(-r));
        cr_assert_not_null(msg);
        sels_free(&s);
        return msg;
}

static void expect_explain(const char *json, const char *want) {
        size_t found = 99;
        char *msg = explain(json, &found);
        cr_expect_str_eq(msg, want, "%s", json);
        cr_expect_eq(found, 0);
        free(msg);
}

Test(resources_match, explain_says_why_nothing_matches) {
        usb_serial_tree();
        drm_tree();
        mk(root, "dev/ttyS0", "a file");
        size_t found = 0;
        char *msg = explain("[{\"path\": \"/dev/ttyUSB*\"}]", &found);
        cr_expect_str_eq(msg, "finds 2 devices: /dev/ttyUSB0, /dev/ttyUSB1");
        cr_expect_eq(found, 2);
        free(msg);
        expect_explain("[{\"path\": \"/dev/serial/by-id/*\"}]",
                       "path: directory /dev/serial/by-id does not exist");
        expect_explain("[{\"path\": \"/dev/ttyACM*\"}]", "path: nothing matches \"/dev/ttyACM*\"");
        expect_explain("[{\"path\": \"/dev/ttyS*\"}]",
                       "/dev/ttyS0 is not a character or block device node; skipped");
        expect_explain(
                "[{\"path\": \"/dev/ttyUSB*\", \"attrs\": {\"idVendor\": \"10c4\"}}]",
                "/dev/ttyUSB0 (and others) matches \"/dev/ttyUSB*\" but idVendor is \"0403\" "
                "on 1-1, not \"10c4\"");
        expect_explain(
                "[{\"path\": \"/dev/ttyUSB*\", \"driver\": \"cp210x\"}]",
                "/dev/ttyUSB0 (and others) matches \"/dev/ttyUSB*\" but no device in its sysfs "
                "path has driver \"cp210x\"");
}

Test(resources_match, explain_usb_and_pci) {
        usb_serial_tree();
        drm_tree();
        /* bus links for the usb and pci selectors */
        link_to("sys/bus/usb/devices/1-1", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1");
        link_to("sys/bus/usb/devices/1-2", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-2");
        link_to("sys/bus/pci/devices/0000:3b:00.0",
                "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
        attr(XHCI "/usb1/1-1", "busnum", "1\n");
        attr(XHCI "/usb1/1-1", "devnum", "4\n");
        expect_explain("[{\"usb\": {\"vendor\": \"0403\", \"product\": \"6015\"}}]",
                       "USB device 1-1 has vendor 0403 but product 6001, not 6015");
        expect_explain("[{\"usb\": {\"vendor\": \"0403\", \"serial\": \"XYZ\"}}]",
                       "USB device 1-1 (vendor 0403) has serial \"A12B\", not \"XYZ\"");
        expect_explain(
                "[{\"usb\": {\"vendor\": \"0403\"}}]",
                "USB device 1-1 matches but its node /dev/bus/usb/001/004 is missing or not a device "
                "node");
        expect_explain("[{\"usb\": {\"vendor\": \"1234\"}}]",
                       "no USB device has vendor 1234 (2 USB devices present)");
        expect_explain("[{\"pci\": {\"vendor\": \"8086\", \"driver\": \"vfio-pci\"}}]",
                       "PCI function 0000:3b:00.0 is bound to i915, not vfio-pci");
        expect_explain("[{\"pci\": {\"vendor\": \"1234\"}}]",
                       "no PCI function matches (1 present)");
}

Test(resources_match, explain_paths_and_missing_serial) {
        drm_tree();
        expect_explain(
                "[{\"paths\": [\"/dev/dri/card*\", \"/dev/dri/renderD*\"], \"driver\": \"nvidia\"}]",
                "/dev/dri/card1 matches \"/dev/dri/card*\" but no device in its sysfs path has driver "
                "\"nvidia\"");
        expect_explain("[{\"paths\": [\"/dev/dri/renderD*\", \"/dev/nvidiactl\"]}]",
                       "paths[1]: nothing matches \"/dev/nvidiactl\"");
        /* A DRM node has a PCI parent but no USB serial: with "serial" it
         * still gets the PCI address; a node without sysfs gets nothing. */
        mk(root, "dev/fuse", NULL);
        expect_explain(
                "[{\"path\": \"/dev/fuse\", \"id\": \"serial\"}]",
                "/dev/fuse has no USB serial or PCI address in its sysfs path, so no \"id\": "
                "\"serial\"; skipped");
}

/* The miss the scan kept for field, for the only selector of json, which
 * finds nothing: the first failing rule the matcher reported. */
static void expect_rule(const char *json, const char *field, const char *want, const char *got,
                        const char *text) {
        struct sels s = sels_parse(json);
        int rootfd = -1;
        cr_assert_eq(res_root_open(root, &rootfd), 0);
        struct res_devvec v = { 0 };
        struct base_strvec notes = { 0 };
        struct res_misses ms = { 0 };
        cr_assert_eq(res_discover_one(rootfd, s.v[0], 0, &v, &notes, &ms), 0, "%s", json);
        cr_assert_eq(v.n, 0, "%s finds nothing", json);
        const struct res_miss *m = NULL;
        for (size_t i = 0; i < ms.n && !m; i++)
                if (strcmp(ms.v[i].field, field) == 0)
                        m = &ms.v[i];
        cr_assert_not_null(m, "%s: the matcher reports no %s miss", json, field);
        cr_expect_str_eq(m->want, want, "%s", json);
        if (got)
                cr_expect_str_eq(m->got, got, "%s", json);
        else
                cr_expect_null(m->got, "%s", json);
        /* The explanation is that miss in words: the same rule, the same
         * values, nothing the matcher did not look at. */
        char *msg = explain(json, NULL);
        cr_expect_str_eq(msg, text, "%s", json);
        cr_expect_not_null(strstr(msg, want), "%s: %s names no %s", json, msg, want);
        if (got)
                cr_expect_not_null(strstr(msg, got), "%s: %s names no %s", json, msg, got);
        free(msg);
        res_misses_clear(&ms);
        base_strvec_clear(&notes);
        free(v.devs);
        close(rootfd);
        sels_free(&s);
}

/* A function bound to vfio-pci in IOMMU group 7, with no /dev/vfio/7. */
#define VFIO "/sys/devices/pci0000:64/0000:64:00.0/0000:65:00.0"
static void vfio_function(void) {
        sysdev(VFIO, "pci", "vfio-pci");
        attr(VFIO, "vendor", "0x10de\n");
        link_to("sys/devices/pci0000:64/0000:64:00.0/0000:65:00.0/iommu_group",
                "../../../kernel/iommu_groups/7");
        link_to("sys/bus/pci/devices/0000:65:00.0",
                "../../../devices/pci0000:64/0000:64:00.0/0000:65:00.0");
}

Test(resources_match, explanation_names_the_rule_the_matcher_failed) {
        usb_serial_tree();
        drm_tree();
        vfio_function();
        link_to("sys/bus/usb/devices/1-1", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1");
        link_to("sys/bus/usb/devices/1-2", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-2");
        link_to("sys/bus/pci/devices/0000:3b:00.0",
                "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
        attr(XHCI "/usb1/1-1", "busnum", "1\n");
        attr(XHCI "/usb1/1-1", "devnum", "4\n");
        attr(GPU, "device", "0x56a1\n");
        expect_rule("[{\"usb\": {\"vendor\": \"0403\", \"product\": \"6015\"}}]", "usb.product",
                    "6015", "6001", "USB device 1-1 has vendor 0403 but product 6001, not 6015");
        expect_rule("[{\"usb\": {\"vendor\": \"0403\", \"serial\": \"XYZ\"}}]", "usb.serial", "XYZ",
                    "A12B", "USB device 1-1 (vendor 0403) has serial \"A12B\", not \"XYZ\"");
        expect_rule("[{\"usb\": {\"vendor\": \"0403\"}, \"attrs\": {\"serial\": \"Z*\"}}]",
                    "attrs.serial", "Z*", "A12B",
                    "USB device 1-1 matches but serial is \"A12B\" on 1-1, not \"Z*\"");
        expect_rule("[{\"pci\": {\"vendor\": \"8086\", \"device\": \"56a0\"}}]", "pci.device",
                    "56a0", "0x56a1",
                    "PCI function 0000:3b:00.0 has vendor 8086 but device 0x56a1, not 56a0");
        expect_rule("[{\"pci\": {\"vendor\": \"8086\", \"driver\": \"vfio-pci\"}}]", "pci.driver",
                    "vfio-pci", "i915", "PCI function 0000:3b:00.0 is bound to i915, not vfio-pci");

        expect_rule("[{\"path\": \"/dev/ttyUSB*\", \"attrs\": {\"idVendor\": \"10c4\"}}]",
                    "attrs.idVendor", "10c4", "0403",
                    "/dev/ttyUSB0 (and others) matches \"/dev/ttyUSB*\" but idVendor is \"0403\" "
                    "on 1-1, not \"10c4\"");
        expect_rule("[{\"path\": \"/dev/ttyUSB*\", \"driver\": \"cp210x\"}]", "driver", "cp210x",
                    NULL,
                    "/dev/ttyUSB0 (and others) matches \"/dev/ttyUSB*\" but no device in its sysfs "
                    "path has driver \"cp210x\"");
        /* The card passes the filter; what fails is the pairing, and the
         * explanation says so rather than that the card matches. */
        char *msg = explain("[{\"paths\": [\"/dev/dri/card*\", \"/dev/ttyUSB*\"], "
                            "\"driver\": \"i915\"}]",
                            NULL);
        cr_expect_str_eq(msg, "no match of paths[0] has nodes of every further glob under the same "
                              "sysfs parent");
        free(msg);

        /* Every rule holds and the node is missing: the explanation names
         * the node the matcher looked for (busnum and devnum as the kernel
         * names the node, not as sysfs prints them), and that node is
         * what makes the device found. */
        expect_rule("[{\"usb\": {\"vendor\": \"0403\"}}]", "node", "/dev/bus/usb/001/004", NULL,
                    "USB device 1-1 matches but its node /dev/bus/usb/001/004 is missing or not a "
                    "device node");
        mk(root, "dev/bus/usb/001/004", NULL);
        struct res_devlist l = discover(root, "[{\"usb\": {\"vendor\": \"0403\"}}]");
        cr_assert_eq(l.n, 1);
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/bus/usb/001/004", NULL });
        res_devlist_free(&l);

        /* A vfio-pci function is its group's node, not a DRM node. */
        expect_rule("[{\"pci\": {\"vendor\": \"10de\", \"driver\": \"vfio-pci\"}}]", "node",
                    "/dev/vfio/7", "vfio-pci",
                    "PCI function 0000:65:00.0 is bound to vfio-pci but its node /dev/vfio/7 is "
                    "missing or not a device node");
        mk(root, "dev/vfio/7", NULL);
        mk(root, "dev/vfio/vfio", NULL);
        l = discover(root, "[{\"pci\": {\"vendor\": \"10de\", \"driver\": \"vfio-pci\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "0000:65:00.0");
        res_devlist_free(&l);
}

Test(resources_match, usb_and_pci_selectors_take_filters_and_serial_ids) {
        usb_serial_tree();
        drm_tree();
        link_to("sys/bus/usb/devices/1-1", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1");
        link_to("sys/bus/usb/devices/1-2", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-2");
        link_to("sys/bus/pci/devices/0000:3b:00.0",
                "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
        for (int i = 1; i <= 2; i++) {
                char *dir = tfmt(XHCI "/usb1/1-%d", i), *dev = tfmt("%d\n", i + 3),
                     *node = tfmt("dev/bus/usb/001/%03d", i + 3);
                attr(dir, "busnum", "1\n");
                attr(dir, "devnum", dev);
                mk(root, node, NULL);
                free(dir), free(dev), free(node);
        }
        /* Both adapters have product 6001; the serial glob picks one. */
        struct res_devlist l =
                discover(root, "[{\"usb\": {\"vendor\": \"0403\"}, \"id\": \"serial\", "
                               "\"attrs\": {\"serial\": \"A1*\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "A12B");
        cr_expect_eq(l.devs[0].numa_node, 1);
        res_devlist_free(&l);
        l = discover(
                root,
                "[{\"usb\": {\"vendor\": \"067b\"}, \"attrs\": {\"serial\": \"A1*\"}, \"optional\": true}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
        /* The GPU's parent bridge is bound to pcieport. */
        l = discover(root, "[{\"pci\": {\"vendor\": \"8086\"}, \"driver\": \"pcieport\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "0000:3b:00.0");
        cr_expect_eq(l.devs[0].numa_node, 0);
        res_devlist_free(&l);
}
