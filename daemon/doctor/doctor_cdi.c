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
#include "doctor-internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "plugin.h"
#include "resources.h"
#include "log.h"

#define CDI_MAX_SPEC_BYTES (4 * 1024 * 1024)
/* CRI-O reads them all; doctor stops here and says so. */
#define MAX_DROPINS 1024
#define CONTAINERD_CONFIG "/etc/containerd/config.toml"
#define CRIO_CONF "/etc/crio/crio.conf"
#define CRIO_DROPINS "/etc/crio/crio.conf.d"

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

/* A runtime config file inside the host root, parsed. -EINVAL: it is no
 * regular file, which doc_root_read has reported; other errors are for
 * the caller to report with report_load(). */
static int load_toml(struct doc_ctx *c, const char *path, struct toml_doc *ret,
                     unsigned *ret_line) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = doc_root_read(c, "runtime", path, TOML_MAX_BYTES, &text, &len);
        if (r == -EFBIG)
                return -E2BIG;
        if (r < 0)
                return r;
        return toml_parse(text, len, ret, ret_line);
}

static void report_load(struct doc_ctx *c, const char *host, int r, unsigned line,
                        const char *runtime) {
        _cleanup_free_ char *fix = NULL;
        if (r == -EINVAL)
                return;
        if (r == -ENOMEM) {
                c->oom = true;
                return;
        }
        (void)!xasprintf(&fix, "fix the file; %s does not start with it either", runtime);
        if (r == -EBADMSG)
                doc_add(c, "runtime", DOC_PROBLEM, fix, "%s: not valid TOML at line %u", host,
                        line);
        else if (r == -E2BIG)
                doc_add(c, "runtime", DOC_WARN, NULL,
                        "%s: larger than %d bytes or %d entries, not read", host, TOML_MAX_BYTES,
                        TOML_MAX_ENTRIES);
        else
                doc_add(c, "runtime", DOC_PROBLEM, NULL, "%s: cannot read it: %s", host,
                        strerror(-r));
}

/* Load one file (inside the host root) into f; a problem is reported and
 * the file skipped. */
static void cd_load(struct doc_ctx *c, struct containerd_files *f, const char *path) {
        _cleanup_free_ char *host = doc_host_path(c, path);
        unsigned line = 0;
        int r;
        if (!host) {
                c->oom = true;
                return;
        }
        if (f->n == CONTAINERD_MAX_FILES) {
                doc_add(c, "runtime", DOC_WARN, NULL,
                        "%s: more than %d containerd config files, not read", host,
                        CONTAINERD_MAX_FILES);
                return;
        }
        r = load_toml(c, path, &f->doc[f->n], &line);
        if (r < 0)
                report_load(c, host, r, line, "containerd");
        else
                f->path[f->n++] = TAKE_PTR(host);
}

/* containerd expands each import with Go's filepath.Glob, relative to the
 * main config's dir; here every component is matched inside the host
 * root, never through doctor's own "/". */
static void cd_load_imports(struct doc_ctx *c, struct containerd_files *f) {
        const struct toml_value *v =
                f->n ? toml_get(&f->doc[0], (const char *const[]){ "imports", NULL }) : NULL;
        for (char **pat = v && v->type == TOML_STRV ? v->strv : NULL; pat && *pat; pat++) {
                _cleanup_free_ char *abs = NULL;
                _cleanup_strvec_ struct base_strvec found = { 0 };
                if (xasprintf(&abs, "%s%s", **pat == '/' ? "" : "/etc/containerd/", *pat) < 0) {
                        c->oom = true;
                        return;
                }
                int r = doc_root_glob(c, abs, CONTAINERD_MAX_FILES, &found);
                for (size_t i = 0; i < found.n; i++)
                        cd_load(c, f, found.v[i]);
                if (r == -E2BIG)
                        doc_add(c, "runtime", DOC_WARN, NULL,
                                "containerd imports \"%s\": stopped after %zu files (a bound on what "
                                "doctor reads): the settings below may not be containerd's",
                                *pat, found.n);
                else if (r == -ENOMEM)
                        c->oom = true;
                else if (r < 0)
                        doc_add(c, "runtime", DOC_WARN, NULL,
                                "containerd imports \"%s\": cannot expand it: %s", *pat,
                                strerror(-r));
        }
}

/* enable_cdi in the CRI plugin's table (named plugin for this config
 * version), and what it means for the configured Allocate modes. */
static void cd_check_enable(struct doc_ctx *c, const struct containerd_files *f, const char *plugin,
                            long long version, const char *path) {
        const struct toml_value *v;
        const char *src = NULL;
        const char *enable[] = { "plugins", plugin, "enable_cdi", NULL };
        _cleanup_free_ char *table = NULL;
        if (xasprintf(&table, "[plugins.\"%s\"]", plugin) < 0)
                c->oom = true;

        v = cd_get(f, enable, &src);
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
}

/* Returns whether containerd has a config file. */
static bool check_containerd(struct doc_ctx *c) {
        _cleanup_free_ char *path = doc_host_path(c, CONTAINERD_CONFIG);
        struct containerd_files f = { 0 };
        const struct toml_value *v;
        const char *src = NULL;
        struct stat st;

        if (!path) {
                c->oom = true;
                return false;
        }
        int r = doc_root_stat(c, CONTAINERD_CONFIG, &st);
        if (r == -ENOENT || r == -ENOTDIR)
                return false;
        cd_load(c, &f, CONTAINERD_CONFIG);
        if (f.n == 0)
                return true;
        cd_load_imports(c, &f);

        v = toml_get(&f.doc[0], (const char *const[]){ "version", NULL });
        long long version = v && v->type == TOML_INT ? v->i : 1;
        const char *plugin = version >= 3   ? "io.containerd.cri.v1.runtime"
                             : version == 2 ? "io.containerd.grpc.v1.cri"
                                            : "cri";
        const char *dirs[] = { "plugins", plugin, "cdi_spec_dirs", NULL };
        const char *owner[] = { "plugins", plugin, "device_ownership_from_security_context", NULL };
        cd_check_enable(c, &f, plugin, version, path);

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

static bool is_dropin(const char *name) {
        size_t len = strlen(name);
        return name[0] != '.' && len > 5 && strcmp(name + len - 5, ".conf") == 0;
}

/* crio.conf, then the drop-ins (in-root paths pushed to files) in the
 * order CRI-O applies them: by name, byte-wise. Past MAX_DROPINS the rest
 * is not read, and a warning says from which file on. */
static void crio_files(struct doc_ctx *c, struct base_strvec *files) {
        _cleanup_strv_ char **names = NULL;
        size_t n = 0, left = 0;
        const char *stopped = NULL;
        struct stat st;
        int r;

        r = doc_root_stat(c, CRIO_CONF, &st);
        if (r != -ENOENT && r != -ENOTDIR && base_strvec_push_dup(files, CRIO_CONF) < 0)
                c->oom = true;
        r = doc_root_list(c, CRIO_DROPINS, &names);
        if (r < 0 && r != -ENOENT && r != -ENOTDIR) {
                _cleanup_free_ char *host = doc_host_path(c, CRIO_DROPINS);
                doc_add(c, "runtime", DOC_WARN, NULL,
                        "%s: cannot list it: %s: its drop-ins are not read, the settings below may "
                        "not be CRI-O's",
                        host ? host : CRIO_DROPINS, strerror(-r));
        }
        for (char **name = names; name && *name; name++) {
                char *p = NULL;
                if (!is_dropin(*name))
                        continue;
                if (n == MAX_DROPINS) {
                        stopped = stopped ? stopped : *name;
                        left++;
                        continue;
                }
                if (xasprintf(&p, "%s/%s", CRIO_DROPINS, *name) < 0 ||
                    base_strvec_push(files, p) < 0)
                        c->oom = true;
                n++;
        }
        if (stopped) {
                _cleanup_free_ char *host = doc_host_path(c, CRIO_DROPINS);
                doc_add(c, "runtime", DOC_WARN, NULL,
                        "%s: %zu drop-ins; doctor read the first %d by name and stopped at \"%s\" "
                        "(%zu not read): the settings below may not be CRI-O's",
                        host ? host : CRIO_DROPINS, n + left, MAX_DROPINS, stopped, left);
        }
}

/* crio.conf, then the drop-ins; returns whether any exists. */
static bool check_crio(struct doc_ctx *c) {
        _cleanup_strvec_ struct base_strvec files = { 0 };
        char **dirs = NULL;

        crio_files(c, &files);
        for (size_t i = 0; i < files.n; i++) {
                _cleanup_free_ char *host = doc_host_path(c, files.v[i]);
                struct toml_doc doc = { 0 };
                unsigned line = 0;
                int r = load_toml(c, files.v[i], &doc, &line);
                if (r < 0) {
                        report_load(c, host ? host : files.v[i], r, line, "CRI-O");
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
        if (files.n == 0)
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
        c->runtime_assumed = !containerd && !crio;

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

/* Whether the runtime's dir (inside the host root) is the dir cdiplug
 * writes (--cdi-dir, taken as given; st is its stat). */
static bool same_dir(const struct doc_ctx *c, const char *runtime_dir, const struct stat *st) {
        struct stat rs;
        /* With the host's own root, a dir serve will create still counts. */
        if (c->o->host_root && strcmp(c->o->host_root, "/") == 0 &&
            strcmp(runtime_dir, c->o->cdi_dir) == 0)
                return true;
        return st && doc_root_stat(c, runtime_dir, &rs) == 0 && S_ISDIR(rs.st_mode) &&
               rs.st_dev == st->st_dev && rs.st_ino == st->st_ino;
}

static bool is_default_dir(const char *dir) {
        for (const char *const *d = default_dirs; *d; d++)
                if (strcmp(*d, dir) == 0)
                        return true;
        return false;
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
/* MAJOR.MINOR.PATCH, each a decimal number that fits 32 bits. */
static bool is_version(const char *s) {
        for (int part = 0; part < 3; part++) {
                char *end;
                if (*s < '0' || *s > '9')
                        return false;
                errno = 0;
                unsigned long v = strtoul(s, &end, 10);
                if (errno || v > UINT32_MAX || *end != (part < 2 ? '.' : '\0'))
                        return false;
                s = end + (part < 2);
        }
        return true;
}

static const char *spec_problem(const cJSON *spec) {
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(spec, "cdiVersion");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(spec, "kind");
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(spec, "devices");
        const cJSON *d;

        if (!cJSON_IsObject(spec))
                return "not a JSON object";
        if (!cJSON_IsString(ver) || !is_version(ver->valuestring))
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

struct our_specs {
        struct cdi_spec *v;
        size_t n;
};

/* Another file declaring one of our kinds: the runtime then refuses a
 * device both declare (or picks one file by dir priority); a kind alone
 * shared means device names of the two must never meet. The judgement is
 * cdi_find_conflicts', made on the text doctor read inside the host root
 * (YAML text is changed in place). */
static void check_conflicts(struct doc_ctx *c, const char *host, char *text, size_t n,
                            const struct our_specs *ours) {
        struct cdi_conflict *conf = NULL;
        size_t n_conf = 0;
        int r = cdi_find_conflicts_in_text(host, ours->v, ours->n, text, n, &conf, &n_conf);

        if (r == -ENOMEM)
                c->oom = true;
        for (size_t i = 0; r >= 0 && i < n_conf; i++) {
                bool device = false;
                if (conf[i].type == CDI_CONFLICT_DEVICE)
                        doc_add(c, "cdi", DOC_PROBLEM,
                                "remove the other file, or rename the resource",
                                "%s also declares device %s: the runtime refuses the device (or picks "
                                "one file by dir priority)",
                                host, conf[i].device);
                if (conf[i].type != CDI_CONFLICT_KIND)
                        continue; /* UNCHECKED: the parse problem is reported already */
                for (size_t j = 0; j < n_conf; j++)
                        device |= conf[j].type == CDI_CONFLICT_DEVICE &&
                                  strcmp(conf[j].kind, conf[i].kind) == 0;
                if (!device)
                        doc_add(c, "cdi", DOC_WARN, "rename the resource, or remove the other file",
                                "%s also declares kind %s: device names of the two files must never meet",
                                host, conf[i].kind);
        }
        cdi_conflicts_free(conf, n_conf);
}

/* One spec file of a runtime dir (dir inside the host root). */
static void check_spec_file(struct doc_ctx *c, const char *dir, const char *name,
                            const struct our_specs *ours) {
        _cleanup_free_ char *path = NULL, *host = NULL, *hostdir = NULL, *text = NULL;
        size_t len = strlen(name), n;
        int r;

        if (xasprintf(&path, "%s/%s", dir, name) < 0 || !(host = doc_host_path(c, path)) ||
            !(hostdir = doc_host_path(c, dir))) {
                c->oom = true;
                return;
        }
        r = doc_root_read(c, "cdi", path, CDI_MAX_SPEC_BYTES, &text, &n);
        if (r == -EFBIG)
                doc_add(c, "cdi", DOC_WARN, NULL, "%s: larger than %d bytes, not checked", host,
                        CDI_MAX_SPEC_BYTES);
        else if (r == -ENOMEM)
                c->oom = true;
        else if (r < 0 && r != -EINVAL) /* -EINVAL: skipped, and said */
                doc_add(c, "cdi", DOC_WARN, NULL,
                        "%s: cannot read it: %s: runtimes may fail to load the specs of %s", host,
                        strerror(-r), hostdir);
        if (r < 0)
                return;
        if (strcmp(name + len - 5, ".yaml") == 0 && text[strspn(text, " \t\r\n")] != '{') {
                /* YAML is only line-scanned: both keys must be top-level. */
                bool kind = strncmp(text, "kind:", 5) == 0 || strstr(text, "\nkind:");
                bool ver = strncmp(text, "cdiVersion:", 11) == 0 || strstr(text, "\ncdiVersion:");
                if (!kind || !ver)
                        doc_add(c, "cdi", DOC_PROBLEM, "fix or remove the file",
                                "%s: the CDI parser rejects it (no top-level %s): runtimes fail to load the specs "
                                "of %s",
                                host, kind ? "cdiVersion" : "kind", hostdir);
                check_conflicts(c, host, text, n, ours);
                return;
        }
        cJSON *spec = cJSON_ParseWithLength(text, n);
        const char *why = spec ? spec_problem(spec) : "not valid JSON";
        if (why)
                doc_add(c, "cdi", DOC_PROBLEM, "fix or remove the file",
                        "%s: the CDI parser rejects it (%s): runtimes fail to load the specs of %s",
                        host, why, hostdir);
        cJSON_Delete(spec);
        check_conflicts(c, host, text, n, ours);
}

static bool is_spec_name(const char *name) {
        size_t len = strlen(name);
        return name[0] != '.' && len > 5 &&
               (strcmp(name + len - 5, ".json") == 0 || strcmp(name + len - 5, ".yaml") == 0);
}

/* The runtime dirs' spec files that cdiplug did not write: whether the
 * CDI parser takes them, and whether they clash with ours. */
static void check_foreign_specs(struct doc_ctx *c, const struct our_specs *ours) {
        for (char **dir = c->runtime_dirs; dir && *dir; dir++) {
                _cleanup_strv_ char **names = NULL;
                _cleanup_close_ int fd = -1;
                int r = doc_root_list(c, *dir, &names);
                if (r == -ENOMEM)
                        c->oom = true;
                if (r >= 0)
                        r = doc_root_open_dir(c, *dir, &fd);
                if (r < 0)
                        continue;
                for (char **name = names; *name; name++) {
                        bool owned = false;
                        if (!is_spec_name(*name))
                                continue;
                        if (cdi_spec_is_owned_at(fd, *name, &owned) < 0 || !owned)
                                check_spec_file(c, *dir, *name, ours);
                }
        }
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
                        const char *file = c->cfg->resources[i].spec_file;
                        configured = file && strcmp(file, name) == 0;
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
        struct our_specs ours = { 0 };
        bool runtime_reads = false, have_dir = false;
        struct stat st;

        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                doc_add(c, "cdi", DOC_WARN, NULL, "%s does not exist yet: cdiplug serve creates it",
                        dir);
        else {
                have_dir = true;
                if (!doc_can_write(&st, c->uid, c->gid, true))
                        doc_add(c, "cdi", DOC_PROBLEM,
                                "serve as uid 0 (no \"user\"), or: chown the dir to the user, or give its group write access",
                                "%s is not writable by uid %u gid %u without capabilities: cdiplug cannot write its specs",
                                dir, (unsigned)c->uid, (unsigned)c->gid);
        }
        if (!c->runtime_dirs)
                return;
        for (char **d = c->runtime_dirs; *d; d++)
                runtime_reads |= same_dir(c, *d, have_dir ? &st : NULL);
        _cleanup_free_ char *list = join_dirs(c->runtime_dirs);
        if (runtime_reads)
                doc_add(c, "cdi", DOC_OK, NULL, "%s is read by the runtime", dir);
        else if (c->runtime_assumed)
                /* No runtime config in sight (doctor in the DaemonSet's pod,
                 * which mounts the host's CDI dir but not /etc/containerd):
                 * only the default dirs are known, and not where they are
                 * mounted here, so a name is all there is to compare. */
                doc_add(c, "cdi", is_default_dir(dir) ? DOC_OK : DOC_WARN,
                        is_default_dir(dir)
                                ? NULL
                                : "serve with --cdi-dir /etc/cdi, or run doctor where the "
                                  "runtime's config is visible",
                        "%s %s a dir runtimes read by default (%s); the runtime's own config "
                        "is not visible here",
                        dir, is_default_dir(dir) ? "is" : "is not", list ? list : "?");
        else {
                _cleanup_free_ char *fix = NULL;
                (void)!xasprintf(
                        &fix, "serve with --cdi-dir %s, or add %s to the runtime's cdi_spec_dirs",
                        c->runtime_dirs[0] ? c->runtime_dirs[0] : "/etc/cdi", dir);
                doc_add(c, "cdi", DOC_PROBLEM, fix,
                        "%s is not among the dirs the runtime reads (%s)", dir, list ? list : "?");
        }
        if (c->cfg && build_specs(c, &ours.v, &ours.n) < 0)
                c->oom = true;
        check_foreign_specs(c, &ours);
        for (size_t i = 0; i < ours.n; i++)
                cdi_spec_free(&ours.v[i]);
        free(ours.v);
        if (c->cfg)
                check_stale(c);
}
