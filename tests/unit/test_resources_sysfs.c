/* SPDX-License-Identifier: Apache-2.0 */
/* resources: USB and PCI selectors, NUMA nodes and multi-node ("paths")
 * devices on fake /sys trees shaped like the kernel's. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

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

TestSuite(resources_sysfs, .init = setup, .fini = teardown);

static void mkf(const char *dir, const char *attr, const char *content) {
        char *p = tfmt("%s/%s", dir, attr);
        mk(root, p, content);
        free(p);
}

/* A PCI function at sys/devices/<bridge>/<addr>, linked from
 * sys/bus/pci/devices. NULL numa: no numa_node file; NULL driver: unbound. */
static void pci_dev(const char *bridge, const char *addr, const char *vendor, const char *device,
                    const char *class, const char *numa, const char *driver, const char *group) {
        char *dir = tfmt("sys/devices/%s/%s", bridge, addr);
        char *val;
        mkd(root, dir);
        mkf(dir, "vendor", val = tfmt("0x%s\n", vendor)), free(val);
        mkf(dir, "device", val = tfmt("0x%s\n", device)), free(val);
        mkf(dir, "class", val = tfmt("0x%s\n", class)), free(val);
        if (numa)
                mkf(dir, "numa_node", val = tfmt("%s\n", numa)), free(val);
        char *l = tfmt("%s/subsystem", dir);
        mkln(root, l, "../../../bus/pci");
        free(l);
        if (driver) {
                l = tfmt("%s/driver", dir);
                val = tfmt("../../../bus/pci/drivers/%s", driver);
                mkln(root, l, val);
                free(l), free(val);
        }
        if (group) {
                l = tfmt("%s/iommu_group", dir);
                val = tfmt("../../../kernel/iommu_groups/%s", group);
                mkln(root, l, val);
                free(l), free(val);
        }
        l = tfmt("sys/bus/pci/devices/%s", addr);
        val = tfmt("../../../devices/%s/%s", bridge, addr);
        mkln(root, l, val);
        free(l), free(val), free(dir);
}

/* A USB device at sys/devices/<path>, linked as sys/bus/usb/devices/<name>. */
static void usb_dev(const char *path, const char *vendor, const char *product, const char *serial,
                    int bus, int devnum) {
        char *dir = tfmt("sys/devices/%s", path);
        const char *name = strrchr(path, '/') + 1;
        char *val;
        mkd(root, dir);
        mkf(dir, "idVendor", val = tfmt("%s\n", vendor)), free(val);
        mkf(dir, "idProduct", val = tfmt("%s\n", product)), free(val);
        if (serial)
                mkf(dir, "serial", val = tfmt("%s\n", serial)), free(val);
        mkf(dir, "busnum", val = tfmt("%d\n", bus)), free(val);
        mkf(dir, "devnum", val = tfmt("%d\n", devnum)), free(val);
        char *l = tfmt("%s/subsystem", dir);
        mkln(root, l, "/sys/bus/usb");
        free(l);
        /* Interfaces sit next to devices and must not be mistaken for them. */
        char *intf = tfmt("%s/%s:1.0", dir, name);
        mkf(intf, "bInterfaceClass", "ff\n");
        l = tfmt("sys/bus/usb/devices/%s:1.0", name);
        val = tfmt("../../../devices/%s/%s:1.0", path, name);
        mkln(root, l, val);
        free(l), free(val), free(intf);
        l = tfmt("sys/bus/usb/devices/%s", name);
        val = tfmt("../../../devices/%s", path);
        mkln(root, l, val);
        free(l), free(val);
        char *node = tfmt("dev/bus/usb/%03d/%03d", bus, devnum);
        mk(root, node, NULL);
        free(node);
        free(dir);
}

static void usb_tree(void) {
        pci_dev("pci0000:00", "0000:00:14.0", "8086", "a36d", "0c0330", "1", "xhci_hcd", NULL);
        usb_dev("pci0000:00/0000:00:14.0/usb1/1-1/1-1.2", "046d", "0825", "ABC123", 1, 5);
        usb_dev("pci0000:00/0000:00:14.0/usb1/1-3", "046d", "c52b", NULL, 1, 7);
        usb_dev("pci0000:00/0000:00:14.0/usb2/2-1", "0403", "6001", "FT1", 2, 2);
        /* No PCI parent: a platform (SoC) controller. */
        usb_dev("platform/fe980000.usb/usb3/3-1", "046d", "0826", NULL, 3, 2);
}

Test(resources_sysfs, usb_by_vendor_and_product) {
        usb_tree();
        struct res_devlist l =
                discover(root, "[{\"usb\": {\"vendor\": \"046d\", \"product\": \"0825\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "usb-1-1.2");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/bus/usb/001/005", NULL });
        /* NUMA node of the xHCI controller the device hangs off. */
        cr_expect_eq(l.devs[0].numa_node, 1);
        res_devlist_free(&l);
}

Test(resources_sysfs, usb_vendor_only_and_numa_without_pci) {
        usb_tree();
        struct res_devlist l = discover(root, "[{\"usb\": {\"vendor\": \"046D\"}}]");
        cr_assert_eq(l.n, 3);
        cr_expect_str_eq(l.devs[0].id, "usb-1-1.2");
        cr_expect_str_eq(l.devs[1].id, "usb-1-3");
        cr_expect_str_eq(l.devs[2].id, "usb-3-1");
        assert_nodes(&l.devs[1], (const char *[]){ "/dev/bus/usb/001/007", NULL });
        cr_expect_eq(l.devs[1].numa_node, 1);
        cr_expect_eq(l.devs[2].numa_node, -1, "no PCI ancestor, no affinity");
        res_devlist_free(&l);
}

Test(resources_sysfs, usb_serial) {
        usb_tree();
        struct res_devlist l =
                discover(root, "[{\"usb\": {\"vendor\": \"046d\", \"serial\": \"ABC123\"}}]");
        cr_assert_eq(l.n, 1,
                     "only the device with that serial; ones without a serial file don't match");
        cr_expect_str_eq(l.devs[0].id, "usb-1-1.2");
        res_devlist_free(&l);
        l = discover(root, "[{\"usb\": {\"vendor\": \"046d\", \"serial\": \"ABC12\"}}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
}

Test(resources_sysfs, usb_without_node_is_not_listed) {
        usb_tree();
        char *node = ft_path(root, "dev/bus/usb/002/002");
        cr_assert_eq(unlink(node), 0);
        free(node);
        struct res_devlist l = discover(root, "[{\"usb\": {\"vendor\": \"0403\"}}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
}

Test(resources_sysfs, usb_controller_numa_minus_one) {
        pci_dev("pci0000:80", "0000:80:14.0", "8086", "a36d", "0c0330", "-1", "xhci_hcd", NULL);
        usb_dev("pci0000:80/0000:80:14.0/usb4/4-2", "1a86", "7523", NULL, 4, 3);
        struct res_devlist l = discover(root, "[{\"usb\": {\"vendor\": \"1a86\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_eq(l.devs[0].numa_node, -1);
        res_devlist_free(&l);
}

static void pci_tree(void) {
        /* A GPU passed through with vfio. */
        pci_dev("pci0000:3a", "0000:3b:00.0", "10de", "1db6", "030200", "0", "vfio-pci", "42");
        mk(root, "dev/vfio/42", NULL);
        mk(root, "dev/vfio/vfio", NULL);
        /* A GPU on its native driver, with DRM nodes. */
        pci_dev("pci0000:00", "0000:01:00.0", "1002", "73bf", "030000", "1", "amdgpu", NULL);
        mkd(root, "sys/devices/pci0000:00/0000:01:00.0/drm/card1");
        mkd(root, "sys/devices/pci0000:00/0000:01:00.0/drm/renderD129");
        mkd(root, "sys/devices/pci0000:00/0000:01:00.0/drm/controlD65");
        mk(root, "dev/dri/card1", NULL);
        mk(root, "dev/dri/renderD129", NULL);
        /* An NVIDIA GPU on the proprietary driver: no DRM, no numa_node. */
        pci_dev("pci0000:00", "0000:02:00.0", "10de", "2204", "030000", NULL, "nvidia", NULL);
        /* Unbound NIC. */
        pci_dev("pci0000:00", "0000:03:00.0", "8086", "1572", "020000", "0", NULL, NULL);
        mk(root, "sys/bus/pci/devices/not-an-address", NULL);
}

Test(resources_sysfs, pci_vfio_function) {
        pci_tree();
        struct res_devlist l =
                discover(root, "[{\"pci\": {\"vendor\": \"10de\", \"device\": \"1db6\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "0000:3b:00.0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/vfio/42", "/dev/vfio/vfio", NULL });
        cr_expect_eq(l.devs[0].numa_node, 0);
        res_devlist_free(&l);
}

Test(resources_sysfs, pci_drm_nodes_and_unexposable_functions) {
        pci_tree();
        /* 10de matches the vfio GPU and the nvidia one; the latter has no
         * node we know how to hand out, so it is not listed. */
        struct res_devlist l =
                discover(root, "[{\"pci\": {\"class\": \"030000\", \"class_mask\": \"ff0000\"}}]");
        cr_assert_eq(l.n, 2);
        cr_expect_str_eq(l.devs[0].id, "0000:01:00.0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/dri/card1", "/dev/dri/renderD129", NULL });
        cr_expect_eq(l.devs[0].numa_node, 1);
        cr_expect_str_eq(l.devs[1].id, "0000:3b:00.0");
        res_devlist_free(&l);
}

Test(resources_sysfs, pci_class_without_mask_is_exact) {
        pci_tree();
        struct res_devlist l = discover(root, "[{\"pci\": {\"class\": \"0x030000\"}}]");
        cr_assert_eq(l.n, 1, "0x030200 must not match an unmasked 0x030000");
        cr_expect_str_eq(l.devs[0].id, "0000:01:00.0");
        res_devlist_free(&l);
}

Test(resources_sysfs, pci_driver_filter) {
        pci_tree();
        struct res_devlist l = discover(root, "[{\"pci\": {\"driver\": \"vfio-pci\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "0000:3b:00.0");
        res_devlist_free(&l);
        l = discover(root, "[{\"pci\": {\"vendor\": \"8086\", \"driver\": \"i40e\"}}]");
        cr_expect_eq(l.n, 0, "unbound function has no driver");
        res_devlist_free(&l);
}

Test(resources_sysfs, pci_missing_numa_is_minus_one) {
        pci_tree();
        mkd(root, "sys/devices/pci0000:00/0000:02:00.0/drm/card0");
        mk(root, "dev/dri/card0", NULL);
        struct res_devlist l = discover(root, "[{\"pci\": {\"device\": \"2204\"}}]");
        cr_assert_eq(l.n, 1);
        cr_expect_eq(l.devs[0].numa_node, -1);
        res_devlist_free(&l);
}

Test(resources_sysfs, pci_vfio_without_group_node_is_not_listed) {
        pci_tree();
        char *node = ft_path(root, "dev/vfio/42");
        cr_assert_eq(unlink(node), 0);
        free(node);
        struct res_devlist l = discover(root, "[{\"pci\": {\"driver\": \"vfio-pci\"}}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
}

Test(resources_sysfs, paths_share_a_control_node) {
        mk(root, "dev/nvidia0", NULL);
        mk(root, "dev/nvidia1", NULL);
        mk(root, "dev/nvidiactl", NULL);
        mk(root, "dev/nvidia-uvm", NULL);
        struct res_devlist l = discover(
                root,
                "[{\"paths\": [\"/dev/nvidia[0-9]*\", \"/dev/nvidiactl\", \"/dev/nvidia-uvm\"]}]");
        cr_assert_eq(l.n, 2);
        cr_expect_str_eq(l.devs[0].id, "nvidia0");
        assert_nodes(&l.devs[0],
                     (const char *[]){ "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", NULL });
        assert_nodes(&l.devs[1],
                     (const char *[]){ "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", NULL });
        res_devlist_free(&l);
}

Test(resources_sysfs, paths_without_partner_list_nothing) {
        mk(root, "dev/nvidia0", NULL);
        mk(root, "dev/x1", NULL);
        mk(root, "dev/x2", NULL);
        /* No match for the second glob. */
        struct res_devlist l =
                discover(root, "[{\"paths\": [\"/dev/nvidia*\", \"/dev/nvidiactl\"]}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
        /* Two candidates without a sysfs parent: no way to tell which. */
        l = discover(root, "[{\"paths\": [\"/dev/nvidia*\", \"/dev/x*\"]}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
}

/* A DRM node as the kernel shows it: /sys/dev/char/226:N -> the class
 * device under its parent, whose "device" link is the parent. */
static void drm_node(const char *name, unsigned minor, const char *parent) {
        char *dev = tfmt("dev/dri/%s", name);
        int r = ft_chrdev(root, dev, 226, minor);
        free(dev);
        if (r == -EPERM)
                cr_skip_test("mknod not permitted here");
        cr_assert_eq(r, 0, "mknod: %s", strerror(-r));
        char *cls = tfmt("sys/devices/%s/drm/%s", parent, name);
        char *link = tfmt("%s/device", cls);
        mkd(root, cls);
        mkln(root, link, "../..");
        char *sysdev = tfmt("sys/dev/char/226:%u", minor);
        char *target = tfmt("../../devices/%s/drm/%s", parent, name);
        mkln(root, sysdev, target);
        free(cls), free(link), free(sysdev), free(target);
}

Test(resources_sysfs, paths_pair_by_sysfs_parent) {
        pci_dev("pci0000:00", "0000:01:00.0", "1002", "73bf", "030000", "1", "amdgpu", NULL);
        pci_dev("pci0000:80", "0000:81:00.0", "1002", "73bf", "030000", "0", "amdgpu", NULL);
        mkd(root, "sys/devices/platform/simple-framebuffer.0");
        /* Numbered so that pairing by sort order would get it wrong. */
        drm_node("card0", 0, "pci0000:80/0000:81:00.0");
        drm_node("card1", 1, "platform/simple-framebuffer.0");
        drm_node("card2", 2, "pci0000:00/0000:01:00.0");
        drm_node("renderD128", 128, "pci0000:00/0000:01:00.0");
        drm_node("renderD129", 129, "pci0000:80/0000:81:00.0");

        struct res_devlist l =
                discover(root, "[{\"paths\": [\"/dev/dri/card*\", \"/dev/dri/renderD*\"]}]");
        cr_assert_eq(l.n, 2, "card1 has no render node and is left out");
        cr_expect_str_eq(l.devs[0].id, "dri-card0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/dri/card0", "/dev/dri/renderD129", NULL });
        cr_expect_eq(l.devs[0].numa_node, 0);
        cr_expect_str_eq(l.devs[1].id, "dri-card2");
        assert_nodes(&l.devs[1], (const char *[]){ "/dev/dri/card2", "/dev/dri/renderD128", NULL });
        cr_expect_eq(l.devs[1].numa_node, 1);
        res_devlist_free(&l);

        /* A plain path glob on real nodes also finds their NUMA node. */
        l = discover(root, "[{\"path\": \"/dev/dri/card*\"}]");
        cr_assert_eq(l.n, 3);
        cr_expect_eq(l.devs[0].numa_node, 0);
        cr_expect_eq(l.devs[1].numa_node, -1);
        cr_expect_eq(l.devs[2].numa_node, 1);
        res_devlist_free(&l);
}

Test(resources_sysfs, all_selector_kinds_together) {
        usb_tree();
        pci_tree();
        mk(root, "dev/ttyUSB0", NULL);
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/ttyUSB*\", \"permissions\": \"rw\"},"
                               " {\"usb\": {\"vendor\": \"0403\"}},"
                               " {\"pci\": {\"driver\": \"vfio-pci\"}, \"env\": {\"V\": \"1\"}}]");
        cr_assert_eq(l.n, 3);
        cr_expect_str_eq(l.devs[0].id, "0000:3b:00.0");
        cr_expect_str_eq(l.devs[0].edits.env[0], "V=1");
        cr_expect_str_eq(l.devs[1].id, "ttyUSB0");
        cr_expect_str_eq(l.devs[1].edits.node.permissions, "rw");
        cr_expect_str_eq(l.devs[2].id, "usb-2-1");
        cr_expect_null(l.devs[2].edits.node.permissions);
        res_devlist_free(&l);
}

/* A FIFO where an attribute should be: before, opening it for reading
 * blocked until a writer came, and discovery (generate, doctor, the
 * daemon's watcher under its lock) never returned. Now it is a mismatch. */
static void fifo_attr(const char *dir, const char *attr) {
        char *p = tfmt("%s/%s", dir, attr), *full = ft_path(root, p);
        cr_assert_eq(unlink(full), 0, "%s", full);
        cr_assert_eq(ft_fifo(root, p), 0);
        free(p), free(full);
}

Test(resources_sysfs, fifo_attributes_are_mismatches_not_hangs, .timeout = 10) {
        usb_tree();
        fifo_attr("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2", "idProduct");
        fifo_attr("sys/devices/pci0000:00/0000:00:14.0/usb2/2-1", "serial");
        struct res_devlist l =
                discover(root, "[{\"usb\": {\"vendor\": \"046d\", \"product\": \"0825\"}}, "
                               "{\"usb\": {\"vendor\": \"0403\", \"serial\": \"FT1\"}}, "
                               "{\"usb\": {\"vendor\": \"046d\", \"product\": \"c52b\"}}]");
        /* Only the device whose attributes are files is found. */
        cr_assert_eq(l.n, 1, "got %zu devices", l.n);
        cr_expect_str_eq(l.devs[0].id, "usb-1-3");
        res_devlist_free(&l);

        struct sels s = sels_parse("[{\"usb\": {\"vendor\": \"0403\", \"serial\": \"FT1\"}}]");
        char *msg = NULL;
        size_t found = 99;
        cr_assert_eq(res_selector_explain(root, s.v[0], &msg, &found), 0);
        cr_expect_eq(found, 0, "%s", msg);
        free(msg);
        sels_free(&s);
}
