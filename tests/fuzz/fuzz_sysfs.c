/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the sysfs readers in resources/ (USB and PCI attributes, driver and
 * iommu_group links, drm entries, numa_node, PCI address and USB port
 * names) and the selector parser, through res_discover on a fake host
 * tree built from the input:
 *
 *   line 1:      one "match" entry as JSON, e.g. {"usb": {"vendor": "046d"}}
 *   PATH VALUE   a file under the root holding VALUE and a newline
 *   PATH         a character device node with /dev/null's numbers (an empty
 *                file when not run as root, which discovery then skips)
 *   PATH -> DEST a symlink
 *
 * Paths are relative to the root, at most 16 components and never "." or
 * "..". The tree is built with O_NOFOLLOW at every step, so whatever the
 * input's symlinks point at, the harness writes only inside its temp dir;
 * res_discover must stay inside the root too (RESOLVE_IN_ROOT). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base.h"
#include "fuzz.h"
#include "resources.h"

#define MAX_LINES 64

static char root[] = "/tmp/cdiplug-fuzz-sysfs.XXXXXX";
static char tree[sizeof(root) + 8];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(void) {
        nftw(tree, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup(void) {
        rm_tree();
        rmdir(root);
}

static void setup(void) {
        FUZZ_CHECK(mkdtemp(root));
        snprintf(tree, sizeof(tree), "%s/root", root);
        atexit(cleanup);
}

/* Create path (with its parent directories) below dirfd; kind 0: file
 * holding value, 1: symlink to value. Symlinks met on the way end it. */
static void create(int rootfd, char *path, const char *value, int kind) {
        int dfd = dup(rootfd);
        char *save = NULL;
        char *comp = strtok_r(path, "/", &save);
        int depth = 0;
        while (comp && dfd >= 0) {
                char *next = strtok_r(NULL, "/", &save);
                if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0 || ++depth > 16)
                        break;
                if (!next) {
                        if (kind == 1) {
                                (void)!symlinkat(value, dfd, comp);
                        } else if (!value &&
                                   mknodat(dfd, comp, S_IFCHR | 0644, makedev(1, 3)) == 0) {
                                /* created the node */
                        } else {
                                int fd = openat(
                                        dfd, comp,
                                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                                if (fd >= 0) {
                                        if (value)
                                                (void)!dprintf(fd, "%s\n", value);
                                        close(fd);
                                }
                        }
                        break;
                }
                (void)mkdirat(dfd, comp, 0755);
                int sub = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                close(dfd);
                dfd = sub;
                comp = next;
        }
        if (dfd >= 0)
                close(dfd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!tree[0])
                setup();
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        char *save = NULL;
        char *line = strtok_r(text, "\n", &save);
        cJSON *entry = line ? cJSON_Parse(line) : NULL;
        struct res_selector *sel = NULL;
        struct base_field_error e = { 0 };
        int r = entry ? res_selector_parse(entry, &sel, &e) : -EINVAL;
        cJSON_Delete(entry);
        base_field_error_clear(&e);
        if (r < 0) {
                free(text);
                return 0;
        }

        rm_tree();
        FUZZ_CHECK(mkdir(tree, 0755) == 0);
        int rootfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        FUZZ_CHECK(rootfd >= 0);
        int n = 0;
        while ((line = strtok_r(NULL, "\n", &save)) && n++ < MAX_LINES) {
                char *arrow = strstr(line, " -> ");
                char *space = strchr(line, ' ');
                if (arrow) {
                        *arrow = '\0';
                        create(rootfd, line, arrow + 4, 1);
                } else if (space) {
                        *space = '\0';
                        create(rootfd, line, space + 1, 0);
                } else {
                        create(rootfd, line, NULL, 0);
                }
        }
        close(rootfd);
        free(text);

        struct res_devlist list = { 0 };
        r = res_discover(tree, &sel, 1, &list);
        if (r == 0) {
                for (size_t i = 0; i < list.n; i++) {
                        FUZZ_CHECK(list.devs[i].id && strlen(list.devs[i].id) <= RES_ID_MAX);
                        FUZZ_CHECK(list.devs[i].n_nodes >= 1);
                        FUZZ_CHECK(list.devs[i].numa_node >= -1);
                        for (size_t k = 0; k < list.devs[i].n_nodes; k++)
                                FUZZ_CHECK(list.devs[i].nodes[k][0] == '/');
                        if (i > 0)
                                FUZZ_CHECK(strcmp(list.devs[i - 1].id, list.devs[i].id) < 0);
                }
                res_devlist_free(&list);
        }
        char **dirs = NULL;
        if (res_watch_dirs(tree, &sel, 1, &dirs) == 0)
                base_strv_free(dirs);
        res_selector_free(sel);
        return 0;
}
