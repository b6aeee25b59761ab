/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: what each selector matched, and when it matched nothing, why.
 *
 * The resources module answers "which devices"; the reasons a device is
 * not among them (a missing dir, another product, another driver) are
 * found here by looking at the same /dev and /sys with the selector's own
 * text from the config. (Should resources/ grow an explanation of its own,
 * res_selector_explain(), this file should defer to it.) */
#include "doctor.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "resources.h"
#include "util.h"

/* Names listed in one explanation, so a busy /dev stays readable. */
#define MAX_LISTED 5
#define MAX_SELECTOR_TEXT 160

struct names {
        char text[512];
        size_t n;
};

static void names_add(struct names *l, const char *name) {
        size_t len = strlen(l->text);
        if (l->n++ < MAX_LISTED)
                snprintf(l->text + len, sizeof(l->text) - len, "%s%s", len ? ", " : "", name);
        else if (l->n == MAX_LISTED + 1)
                snprintf(l->text + len, sizeof(l->text) - len, ", ...");
}

static bool has_glob(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (s[i] == '*' || s[i] == '?' || s[i] == '[')
                        return true;
        return false;
}

/* Why the glob matches no device node under the host root. */
static void explain_glob(struct doc_ctx *c, const char *where, const char *glob) {
        /* The directory part without glob characters, and the rest. */
        const char *rest = glob + 1, *slash;
        while ((slash = strchr(rest, '/')) && !has_glob(rest, (size_t)(slash - rest)))
                rest = slash + 1;
        _cleanup_free_ char *dir = strndup(glob, rest - glob > 1 ? (size_t)(rest - glob - 1) : 1);
        _cleanup_free_ char *hostdir = dir ? doc_host_path(c, dir) : NULL;
        struct stat st;
        if (!hostdir) {
                c->oom = true;
                return;
        }
        if (stat(hostdir, &st) < 0 || !S_ISDIR(st.st_mode)) {
                doc_add(c, "match", DOC_PROBLEM, "plug the device in or load its driver, or fix the glob",
                        "%s: matches nothing: the directory %s does not exist%s", where, dir,
                        strcmp(c->o->host_root, "/") ? " under the host root" : "");
                return;
        }
        if (strchr(rest, '/')) {
                doc_add(c, "match", DOC_PROBLEM, "plug the device in or load its driver, or fix the glob",
                        "%s: matches nothing: no path below %s matches \"%s\"", where, dir, rest);
                return;
        }
        struct dirent **ents = NULL;
        struct names matched = {0}, similar = {0};
        int n = scandir(hostdir, &ents, NULL, alphasort);
        size_t literal = strcspn(rest, "*?["), best = 0;
        if (n < 0) {
                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: cannot read %s: %s", where, hostdir, strerror(errno));
                return;
        }
        /* Entries that match but are not nodes; else the names sharing the
         * longest start with the pattern's literal part (ttyACM0 for
         * ttyUSB*), the usual typo, if at least 3 characters long. */
        for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < n; i++) {
                        const char *name = ents[i]->d_name;
                        size_t lcp = 0;
                        if (name[0] == '.')
                                continue;
                        if (fnmatch(rest, name, FNM_PERIOD) == 0) {
                                if (pass == 0)
                                        names_add(&matched, name);
                                continue;
                        }
                        while (lcp < literal && name[lcp] == rest[lcp])
                                lcp++;
                        /* Ties go to names that go on like the pattern, a
                         * letter after a letter (ttyS0 before tty0). */
                        size_t score = lcp < 3 ? 0 : 2 * lcp + (lcp < literal && isalpha((unsigned char)rest[lcp]) &&
                                                                isalpha((unsigned char)name[lcp]));
                        if (pass == 0 && score > best)
                                best = score;
                        else if (pass == 1 && score > 0 && score == best)
                                names_add(&similar, name);
                }
        for (int i = 0; i < n; i++)
                free(ents[i]);
        free(ents);
        if (matched.n)
                doc_add(c, "match", DOC_PROBLEM, "match the device nodes themselves",
                        "%s: matches nothing: %s in %s %s not a device node", where, matched.text, dir,
                        matched.n == 1 ? "is" : "are");
        else if (similar.n)
                doc_add(c, "match", DOC_PROBLEM, "fix the glob, or plug the device in",
                        "%s: matches nothing: no entry of %s matches \"%s\"; similar names there: %s", where, dir,
                        rest, similar.text);
        else
                doc_add(c, "match", DOC_PROBLEM, "plug the device in or load its driver, or fix the glob",
                        "%s: matches nothing: no entry of %s matches \"%s\"", where, dir, rest);
}

static int read_attr(struct doc_ctx *c, const char *dir, const char *attr, char *buf, size_t max) {
        _cleanup_free_ char *p = NULL;
        if (xasprintf(&p, "%s/%s", dir, attr) < 0)
                return -ENOMEM;
        return doc_read_small(p, buf, max);
}

static bool hex_eq(const char *text, const cJSON *want) {
        if (!cJSON_IsString(want))
                return true; /* not asked for */
        const char *w = want->valuestring;
        if (strncmp(text, "0x", 2) == 0)
                text += 2;
        if (strncmp(w, "0x", 2) == 0 || strncmp(w, "0X", 2) == 0)
                w += 2;
        return strtoul(text, NULL, 16) == strtoul(w, NULL, 16);
}

static void explain_usb(struct doc_ctx *c, const char *where, const cJSON *usb) {
        const cJSON *vendor = cJSON_GetObjectItemCaseSensitive(usb, "vendor");
        const cJSON *product = cJSON_GetObjectItemCaseSensitive(usb, "product");
        const cJSON *serial = cJSON_GetObjectItemCaseSensitive(usb, "serial");
        _cleanup_free_ char *base = doc_host_path(c, "/sys/bus/usb/devices");
        struct names present = {0}, other_product = {0}, other_serial = {0}, no_node = {0};
        DIR *d = base ? opendir(base) : NULL;
        struct dirent *e;

        if (!d) {
                doc_add(c, "match", DOC_PROBLEM, "mount the host's /sys, or load the USB host drivers",
                        "%s: matches nothing: %s cannot be read", where, base ? base : "/sys/bus/usb/devices");
                return;
        }
        while ((e = readdir(d))) {
                char v[16], p[16], s[256], bus[16], dev[16], desc[320];
                _cleanup_free_ char *dir = NULL;
                /* Interfaces (1-1:1.0) carry no IDs of their own. */
                if (e->d_name[0] == '.' || strchr(e->d_name, ':'))
                        continue;
                if (xasprintf(&dir, "%s/%s", base, e->d_name) < 0)
                        break;
                if (read_attr(c, dir, "idVendor", v, sizeof(v)) < 0 || read_attr(c, dir, "idProduct", p, sizeof(p)) < 0)
                        continue;
                snprintf(desc, sizeof(desc), "%.15s:%.15s at %.64s", v, p, e->d_name);
                names_add(&present, desc);
                if (!hex_eq(v, vendor))
                        continue;
                if (!hex_eq(p, product)) {
                        names_add(&other_product, desc);
                        continue;
                }
                if (cJSON_IsString(serial) &&
                    (read_attr(c, dir, "serial", s, sizeof(s)) < 0 || strcmp(s, serial->valuestring) != 0)) {
                        snprintf(desc, sizeof(desc), "%.64s (serial \"%.64s\")", e->d_name,
                                 read_attr(c, dir, "serial", s, sizeof(s)) < 0 ? "none" : s);
                        names_add(&other_serial, desc);
                        continue;
                }
                if (read_attr(c, dir, "busnum", bus, sizeof(bus)) >= 0 &&
                    read_attr(c, dir, "devnum", dev, sizeof(dev)) >= 0) {
                        snprintf(desc, sizeof(desc), "/dev/bus/usb/%03ld/%03ld", strtol(bus, NULL, 10),
                                 strtol(dev, NULL, 10));
                        names_add(&no_node, desc);
                }
        }
        closedir(d);
        const char *vtext = cJSON_IsString(vendor) ? vendor->valuestring : "?";
        if (no_node.n)
                doc_add(c, "match", DOC_PROBLEM, "mount the host's /dev (devtmpfs), where udev creates USB nodes",
                        "%s: matches nothing: the device is present but its node %s is missing", where,
                        no_node.text);
        else if (other_serial.n)
                doc_add(c, "match", DOC_PROBLEM, "fix \"serial\" (lsusb -v shows iSerial)",
                        "%s: matches nothing: devices with this vendor and product have another serial: %s", where,
                        other_serial.text);
        else if (other_product.n)
                doc_add(c, "match", DOC_PROBLEM, "fix \"product\" (lsusb shows vendor:product)",
                        "%s: matches nothing: USB devices of vendor %s are present with another product: %s", where,
                        vtext, other_product.text);
        else
                doc_add(c, "match", DOC_PROBLEM, "plug the device in, or fix \"vendor\" (lsusb shows vendor:product)",
                        "%s: matches nothing: no USB device of vendor %s is present%s%s", where, vtext,
                        present.n ? "; present: " : "", present.text);
}

static bool pci_attr_eq(struct doc_ctx *c, const char *dir, const char *attr, const cJSON *want, unsigned long mask) {
        char buf[32];
        if (!cJSON_IsString(want))
                return true;
        if (read_attr(c, dir, attr, buf, sizeof(buf)) < 0)
                return false;
        const char *w = want->valuestring;
        if (strncmp(w, "0x", 2) == 0 || strncmp(w, "0X", 2) == 0)
                w += 2;
        return (strtoul(buf + (strncmp(buf, "0x", 2) == 0 ? 2 : 0), NULL, 16) & mask) == strtoul(w, NULL, 16);
}

static void explain_pci(struct doc_ctx *c, const char *where, const cJSON *pci) {
        const cJSON *driver = cJSON_GetObjectItemCaseSensitive(pci, "driver");
        const cJSON *mask = cJSON_GetObjectItemCaseSensitive(pci, "class_mask");
        unsigned long class_mask = cJSON_IsString(mask) ? strtoul(mask->valuestring, NULL, 16) : 0xffffff;
        _cleanup_free_ char *base = doc_host_path(c, "/sys/bus/pci/devices");
        struct names other_driver = {0}, no_nodes = {0};
        size_t functions = 0;
        DIR *d = base ? opendir(base) : NULL;
        struct dirent *e;

        if (!d) {
                doc_add(c, "match", DOC_PROBLEM, "mount the host's /sys",
                        "%s: matches nothing: %s cannot be read", where, base ? base : "/sys/bus/pci/devices");
                return;
        }
        while ((e = readdir(d))) {
                _cleanup_free_ char *dir = NULL, *link = NULL;
                char target[4096], desc[320];
                const char *bound = NULL;
                if (e->d_name[0] == '.' || xasprintf(&dir, "%s/%s", base, e->d_name) < 0 ||
                    xasprintf(&link, "%s/driver", dir) < 0)
                        continue;
                functions++;
                if (!pci_attr_eq(c, dir, "vendor", cJSON_GetObjectItemCaseSensitive(pci, "vendor"), 0xffff) ||
                    !pci_attr_eq(c, dir, "device", cJSON_GetObjectItemCaseSensitive(pci, "device"), 0xffff) ||
                    !pci_attr_eq(c, dir, "class", cJSON_GetObjectItemCaseSensitive(pci, "class"), class_mask))
                        continue;
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                if (n > 0) {
                        target[n] = '\0';
                        bound = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
                }
                if (cJSON_IsString(driver) && (!bound || strcmp(bound, driver->valuestring) != 0)) {
                        snprintf(desc, sizeof(desc), "%.64s (%s%.64s)", e->d_name, bound ? "bound to " : "unbound",
                                 bound ? bound : "");
                        names_add(&other_driver, desc);
                        continue;
                }
                snprintf(desc, sizeof(desc), "%.64s (%.64s)", e->d_name, bound ? bound : "unbound");
                names_add(&no_nodes, desc);
        }
        closedir(d);
        if (other_driver.n) {
                _cleanup_free_ char *fix = NULL;
                if (xasprintf(&fix, "bind it to %s (for example: driverctl set-override <address> %s)",
                              driver->valuestring, driver->valuestring) < 0)
                        c->oom = true;
                doc_add(c, "match", DOC_PROBLEM, fix,
                        "%s: matches nothing: matching PCI functions are bound to another driver than \"%s\": %s",
                        where, driver->valuestring, other_driver.text);
        } else if (no_nodes.n)
                doc_add(c, "match", DOC_PROBLEM,
                        "bind it to vfio-pci (its /dev/vfio/<group> is then handed out), or to a DRM driver",
                        "%s: matches nothing: matching PCI functions have no device node cdiplug hands out "
                        "(a vfio-pci group node, or DRM card/render nodes): %s", where, no_nodes.text);
        else
                doc_add(c, "match", DOC_PROBLEM, "fix the selector (lspci -nn shows [vendor:device])",
                        "%s: matches nothing: none of the %zu PCI functions has this vendor, device and class", where,
                        functions);
}

/* "paths": when the first glob alone finds nodes, the pairing failed. */
static void explain_paths(struct doc_ctx *c, const char *where, const char *first) {
        cJSON *alone = cJSON_CreateObject();
        struct res_selector *sel = NULL;
        struct res_devlist found = {0};
        char *field = NULL, *msg = NULL;

        if (alone && cJSON_AddStringToObject(alone, "path", first) &&
            res_selector_parse(alone, &sel, &field, &msg) >= 0 &&
            res_discover(c->o->host_root, &sel, 1, &found) >= 0 && found.n > 0)
                doc_add(c, "match", DOC_PROBLEM,
                        "each further glob must match, per device, a node with the same sysfs parent "
                        "(/sys/dev/char/MAJ:MIN/device), or exactly one shared node without one",
                        "%s: matches nothing: the first glob finds %zu node%s, but the other globs pair none "
                        "of them", where, found.n, found.n == 1 ? "" : "s");
        else
                explain_glob(c, where, first);
        res_devlist_free(&found);
        res_selector_free(sel);
        free(field);
        free(msg);
        cJSON_Delete(alone);
}

/* The selector's text as written, shortened to fit a line. */
static void selector_text(const cJSON *entry, char *buf, size_t max) {
        char *s = entry ? cJSON_PrintUnformatted(entry) : NULL;
        snprintf(buf, max, "%s", s ? s : "?");
        if (s && strlen(s) >= max && max > 4)
                memcpy(buf + max - 4, "...", 4);
        free(s);
}

static void explain(struct doc_ctx *c, const char *where, const cJSON *entry) {
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(entry, "path")) && cJSON_IsString(v))
                explain_glob(c, where, v->valuestring);
        else if ((v = cJSON_GetObjectItemCaseSensitive(entry, "paths")) && cJSON_IsArray(v)) {
                /* One device per match of the first glob: it decides. */
                const cJSON *first = cJSON_GetArrayItem(v, 0);
                if (cJSON_IsString(first))
                        explain_paths(c, where, first->valuestring);
        } else if ((v = cJSON_GetObjectItemCaseSensitive(entry, "usb")))
                explain_usb(c, where, v);
        else if ((v = cJSON_GetObjectItemCaseSensitive(entry, "pci")))
                explain_pci(c, where, v);
        else
                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: matches nothing", where);
}

static void list_ids(const struct res_devlist *l, char *buf, size_t max) {
        struct names n = {0};
        for (size_t i = 0; i < l->n; i++)
                names_add(&n, l->devs[i].id);
        snprintf(buf, max, "%s", n.text);
}

void doc_check_match(struct doc_ctx *c) {
        const cJSON *resources = cJSON_GetObjectItemCaseSensitive(c->raw, "resources");

        for (size_t i = 0; i < c->cfg->n_resources; i++) {
                const struct cfg_resource *rc = &c->cfg->resources[i];
                const cJSON *match = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(resources, (int)i), "match");
                size_t total = 0;

                for (size_t j = 0; j < rc->n_selectors; j++) {
                        const cJSON *entry = cJSON_GetArrayItem(match, (int)j);
                        struct res_devlist found = {0};
                        char text[MAX_SELECTOR_TEXT], where[MAX_SELECTOR_TEXT + 320], ids[512];
                        int r;

                        selector_text(entry, text, sizeof(text));
                        snprintf(where, sizeof(where), "resource \"%s\" match[%zu] %s", rc->name, j, text);
                        r = res_discover(c->o->host_root, &rc->selectors[j], 1, &found);
                        if (r < 0) {
                                doc_add(c, "match", DOC_PROBLEM, NULL, "%s: discovery failed: %s", where,
                                        strerror(-r));
                                continue;
                        }
                        total += found.n;
                        if (found.n) {
                                list_ids(&found, ids, sizeof(ids));
                                doc_add(c, "match", DOC_INFO, NULL, "%s: %zu device%s: %s", where, found.n,
                                        found.n == 1 ? "" : "s", ids);
                        } else if (entry)
                                explain(c, where, entry);
                        res_devlist_free(&found);
                }
                if (total == 0)
                        doc_add(c, "match", DOC_PROBLEM, NULL,
                                "resource \"%s\": no devices: the kubelet sees a capacity of 0", rc->name);
        }
}
