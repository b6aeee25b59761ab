/* SPDX-License-Identifier: Apache-2.0 */
/* A second, independent reading of CDI names and specs, written from the
 * reference Go library (container-device-interface pkg/parser and the
 * spec's version rules) as the runtimes vendor it: the 0.5.x generation
 * (podman 4.3, containerd 1.7) and the 0.6+ one (containerd 2.x, CRI-O,
 * podman 5). Tests hold cdiplug's output against it, so it must not share
 * code with cdi/. */
#pragma once

#include <stdbool.h>

enum cdig_lib {
        CDIG_LIB_05 = 1 << 0, /* library 0.5.x: no '.' in the class, cdiVersion <= 0.5.0 */
        CDIG_LIB_06 = 1 << 1, /* library 0.6 and later */
};

/* NULL when the reference validator accepts the vendor or class, else its
 * complaint; "panic: ..." where Go would panic (one character). */
const char *cdig_vendor(const char *s);
const char *cdig_class(const char *s, enum cdig_lib lib);
const char *cdig_device_name(const char *s);
/* The annotation key name part, as the library's AnnotationKey checks it. */
const char *cdig_annotation_name(const char *s);

/* Which library generations load the spec text (JSON) without error: the
 * kind, every device name, and the written cdiVersion against the lowest
 * one the content needs. *ret_why (static text or NULL) says why the
 * newest generation refuses it. */
unsigned cdig_spec_readers(const char *json, const char **ret_why);
