/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: the container runtime's CDI settings, and the spec dirs it reads.
 *
 * containerd keeps CDI under its CRI plugin, whose table name changed with
 * the config version: "cri" (version 1), "io.containerd.grpc.v1.cri"
 * (version 2, containerd 1.7 where enable_cdi defaults to false) and
 * "io.containerd.cri.v1.runtime" (version 3, containerd 2.x where it
 * defaults to true). CRI-O has CDI on without a switch and reads
 * [crio.runtime] from crio.conf, then each crio.conf.d/<name>.conf in name
 * order, a later file overriding an earlier one. */
#include "doctor.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "plugin.h"
#include "resources.h"
#include "toml.h"
#include "util.h"

#define CDI_MAX_SPEC_BYTES (4 * 1024 * 1024)
#define MAX_DROPINS 256

static const char *const default_dirs[] = { "/etc/cdi", "/var/run/cdi", NULL };

/* Never NULL on success: a configured empty list is not "unset". */
static int strv_dup(const char *const *src, char ***ret) {
        int r = base_strv_copy((char *const *)src, ret);
        if (r >= 0 && !*ret && !(*ret = calloc(1, sizeof(char *))))
                return -ENOMEM;
        return r;
}

static void add_runtime_dirs(struct doc_ctx *c, char *const *dirs) {
        struct base_strvec all = { 0 };
        int r = 0;

        for (char **d = c->runtime_dirs; d && *d && r >= 0; d++)
                r = base_strvec_push_dup(&all, *d);
        for (; dirs && *dirs && r >= 0; dirs++)
                if (!base_strv_contains(all.v, *dirs))
                        r = base_strvec_push_dup(&all, *dirs);
        /* Not NULL: a runtime config was found, even if it lists nothing. */
        if (r >= 0 && !all.v && !(all.v = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0) {
                base_strvec_clear(&all);
                c->oom = true;
                return;
        }
        base_strv_free(c->runtime_dirs);
        c->runtime_dirs = base_strvec_take(&all);
}

static char *join_dirs(char *const *dirs) {
        size_t len = 1;
        for (char *const *d = dirs; *d; d++)
                len += strlen(*d) + 2;
        char *s = malloc(len);
        size_t at = 0;
        if (!s)
                return NULL;
        s[0] = '\0';
        for (char *const *d = dirs; *d; d++) {
                /* len counts every byte written, so this never truncates. */
                int k = snprintf(s + at, len - at, "%s%s", d == dirs ? "" : ", ", *d);
                at += (size_t)k;
        }
        return s;
}

static bool uses_mode(const struct doc_ctx *c, unsigned mode) {
        for (size_t i = 0; c->cfg && i < c->cfg->n_resources; i++)
                if (c->cfg->resources[i].alloc_modes & mode)
                        return true;
        return false;
}

/* containerd's config and the files its "imports" name (globs; relative
 * to the config's dir), in the order containerd merges them: an imported
 * file overrides the main one, a later import an earlier one. */
#define CONTAINERD_MAX_FILES 32

struct containerd_files {
        struct toml_doc doc[CONTAINERD_MAX_FILES];
        char *path[CONTAINERD_MAX_FILES];
        size_t n;
};

static const struct toml_value *cd_get(const struct containerd_files *f, const char *const *key,
                                       const char **ret_path) {
        for (size_t i = f->n; i-- > 0;) {
                const struct toml_value *v = toml_get(&f->doc[i], key);
                if (v) {
                        *ret_path = f->path[i];
                        return v;
                }
        }
        return NULL;
}

/* Load one file into f; a problem is reported and the file skipped. */
static void cd_load(struct doc_ctx *c, struct containerd_files *f, const char *path) {
        unsigned line = 0;
        int r;
        if (f->n == CONTAINERD_MAX_FILES) {
                doc_add(c, "runtime", DOC_WARN, NULL,
                        "%s: more than %d containerd config files, not read", path,
                        CONTAINERD_MAX_FILES);
                return;
        }
        r = toml_load(path, &f->doc[f->n], &line);
        if (r == -EBADMSG)
                doc_add(c, "runtime", DOC_PROBLEM,
                        "fix the file; containerd does not start with it either",
                        "%s: not valid TOML at line %u", path, line);
        else if (r < 0)
                doc_add(c, "runtime", DOC_PROBLEM, NULL, "%s: cannot read it: %s", path,
                        strerror(-r));
        else if (!(f->path[f->n] = strdup(path))) {
                toml_doc_free(&f->doc[f->n]);
                c->oom = true;
        } else
                f->n++;
}

static void cd_load_imports(struct doc_ctx *c, struct containerd_files *f) {
        const struct toml_value *v =
                f->n ? toml_get(&f->doc[0], (const char *const[]){ "imports", NULL }) : NULL;
        for (char **pat = v && v->type == TOML_STRV ? v->strv : NULL; pat && *pat; pat++) {
                _cleanup_free_ char *abs = NULL, *host = NULL;
                glob_t g;
                if (xasprintf(&abs, "%s%s", **pat == '/' ? "" : "/etc/containerd/", *pat) < 0 ||
                    !(host = doc_host_path(c, abs))) {
                        c->oom = true;
                        return;
                }
                if (glob(host, 0, NULL, &g) != 0)
                        continue;
                for (size_t i = 0; i < g.gl_pathc; i++)
                        cd_load(c, f, g.gl_pathv[i]);
                globfree(&g);
        }
}

/* Returns whether containerd has a config file. */
static bool check_containerd(struct doc_ctx *c) {
        _cleanup_free_ char *path = doc_host_path(c, "/etc/containerd/config.toml");
        struct containerd_files f = { 0 };
        const struct toml_value *v;
        const char *src = NULL;

        if (!path) {
                c->oom = true;
                return false;
        }
        if (access(path, F_OK) < 0)
                return false;
        cd_load(c, &f, path);
        if (f.n == 0)
                return true;
        cd_load_imports(c, &f);

        v = toml_get(&f.doc[0], (const char *const[]){ "version", NULL });
        long long version = v && v->type == TOML_INT ? v->i : 1;
        const char *plugin = version >= 3   ? "io.containerd.cri.v1.runtime"
                             : version == 2 ? "io.containerd.grpc.v1.cri"
                                            : "cri";
        const char *enable[] = { "plugins", plugin, "enable_cdi", NULL };
        const char *dirs[] = { "plugins", plugin, "cdi_spec_dirs", NULL };
        const char *owner[] = { "plugins", plugin, "device_ownership_from_security_context", NULL };
        _cleanup_free_ char *table = NULL;
        if (xasprintf(&table, "[plugins.\"%s\"]", plugin) < 0)
                c->oom = true;

        v = cd_get(&f, enable, &src);
        /* CDI off matters most when a configured mode answers with CDI. */
        enum doc_level off = uses_mode(c, CFG_ALLOC_CDI_CRI | CFG_ALLOC_CDI_ANNOTATIONS)
                                     ? DOC_PROBLEM
                                     : DOC_WARN;
        _cleanup_free_ char *fix = NULL;
        (void)!xasprintf(&fix, "set enable_cdi = true under %s in %s, then restart containerd",
                         table, v ? src : path);
        if (v && v->type == TOML_BOOL && v->b)
                doc_add(c, "runtime", DOC_OK, NULL,
                        "containerd (config version %lld): enable_cdi = true", version);
        else if (v && v->type == TOML_BOOL)
                doc_add(c, "runtime", off, fix,
                        "containerd: CDI is off (%s line %u: enable_cdi = false): pods given a CDI device "
                        "fail to start",
                        src, v->line);
        else if (v)
                doc_add(c, "runtime", DOC_PROBLEM, "write enable_cdi = true (a boolean)",
                        "containerd: %s line %u: enable_cdi is not a boolean", src, v->line);
        else if (version >= 3)
                doc_add(c, "runtime", DOC_OK, NULL,
                        "containerd (config version 3): enable_cdi unset, on by default in containerd 2.x");
        else
                doc_add(c, "runtime", off, fix,
                        "containerd (config version %lld): enable_cdi is not set, and containerd 1.7 "
                        "defaults to off",
                        version);

        v = cd_get(&f, dirs, &src);
        char **list = NULL;
        if (v && v->type != TOML_STRV)
                doc_add(c, "runtime", DOC_PROBLEM,
                        "write cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]",
                        "containerd: %s line %u: cdi_spec_dirs is not a list of strings", src,
                        v->line);
        if (strv_dup(v && v->type == TOML_STRV ? (const char *const *)v->strv : default_dirs,
                     &list) < 0)
                c->oom = true;
        else {
                add_runtime_dirs(c, list);
                base_strv_free(list);
        }

        v = cd_get(&f, owner, &src);
        if (v && v->type == TOML_BOOL)
                c->ownership_from_ctx = v->b;
        for (size_t i = 0; i < f.n; i++) {
                toml_doc_free(&f.doc[i]);
                free(f.path[i]);
        }
        return true;
}

static int cmp_name(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* crio.conf, then the drop-ins in name order; returns whether any exists. */
static bool check_crio(struct doc_ctx *c) {
        _cleanup_free_ char *conf = doc_host_path(c, "/etc/crio/crio.conf");
        _cleanup_free_ char *dropdir = doc_host_path(c, "/etc/crio/crio.conf.d");
        struct base_strvec files = { 0 };
        char **dirs = NULL;
        bool found = false;
        DIR *d;

        if (!conf || !dropdir) {
                c->oom = true;
                return false;
        }
        if (access(conf, F_OK) == 0) {
                (void)!base_strvec_push_dup(&files, conf);
        }
        size_t first_dropin = files.n;
        if ((d = opendir(dropdir))) {
                struct dirent *e;
                while ((e = readdir(d)) && files.n < MAX_DROPINS) {
                        size_t len = strlen(e->d_name);
                        char *s = NULL;
                        if (e->d_name[0] == '.' || len < 6 ||
                            strcmp(e->d_name + len - 5, ".conf") != 0)
                                continue;
                        if (xasprintf(&s, "%s/%s", dropdir, e->d_name) == 0)
                                (void)!base_strvec_push(&files, s);
                }
                closedir(d);
                if (files.n > first_dropin)
                        qsort(files.v + first_dropin, files.n - first_dropin, sizeof(char *),
                              cmp_name);
        }
        for (size_t i = 0; i < files.n; i++) {
                struct toml_doc doc = { 0 };
                unsigned line = 0;
                int r = toml_load(files.v[i], &doc, &line);
                found = true;
                if (r < 0) {
                        doc_add(c, "runtime", DOC_PROBLEM,
                                "fix the file; CRI-O does not start with it either",
                                r == -EBADMSG ? "%s: not valid TOML at line %u"
                                              : "%s: cannot read it (%u)",
                                files.v[i], r == -EBADMSG ? line : (unsigned)-r);
                        continue;
                }
                const struct toml_value *v = toml_get(
                        &doc, (const char *const[]){ "crio", "runtime", "cdi_spec_dirs", NULL });
                if (v && v->type == TOML_STRV) {
                        base_strv_free(dirs);
                        dirs = NULL;
                        if (strv_dup((const char *const *)v->strv, &dirs) < 0)
                                c->oom = true;
                }
                v = toml_get(&doc, (const char *const[]){ "crio", "runtime",
                                                          "device_ownership_from_security_context",
                                                          NULL });
                if (v && v->type == TOML_BOOL)
                        c->ownership_from_ctx = v->b;
                toml_doc_free(&doc);
        }
        base_strvec_clear(&files);
        if (!found)
                return false;
        if (!dirs && strv_dup(default_dirs, &dirs) < 0) {
                c->oom = true;
                return true;
        }
        doc_add(c, "runtime", DOC_OK, NULL, "CRI-O: CDI is always on");
        add_runtime_dirs(c, dirs);
        base_strv_free(dirs);
        return true;
}

void doc_check_runtime(struct doc_ctx *c) {
        bool containerd = check_containerd(c);
        bool crio = check_crio(c);
        if (!containerd && !crio)
                doc_add(c, "runtime", DOC_WARN,
                        "run doctor with --host-root pointing at the host's / (for example /host in the container)",
                        "no containerd config.toml or CRI-O crio.conf under %s: cannot tell whether the runtime "
                        "has CDI on, assuming it reads /etc/cdi and /var/run/cdi",
                        c->o->host_root);
        if (!c->runtime_dirs && strv_dup(default_dirs, &c->runtime_dirs) < 0)
                c->oom = true;

        if (uses_mode(c, CFG_ALLOC_DEVICE_SPECS)) {
                if (c->ownership_from_ctx == 1)
                        doc_add(c, "runtime", DOC_OK, NULL,
                                "device_ownership_from_security_context = true: non-root pods own their device-specs nodes");
                else
                        doc_add(c, "runtime", DOC_WARN,
                                "set device_ownership_from_security_context = true (containerd: in the CRI plugin's "
                                "table; CRI-O: under [crio.runtime])",
                                "a resource uses \"device-specs\" and device_ownership_from_security_context is %s: "
                                "non-root pods cannot open nodes only root may open",
                                c->ownership_from_ctx == 0 ? "false" : "not set (false)");
        }
}

/* --- CDI dirs and specs --- */

static bool same_dir(const char *a, const char *b) {
        struct stat sa, sb;
        if (strcmp(a, b) == 0)
                return true;
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
               sa.st_ino == sb.st_ino;
}

/* Our specs as `serve` would write them now. */
static int build_specs(struct doc_ctx *c, struct cdi_spec **ret, size_t *ret_n) {
        struct cdi_spec *specs =
                calloc(c->cfg->n_resources ? c->cfg->n_resources : 1, sizeof(*specs));
        size_t n = 0;
        if (!specs)
                return -ENOMEM;
        for (size_t i = 0; i < c->cfg->n_resources; i++) {
                const struct cfg_resource *rc = &c->cfg->resources[i];
                struct dp_plugin *p = NULL;
                struct res_devlist found = { 0 };
                bool changed;
                int r = dp_plugin_new(rc, &p);
                if (r >= 0)
                        r = res_discover(c->o->host_root, rc->selectors, rc->n_selectors, &found);
                if (r >= 0)
                        r = dp_plugin_update(p, &found, &changed);
                if (r >= 0 && p->n_devs > 0 && dp_plugin_spec(p, &specs[n]) >= 0)
                        n++;
                res_devlist_free(&found);
                dp_plugin_free(p);
        }
        *ret = specs;
        *ret_n = n;
        return 0;
}

/* What the reference parser (the Go CDI library runtimes use) refuses in a
 * JSON spec; NULL when it looks acceptable. A refused file fails every
 * device of the dir's specs for some runtimes, so it is worth a problem. */
static const char *spec_problem(const cJSON *spec) {
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(spec, "cdiVersion");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(spec, "kind");
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(spec, "devices");
        const cJSON *d;
        unsigned a, b, cc;
        char extra;

        if (!cJSON_IsObject(spec))
                return "not a JSON object";
        if (!cJSON_IsString(ver) ||
            sscanf(ver->valuestring, "%u.%u.%u%c", &a, &b, &cc, &extra) != 3)
                return "no valid \"cdiVersion\"";
        if (!cJSON_IsString(kind) || !cdi_kind_is_valid(kind->valuestring))
                return "no valid \"kind\" (vendor/class)";
        if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) == 0)
                return "no \"devices\"";
        cJSON_ArrayForEach(d, devs) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(d, "name");
                const cJSON *edits = cJSON_GetObjectItemCaseSensitive(d, "containerEdits");
                if (!cJSON_IsString(name) || !cdi_device_name_is_valid(name->valuestring))
                        return "a device without a valid \"name\"";
                if (!cJSON_IsObject(edits) || !edits->child)
                        return "a device without \"containerEdits\"";
                for (const cJSON *o = devs->child; o != d; o = o->next) {
                        const cJSON *other = cJSON_GetObjectItemCaseSensitive(o, "name");
                        if (cJSON_IsString(other) &&
                            strcmp(other->valuestring, name->valuestring) == 0)
                                return "two devices with the same name";
                }
        }
        return NULL;
}

static bool is_owned(const char *dir, const char *name) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool owned = false;
        if (fd >= 0) {
                if (cdi_spec_is_owned_at(fd, name, &owned) < 0)
                        owned = false;
                close(fd);
        }
        return owned;
}

static void check_spec_file(struct doc_ctx *c, const char *dir, const char *name) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        size_t len = strlen(name), n;
        int r;

        if (xasprintf(&path, "%s/%s", dir, name) < 0) {
                c->oom = true;
                return;
        }
        r = base_read_file_at(AT_FDCWD, path, 0, CDI_MAX_SPEC_BYTES, &text, &n);
        if (r == -EFBIG)
                doc_add(c, "cdi", DOC_WARN, NULL, "%s: larger than %d bytes, not checked", path,
                        CDI_MAX_SPEC_BYTES);
        if (r == -ENOMEM)
                c->oom = true;
        if (r < 0)
                return;
        if (strcmp(name + len - 5, ".yaml") == 0) {
                /* YAML is only line-scanned: both keys must be top-level. */
                bool kind = strncmp(text, "kind:", 5) == 0 || strstr(text, "\nkind:");
                bool ver = strncmp(text, "cdiVersion:", 11) == 0 || strstr(text, "\ncdiVersion:");
                if (!kind || !ver)
                        doc_add(c, "cdi", DOC_PROBLEM, "fix or remove the file",
                                "%s: the CDI parser rejects it (no top-level %s): runtimes fail to load the specs "
                                "of %s",
                                path, kind ? "cdiVersion" : "kind", dir);
                return;
        }
        cJSON *spec = cJSON_ParseWithLength(text, n);
        const char *why = spec ? spec_problem(spec) : "not valid JSON";
        if (why)
                doc_add(c, "cdi", DOC_PROBLEM, "fix or remove the file",
                        "%s: the CDI parser rejects it (%s): runtimes fail to load the specs of %s",
                        path, why, dir);
        cJSON_Delete(spec);
}

static void check_foreign_specs(struct doc_ctx *c, char *const *hostdirs) {
        for (char *const *dir = hostdirs; *dir; dir++) {
                DIR *d = opendir(*dir);
                struct dirent *e;
                if (!d)
                        continue;
                while ((e = readdir(d))) {
                        size_t len = strlen(e->d_name);
                        if (e->d_name[0] == '.' || len < 6 ||
                            (strcmp(e->d_name + len - 5, ".json") &&
                             strcmp(e->d_name + len - 5, ".yaml")))
                                continue;
                        if (!is_owned(*dir, e->d_name))
                                check_spec_file(c, *dir, e->d_name);
                }
                closedir(d);
        }
}

static bool device_conflict(const struct cdi_conflict *conf, size_t n, const char *path) {
        for (size_t i = 0; i < n; i++)
                if (conf[i].type == CDI_CONFLICT_DEVICE && strcmp(conf[i].path, path) == 0)
                        return true;
        return false;
}

static void check_conflicts(struct doc_ctx *c, char **hostdirs) {
        struct cdi_spec *specs = NULL;
        struct cdi_conflict *conf = NULL;
        size_t n_specs = 0, n_conf = 0;

        if (build_specs(c, &specs, &n_specs) < 0) {
                c->oom = true;
                return;
        }
        int r = cdi_find_conflicts((const char *const *)hostdirs, specs, n_specs, &conf, &n_conf);
        if (r < 0)
                doc_add(c, "cdi", DOC_WARN, NULL, "cannot look for conflicting specs: %s",
                        strerror(-r));
        for (size_t i = 0; r >= 0 && i < n_conf; i++) {
                if (conf[i].type == CDI_CONFLICT_DEVICE)
                        doc_add(c, "cdi", DOC_PROBLEM,
                                "remove the other file, or rename the resource",
                                "%s also declares device %s: the runtime refuses the device (or picks one file "
                                "by dir priority)",
                                conf[i].path, conf[i].device);
                else if (conf[i].type == CDI_CONFLICT_KIND &&
                         !device_conflict(conf, n_conf, conf[i].path))
                        doc_add(c, "cdi", DOC_WARN, "rename the resource, or remove the other file",
                                "%s also declares kind %s: device names of the two files must never meet",
                                conf[i].path, conf[i].kind);
                /* Unreadable files are judged by check_spec_file. */
        }
        cdi_conflicts_free(conf, n_conf);
        for (size_t i = 0; i < n_specs; i++)
                cdi_spec_free(&specs[i]);
        free(specs);
}

/* Spec files of ours that no configured resource writes any more. */
static void check_stale(struct doc_ctx *c) {
        _cleanup_strvec_ struct base_strvec owned = { 0 };
        _cleanup_close_ int fd = open(c->o->cdi_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 || cdi_owned_load(fd, &owned) < 0)
                return;
        for (size_t k = 0; k < owned.n; k++) {
                const char *name = owned.v[k];
                bool configured = false;
                for (size_t i = 0; i < c->cfg->n_resources && !configured; i++) {
                        _cleanup_free_ char *kind = NULL, *file = NULL;
                        if (cdi_kind_from_resource(c->cfg->resources[i].name, &kind) >= 0 &&
                            cdi_spec_file_name(kind, &file) >= 0)
                                configured = strcmp(file, name) == 0;
                }
                _cleanup_free_ char *path = NULL, *fix = NULL;
                if (configured || xasprintf(&path, "%s/%s", c->o->cdi_dir, name) < 0 ||
                    access(path, F_OK) < 0)
                        continue;
                (void)!xasprintf(
                        &fix,
                        "none while the daemon can ask the kubelet's PodResources; if its log says "
                        "it cannot: once no pod uses its devices, rm %s",
                        path);
                doc_add(c, "cdi", DOC_WARN, fix,
                        "%s was written by cdiplug, but no configured resource owns it: the daemon keeps it while a "
                        "pod holds one of its devices (a container restart needs it) and then removes it",
                        path);
        }
}

void doc_check_cdi(struct doc_ctx *c) {
        const char *dir = c->o->cdi_dir;
        struct base_strvec hostdirs = { 0 };
        bool runtime_reads = false;
        struct stat st;

        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                doc_add(c, "cdi", DOC_WARN, NULL, "%s does not exist yet: cdiplug serve creates it",
                        dir);
        else if (!doc_can_write(&st, c->uid, c->gid, true))
                doc_add(c, "cdi", DOC_PROBLEM,
                        "serve as uid 0 (no \"user\"), or: chown the dir to the user, or give its group write access",
                        "%s is not writable by uid %u gid %u without capabilities: cdiplug cannot write its specs",
                        dir, (unsigned)c->uid, (unsigned)c->gid);
        for (char **d = c->runtime_dirs; d && *d; d++) {
                char *h = doc_host_path(c, *d);
                if (base_strvec_push(&hostdirs, h) < 0) {
                        c->oom = true;
                        continue;
                }
                runtime_reads |= same_dir(dir, *d) || same_dir(dir, h);
        }
        if (!hostdirs.v)
                return;
        _cleanup_free_ char *list = join_dirs(c->runtime_dirs);
        if (runtime_reads)
                doc_add(c, "cdi", DOC_OK, NULL, "%s is read by the runtime", dir);
        else {
                _cleanup_free_ char *fix = NULL;
                (void)!xasprintf(
                        &fix, "serve with --cdi-dir %s, or add %s to the runtime's cdi_spec_dirs",
                        c->runtime_dirs[0] ? c->runtime_dirs[0] : "/etc/cdi", dir);
                doc_add(c, "cdi", DOC_PROBLEM, fix,
                        "%s is not among the dirs the runtime reads (%s)", dir, list ? list : "?");
        }
        check_foreign_specs(c, hostdirs.v);
        if (c->cfg) {
                check_conflicts(c, hostdirs.v);
                check_stale(c);
        }
        base_strvec_clear(&hostdirs);
}
