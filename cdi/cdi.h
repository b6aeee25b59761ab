/* SPDX-License-Identifier: Apache-2.0 */
/* cdi: Container Device Interface spec model, names and atomic spec files.
 *
 * Everything here returns 0 or a negative errno; ret_* outputs are written
 * only on success. Nothing here logs: callers (daemon/) decide what to say.
 *
 * Names follow what CDI consumers enforce (the reference Go parser):
 *   vendor  letter first, letter/digit last, [A-Za-z0-9_.-] between,
 *           2 to 253 chars (SPEC.md: a DNS subdomain; one character
 *           panics the reference parser);
 *   class   same characters, 2 to 63 chars; a '.' needs cdiVersion 0.6.0,
 *           and consumers with the library before 0.6 (podman 4.3,
 *           containerd 1.7) refuse it at any version;
 *   device  letter/digit first and last, [A-Za-z0-9_.:-] between; a digit
 *           first needs cdiVersion 0.5.0.
 *
 * Ownership. cdiplug must tell its own spec files from everyone else's,
 * yet the file name is fixed ("<vendor>-<class>.json") and anything inside
 * the JSON would either fail strict parsing (unknown fields) or raise the
 * version (annotations need 0.6.0). So the marker lives beside the specs:
 * each spec directory holds a record file ".cdiplug-owned" listing, one
 * per line, the spec file names cdiplug wrote there. Consumers load only
 * "*.json" and "*.yaml", so they never see it. The record is replaced
 * atomically like the specs, a name is added before its file first
 * appears and dropped only after the file is unlinked, so a crash never
 * leaves a file of ours unclaimed. Temp files are ".cdiplug-tmp.<hex>",
 * also invisible to consumers. One cdiplug instance per directory: the
 * write and removal functions below must not run concurrently on one
 * directory.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

/* A device node as the container sees it. host_path is NULL when the node
 * sits at the same path on the host. No major/minor: the runtime stats the
 * live node, so a renumbered node after a driver reload still works. */
struct cdi_node {
        char *path;
        char *host_path;
        /* "permissions" and the overrides, written in every cdiVersion. */
        struct base_node_access access;
};

struct cdi_mount {
        char *host_path;
        char *container_path;
        char *type;     /* NULL unless set: a type needs cdiVersion 0.4.0 */
        char **options; /* NULL-terminated, may be NULL */
};

struct cdi_edits {
        char **env; /* NULL-terminated "KEY=VALUE", may be NULL */
        struct cdi_node *nodes;
        size_t n_nodes;
        struct cdi_mount *mounts;
        size_t n_mounts;
};

struct cdi_device {
        char *name; /* a valid CDI device name (see cdi_device_name) */
        struct cdi_edits edits;
};

struct cdi_spec {
        char *kind; /* "vendor.com/class" */
        struct cdi_device *devices;
        size_t n_devices;
        struct cdi_edits edits; /* applied once for any device of the spec */
};

/* Kind for a kubelet extended-resource name "domain/name". The rules,
 * fixed forever since they decide the names runtimes are asked for:
 *   1. A name that is a valid kind is used unchanged ("example.com/serial").
 *   2. Otherwise each part (vendor from the domain, class from the name
 *      part) that does not start with a letter, or is one character long,
 *      gets the prefix "cdi-": "example.com/9x" -> "example.com/cdi-9x",
 *      "3com.com/x" -> "cdi-3com.com/cdi-x".
 *   3. A part then longer than its limit (vendor 253, class 63) keeps its
 *      first limit-9 characters, then "-" and the 32-bit FNV-1a hash of
 *      the original part as 8 lowercase hex digits.
 * Distinct names can map to one kind ("example.com/9x" and
 * "example.com/cdi-9x"): callers must refuse such a pair. -EINVAL when the
 * name has no '/' or exactly one, empty parts, characters outside
 * [A-Za-z0-9_.-], a part not ending in a letter or digit, or a domain
 * beyond 253 characters. */
int cdi_kind_from_resource(const char *resource, char **ret_kind);

/* The annotation key for the "cdi-annotations" Allocate mode:
 * "cdi.k8s.io/cdiplug_<resource with '/' as '-'>". A name part beyond 63
 * characters keeps its first 54, then "-" and the FNV-1a hash of the
 * resource (8 hex digits). -EINVAL when that is not a valid key. */
int cdi_annotation_key(const char *resource, char **ret_key);

/* Whether name is valid after "cdi.k8s.io/": at most 63 of
 * [A-Za-z0-9_.-], a letter or digit at both ends. */
bool cdi_annotation_name_is_valid(const char *name);

/* A valid CDI device name for a device ID. The rules, fixed forever
 * since they decide the names runtimes are asked for:
 *   1. An ID that already is a valid device name is used unchanged
 *      ("ttyUSB0", "0000:03:00.0").
 *   2. Otherwise leading characters that are not ASCII letters or digits
 *      are dropped.
 *   3. Each remaining byte outside [A-Za-z0-9_.:-] becomes '_' (a UTF-8
 *      character of n bytes becomes n underscores).
 *   4. If rule 2 dropped everything, the name starts with "dev".
 *   5. "-" and the 32-bit FNV-1a hash of the whole original ID, as 8
 *      lowercase hex digits, is appended, so IDs that rules 2-4 map to
 *      the same text ("a/b", "a b") still get distinct names, and the name
 *      ends in a letter or digit. "/dev/ttyUSB0" -> "dev_ttyUSB0-<8 hex>".
 * -EINVAL for an empty ID, -ENAMETOOLONG beyond 1024 bytes. */
int cdi_device_name(const char *id, char **ret_name);

/* Whether kind is "vendor/class" by the rules above. */
bool cdi_kind_is_valid(const char *kind);

/* Whether name is a valid CDI device name (the rules above). */
bool cdi_device_name_is_valid(const char *name);

/* "kind=name", the fully-qualified name runtimes resolve. */
int cdi_qualified_name(const char *kind, const char *name, char **ret);

/* The lowest cdiVersion ("0.3.0", ...) that the spec's content needs. */
const char *cdi_spec_min_version(const struct cdi_spec *spec);

/* 0, or -EINVAL when runtimes would refuse the spec (bad kind or device
 * name, no devices, a device without edits, env entry without "NAME=",
 * relative node path, permissions other than r/w/m, mount without both
 * paths), -EEXIST for two devices with one name. A refused spec fails the
 * whole file for every device in it, so we refuse to write it instead. */
int cdi_spec_validate(const struct cdi_spec *spec);

/* The spec as JSON text (newline-terminated, free()), with the minimal
 * cdiVersion. Unset and empty fields are omitted, and a hostPath equal to
 * path is dropped (it would only raise the version). Validates first.
 * No ownership marker is inside: see ".cdiplug-owned" above. */
int cdi_spec_to_json(const struct cdi_spec *spec, char **ret_json);

/* File name of the spec for a kind: "<vendor>-<class>.json". A valid kind
 * needs no sanitising (no '/', never starts with '.'); -EINVAL for an
 * invalid kind. A name that would pass NAME_MAX keeps its first 241
 * characters, then "-" and the FNV-1a hash of the kind (8 hex digits).
 * Distinct kinds can share a file name ("a-b/c", "a/b-c"): callers must
 * not configure both. */
int cdi_spec_file_name(const char *kind, char **ret_name);

/* Write the spec atomically into dir (temp file, fsync, rename, fsync dir;
 * mode 0644), so a crash at any moment leaves either the old or the new
 * file, never a partial one. Creates dir (last component, 0755) if
 * missing. -EEXIST when a file cdiplug did not write has the name.
 * A spec with no devices is invalid for every consumer, so writing one
 * removes cdiplug's own file for the kind instead (0 if there is none):
 * devices that are all gone must stop being advertised. */
int cdi_spec_write(const char *dir, const struct cdi_spec *spec);

/* cdi_spec_write on an open directory (O_DIRECTORY), e.g. opened before
 * the sandbox locks down. */
int cdi_spec_write_at(int dir_fd, const struct cdi_spec *spec);

/* Open (O_RDONLY|O_DIRECTORY|O_CLOEXEC) a spec directory, creating its last
 * component with mode 0755 if missing. */
int cdi_dir_open(const char *path, int *ret_fd);

/* The spec file names the directory's record says cdiplug wrote (none
 * without a record); read-only. Clear with base_strvec_clear. */
int cdi_owned_load(int dir_fd, struct base_strvec *ret_names);

/* Whether file_name in the directory is recorded as written by cdiplug. */
int cdi_spec_is_owned_at(int dir_fd, const char *file_name, bool *ret_owned);

/* Remove cdiplug's own spec files in dir whose kind is not in kinds
 * (NULL-terminated, may be NULL: remove all of ours), plus temp files left
 * by a crash. Files cdiplug did not write are never touched, and neither
 * is anything that is not a regular file. A missing dir is not an error.
 * ret_removed (may be NULL) gets the removed file names, NULL-terminated,
 * free with base_strv_free. -EINVAL for an invalid kind. */
int cdi_remove_stale(const char *dir, const char *const *kinds, char ***ret_removed);
int cdi_remove_stale_at(int dir_fd, const char *const *kinds, char ***ret_removed);

/* cdi_remove_stale without the removal: cdiplug's own spec files in dir
 * whose kind is not in kinds stay, and *ret_stale (may be NULL) gets their
 * names, NULL-terminated (base_strv_free), for the caller to remove one by
 * one with cdi_spec_remove once nothing needs them. Temp files left by a
 * crash are removed, and claims on files that are gone (or were replaced
 * by something that is not a regular file) are dropped from the record.
 * A missing dir is not an error. */
int cdi_sweep(const char *dir, const char *const *kinds, char ***ret_stale);

/* How cdiplug's own spec file for spec->kind in dir (as the record
 * claims it) compares with spec, device by device: (*ret_defined)[i]
 * when it defines spec->devices[i] by name, (*ret_same)[i] when exactly
 * so (nodes, env, mounts, and the spec-wide edits, as cdi_spec_to_json
 * writes them). Both malloc'd, spec->n_devices entries. A missing dir or
 * file, a file that is not ours, another kind, or one that cannot be
 * read or parsed defines nothing (0, all false). Reads only. */
int cdi_spec_compare(const char *dir, const struct cdi_spec *spec, bool **ret_defined,
                     bool **ret_same);

/* Remove cdiplug's own spec file file_name from dir, then its claim from
 * the record (replaced atomically; the dir is fsynced). *ret_removed says
 * whether a file was unlinked: false when the name is not claimed (then
 * nothing is touched), when the file is gone already, or when it is not a
 * regular file (someone else's: the claim goes, the file stays). */
int cdi_spec_remove(const char *dir, const char *file_name, bool *ret_removed);

enum cdi_conflict_type {
        CDI_CONFLICT_KIND,      /* the file defines one of our kinds */
        CDI_CONFLICT_DEVICE,    /* ...and one of our qualified device names */
        CDI_CONFLICT_UNCHECKED, /* could not be read or parsed: unknown */
};

struct cdi_conflict {
        enum cdi_conflict_type type;
        char *path;   /* "<dir>/<file>" */
        char *kind;   /* ours that clashes; NULL for UNCHECKED */
        char *device; /* "kind=name" for DEVICE, else NULL */
        int error;    /* negative errno for UNCHECKED (-EFBIG, -EBADMSG...) */
};

/* Other files in dirs (NULL-terminated, e.g. "/etc/cdi", "/var/run/cdi")
 * that define the same kind or the same qualified device names as specs:
 * runtimes then pick one by directory priority or reject the device, so
 * the daemon should warn. Only "*.json" and "*.yaml" are looked at, as by
 * consumers; files cdiplug owns are skipped, missing dirs too. JSON files
 * are parsed (at most 4 MiB); YAML files are only line-scanned for a
 * top-level "kind:" and so can only yield KIND entries. */
int cdi_find_conflicts(const char *const *dirs, const struct cdi_spec *specs, size_t n_specs,
                       struct cdi_conflict **ret, size_t *ret_n);
/* The same judgement on one file's text that the caller has read itself
 * (doctor reads inside a host root): path names it in the results and by
 * its ".json" or ".yaml" ending says how text is read. YAML text is
 * changed in place. */
int cdi_find_conflicts_in_text(const char *path, const struct cdi_spec *specs, size_t n_specs,
                               char *text, size_t len, struct cdi_conflict **ret, size_t *ret_n);
void cdi_conflicts_free(struct cdi_conflict *conflicts, size_t n); /* accepts NULL */

void cdi_spec_free(struct cdi_spec *spec); /* frees members, accepts NULL */
