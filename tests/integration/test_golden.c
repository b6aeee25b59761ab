/* SPDX-License-Identifier: Apache-2.0 */
/* Golden files: a config and a fake host tree in, `cdiplug generate` out;
 * every spec is compared structurally (key order and whitespace aside)
 * with tests/golden/<case>/<file>.json. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

static struct env e;

static void stop(void) {
        env_cleanup(&e);
}

TestSuite(golden, .init = NULL, .fini = stop, .timeout = 30);

static void link_in_host(const char *target, const char *rel) {
        char *path;
        cr_assert(asprintf(&path, "%s/%s", e.host, rel) > 0);
        cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
        free(path);
}

/* Generate, then compare every golden file of the case, and make sure no
 * other spec was written. */
static void check(const char *name) {
        char *out = NULL, *gdir;
        int rc = env_run(&e, &out, "generate", "--config", e.config, "--cdi-dir", e.cdi_dir,
                         "--host-root", e.host, NULL);
        cr_assert_eq(rc, 0, "generate failed: %s", out);
        free(out);
        cr_assert(asprintf(&gdir, "%s/tests/golden/%s", CDIPLUG_SRC_DIR, name) > 0);
        /* To refresh the golden files after a deliberate change; review
         * the diff before committing it. */
        if (getenv("CDIPLUG_GOLDEN_UPDATE")) {
                char *cmd;
                cr_assert(asprintf(&cmd, "mkdir -p '%s' && cp '%s'/*.json '%s'/", gdir, e.cdi_dir,
                                   gdir) > 0);
                /* A developer's opt-in refresh of the golden files; the paths
                 * are the test's own. NOLINTNEXTLINE(cert-env33-c) */
                cr_assert_eq(system(cmd), 0);
                free(cmd);
        }
        DIR *d = opendir(gdir);
        cr_assert_not_null(d, "%s", gdir);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d))) {
                if (!strstr(de->d_name, ".json"))
                        continue;
                char *gpath, *opath;
                cr_assert(asprintf(&gpath, "%s/%s", gdir, de->d_name) > 0);
                cr_assert(asprintf(&opath, "%s/%s", e.cdi_dir, de->d_name) > 0);
                char *want = env_read(gpath), *got = env_read(opath);
                cr_assert_not_null(got, "%s was not written", opath);
                cJSON *w = cJSON_Parse(want), *g = cJSON_Parse(got);
                cr_assert_not_null(w, "golden %s does not parse", gpath);
                cr_assert_not_null(g, "%s does not parse", opath);
                cr_assert(cJSON_Compare(w, g, true), "%s differs from %s:\n%s", opath, gpath, got);
                cJSON_Delete(w);
                cJSON_Delete(g);
                free(want);
                free(got);
                free(gpath);
                free(opath);
                n++;
        }
        closedir(d);
        free(gdir);
        cr_assert_gt(n, 0);
        /* Plus the ownership record, nothing else. */
        cr_assert_eq(env_dir_entries(e.cdi_dir), n + 1);
}

Test(golden, paths_and_shares) {
        env_init(&e);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/ttyUSB1");
        env_touch(&e, "dev/fuse");
        env_touch(&e, "dev/dri/renderD128");
        env_write(
                &e, "config.json",
                "{ \"resources\": ["
                " { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ], \"shares\": 8 },"
                " { \"name\": \"example.com/render\", \"match\": [ { \"path\": \"/dev/dri/renderD*\" } ] } ] }");
        check("paths");
}

Test(golden, usb_with_env_mounts_and_permissions) {
        env_init(&e);
        env_write(&e, "host/sys/bus/usb/devices/1-1.2/idVendor", "046d\n");
        env_write(&e, "host/sys/bus/usb/devices/1-1.2/idProduct", "0825\n");
        env_write(&e, "host/sys/bus/usb/devices/1-1.2/busnum", "1\n");
        env_write(&e, "host/sys/bus/usb/devices/1-1.2/devnum", "7\n");
        env_touch(&e, "dev/bus/usb/001/007");
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/webcam\", \"match\": [ {"
                " \"usb\": { \"vendor\": \"046d\", \"product\": \"0825\" },"
                " \"env\": { \"CAMERA\": \"logitech\" },"
                " \"mounts\": [ { \"hostPath\": \"/usr/share/cam\", \"containerPath\": \"/opt/cam\", \"readOnly\": true } ],"
                " \"permissions\": \"rw\" } ] } ] }");
        check("usb");
}

Test(golden, pci_vfio_needs_cdi_0_5_for_an_address_name) {
        env_init(&e);
        const char *dev = "host/sys/bus/pci/devices/0000:3b:00.0";
        char path[256];
        const char *attrs[][2] = { { "vendor", "0x10de\n" },
                                   { "device", "0x1db6\n" },
                                   { "class", "0x030200\n" },
                                   { "numa_node", "1\n" } };
        for (size_t i = 0; i < 4; i++) {
                snprintf(path, sizeof(path), "%s/%s", dev, attrs[i][0]);
                env_write(&e, path, attrs[i][1]);
        }
        env_write(&e, "host/sys/bus/pci/drivers/vfio-pci/.keep", "");
        env_write(&e, "host/sys/kernel/iommu_groups/42/.keep", "");
        link_in_host("../../../../bus/pci/drivers/vfio-pci",
                     "sys/bus/pci/devices/0000:3b:00.0/driver");
        link_in_host("../../../../kernel/iommu_groups/42",
                     "sys/bus/pci/devices/0000:3b:00.0/iommu_group");
        env_touch(&e, "dev/vfio/42");
        env_touch(&e, "dev/vfio/vfio");
        env_write(&e, "config.json",
                  "{ \"resources\": [ { \"name\": \"example.com/gpu\", \"match\": [ {"
                  " \"pci\": { \"vendor\": \"10de\", \"driver\": \"vfio-pci\" } } ] } ] }");
        check("pci");
}
