/* SPDX-License-Identifier: Apache-2.0 */
/* cdi-internal: helpers shared by the cdi/ sources only; never included
 * outside cdi/. */
#pragma once

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"
#include "cdi.h"

/* Spec files and the ownership record are read whole into memory; anything
 * bigger than this is not something we wrote nor a sane CDI spec. */
#define CDI_MAX_FILE_SIZE ((size_t)4 << 20)

/* Limits from SPEC.md's description of kinds: the vendor is a DNS
 * subdomain (at most 253 chars), the class at most 63 chars. Device IDs
 * have no spec limit; ours keeps names and qualified names bounded. */
#define CDI_MAX_VENDOR 253
#define CDI_MAX_CLASS 63
#define CDI_MAX_DEVICE_ID 1024
/* An annotation key's name part (after "cdi.k8s.io/"): a Kubernetes
 * label name, which the reference library's AnnotationKey also enforces. */
#define CDI_MAX_ANNOTATION_NAME 63
/* Room for cdi_device_name's "dev-" prefix and "-%08x" suffix. */
#define CDI_MAX_DEVICE_NAME (CDI_MAX_DEVICE_ID + 16)

/* Lives next to the specs; it starts with a dot and does not end in
 * ".json"/".yaml", so CDI consumers never load it. */
#define CDI_OWNER_RECORD ".cdiplug-owned"
/* Prefix of our temp files, same reasoning; recognisable for clean-up. */
#define CDI_TMP_PREFIX ".cdiplug-tmp."

static inline void cdi_json_deletep(cJSON **j) {
        cJSON_Delete(*j);
}

#define _cleanup_json_ _cleanup_(cdi_json_deletep)

/* names.c */
bool cdi_vendor_is_valid(const char *vendor, size_t len);
bool cdi_class_is_valid(const char *class_, size_t len);

/* file.c */
int cdi_read_file_at(int dfd, const char *name, bool nofollow, char **ret_buf, size_t *ret_len);
