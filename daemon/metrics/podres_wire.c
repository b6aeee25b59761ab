/* SPDX-License-Identifier: Apache-2.0 */
/* A PodResources List answer read in place, off its wire bytes.
 *
 * protobuf-c decodes the whole answer into thousands of small objects,
 * five to ten times its size: 4 MiB of IDs of other resources became
 * tens of megabytes, all to find the few IDs that are ours. This walks
 * the protobuf wire format over the bytes as received and hands each
 * device set to a callback with pointers into those bytes: nothing is
 * allocated, whatever the answer's size, and the caller keeps what it
 * needs (our resources' IDs only).
 *
 * proto3 writes fields in any order (a pod's name may follow its
 * containers), so each message is walked once for its names, then once
 * for its children. Every length is checked against what is left; a
 * malformed answer is -EBADMSG, never a read past its end. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "metrics.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct field {
        uint32_t number;
        unsigned type;
        struct dp_podres_str val; /* WT_LEN: the bytes */
};

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                uint8_t b = *(*p)++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* The next field of [*p, end): 1, 0 at the end, or -EBADMSG. */
static int next_field(const uint8_t **p, const uint8_t *end, struct field *f) {
        uint64_t key, v;

        if (*p == end)
                return 0;
        if (varint(p, end, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
                return -EBADMSG;
        f->number = (uint32_t)(key >> 3);
        f->type = (unsigned)(key & 7);
        switch (f->type) {
        case WT_VARINT:
                return varint(p, end, &v) < 0 ? -EBADMSG : 1;
        case WT_I64:
        case WT_I32: {
                size_t n = f->type == WT_I64 ? 8 : 4;
                if ((size_t)(end - *p) < n)
                        return -EBADMSG;
                *p += n;
                return 1;
        }
        case WT_LEN:
                if (varint(p, end, &v) < 0 || v > (uint64_t)(end - *p))
                        return -EBADMSG;
                f->val.s = (const char *)*p;
                f->val.len = (size_t)v;
                *p += v;
                return 1;
        default: /* groups, long gone from protobuf, and nonsense */
                return -EBADMSG;
        }
}

/* The last value of string field number in msg (proto3: the last wins),
 * or an empty one. */
static int string_field(struct dp_podres_str msg, uint32_t number, struct dp_podres_str *ret) {
        const uint8_t *p = (const uint8_t *)msg.s, *end = p + msg.len;
        struct dp_podres_str s = { "", 0 };
        struct field f;
        int r;

        while ((r = next_field(&p, end, &f)) > 0)
                if (f.number == number) {
                        if (f.type != WT_LEN)
                                return -EBADMSG;
                        s = f.val;
                }
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

/* A DynamicResource (field 5 of a container): each ClaimResource (4) with
 * its driver (2), pool (3) and device (4) name. */
static int walk_dynamic(struct dp_podres_devices *dv, struct dp_podres_str dyn, dp_podres_fn fn,
                        void *arg) {
        const uint8_t *p = (const uint8_t *)dyn.s, *end = p + dyn.len;
        struct dp_podres_devices claim = *dv;
        struct field f;
        int r;

        claim.dynamic = true;
        claim.resource = (struct dp_podres_str){ "", 0 };
        while ((r = next_field(&p, end, &f)) > 0) {
                if (f.number != 4)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                claim.devices = f.val;
                r = string_field(f.val, 2, &claim.driver);
                if (r >= 0)
                        r = string_field(f.val, 3, &claim.pool);
                if (r >= 0)
                        r = string_field(f.val, 4, &claim.device);
                if (r >= 0)
                        r = fn(arg, &claim);
                if (r < 0)
                        return r;
        }
        return r;
}

static int walk_container(struct dp_podres_devices *dv, struct dp_podres_str ctr, bool all,
                          dp_podres_fn fn, void *arg) {
        const uint8_t *p = (const uint8_t *)ctr.s, *end = p + ctr.len;
        struct field f;
        int r;

        r = string_field(ctr, 1, &dv->container);
        while (r >= 0 && (r = next_field(&p, end, &f)) > 0) {
                if (f.number == 5 && all) {
                        if (f.type != WT_LEN)
                                return -EBADMSG;
                        r = walk_dynamic(dv, f.val, fn, arg);
                        continue;
                }
                if (f.number != 2)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                dv->devices = f.val;
                r = string_field(f.val, 1, &dv->resource);
                if (r >= 0)
                        r = fn(arg, dv);
        }
        return r;
}

static int walk_pod(struct dp_podres_str pod, bool all, dp_podres_fn fn, void *arg) {
        const uint8_t *p = (const uint8_t *)pod.s, *end = p + pod.len;
        struct dp_podres_devices dv = { 0 };
        struct field f;
        int r;

        r = string_field(pod, 1, &dv.pod);
        if (r >= 0)
                r = string_field(pod, 2, &dv.namespace_);
        while (r >= 0 && (r = next_field(&p, end, &f)) > 0) {
                if (f.number != 3)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                r = walk_container(&dv, f.val, all, fn, arg);
        }
        return r;
}

static int walk(const void *wire, size_t len, bool all, dp_podres_fn fn, void *arg) {
        const uint8_t *p = wire, *end = p + len;
        struct field f;
        int r;

        while ((r = next_field(&p, end, &f)) > 0) {
                if (f.number != 1)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                r = walk_pod(f.val, all, fn, arg);
                if (r < 0)
                        return r;
        }
        return r;
}

int dp_podres_next_id(const struct dp_podres_devices *dv, size_t *pos, struct dp_podres_str *ret) {
        const uint8_t *start = (const uint8_t *)dv->devices.s, *end = start + dv->devices.len;
        const uint8_t *p = start + *pos;
        struct field f;
        int r;

        while ((r = next_field(&p, end, &f)) > 0) {
                if (f.number != 2)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                *pos = (size_t)(p - start);
                *ret = f.val;
                return 1;
        }
        return r;
}

int dp_podres_next_cdi(const struct dp_podres_devices *dv, size_t *pos, struct dp_podres_str *ret) {
        const uint8_t *start = (const uint8_t *)dv->devices.s, *end = start + dv->devices.len;
        const uint8_t *p = start + *pos;
        struct field f;
        int r;

        if (!dv->dynamic)
                return 0;
        while ((r = next_field(&p, end, &f)) > 0) {
                if (f.number != 1)
                        continue;
                if (f.type != WT_LEN)
                        return -EBADMSG;
                r = string_field(f.val, 1, ret);
                if (r < 0)
                        return r;
                *pos = (size_t)(p - start);
                return 1;
        }
        return r;
}

bool dp_podres_str_eq(struct dp_podres_str s, const char *c) {
        return strlen(c) == s.len && memcmp(s.s, c, s.len) == 0;
}

int dp_podres_walk(const void *wire, size_t len, dp_podres_fn fn, void *arg) {
        return walk(wire, len, false, fn, arg);
}

int dp_podres_walk_all(const void *wire, size_t len, dp_podres_fn fn, void *arg) {
        return walk(wire, len, true, fn, arg);
}
