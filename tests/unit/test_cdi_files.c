/* SPDX-License-Identifier: Apache-2.0 */
/* cdi/: spec files on disk, the ownership record, stale removal and
 * conflict detection, all in throw-away directories. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "cdi.h"

static char tmpdir[4096];

static void setup(void) {
        const char *base = getenv("TMPDIR");
        int n = snprintf(tmpdir, sizeof(tmpdir), "%s/cdi-files-XXXXXX",
                         base && *base ? base : "/tmp");

        cr_assert(n > 0 && (size_t)n < sizeof(tmpdir));
        cr_assert_not_null(mkdtemp(tmpdir));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(p);
}

static void teardown(void) {
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cdi_files, .init = setup, .fini = teardown);

static char *path_in(const char *name) {
        char *p = NULL;

        cr_assert(asprintf(&p, "%s/%s", tmpdir, name) > 0);
        return p;
}

static void put_file(const char *name, const char *content) {
        char *p = path_in(name);
        FILE *f = fopen(p, "we");

        cr_assert_not_null(f, "%s", p);
        cr_assert(fputs(content, f) >= 0);
        cr_assert_eq(fclose(f), 0);
        free(p);
}

static char *get_file(const char *name) {
        char *p = path_in(name), *buf = NULL;
        size_t len = 0;
        FILE *f = fopen(p, "re"), *m = open_memstream(&buf, &len);
        int c;

        cr_assert_not_null(f, "%s", p);
        cr_assert_not_null(m);
        while ((c = fgetc(f)) != EOF)
                fputc(c, m);
        fclose(f);
        fclose(m);
        free(p);
        return buf;
}

static bool exists(const char *name) {
        char *p = path_in(name);
        struct stat st;
        bool r = lstat(p, &st) == 0;

        free(p);
        return r;
}

/* Every entry of the directory, sorted, joined by spaces. */
static char *listing(void) {
        struct dirent **ents;
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        int n = scandir(tmpdir, &ents, NULL, alphasort);
        bool first = true;

        cr_assert(n >= 0);
        for (int i = 0; i < n; i++) {
                if (strcmp(ents[i]->d_name, ".") != 0 && strcmp(ents[i]->d_name, "..") != 0) {
                        fprintf(m, "%s%s", first ? "" : " ", ents[i]->d_name);
                        first = false;
                }
                free(ents[i]);
        }
        free(ents);
        fclose(m);
        return buf;
}

static struct cdi_node node = { .path = "/dev/ttyUSB0", .access.permissions = "rw" };
static struct cdi_device devs[] = {
        { .name = "ttyUSB0", .edits = { .nodes = &node, .n_nodes = 1 } },
        { .name = "ttyUSB1", .edits = { .nodes = &node, .n_nodes = 1 } },
};

static struct cdi_spec spec_for(const char *kind, size_t n_devices) {
        return (struct cdi_spec){ .kind = (char *)kind, .devices = devs, .n_devices = n_devices };
}

Test(cdi_files, write_creates_complete_world_readable_spec) {
        struct cdi_spec s = spec_for("example.com/serial", 2);
        char *p = path_in("example.com-serial.json"), *text, *list;
        struct stat st;
        cJSON *j;

        umask(077);
        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0644, "mode %o", st.st_mode & 07777);
        text = get_file("example.com-serial.json");
        j = cJSON_Parse(text);
        cr_assert_not_null(j);
        cr_expect_str_eq(cJSON_GetObjectItem(j, "kind")->valuestring, "example.com/serial");
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "devices")), 2);
        /* nothing but the spec and the record: no temp file left behind */
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-serial.json");
        cJSON_Delete(j);
        free(text);
        free(list);
        free(p);
}

Test(cdi_files, rewrite_replaces_content) {
        struct cdi_spec s = spec_for("example.com/serial", 2);
        char *text, *list;
        cJSON *j;

        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        s.n_devices = 1;
        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        text = get_file("example.com-serial.json");
        j = cJSON_Parse(text);
        cr_assert_not_null(j);
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "devices")), 1);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-serial.json");
        cJSON_Delete(j);
        free(text);
        free(list);
}

Test(cdi_files, unchanged_spec_is_not_rewritten) {
        struct cdi_spec s = spec_for("example.com/serial", 2);
        char *p = path_in("example.com-serial.json");
        struct stat a, b, c;

        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_assert_eq(stat(p, &a), 0);
        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_assert_eq(stat(p, &b), 0);
        /* A rewrite renames a new inode into place; none happened. */
        cr_expect_eq(a.st_ino, b.st_ino, "same content must not be written again");
        /* A mode someone changed is repaired by a rewrite. */
        cr_assert_eq(chmod(p, 0600), 0);
        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_assert_eq(stat(p, &c), 0);
        cr_expect_neq(c.st_ino, b.st_ino);
        cr_expect_eq(c.st_mode & 07777, 0644);
        free(p);
}

Test(cdi_files, foreign_file_is_never_overwritten) {
        struct cdi_spec s = spec_for("example.com/serial", 1);
        bool owned = true;
        char *text;
        int dfd;

        put_file("example.com-serial.json", "{\"kind\": \"someone/else\"}\n");
        cr_expect_eq(cdi_spec_write(tmpdir, &s), -EEXIST);
        text = get_file("example.com-serial.json");
        cr_expect_str_eq(text, "{\"kind\": \"someone/else\"}\n");
        free(text);
        dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert(dfd >= 0);
        cr_expect_eq(cdi_spec_is_owned_at(dfd, "example.com-serial.json", &owned), 0);
        cr_expect_not(owned);
        close(dfd);
}

Test(cdi_files, write_creates_missing_dir) {
        struct cdi_spec s = spec_for("example.com/serial", 1);
        char *sub = path_in("cdi");

        cr_expect_eq(cdi_spec_write(sub, &s), 0);
        cr_expect(exists("cdi/example.com-serial.json"));
        free(sub);
}

Test(cdi_files, invalid_spec_touches_nothing) {
        struct cdi_spec s = spec_for("not-a-kind", 1);
        char *list;

        cr_expect_eq(cdi_spec_write(tmpdir, &s), -EINVAL);
        list = listing();
        cr_expect_str_eq(list, "");
        free(list);
}

Test(cdi_files, failed_rename_leaves_no_temp) {
        struct cdi_spec s = spec_for("example.com/serial", 1);
        char *p = path_in("example.com-serial.json"), *list;

        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        /* A directory under the name makes the final rename fail. */
        cr_assert_eq(unlink(p), 0);
        cr_assert_eq(mkdir(p, 0755), 0);
        cr_expect_lt(cdi_spec_write(tmpdir, &s), 0);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-serial.json");
        free(list);
        free(p);
}

Test(cdi_files, stale_removal_takes_only_our_unconfigured_specs) {
        struct cdi_spec a = spec_for("example.com/serial", 1), b = spec_for("example.com/gpio", 1);
        const char *keep[] = { "example.com/serial", NULL };
        char **removed = NULL, *list, *record;

        cr_assert_eq(cdi_spec_write(tmpdir, &a), 0);
        cr_assert_eq(cdi_spec_write(tmpdir, &b), 0);
        put_file("example.com-usb.json", "{}\n");       /* someone else's */
        put_file(".cdiplug-tmp.0123456789abcdef", "{"); /* crash leftover */
        put_file(".other-tmp", "x");

        cr_assert_eq(cdi_remove_stale(tmpdir, keep, &removed), 0);
        cr_assert_not_null(removed);
        cr_expect_str_eq(removed[0], "example.com-gpio.json");
        cr_expect_null(removed[1]);
        base_strv_free(removed);
        list = listing();
        cr_expect_str_eq(list,
                         ".cdiplug-owned .other-tmp example.com-serial.json example.com-usb.json");
        free(list);
        record = get_file(".cdiplug-owned");
        cr_expect_null(strstr(record, "gpio"), "record still claims the removed file");
        free(record);

        /* Nothing configured any more: all of ours goes, foreign files stay. */
        cr_assert_eq(cdi_remove_stale(tmpdir, NULL, NULL), 0);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned .other-tmp example.com-usb.json");
        free(list);
}

Test(cdi_files, sweep_lists_stale_specs_and_keeps_them_claimed) {
        struct cdi_spec a = spec_for("example.com/serial", 1), b = spec_for("example.com/gpio", 1),
                        c = spec_for("example.com/spi", 1);
        const char *keep[] = { "example.com/serial", NULL };
        char **stale = NULL, *list, *record, *gone = path_in("example.com-spi.json");

        cr_assert_eq(cdi_spec_write(tmpdir, &a), 0);
        cr_assert_eq(cdi_spec_write(tmpdir, &b), 0);
        cr_assert_eq(cdi_spec_write(tmpdir, &c), 0);
        cr_assert_eq(unlink(gone), 0); /* removed by hand: its claim goes */
        put_file("example.com-usb.json", "{}\n");
        put_file(".cdiplug-tmp.0123456789abcdef", "{");

        cr_assert_eq(cdi_sweep(tmpdir, keep, &stale), 0);
        cr_assert_not_null(stale);
        cr_expect_str_eq(stale[0], "example.com-gpio.json");
        cr_expect_null(stale[1]);
        base_strv_free(stale);
        list = listing();
        cr_expect_str_eq(
                list,
                ".cdiplug-owned example.com-gpio.json example.com-serial.json example.com-usb.json");
        free(list);
        record = get_file(".cdiplug-owned");
        cr_expect_not_null(strstr(record, "example.com-gpio.json"), "the stale spec is still ours");
        cr_expect_null(strstr(record, "spi"), "a claim on a file that is gone stays");
        free(record);

        /* Then removed one by one: the file, then the claim. */
        bool removed = false;
        cr_assert_eq(cdi_spec_remove(tmpdir, "example.com-gpio.json", &removed), 0);
        cr_expect(removed);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-serial.json example.com-usb.json");
        free(list);
        record = get_file(".cdiplug-owned");
        cr_expect_null(strstr(record, "gpio"), "record still claims the removed file");
        cr_expect_not_null(strstr(record, "example.com-serial.json"));
        free(record);
        /* Someone else's file is never removed, and a second removal is a no-op. */
        cr_assert_eq(cdi_spec_remove(tmpdir, "example.com-usb.json", &removed), 0);
        cr_expect_not(removed);
        cr_assert_eq(cdi_spec_remove(tmpdir, "example.com-gpio.json", &removed), 0);
        cr_expect_not(removed);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-serial.json example.com-usb.json");
        free(list);
        free(gone);
}

Test(cdi_files, sweep_and_remove_on_a_missing_dir) {
        char *missing = path_in("nope"), **stale = NULL;
        bool removed = true;

        cr_assert_eq(cdi_sweep(missing, NULL, &stale), 0);
        cr_assert_not_null(stale);
        cr_expect_null(stale[0]);
        base_strv_free(stale);
        cr_assert_eq(cdi_spec_remove(missing, "example.com-gpio.json", &removed), 0);
        cr_expect_not(removed);
        free(missing);
}

Test(cdi_files, stale_removal_ignores_forged_record_lines) {
        char *outside = NULL, *list, *link = path_in("link.json");
        struct stat st;

        /* Names we could never have written, and a symlink we did not make. */
        cr_assert(asprintf(&outside, "%s-victim.json", tmpdir) > 0);
        put_file(".cdiplug-owned", "../victim.json\n.hidden.json\nlink.json\nnotes.txt\n");
        cr_assert_eq(symlink("/etc/hostname", link), 0);
        cr_assert_eq(close(open(outside, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)), 0);
        put_file(".hidden.json", "{}");
        put_file("notes.txt", "x");

        cr_assert_eq(cdi_remove_stale(tmpdir, NULL, NULL), 0);
        cr_expect_eq(stat(outside, &st), 0, "file outside the dir removed");
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned .hidden.json link.json notes.txt");
        free(list);
        unlink(outside);
        free(outside);
        free(link);
}

Test(cdi_files, stale_removal_of_missing_dir_is_fine) {
        char *sub = path_in("nope"), **removed = NULL;

        cr_expect_eq(cdi_remove_stale(sub, NULL, &removed), 0);
        cr_assert_not_null(removed);
        cr_expect_null(removed[0]);
        base_strv_free(removed);
        free(sub);
}

Test(cdi_files, stale_removal_refuses_invalid_kind) {
        const char *keep[] = { "bogus", NULL };

        cr_expect_eq(cdi_remove_stale(tmpdir, keep, NULL), -EINVAL);
}

/* ---- conflicts -------------------------------------------------------------- */

static const struct cdi_conflict *find(const struct cdi_conflict *c, size_t n,
                                       enum cdi_conflict_type t, const char *file,
                                       const char *device) {
        char *p = path_in(file);
        const struct cdi_conflict *hit = NULL;

        for (size_t i = 0; i < n; i++)
                if (c[i].type == t && strcmp(c[i].path, p) == 0 &&
                    (device ? c[i].device && strcmp(c[i].device, device) == 0 : !c[i].device))
                        hit = &c[i];
        free(p);
        return hit;
}

Test(cdi_files, conflicts_found_in_json_and_yaml) {
        struct cdi_spec ours[] = { spec_for("example.com/serial", 2) };
        char *missing = path_in("missing");
        const char *dirs[] = { tmpdir, missing, NULL };
        struct cdi_conflict *c = NULL;
        const struct cdi_conflict *hit;
        size_t n = 0;
        char *sub = path_in("subdir.json"), *huge = path_in("huge.json");
        int fd;

        cr_assert_eq(cdi_spec_write(tmpdir, &ours[0]), 0); /* our own: not a clash */
        put_file("other.json",
                 "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/serial\",\"devices\":["
                 "{\"name\":\"ttyUSB1\",\"containerEdits\":{}},{\"name\":\"ttyS9\"}]}");
        put_file("unrelated.json",
                 "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/gpu\",\"devices\":["
                 "{\"name\":\"ttyUSB0\"}]}");
        put_file("quoted.yaml",
                 "cdiVersion: 0.5.0\nkind: \"example.com/serial\" # ours?\ndevices: []\n");
        put_file("plain.yaml", "---\nkind: example.com/serial\n");
        put_file("nested.yaml", "foo:\n  kind: example.com/serial\nkind: example.com/gpu\n");
        put_file("flow.yaml",
                 "{\"kind\": \"example.com/serial\", \"devices\": [{\"name\": \"ttyUSB0\"}]}");
        put_file("broken.json", "{\"kind\": \"example.com/ser");
        put_file("ignored.txt", "{\"kind\": \"example.com/serial\"}");
        cr_assert_eq(mkdir(sub, 0755), 0);
        fd = open(huge, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        cr_assert(fd >= 0);
        cr_assert_eq(ftruncate(fd, (4 << 20) + 1), 0);
        close(fd);

        cr_assert_eq(cdi_find_conflicts(dirs, ours, 1, &c, &n), 0);
        for (size_t i = 0; i < n; i++)
                cr_log_info("%d %s %s %s %d", c[i].type, c[i].path, c[i].kind, c[i].device,
                            c[i].error);

        cr_expect_not_null(find(c, n, CDI_CONFLICT_KIND, "other.json", NULL));
        cr_expect_not_null(
                find(c, n, CDI_CONFLICT_DEVICE, "other.json", "example.com/serial=ttyUSB1"));
        cr_expect_not_null(find(c, n, CDI_CONFLICT_KIND, "quoted.yaml", NULL));
        cr_expect_not_null(find(c, n, CDI_CONFLICT_KIND, "plain.yaml", NULL));
        cr_expect_not_null(find(c, n, CDI_CONFLICT_KIND, "flow.yaml", NULL));
        cr_expect_not_null(
                find(c, n, CDI_CONFLICT_DEVICE, "flow.yaml", "example.com/serial=ttyUSB0"));
        hit = find(c, n, CDI_CONFLICT_UNCHECKED, "broken.json", NULL);
        cr_expect(hit && hit->error == -EBADMSG);
        hit = find(c, n, CDI_CONFLICT_UNCHECKED, "huge.json", NULL);
        cr_expect(hit && hit->error == -EFBIG);
        hit = find(c, n, CDI_CONFLICT_KIND, "other.json", NULL);
        cr_expect(hit && strcmp(hit->kind, "example.com/serial") == 0);
        /* exactly these: no own file, no unrelated kind, no nested key */
        cr_expect_eq(n, 8, "got %zu entries", n);
        cdi_conflicts_free(c, n);
        free(missing);
        free(sub);
        free(huge);
}

Test(cdi_files, no_conflicts_gives_empty_list) {
        struct cdi_spec ours[] = { spec_for("example.com/serial", 1) };
        const char *dirs[] = { tmpdir, NULL };
        struct cdi_conflict *c = (void *)0x1;
        size_t n = 7;

        cr_assert_eq(cdi_spec_write(tmpdir, &ours[0]), 0);
        cr_assert_eq(cdi_find_conflicts(dirs, ours, 1, &c, &n), 0);
        cr_expect_eq(n, 0);
        cdi_conflicts_free(c, n);
}

Test(cdi_files, writing_no_devices_removes_only_our_spec) {
        struct cdi_spec s = spec_for("example.com/serial", 1),
                        none = spec_for("example.com/serial", 0);
        struct cdi_spec foreign = spec_for("example.com/usb", 0);
        char *list;

        cr_assert_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_expect_eq(cdi_spec_write(tmpdir, &none), 0);
        cr_expect_not(exists("example.com-serial.json"), "empty spec left devices advertised");
        put_file("example.com-usb.json", "{}\n");
        cr_expect_eq(cdi_spec_write(tmpdir, &foreign), 0);
        list = listing();
        cr_expect_str_eq(list, ".cdiplug-owned example.com-usb.json");
        free(list);
        /* devices back: the file comes back */
        cr_expect_eq(cdi_spec_write(tmpdir, &s), 0);
        cr_expect(exists("example.com-serial.json"));
}
