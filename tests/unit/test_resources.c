/* SPDX-License-Identifier: Apache-2.0 */
/* resources: device IDs, the "path" selector, ID uniqueness, selector
 * errors and watch directories, all on fake trees in temp dirs. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

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

TestSuite(resources, .init = setup, .fini = teardown);

static char *id_of(const char *path) {
        char *id = NULL;
        int r = res_id_from_path(path, &id);
        cr_assert_eq(r, 0, "res_id_from_path(%s): %d", path, r);
        cr_assert_leq(strlen(id), RES_ID_MAX);
        return id;
}

static void expect_id(const char *path, const char *want) {
        char *id = id_of(path);
        cr_expect_str_eq(id, want, "ID of %s", path);
        free(id);
}

Test(resources, id_rules) {
        expect_id("/dev/ttyUSB0", "ttyUSB0");
        expect_id("/dev/bus/usb/001/002", "bus-usb-001-002");
        expect_id("/dev/serial/by-id/usb-FTDI:x y+z", "serial-by-id-usb-FTDI_x_y_z");
        expect_id("/dev/a.b_c-d", "a.b_c-d");
        /* Outside /dev: the whole path, so /tmp/x cannot pose as /dev/x. */
        expect_id("/tmp/x", "tmp-x");
}

Test(resources, id_invalid_leaves_output) {
        char *id = (char *)"untouched";
        cr_expect_eq(res_id_from_path("dev/x", &id), -EINVAL);
        cr_expect_eq(res_id_from_path("/dev/", &id), -EINVAL);
        cr_expect_eq(res_id_from_path("/", &id), -EINVAL);
        cr_expect_str_eq(id, "untouched");
}

Test(resources, id_long_is_shortened_stably_and_uniquely) {
        const char *a = "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T123456-part1";
        const char *b = "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T123456-part2";
        char *ia = id_of(a), *ia2 = id_of(a), *ib = id_of(b);
        cr_expect_eq(strlen(ia), RES_ID_MAX);
        cr_expect_str_eq(ia, ia2, "same path, same ID");
        cr_expect_str_neq(ia, ib, "paths differing past the cut must not share an ID");
        cr_expect(strncmp(ia, "disk-by-id-nvme-SAMSUNG", 23) == 0, "prefix kept: %s", ia);
        /* The hash covers the raw path: these sanitise to the same text. */
        char *x =
                id_of("/dev/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx:1");
        char *y =
                id_of("/dev/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx;1");
        cr_expect_str_neq(x, y);
        free(ia), free(ia2), free(ib), free(x), free(y);
}

Test(resources, share_ids) {
        char *id = NULL;
        cr_assert_eq(res_share_id("ttyUSB0", 0, 1, &id), 0);
        cr_expect_str_eq(id, "ttyUSB0");
        free(id);
        cr_assert_eq(res_share_id("ttyUSB0", 3, 4, &id), 0);
        cr_expect_str_eq(id, "ttyUSB0-3");
        free(id);

        char long_id[RES_ID_MAX + 1];
        memset(long_id, 'g', RES_ID_MAX);
        long_id[RES_ID_MAX] = '\0';
        char *s0 = NULL, *s1 = NULL;
        cr_assert_eq(res_share_id(long_id, 0, 2, &s0), 0);
        cr_assert_eq(res_share_id(long_id, 1, 2, &s1), 0);
        cr_expect_leq(strlen(s0), RES_ID_MAX);
        cr_expect_str_neq(s0, s1, "shares of a long ID must stay distinct");
        free(s0), free(s1);

        id = (char *)"untouched";
        cr_expect_eq(res_share_id("x", 2, 2, &id), -EINVAL);
        cr_expect_eq(res_share_id("x", 0, 0, &id), -EINVAL);
        cr_expect_eq(res_share_id("", 0, 1, &id), -EINVAL);
        cr_expect_str_eq(id, "untouched");
}

Test(resources, path_glob_matches_nodes_only) {
        mk(root, "dev/ttyUSB0", NULL);
        mk(root, "dev/ttyUSB1", NULL);
        mk(root, "dev/ttyUSB10", NULL);
        mk(root, "dev/ttyACM0", NULL);
        mk(root, "dev/.ttyUSB9", NULL);
        mkd(root, "dev/ttyUSBdir");
        cr_assert_eq(ft_fifo(root, "dev/ttyUSBfifo"), 0);

        struct res_devlist l = discover(root, "[{\"path\": \"/dev/ttyUSB*\"}]");
        cr_assert_eq(l.n, 3, "want ttyUSB0, 1, 10 (not dir, fifo, dotfile); got %zu", l.n);
        const char *ids[] = { "ttyUSB0", "ttyUSB1", "ttyUSB10" };
        for (size_t i = 0; i < 3; i++) {
                char want[32];
                snprintf(want, sizeof(want), "/dev/%s", ids[i]);
                cr_expect_str_eq(l.devs[i].id, ids[i]);
                /* Host-absolute: no host-root prefix. */
                assert_nodes(&l.devs[i], (const char *[]){ want, NULL });
                cr_expect_eq(l.devs[i].numa_node, -1);
                cr_expect_null(l.devs[i].edits.env);
                cr_expect_null(l.devs[i].edits.node.permissions);
                cr_expect_eq(l.devs[i].edits.n_mounts, 0);
        }
        res_devlist_free(&l);
}

Test(resources, path_nested_and_literal) {
        mk(root, "dev/bus/usb/001/001", NULL);
        mk(root, "dev/bus/usb/001/004", NULL);
        mk(root, "dev/bus/usb/002/001", NULL);
        mk(root, "dev/bus/usb/README", NULL);
        mk(root, "dev/vfio/vfio", NULL);

        struct res_devlist l = discover(root, "[{\"path\": \"/dev/bus/usb/*/*\"},"
                                              " {\"path\": \"/dev/vfio/vfio\"},"
                                              " {\"path\": \"/dev/vfio/missing\"}]");
        cr_assert_eq(l.n, 4);
        cr_expect_str_eq(l.devs[0].id, "bus-usb-001-001");
        cr_expect_str_eq(l.devs[1].id, "bus-usb-001-004");
        cr_expect_str_eq(l.devs[2].id, "bus-usb-002-001");
        cr_expect_str_eq(l.devs[3].id, "vfio-vfio");
        assert_nodes(&l.devs[1], (const char *[]){ "/dev/bus/usb/001/004", NULL });
        res_devlist_free(&l);
}

Test(resources, path_no_match_is_empty) {
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/nothing*\"},"
                                              " {\"path\": \"/nodir/x/*\"}]");
        cr_expect_eq(l.n, 0);
        res_devlist_free(&l);
}

Test(resources, symlinks_resolve_inside_host_root) {
        mk(root, "dev/ttyUSB0", NULL);
        mk(root, "dev/ttyUSB1", NULL);
        mkln(root, "dev/serial/by-id/usb-rel", "../../ttyUSB1");
        /* Absolute links mean the host's /dev, i.e. <root>/dev. */
        mkln(root, "dev/serial/by-id/usb-abs", "/dev/ttyUSB0");
        mkln(root, "dev/serial/by-id/usb-dangling", "../../ttyUSB7");
        /* Must not reach the test machine's own /etc/passwd. */
        mkln(root, "dev/serial/by-id/usb-escape", "/etc/passwd");
        mkln(root, "dev/serial/by-id/usb-dotdot", "../../../../../../../../etc/passwd");

        struct res_devlist l = discover(root, "[{\"path\": \"/dev/serial/by-id/*\"}]");
        cr_assert_eq(l.n, 2);
        cr_expect_str_eq(l.devs[0].id, "serial-by-id-usb-abs");
        cr_expect_str_eq(l.devs[1].id, "serial-by-id-usb-rel");
        /* The link names the ID; the node it leads to is what is injected. */
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/ttyUSB0", NULL });
        assert_nodes(&l.devs[1], (const char *[]){ "/dev/ttyUSB1", NULL });
        res_devlist_free(&l);
}

Test(resources, real_root_finds_dev_null) {
        struct res_devlist l = discover("/", "[{\"path\": \"/dev/nul[l]\"}]");
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "null");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/null", NULL });
        res_devlist_free(&l);
}

Test(resources, host_root_trailing_slash) {
        mk(root, "dev/ttyS0", NULL);
        char *r2 = NULL;
        cr_assert_gt(asprintf(&r2, "%s/", root), 0);
        struct res_devlist l = discover(r2, "[{\"path\": \"/dev/ttyS*\"}]");
        cr_assert_eq(l.n, 1);
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/ttyS0", NULL });
        res_devlist_free(&l);
        free(r2);
}

Test(resources, missing_host_root_fails) {
        struct sels s = sels_parse("[{\"path\": \"/dev/x\"}]");
        struct res_devlist l = { .n = 99 };
        cr_expect_eq(res_discover("/nonexistent/host", s.v, s.n, &l), -ENOENT);
        cr_expect_eq(l.n, 99);
        sels_free(&s);
}

Test(resources, selector_edits_are_copied) {
        mk(root, "dev/ttyUSB0", NULL);
        struct res_devlist l = discover(
                root,
                "[{\"path\": \"/dev/ttyUSB*\", \"env\": {\"BAUD\": \"9600\", \"E\": \"\"},"
                " \"mounts\": [{\"hostPath\": \"/etc/x\", \"containerPath\": \"/x\","
                " \"readOnly\": true}, {\"hostPath\": \"/var/y\", \"containerPath\": \"/y\"}],"
                " \"permissions\": \"rw\"}]");
        cr_assert_eq(l.n, 1);
        const struct res_device *d = &l.devs[0];
        cr_assert_not_null(d->edits.env);
        cr_expect_str_eq(d->edits.env[0], "BAUD=9600");
        cr_expect_str_eq(d->edits.env[1], "E=");
        cr_expect_null(d->edits.env[2]);
        cr_assert_eq(d->edits.n_mounts, 2);
        cr_expect_str_eq(d->edits.mounts[0].host_path, "/etc/x");
        cr_expect_str_eq(d->edits.mounts[0].container_path, "/x");
        cr_expect(d->edits.mounts[0].read_only);
        cr_expect_not(d->edits.mounts[1].read_only);
        cr_expect_str_eq(d->edits.node.permissions, "rw");
        res_devlist_free(&l);
}

Test(resources, selectors_union_and_duplicates_keep_first) {
        mk(root, "dev/ttyUSB0", NULL);
        mk(root, "dev/ttyUSB1", NULL);
        mk(root, "dev/ttyACM0", NULL);
        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/ttyUSB0\", \"env\": {\"WHO\": \"first\"}},"
                               " {\"path\": \"/dev/tty*\", \"env\": {\"WHO\": \"second\"}}]");
        cr_assert_eq(l.n, 3, "ttyUSB0 listed once");
        cr_expect_str_eq(l.devs[0].id, "ttyACM0");
        cr_expect_str_eq(l.devs[0].edits.env[0], "WHO=second");
        cr_expect_str_eq(l.devs[1].id, "ttyUSB0");
        cr_expect_str_eq(l.devs[1].edits.env[0], "WHO=first");
        res_devlist_free(&l);
}

Test(resources, clashing_ids_are_refused_not_renamed) {
        mk(root, "dev/a/b", NULL);
        mk(root, "dev/a-b", NULL);
        mk(root, "dev/a-c", NULL);
        const char *json = "[{\"path\": \"/dev/a/*\"}, {\"path\": \"/dev/a-*\"}]";
        struct res_devlist l = discover(root, json);
        /* Renaming would change what a checkpointed ID means: both
         * clashing devices are refused, the bystander is untouched. */
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.devs[0].id, "a-c");
        cr_assert_eq(l.n_clashes, 2);
        cr_expect_str_eq(l.clashes[0].id, "a-b");
        cr_expect_str_eq(l.clashes[1].id, "a-b");
        cr_expect_str_eq(l.clashes[0].nodes[0], "/dev/a-b");
        cr_expect_str_eq(l.clashes[1].nodes[0], "/dev/a/b");
        res_devlist_free(&l);
}

Test(resources, ten_thousand_nodes) {
        char name[64];
        for (int i = 0; i < 10000; i++) {
                snprintf(name, sizeof(name), "dev/many/n%05d", i);
                mk(root, name, NULL);
        }
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/many/n*\"}]");
        cr_assert_eq(l.n, 10000);
        cr_expect_str_eq(l.devs[0].id, "many-n00000");
        cr_expect_str_eq(l.devs[9999].id, "many-n09999");
        cr_expect_str_eq(l.devs[4242].nodes[0], "/dev/many/n04242");
        res_devlist_free(&l);
}

Test(resources, too_many_devices_is_e2big, .timeout = 120) {
        char name[64];
        for (int i = 0; i < 65537; i++) {
                snprintf(name, sizeof(name), "dev/huge/n%05d", i);
                mk(root, name, NULL);
        }
        cr_expect_eq(discover_err(root, "[{\"path\": \"/dev/huge/*\"}]"), -E2BIG);
}

/* Watch directories. */

static char **watch(const char *host_root, const char *json) {
        struct sels s = sels_parse(json);
        char **dirs = NULL;
        int r = res_watch_dirs(host_root, s.v, s.n, &dirs);
        cr_assert_eq(r, 0, "res_watch_dirs: %d", r);
        sels_free(&s);
        return dirs;
}

static void expect_dirs(char **dirs, const char *const *rel) {
        size_t n = 0;
        for (; rel[n]; n++) {
                char *want = NULL;
                cr_assert_gt(asprintf(&want, "%s%s", root, rel[n]), 0);
                cr_assert_not_null(dirs[n], "missing watch dir %s", want);
                cr_expect_str_eq(dirs[n], want);
                free(want);
        }
        cr_expect_null(dirs[n], "extra watch dir %s", dirs[n] ? dirs[n] : "");
        base_strv_free(dirs);
}

Test(resources, watch_plain_glob_is_parent) {
        mkd(root, "dev");
        expect_dirs(watch(root, "[{\"path\": \"/dev/ttyUSB*\"}, {\"path\": \"/dev/tty[AS]*\"}]"),
                    (const char *[]){ "/dev", NULL });
}

Test(resources, watch_nested_glob_lists_each_level) {
        mk(root, "dev/bus/usb/001/001", NULL);
        mk(root, "dev/bus/usb/002/001", NULL);
        mk(root, "dev/bus/usb/notadir", NULL);
        expect_dirs(
                watch(root, "[{\"path\": \"/dev/bus/usb/*/*\"}]"),
                (const char *[]){ "/dev/bus/usb", "/dev/bus/usb/001", "/dev/bus/usb/002", NULL });
}

Test(resources, watch_missing_dir_falls_back_to_ancestor) {
        mkd(root, "dev");
        mk(root, "dev/vfio/vfio", NULL);
        expect_dirs(watch(root, "[{\"path\": \"/dev/dri/card*\"}, {\"path\": \"/dev/vfio/vfio\"}]"),
                    (const char *[]){ "/dev", "/dev/vfio", NULL });
}

Test(resources, watch_usb_and_pci) {
        mkd(root, "dev/bus/usb/003");
        mkd(root, "dev/vfio");
        expect_dirs(
                watch(root,
                      "[{\"usb\": {\"vendor\": \"046d\"}}, {\"pci\": {\"vendor\": \"10de\"}}]"),
                (const char *[]){ "/dev", "/dev/bus/usb", "/dev/bus/usb/003", "/dev/vfio", NULL });
}

Test(resources, watch_real_root_has_no_prefix) {
        char **dirs = watch("/", "[{\"path\": \"/dev/null\"}]");
        cr_assert_not_null(dirs[0]);
        cr_expect_str_eq(dirs[0], "/dev");
        cr_expect_null(dirs[1]);
        base_strv_free(dirs);
}

Test(resources, watch_no_selectors_is_empty) {
        char **dirs = NULL;
        cr_assert_eq(res_watch_dirs(root, NULL, 0, &dirs), 0);
        cr_assert_not_null(dirs);
        cr_expect_null(dirs[0]);
        base_strv_free(dirs);
}

/* One node reached by several paths is one device. Before, each path was
 * a device of its own (2 nodes, 4 healthy IDs): the kubelet could give
 * one port to two pods. */
Test(resources, one_node_by_several_paths_is_one_device) {
        mk(root, "dev/ttyUSB0", NULL);
        mk(root, "dev/ttyUSB1", NULL);
        /* A link the glob itself catches, and udev's stable links. */
        mkln(root, "dev/ttyUSB-console", "ttyUSB0");
        mkln(root, "dev/serial/by-id/usb-FTDI_A-port0", "/dev/ttyUSB0");
        mkln(root, "dev/serial/by-id/usb-FTDI_B-port0", "../../ttyUSB1");
        /* A second node made with mknod, same numbers: the same device. */
        struct stat st;
        char *p0 = ft_path(root, "dev/ttyUSB0");
        cr_assert_eq(stat(p0, &st), 0);
        free(p0);
        cr_assert_eq(ft_chrdev(root, "dev/copy/ttyUSB0", major(st.st_rdev), minor(st.st_rdev)), 0);

        struct res_devlist l =
                discover(root, "[{\"path\": \"/dev/serial/by-id/*\", \"env\": {\"FIRST\": \"1\"}},"
                               " {\"path\": \"/dev/ttyUSB*\", \"env\": {\"SECOND\": \"1\"}},"
                               " {\"path\": \"/dev/copy/*\"}]");
        cr_assert_eq(l.n, 2, "got %zu devices", l.n);
        /* The first selector's path, ID and edits. */
        cr_expect_str_eq(l.devs[0].id, "serial-by-id-usb-FTDI_A-port0");
        cr_expect_str_eq(l.devs[1].id, "serial-by-id-usb-FTDI_B-port0");
        assert_nodes(&l.devs[0], (const char *[]){ "/dev/ttyUSB0", NULL });
        assert_nodes(&l.devs[1], (const char *[]){ "/dev/ttyUSB1", NULL });
        for (size_t i = 0; i < 2; i++) {
                cr_expect_str_eq(l.devs[i].edits.env[0], "FIRST=1");
                cr_expect_null(l.devs[i].edits.env[1]);
        }
        /* One note per node, naming every path. */
        cr_assert_not_null(l.notes);
        size_t n = 0;
        for (; l.notes[n]; n++)
                ;
        cr_assert_eq(n, 2, "notes: %s", l.notes[0]);
        const char *a = strstr(l.notes[0], "ttyUSB-console") ? l.notes[0] : l.notes[1];
        const char *b = a == l.notes[0] ? l.notes[1] : l.notes[0];
        cr_expect(strncmp(a, "match[0]: /dev/serial/by-id/usb-FTDI_A-port0, ", 46) == 0, "%s", a);
        cr_expect_not_null(strstr(a, "/dev/ttyUSB0"), "%s", a);
        cr_expect_not_null(strstr(a, "/dev/ttyUSB-console"), "%s", a);
        cr_expect_not_null(strstr(a, "/dev/copy/ttyUSB0"), "%s", a);
        cr_expect_not_null(strstr(a, "listed once, as \"serial-by-id-usb-FTDI_A-port0\""), "%s", a);
        cr_expect_not_null(strstr(b, "/dev/ttyUSB1"), "%s", b);
        cr_expect_null(strstr(b, "ttyUSB0"), "%s", b);
        res_devlist_free(&l);
}

/* Thousands of links to one node: one device, and a note of bounded
 * length that says how many paths it leaves out. */
Test(resources, many_links_to_one_node_are_one_device) {
        mk(root, "dev/ttyUSB0", NULL);
        for (int i = 0; i < 200; i++) {
                char *p = tfmt("dev/serial/by-id/link%03d", i);
                mkln(root, p, "/dev/ttyUSB0");
                free(p);
        }
        struct res_devlist l = discover(root, "[{\"path\": \"/dev/serial/by-id/*\"},"
                                              " {\"path\": \"/dev/ttyUSB*\"}]");
        cr_assert_eq(l.n, 1, "got %zu devices", l.n);
        cr_expect_str_eq(l.devs[0].id, "serial-by-id-link000");
        cr_assert_not_null(l.notes);
        cr_assert_null(l.notes[1]);
        cr_expect_not_null(strstr(l.notes[0], " and 185 more paths"), "%s", l.notes[0]);
        cr_expect_lt(strlen(l.notes[0]), 1024);
        res_devlist_free(&l);
}
