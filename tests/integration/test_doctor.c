/* SPDX-License-Identifier: Apache-2.0 */
/* `cdiplug doctor` on fake host roots: quiet on a healthy node, and each
 * planted problem found and explained. The healthy node runs the real
 * daemon against the test kubelet. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env.h"
#include "http.h"
#include "kubelet.h"

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

TestSuite(doctor, .init = start, .fini = stop, .timeout = 60);

#define SERIAL_CONFIG                                                                              \
        "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }"

#define CONTAINERD_V2_CDI                                                                          \
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n"              \
        "  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"

/* A node where everything is in order: devices, containerd with CDI on
 * reading /etc/cdi (which is the env's CDI dir), udev's /dev/char, roomy
 * inotify limits. The host's /etc/cdi is a real dir inside the host root
 * (doctor reads the runtime's dirs only there) and the env's CDI dir, which
 * serve and doctor are given, a link to it. */
static void healthy_root(const char *config) {
        char *dir;
        env_write(&e, "config.json", config);
        env_touch(&e, "dev/ttyUSB0");
        env_touch(&e, "dev/char/.keep");
        env_write(&e, "host/proc/sys/fs/inotify/max_user_watches", "8192\n");
        env_write(&e, "host/proc/sys/fs/inotify/max_user_instances", "128\n");
        env_write(&e, "host/etc/containerd/config.toml", CONTAINERD_V2_CDI);
        cr_assert(asprintf(&dir, "%s/etc/cdi", e.host) > 0);
        cr_assert_eq(mkdir(dir, 0755), 0);
        cr_assert_eq(rmdir(e.cdi_dir), 0);
        cr_assert_eq(symlink(dir, e.cdi_dir), 0);
        free(dir);
}

static int doctor(char **out, const char *extra) {
        return env_run(&e, out, "doctor", "--config", e.config, "--host-root", e.host,
                       "--kubelet-dir", e.kubelet_dir, "--cdi-dir", e.cdi_dir, extra, NULL);
}

static struct tk *serve(const char *resource) {
        struct tk *tk;
        env_spawn(&e, NULL);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(tk_wait_registered(tk, resource, 1, 10000), 0);
        return tk;
}

static void stop_serving(struct tk *tk) {
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        tk_stop(tk);
}

#define assert_has(out, text)                                                                      \
        cr_assert_not_null(strstr(out, text), "expected \"%s\" in:\n%s", text, out)
#define assert_lacks(out, text)                                                                    \
        cr_assert_null(strstr(out, text), "unexpected \"%s\" in:\n%s", text, out)

Test(doctor, quiet_on_a_healthy_node) {
        char *out = NULL;
        healthy_root(SERIAL_CONFIG);
        struct tk *tk = serve("example.com/serial");

        int rc = doctor(&out, NULL);
        cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
        assert_lacks(out, "PROBLEM");
        assert_lacks(out, "warning");
        assert_has(out, "doctor: no problems found");
        assert_has(out, "1 device: ttyUSB0");
        assert_has(out, "the daemon serves all 1 resources");
        free(out);

        rc = doctor(&out, "--json");
        cr_assert_eq(rc, 0, "%s", out);
        cJSON *j = cJSON_Parse(out);
        cr_assert_not_null(j, "--json prints JSON: %s", out);
        cr_assert_eq(cJSON_GetObjectItem(j, "problems")->valueint, 0);
        cr_assert_eq(cJSON_GetObjectItem(j, "warnings")->valueint, 0);
        cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "findings"), 0);
        cr_assert_str_eq(cJSON_GetObjectItem(f, "check")->valuestring, "config");
        cr_assert_str_eq(cJSON_GetObjectItem(f, "level")->valuestring, "ok");
        cJSON_Delete(j);
        free(out);
        stop_serving(tk);

        /* With the daemon stopped its sockets are gone, and doctor says so. */
        cr_assert_eq(doctor(&out, NULL), 1, "%s", out);
        assert_has(out, "kubelet.sock is missing");
        assert_has(out, "cdiplug-example.com-serial.sock is missing: cdiplug is not serving it");
        free(out);
}

Test(doctor, containerd_cdi_switch_in_config_versions_2_and_3) {
        char *out = NULL;
        healthy_root(SERIAL_CONFIG);

        env_write(&e, "host/etc/containerd/config.toml",
                  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "enable_cdi is not set, and containerd 1.7 defaults to off");
        assert_has(out, "fix: set enable_cdi = true under [plugins.\"io.containerd.grpc.v1.cri\"]");
        free(out);

        env_write(&e, "host/etc/containerd/config.toml",
                  "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = false\n");
        doctor(&out, NULL);
        assert_has(out, "containerd: CDI is off");
        assert_has(out, "line 3: enable_cdi = false");
        free(out);

        env_write(&e, "host/etc/containerd/config.toml", "version = 3\n");
        doctor(&out, NULL);
        assert_has(out, "enable_cdi unset, on by default in containerd 2.x");
        assert_lacks(out, "PROBLEM runtime");
        free(out);

        /* The runtime reads other dirs than the one cdiplug writes. */
        env_write(
                &e, "host/etc/containerd/config.toml",
                "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\"]\ncdi_spec_dirs = [\"/var/run/cdi\"]\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "is not among the dirs the runtime reads (/var/run/cdi)");
        free(out);

        /* A drop-in named by "imports" overrides the main file. */
        env_write(
                &e, "host/etc/containerd/config.toml",
                "version = 2\nimports = [\"conf.d/*.toml\"]\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
                "enable_cdi = false\n");
        env_write(&e, "host/etc/containerd/conf.d/50-cdi.toml",
                  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n");
        doctor(&out, NULL);
        assert_has(out, "containerd (config version 2): enable_cdi = true");
        free(out);
        env_write(&e, "host/etc/containerd/conf.d/60-off.toml",
                  "[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = false\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "60-off.toml line 2: enable_cdi = false");
        free(out);

        env_write(&e, "host/etc/containerd/config.toml", "version = 2\n[plugins\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "config.toml: not valid TOML at line 2");
        free(out);
}

/* Doctor in the DaemonSet's pod: the host's CDI dir is mounted at /etc/cdi,
 * /etc/containerd is not. With no runtime config in sight the default dirs
 * are all doctor knows, by name: /etc/cdi is one (no problem), another dir
 * cannot be told (a warning, not a problem). */
Test(doctor, no_runtime_config_in_sight_is_no_cdi_problem) {
        char *out = NULL;
        healthy_root(SERIAL_CONFIG);
        env_rm(&e, "etc/containerd/config.toml");

        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", "/etc/cdi", NULL);
        assert_lacks(out, "PROBLEM cdi");
        assert_has(out, "/etc/cdi is a dir runtimes read by default");
        free(out);

        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", e.host, "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", "/nonexistent/cdiplug-test-cdi", NULL);
        assert_lacks(out, "PROBLEM cdi");
        assert_has(out, "is not a dir runtimes read by default");
        free(out);
}

Test(doctor, crio_conf_and_drop_ins) {
        char *out = NULL;
        healthy_root(
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"allocate\": [\"device-specs\"],"
                " \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        env_rm(&e, "etc/containerd/config.toml");

        env_write(&e, "host/etc/crio/crio.conf",
                  "[crio.runtime]\ncdi_spec_dirs = [\"/etc/cdi\"]\n");
        doctor(&out, NULL);
        assert_has(out, "CRI-O: CDI is always on");
        assert_has(out, "is read by the runtime");
        assert_has(out,
                   "uses \"device-specs\" and device_ownership_from_security_context is not set");
        free(out);

        /* Drop-ins apply in name order, the last one wins. */
        env_write(&e, "host/etc/crio/crio.conf.d/10-cdi.conf",
                  "[crio.runtime]\ncdi_spec_dirs = [\"/opt/cdi\"]\n"
                  "device_ownership_from_security_context = true\n");
        env_write(&e, "host/etc/crio/crio.conf.d/20-more.conf",
                  "[crio.runtime]\ncdi_spec_dirs = [\"/srv/cdi\"]\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "is not among the dirs the runtime reads (/srv/cdi)");
        assert_has(out, "device_ownership_from_security_context = true: non-root pods own");
        free(out);

        /* No runtime config at all: say what is assumed. */
        env_rm(&e, "etc/crio/crio.conf");
        env_rm(&e, "etc/crio/crio.conf.d/10-cdi.conf");
        env_rm(&e, "etc/crio/crio.conf.d/20-more.conf");
        doctor(&out, NULL);
        assert_has(out, "no containerd config.toml or CRI-O crio.conf under");
        free(out);
}

Test(doctor, conflicting_and_broken_specs) {
        char *out = NULL;
        healthy_root(SERIAL_CONFIG);
        env_write(
                &e, "cdi/other.json",
                "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/serial\",\"devices\":[{\"name\":\"ttyUSB0\","
                "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/ttyUSB0\"}]}}]}");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "other.json also declares device example.com/serial=ttyUSB0");
        free(out);
        env_rm(&e, "etc/cdi/other.json");

        env_write(&e, "cdi/broken.json", "{\"cdiVersion\": \"0.3.0\", \"kind\": ");
        env_write(&e, "cdi/nodevs.json",
                  "{\"cdiVersion\":\"0.3.0\",\"kind\":\"vendor.com/xy\",\"devices\":[]}");
        env_write(&e, "cdi/badkind.json",
                  "{\"cdiVersion\":\"0.3.0\",\"kind\":\"nokind\",\"devices\":[{\"name\":\"a\","
                  "\"containerEdits\":{\"env\":[\"A=1\"]}}]}");
        env_write(&e, "cdi/nokind.yaml", "cdiVersion: 0.3.0\ndevices: []\n");
        env_write(&e, "cdi/fine.yaml", "cdiVersion: 0.3.0\nkind: vendor.com/y\ndevices: []\n");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "broken.json: the CDI parser rejects it (not valid JSON)");
        assert_has(out, "nodevs.json: the CDI parser rejects it (no \"devices\")");
        assert_has(out, "badkind.json: the CDI parser rejects it (no valid \"kind\"");
        assert_has(out, "nokind.yaml: the CDI parser rejects it (no top-level kind)");
        assert_lacks(out, "fine.yaml");
        free(out);
}

Test(doctor, own_specs_no_resource_owns_any_more) {
        char *out = NULL;
        healthy_root(
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/fuse\", \"match\": [ { \"path\": \"/dev/fuse\" } ] } ] }");
        env_touch(&e, "dev/fuse");
        stop_serving(serve("example.com/fuse"));

        env_write(&e, "config.json", SERIAL_CONFIG);
        doctor(&out, NULL);
        assert_has(
                out,
                "example.com-fuse.json was written by cdiplug, but no configured resource owns it");
        assert_has(out, "if its log says it cannot: once no pod uses its devices, rm ");
        assert_lacks(out, "example.com-serial.json was written");
        free(out);
        char *path;
        cr_assert(asprintf(&path, "%s/example.com-fuse.json", e.cdi_dir) > 0);
        cr_assert_eq(access(path, F_OK), 0, "doctor never removes anything");
        free(path);
}

Test(doctor, explains_selectors_that_match_nothing) {
        char *out = NULL;
        healthy_root(
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" },"
                " { \"path\": \"/dev/serial/by-id/*\" }, { \"path\": \"/dev/ttyACM*\" } ] },"
                " { \"name\": \"example.com/cam\", \"match\": [ { \"usb\": { \"vendor\": \"046d\", \"product\": \"0825\" } } ] },"
                " { \"name\": \"example.com/gpu\", \"match\": [ { \"pci\": { \"vendor\": \"10de\", \"driver\": \"vfio-pci\" } } ] },"
                " { \"name\": \"example.com/render\", \"match\": [ { \"paths\": [ \"/dev/dri/renderD*\", \"/dev/dri/card*\" ] } ] },"
                " { \"name\": \"example.com/key\", \"match\": [ { \"usb\": { \"vendor\": \"1050\" } } ] },"
                " { \"name\": \"example.com/fpga\", \"match\": [ { \"pci\": { \"vendor\": \"1172\" } } ] },"
                " { \"name\": \"example.com/opt\", \"match\": [ { \"path\": \"/dev/ttyX*\", \"optional\": true },"
                " { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/clash\", \"match\": [ { \"path\": \"/dev/x*/*\" } ] } ] }");
        /* Both want ID "x-y-z": found, then refused, which is no "finds nothing". */
        env_touch(&e, "dev/x-y/z");
        env_touch(&e, "dev/x/y-z");
        env_touch(&e, "dev/dri/renderD128");
        env_touch(&e, "dev/dri/card0");
        env_touch(&e, "dev/dri/card1");
        env_touch(&e, "dev/ttyS0");
        env_write(&e, "host/sys/bus/usb/devices/1-1/idVendor", "046d\n");
        env_write(&e, "host/sys/bus/usb/devices/1-1/idProduct", "0826\n");
        env_write(&e, "host/sys/bus/pci/devices/0000:03:00.0/vendor", "0x10de\n");
        env_write(&e, "host/sys/bus/pci/devices/0000:03:00.0/device", "0x1eb8\n");
        env_write(&e, "host/sys/bus/pci/devices/0000:03:00.0/class", "0x030200\n");
        env_write(&e, "host/sys/bus/pci/drivers/nouveau/.keep", "");
        char *link;
        cr_assert(asprintf(&link, "%s/sys/bus/pci/devices/0000:03:00.0/driver", e.host) > 0);
        cr_assert_eq(symlink("../../../bus/pci/drivers/nouveau", link), 0);
        free(link);

        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "match[0] {\"path\":\"/dev/ttyUSB*\"}: 1 device: ttyUSB0");
        /* The reasons are res_selector_explain()'s; doctor adds where. */
        assert_has(out,
                   "match[1] {\"path\":\"/dev/serial/by-id/*\"}: finds nothing: path: directory "
                   "/dev/serial/by-id does not exist");
        assert_has(
                out,
                "match[2] {\"path\":\"/dev/ttyACM*\"}: finds nothing: path: nothing matches \"/dev/ttyACM*\"");
        assert_has(out, "finds nothing: USB device 1-1 has vendor 046d but product 0826, not 0825");
        assert_has(out,
                   "finds nothing: PCI function 0000:03:00.0 is bound to nouveau, not vfio-pci");
        assert_has(out, "{\"paths\":[\"/dev/dri/renderD*\",\"/dev/dri/card*\"]}: finds nothing: ");
        assert_has(out,
                   "{\"usb\":{\"vendor\":\"1050\"}}: finds nothing: no USB device has vendor 1050");
        assert_has(out, "{\"pci\":{\"vendor\":\"1172\"}}: finds nothing: ");
        assert_has(
                out,
                "info    match    resource \"example.com/opt\" match[0] {\"path\":\"/dev/ttyX*\","
                "\"optional\":true}: finds nothing (optional): ");
        assert_lacks(out, "resource \"example.com/opt\": no devices");
        assert_has(out, "resource \"example.com/cam\": no devices");
        assert_lacks(out, "resource \"example.com/serial\": no devices");
        assert_has(out, "resource \"example.com/clash\" match[0] {\"path\":\"/dev/x*/*\"}: devices "
                        "/dev/x-y/z, /dev/x/y-z all want ID \"x-y-z\": all refused");
        assert_lacks(out, "{\"path\":\"/dev/x*/*\"}: finds nothing");
        free(out);
}

Test(doctor, config_kubelet_dir_and_kernel) {
        char *out = NULL;
        healthy_root(
                "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ],"
                " \"shares\": 0 } ] }");
        cr_assert_eq(doctor(&out, NULL), 1,
                     "an invalid config is a problem found, not a usage error");
        assert_has(out, "resources[0].shares: must be a whole number");
        free(out);

        /* Valid JSON, but two resources would share a CDI kind. */
        env_write(
                &e, "config.json",
                "{ \"resources\": [ { \"name\": \"example.com/9x\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] },"
                " { \"name\": \"example.com/cdi-9x\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "the resources' names cannot be served as they are");
        free(out);

        /* A user serve would refuse, said in the words serve uses. */
        env_write(&e, "config.json",
                  "{ \"user\": \"no-such-user-cdiplug\", \"resources\": [ { \"name\": "
                  "\"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "user \"no-such-user-cdiplug\" cannot be resolved: no such user");
        free(out);

        /* The serving identity cannot write the root-owned kubelet dir. */
        env_write(
                &e, "config.json",
                "{ \"user\": \"65534:65534\", \"resources\": [ { \"name\": \"example.com/serial\","
                " \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        mkdir(e.kubelet_dir, 0755);
        cr_assert_eq(chown(e.kubelet_dir, 0, 0), 0);
        doctor(&out, NULL);
        assert_has(out, "kubelet is not writable by uid 65534 gid 65534 without capabilities");
        assert_has(out, "cdi is not writable by uid 65534 gid 65534 without capabilities");
        free(out);
        cr_assert_eq(chown(e.kubelet_dir, 65534, 65534), 0);
        cr_assert_eq(chown(e.cdi_dir, 65534, 65534), 0);
        doctor(&out, NULL);
        assert_lacks(out, "is not writable");
        free(out);

        env_write(&e, "host/proc/sys/fs/inotify/max_user_watches", "1\n");
        env_write(&e, "host/proc/sys/fs/inotify/max_user_instances", "1\n");
        env_rm(&e, "dev/char/.keep");
        char *devchar;
        cr_assert(asprintf(&devchar, "%s/dev/char", e.host) > 0);
        cr_assert_eq(rmdir(devchar), 0);
        free(devchar);
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "fs.inotify.max_user_watches is 1, the config needs");
        assert_has(out, "fs.inotify.max_user_instances is 1, cdiplug needs 2");
        assert_has(out, "/dev/char is missing");
        free(out);
}

/* The line doctor writes for a limit: "fs.inotify.NAME VALUE, " with the
 * value the real /proc/sys file gives to one read. */
static char *limit_line(const char *name) {
        char path[128], val[64], *line;
        snprintf(path, sizeof(path), "/proc/sys/fs/inotify/%s", name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "%s", path);
        ssize_t n = read(fd, val, sizeof(val) - 1);
        close(fd);
        cr_assert_gt(n, 0);
        while (n > 0 && val[n - 1] == '\n')
                n--;
        val[n] = '\0';
        cr_assert(asprintf(&line, "fs.inotify.%s %s, ", name, val) > 0);
        return line;
}

/* A sysctl gives its value only to the first read (EOF at any offset past
 * 0): read in pieces, 128 was "1" and doctor found 3 problems on a healthy
 * node. Here the limits are the real kernel's, read through the host root. */
Test(doctor, inotify_limits_are_the_real_proc_values) {
        char *out = NULL, *watches = limit_line("max_user_watches"),
             *instances = limit_line("max_user_instances");

        /* The host root "/": its /proc is the real one. */
        healthy_root(SERIAL_CONFIG);
        env_run(&e, &out, "doctor", "--config", e.config, "--host-root", "/", "--kubelet-dir",
                e.kubelet_dir, "--cdi-dir", e.cdi_dir, NULL);
        assert_has(out, watches);
        assert_has(out, instances);
        assert_lacks(out, "fs.inotify.max_user_watches is");
        assert_lacks(out, "fs.inotify.max_user_instances is");
        free(out);

        /* A healthy fake host root whose /proc/sys/fs/inotify is the real
         * one (bind-mounted in a mount namespace of this test's own). */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                free(watches);
                free(instances);
                cr_skip_test("no mount namespace here (%s): the host-root / case ran",
                             strerror(errno));
        }
        char *dir;
        cr_assert(asprintf(&dir, "%s/proc/sys/fs/inotify", e.host) > 0);
        cr_assert_eq(mount("/proc/sys/fs/inotify", dir, NULL, MS_BIND, NULL), 0, "%s: %s", dir,
                     strerror(errno));
        struct tk *tk = serve("example.com/serial");
        int rc = doctor(&out, NULL);
        cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
        assert_has(out, "doctor: no problems found");
        assert_has(out, watches);
        assert_has(out, instances);
        free(out);
        stop_serving(tk);
        umount(dir);
        free(dir);
        free(watches);
        free(instances);
}

/* A unix socket file nobody listens on: bound, then closed. */
static void stale_socket(const char *dir, const char *name) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert(fd >= 0);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s", sa.sun_path);
        close(fd);
}

Test(doctor, stale_and_unwritable_sockets) {
        char *out = NULL;
        healthy_root(SERIAL_CONFIG);
        mkdir(e.kubelet_dir, 0755);
        stale_socket(e.kubelet_dir, "kubelet.sock");
        stale_socket(e.kubelet_dir, "cdiplug-example.com-serial.sock");
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "kubelet.sock is stale: nothing listens on it");
        assert_has(out, "cdiplug-example.com-serial.sock is stale: nothing listens on it");
        free(out);

        /* A live kubelet whose socket the serving user may not write. */
        struct tk *tk;
        char *sock;
        cr_assert(asprintf(&sock, "%s/kubelet.sock", e.kubelet_dir) > 0);
        unlink(sock);
        cr_assert_eq(tk_start(e.kubelet_dir, &tk), 0);
        cr_assert_eq(chmod(sock, 0755), 0);
        cr_assert_eq(chown(e.kubelet_dir, 65534, 65534), 0);
        env_write(
                &e, "config.json",
                "{ \"user\": \"65534:65534\", \"resources\": [ { \"name\": \"example.com/serial\","
                " \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }");
        doctor(&out, NULL);
        assert_has(out, "kubelet.sock is not writable by uid 65534: cdiplug cannot register");
        free(out);
        free(sock);
        tk_stop(tk);
}

/* The log once it holds text, woken by inotify, within timeout_ms. */
static char *wait_log(const char *text, int timeout_ms) {
        int fd = inotify_init1(IN_CLOEXEC);
        cr_assert(fd >= 0);
        cr_assert(inotify_add_watch(fd, e.log, IN_MODIFY) >= 0, "watch %s", e.log);
        char *log = NULL;
        for (;;) {
                free(log);
                log = env_read(e.log);
                if ((log && strstr(log, text)) || timeout_ms <= 0)
                        break;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char buf[4096];
                cr_assert(poll(&p, 1, timeout_ms) > 0, "no \"%s\" in the log: %s", text,
                          log ? log : "");
                (void)!read(fd, buf, sizeof(buf));
                timeout_ms -= 10;
        }
        close(fd);
        return log;
}

Test(doctor, asks_the_daemons_readyz) {
        char *out = NULL, *config = NULL;
        int port = http_free_port();
        cr_assert_gt(port, 0);
        cr_assert(
                asprintf(
                        &config,
                        "{ \"metrics\": { \"address\": \"127.0.0.1:%d\" }, \"resources\": ["
                        " { \"name\": \"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ] } ] }",
                        port) > 0);
        healthy_root(config);
        free(config);
        /* No kubelet: the daemon serves its endpoint but is not ready. */
        mkdir(e.kubelet_dir, 0755);
        env_spawn(&e, NULL);
        free(wait_log("before serving", 10000));
        cr_assert_eq(doctor(&out, NULL), 1);
        assert_has(out, "daemon /readyz: example.com/serial: not ready");
        assert_has(out, "answers 503: not every resource is registered with the kubelet");
        free(out);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* Nobody listens there any more: said, not guessed. */
        doctor(&out, NULL);
        assert_has(out, "cannot ask the daemon's /readyz on 127.0.0.1:");
        free(out);
}

/* The packaged unit gives the address on serve's command line, not in
 * the config: doctor takes it the same way. */
Test(doctor, asks_readyz_at_the_address_it_is_given) {
        char *out = NULL, addr[64], *flag = NULL;
        int port = http_free_port();
        cr_assert_gt(port, 0);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        healthy_root("{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { "
                     "\"path\": \"/dev/ttyUSB*\" } ] } ] }");
        mkdir(e.kubelet_dir, 0755);
        env_spawn(&e, "--metrics-address", addr, NULL);
        free(wait_log("before serving", 10000));
        doctor(&out, NULL);
        assert_has(out, "registration with the kubelet not checked");
        assert_has(out, "give doctor the daemon's --metrics-address");
        free(out);
        cr_assert(asprintf(&flag, "--metrics-address=%s", addr) > 0);
        cr_assert_eq(doctor(&out, flag), 1);
        assert_has(out, "daemon /readyz: example.com/serial: not ready");
        free(out);
        free(flag);
        int status = env_stop(&e, SIGTERM, 5000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(doctor, usage_errors_exit_2) {
        char *out = NULL;
        cr_assert_eq(env_run(&e, &out, "doctor", "--bogus", NULL), 2);
        free(out);
        cr_assert_eq(env_run(&e, &out, "doctor", "extra", NULL), 2);
        free(out);
        cr_assert_eq(env_run(&e, &out, "check", "--json", NULL), 2);
        assert_has(out, "--json is for doctor only");
        free(out);
}

/* A listener that never accepts, its backlog filled: a blocking connect()
 * to it waits for room that never comes. *ret_fds gets the listener and
 * the clients that filled it, -1 ended, for the caller to close. */
static void full_socket(const char *dir, const char *name, int *ret_fds, size_t max) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n = 0;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert(fd >= 0);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s", sa.sun_path);
        cr_assert_eq(listen(fd, 0), 0);
        ret_fds[n++] = fd;
        for (;;) {
                cr_assert_lt(n, max - 1, "the backlog of %s never filled", sa.sun_path);
                int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                cr_assert(c >= 0);
                if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                        cr_assert_eq(errno, EAGAIN, "connect: %s", strerror(errno));
                        close(c);
                        break;
                }
                ret_fds[n++] = c;
        }
        ret_fds[n] = -1;
}

/* Before, doctor waited in connect() forever, printing nothing. */
Test(doctor, a_socket_that_never_accepts_is_reported_not_waited_on, .timeout = 30) {
        char *out = NULL;
        int fds[32];
        healthy_root(SERIAL_CONFIG);
        mkdir(e.kubelet_dir, 0755);
        full_socket(e.kubelet_dir, "kubelet.sock", fds, 32);
        cr_assert_eq(doctor(&out, NULL), 1, "%s", out);
        assert_has(out, "kubelet.sock is not answering: its listen backlog stayed full for 2 s");
        assert_has(out, "fix: restart the kubelet");
        free(out);
        for (int *fd = fds; *fd >= 0; fd++)
                close(*fd);
}

Test(doctor, a_resource_of_optional_selectors_finding_nothing_is_no_problem) {
        char *out = NULL;
        healthy_root("{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": [ { "
                     "\"path\": \"/dev/ttyUSB*\" } ] }, { \"name\": \"example.com/opt\", "
                     "\"match\": [ { \"path\": \"/dev/ttyX*\", \"optional\": true }, { "
                     "\"path\": \"/dev/ttyY*\", \"optional\": true } ] } ] }");
        doctor(&out, NULL);
        assert_has(out, "info    match    resource \"example.com/opt\": no devices now (every "
                        "selector is optional): the kubelet sees a capacity of 0");
        assert_lacks(out, "PROBLEM match");
        free(out);
}

Test(doctor, crio_drop_ins_all_read_in_name_order_or_where_it_stopped) {
        char *out = NULL, *dropdir = NULL, *loop = NULL, name[320];
        healthy_root(SERIAL_CONFIG);
        env_rm(&e, "etc/containerd/config.toml");
        env_write(&e, "host/etc/crio/crio.conf",
                  "[crio.runtime]\ncdi_spec_dirs = [\"/etc/cdi\"]\n");
        for (int i = 0; i < 300; i++) {
                snprintf(name, sizeof(name), "host/etc/crio/crio.conf.d/d%04d.conf", i);
                env_write(&e, name, "[crio.runtime]\n");
        }
        /* The drop-in that CRI-O applies last but the directory lists
         * late: reading in readdir order and stopping early misses it. */
        cr_assert(asprintf(&dropdir, "%s/etc/crio/crio.conf.d", e.host) > 0);
        DIR *d = opendir(dropdir);
        cr_assert_not_null(d);
        struct dirent *de;
        int pos = 0;
        char late[256] = "";
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && pos++ >= 260 && strcmp(de->d_name, late) > 0)
                        snprintf(late, sizeof(late), "%s", de->d_name);
        closedir(d);
        cr_assert_neq(late[0], '\0');
        snprintf(name, sizeof(name), "host/etc/crio/crio.conf.d/%s", late);
        env_write(&e, name, "[crio.runtime]\ncdi_spec_dirs = [\"/srv/cdi\"]\n");
        /* Every later name sets nothing: late's setting is CRI-O's. */
        char *end;
        long first = strtol(late + 1, &end, 10);
        cr_assert(end != late + 1 && first >= 0 && first < 300, "late name \"%s\"", late);
        for (int i = (int)first + 1; i < 300; i++) {
                snprintf(name, sizeof(name), "host/etc/crio/crio.conf.d/d%04d.conf", i);
                env_write(&e, name, "[crio.runtime]\n");
        }
        /* An error is said in words, not as a number. */
        cr_assert(asprintf(&loop, "%s/a-loop.conf", dropdir) > 0);
        cr_assert_eq(symlink("a-loop.conf", loop), 0);
        cr_assert_eq(doctor(&out, NULL), 1, "%s", out);
        assert_has(out, "is not among the dirs the runtime reads (/srv/cdi)");
        assert_has(out, "a-loop.conf: cannot read it: Too many levels of symbolic links");
        assert_lacks(out, "(40)");
        free(out);

        /* Past doctor's bound: said, with where it stopped. */
        for (int i = 300; i < 1030; i++) {
                snprintf(name, sizeof(name), "host/etc/crio/crio.conf.d/d%04d.conf", i);
                env_write(&e, name, "[crio.runtime]\n");
        }
        doctor(&out, NULL);
        assert_has(out, "crio.conf.d: 1031 drop-ins; doctor read the first 1024 by name and "
                        "stopped at \"d1023.conf\" (7 not read)");
        free(out);
        free(loop);
        free(dropdir);
}

static void link_at(const char *target, const char *host_rel) {
        char *path;
        cr_assert(asprintf(&path, "%s/%s", e.host, host_rel) > 0);
        unlink(path);
        cr_assert_eq(symlink(target, path), 0, "symlink %s: %s", path, strerror(errno));
        free(path);
}

Test(doctor, reads_nothing_outside_the_host_root) {
        char *out = NULL, *outside = NULL, *specs = NULL;
        healthy_root(SERIAL_CONFIG);
        cr_assert(asprintf(&outside, "%s/outside", e.root) > 0);
        cr_assert(asprintf(&specs, "%s/outside/specs", e.root) > 0);
        env_write(&e, "outside/cdi.toml",
                  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n");
        env_write(&e, "outside/specs/evil.json", "{ not json");
        /* An absolute link, and ".." past the root: both mean the host's
         * own tree, where neither leads anywhere. */
        env_write(&e, "host/etc/containerd/config.toml",
                  "version = 2\nimports = [\"conf.d/*.toml\", \"../../../outside/*.toml\"]\n"
                  "[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = false\n"
                  "cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n");
        link_at(outside, "etc/containerd/conf.d");
        env_write(&e, "host/var/.keep", "");
        link_at(specs, "var/run");
        cr_assert_eq(doctor(&out, NULL), 1, "%s", out);
        assert_has(out, "containerd: CDI is off");
        assert_lacks(out, "cdi.toml");
        assert_lacks(out, "evil.json");
        free(out);

        /* The same links resolve inside the root. */
        env_write(&e, "host/opt/conf.d/50-on.toml",
                  "[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n");
        env_write(&e, "host/srv/run/cdi/broken.json", "{ not json");
        link_at("/opt/conf.d", "etc/containerd/conf.d");
        link_at("../srv/run", "var/run");
        doctor(&out, NULL);
        assert_has(out, "containerd (config version 2): enable_cdi = true");
        assert_has(out, "host/var/run/cdi/broken.json: the CDI parser rejects it");
        free(out);
        free(outside);
        free(specs);
}

Test(doctor, never_opens_a_device_fifo_or_socket) {
        char *out = NULL, *path = NULL;
        const char *planted[] = { "etc/cdi/chardev.json", "etc/cdi/fifo.yaml", "dev/zero",
                                  "etc/containerd/conf.d/fifo.toml" };
        healthy_root(SERIAL_CONFIG);
        env_write(&e, "host/etc/containerd/config.toml",
                  "version = 2\nimports = [\"conf.d/*.toml\"]\n"
                  "[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n");
        env_touch(&e, "etc/cdi/chardev.json");
        env_touch(&e, "dev/zero");
        link_at("/dev/zero", "etc/cdi/zero.json");
        cr_assert(asprintf(&path, "%s/etc/cdi/fifo.yaml", e.host) > 0);
        cr_assert_eq(mkfifo(path, 0644), 0);
        free(path);
        env_write(&e, "host/etc/containerd/conf.d/.keep", "");
        cr_assert(asprintf(&path, "%s/etc/containerd/conf.d/fifo.toml", e.host) > 0);
        cr_assert_eq(mkfifo(path, 0644), 0);
        free(path);
        stale_socket(e.cdi_dir, "sock.json");

        int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        cr_assert(in >= 0);
        for (size_t i = 0; i < sizeof(planted) / sizeof(*planted); i++) {
                cr_assert(asprintf(&path, "%s/%s", e.host, planted[i]) > 0);
                cr_assert(inotify_add_watch(in, path, IN_OPEN) >= 0, "watch %s", path);
                free(path);
        }
        doctor(&out, NULL);
        char ev[4096];
        cr_assert_lt(read(in, ev, sizeof(ev)), 0, "doctor opened a planted node:\n%s", out);
        cr_assert_eq(errno, EAGAIN);
        close(in);
        assert_has(out, "chardev.json: skipped, it is a character device: doctor reads regular "
                        "files only, it never opens a device node, FIFO or socket");
        assert_has(out, "zero.json: skipped, it is a character device");
        assert_has(out, "fifo.yaml: skipped, it is a FIFO");
        assert_has(out, "sock.json: skipped, it is a socket");
        assert_has(out, "fifo.toml: skipped, it is a FIFO");
        free(out);
}

#define DRA_CONFIG(user)                                                                           \
        "{ " user                                                                                  \
        "\"dra\": { \"driver\": \"cdiplug.example.com\" }, \"resources\": [ { \"name\": "          \
        "\"example.com/serial\", \"match\": [ { \"path\": \"/dev/ttyUSB*\" } ], \"api\": \"dra\" } ] }"

static int doctor_dra(char **out, const char *kubelet_root, const char *kubeconfig) {
        return env_run(&e, out, "doctor", "--config", e.config, "--host-root", e.host,
                       "--kubelet-dir", e.kubelet_dir, "--cdi-dir", e.cdi_dir, "--kubelet-root",
                       kubelet_root, kubeconfig ? "--kubeconfig" : NULL, kubeconfig, NULL);
}

/* With DRA resources: the plugin registry and plugin dirs under
 * --kubelet-root, and the credentials serve would use; never a token's
 * text. Without any: not a word of DRA. */
Test(doctor, dra_dirs_and_credentials) {
        char *out = NULL, *root, *registry, *plugins, *kubeconfig;
        cr_assert(asprintf(&root, "%s/kroot", e.root) > 0);
        cr_assert(asprintf(&registry, "%s/plugins_registry", root) > 0);
        cr_assert(asprintf(&plugins, "%s/plugins", root) > 0);
        cr_assert(asprintf(&kubeconfig, "%s/kubeconfig", e.root) > 0);
        cr_assert_eq(mkdir(root, 0755), 0);
        /* Not in a pod, whatever the machine running the tests is. */
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");

        healthy_root(SERIAL_CONFIG);
        doctor_dra(&out, root, NULL);
        assert_lacks(out, " dra ");
        assert_lacks(out, "plugins_registry");
        free(out);

        env_write(&e, "config.json", DRA_CONFIG(""));
        cr_assert_eq(doctor_dra(&out, root, NULL), 1, "%s", out);
        assert_has(out, "plugins_registry: No such file or directory: the kubelet's plugin "
                        "registry is not there");
        assert_has(out, "kroot/plugins: No such file or directory: cdiplug cannot make");
        assert_has(out, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set");
        /* A DRA resource has no device-plugin socket to miss. */
        assert_lacks(out, "cdiplug-example.com-serial.sock");
        free(out);

        cr_assert_eq(mkdir(registry, 0755), 0);
        cr_assert_eq(mkdir(plugins, 0750), 0);
#define KUBECONFIG(cluster_extra)                                                                  \
        "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"             \
        "clusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:6443\"" cluster_extra       \
        "}\nusers:\n- name: u\n  user: {token: SECRET-TOKEN-42}\n"
        env_write(&e, "kubeconfig", KUBECONFIG(""));
        doctor_dra(&out, root, kubeconfig);
        assert_has(out, "plugins_registry: the kubelet's plugin registry, writable");
        assert_has(out, "kroot/plugins: writable; serve makes");
        assert_has(out, "--kubeconfig ");
        assert_has(out, "kubeconfig: readable by uid 0; API server https://127.0.0.1:6443");
        assert_lacks(out, "KUBERNETES_SERVICE_HOST");
        assert_lacks(out, "SECRET-TOKEN-42");
        assert_lacks(out, "PROBLEM dra");
        free(out);

        /* What serve refuses in a kubeconfig, doctor names the same way. */
        env_write(&e, "kubeconfig", KUBECONFIG(", insecure-skip-tls-verify: true"));
        cr_assert_eq(doctor_dra(&out, root, kubeconfig), 1, "%s", out);
        assert_has(out, "insecure-skip-tls-verify: refused");
        assert_lacks(out, "SECRET-TOKEN-42");
        free(out);
        env_write(&e, "kubeconfig", KUBECONFIG(""));

        /* Another serving user: root's dirs and a 0600 kubeconfig are
         * not theirs. */
        env_write(&e, "config.json", DRA_CONFIG("\"user\": \"65534:65534\", "));
        cr_assert_eq(chmod(kubeconfig, 0600), 0);
        cr_assert_eq(doctor_dra(&out, root, kubeconfig), 1, "%s", out);
        assert_has(out, "plugins_registry is not writable by uid 65534 gid 65534");
        assert_has(out, "is missing, and ");
        assert_has(out, "kubeconfig is not readable by uid 65534 gid 65534");
        free(out);

        env_write(&e, "config.json", DRA_CONFIG(""));
        env_write(&e, "kubeconfig", "");
        cr_assert_eq(doctor_dra(&out, root, kubeconfig), 1, "%s", out);
        assert_has(out, "kubeconfig is empty");
        free(out);
        char *gone;
        cr_assert(asprintf(&gone, "%s/no-such-kubeconfig", e.root) > 0);
        cr_assert_eq(doctor_dra(&out, root, gone), 1, "%s", out);
        assert_has(out, "no-such-kubeconfig cannot be read: No such file or directory");
        free(out);
        free(gone);

        /* Not a directory where the registry should be. */
        cr_assert_eq(rmdir(registry), 0);
        env_write(&e, "kroot/plugins_registry", "");
        cr_assert_eq(doctor_dra(&out, root, NULL), 1, "%s", out);
        assert_has(out, "plugins_registry is not a directory");
        free(out);
        free(root);
        free(registry);
        free(plugins);
        free(kubeconfig);
}
