/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA wire contract (proto/pluginregistration.proto, dra_v1*.proto,
 * dra_health_v1*.proto) against tests/fixtures/dra: upstream-encoded
 * messages, every field decoded and checked against the .txtpb, none left
 * unknown to our definitions, and re-encoding gives the upstream bytes; and
 * the whole schema (every field's number, label and type, enum values,
 * method paths) compared with the one rendered from the upstream .proto
 * files, so a wrong number or type fails even where the fixtures hold only
 * defaults. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dra_health_v1.pb-c.h"
#include "dra_health_v1alpha1.pb-c.h"
#include "dra_v1.pb-c.h"
#include "dra_v1beta1.pb-c.h"
#include "pluginregistration.pb-c.h"

/* The generated names carry the whole upstream package. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim V1Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device V1Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest V1PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse V1PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse V1PrepareClaim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest V1UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse V1UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesRequest
        V1beta1PrepareRequest;
#define V1_SHARE_ID_SET K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE___SHARE_ID_SHARE_ID
#define V1_SHARE_ID_NOT_SET K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE___SHARE_ID__NOT_SET

/* The messages are a few hundred bytes and schema.txt under 10 KiB: anything
 * past these is a wrong file. */
#define MESSAGE_MAX 4096
#define SCHEMA_MAX 65536

static uint8_t *fixture(const char *name, size_t max, size_t *ret_len) {
        char path[4096];
        int n = snprintf(path, sizeof(path), "%s/%s", DRA_FIXTURE_DIR, name);
        cr_assert(n > 0 && (size_t)n < sizeof(path), "fixture path for %s too long", name);
        FILE *f = fopen(path, "rbe");
        cr_assert_not_null(f, "fixture %s missing", path);
        struct stat st;
        cr_assert_eq(fstat(fileno(f), &st), 0, "stat %s", path);
        cr_assert(st.st_size >= 0 && (size_t)st.st_size <= max, "fixture %s: %lld bytes", path,
                  (long long)st.st_size);
        size_t len = (size_t)st.st_size;
        uint8_t *buf = malloc(len + 1);
        cr_assert_not_null(buf);
        cr_assert_eq(fread(buf, 1, len, f), len, "short read on %s", path);
        buf[len] = 0;
        fclose(f);
        *ret_len = len;
        return buf;
}

/* protobuf-c keeps fields it does not know and packs them back, so a field
 * number that differs from upstream could still round-trip byte for byte:
 * refuse any unknown field, in every nested message. */
/* NOLINTNEXTLINE(misc-no-recursion): as deep as the generated messages nest */
static void no_unknown_fields(const ProtobufCMessage *m) {
        const ProtobufCMessageDescriptor *d = m->descriptor;
        cr_assert_eq(m->n_unknown_fields, 0, "%s: %u field(s) unknown to our .proto", d->name,
                     m->n_unknown_fields);
        const char *base = (const char *)m;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                        continue;
                if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n;
                        ProtobufCMessage **v;
                        memcpy(&n, base + f->quantifier_offset, sizeof(n));
                        memcpy(&v, base + f->offset, sizeof(v));
                        for (size_t j = 0; j < n; j++)
                                no_unknown_fields(v[j]);
                } else {
                        /* A oneof member's pointer is valid only when selected. */
                        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                                uint32_t which;
                                memcpy(&which, base + f->quantifier_offset, sizeof(which));
                                if (which != f->id)
                                        continue;
                        }
                        ProtobufCMessage *sub;
                        memcpy(&sub, base + f->offset, sizeof(sub));
                        if (sub)
                                no_unknown_fields(sub);
                }
        }
}

static ProtobufCMessage *decode(const char *name, const ProtobufCMessageDescriptor *desc) {
        size_t len;
        uint8_t *buf = fixture(name, MESSAGE_MAX, &len);
        ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, buf);
        free(buf);
        cr_assert_not_null(m, "%s does not decode as %s", name, desc->name);
        no_unknown_fields(m);
        return m;
}

/* Re-encoding must give the upstream bytes exactly. protobuf-c holds a map
 * as its entries in wire order, so this holds for the maps too; the peer's
 * encoder may order entries differently (Go's may), which is why readers
 * of a map must never depend on entry order. */
static void same_bytes(const char *name, const ProtobufCMessage *m) {
        size_t len, plen = protobuf_c_message_get_packed_size(m);
        uint8_t *want = fixture(name, MESSAGE_MAX, &len);
        uint8_t *got = malloc(plen + 1);
        cr_assert_not_null(got);
        cr_assert_eq(protobuf_c_message_pack(m, got), plen);
        cr_assert_eq(plen, len, "%s: %zu bytes encoded, upstream has %zu", name, plen, len);
        cr_assert(memcmp(got, want, len) == 0, "%s: encoding differs from upstream", name);
        free(want);
        free(got);
}

static void check_and_free(const char *name, ProtobufCMessage *m) {
        same_bytes(name, m);
        protobuf_c_message_free_unpacked(m, NULL);
}

/* The two claims of the fixtures, in request order. (protoc-c names the
 * Claim field namespace_, since namespace is a C++ keyword.) */
static const struct {
        const char *ns, *uid, *name;
} claims[] = {
        { "default", "4f1c9a3e-7b2d-4c1e-9f0a-1b2c3d4e5f60", "web-0-serial" },
        { "batch", "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d", "job-7-ports" },
};

static void check_v1_claims(size_t n, V1Claim **c, size_t want) {
        cr_assert_eq(n, want);
        for (size_t i = 0; i < want; i++) {
                cr_assert_str_eq(c[i]->namespace_, claims[i].ns);
                cr_assert_str_eq(c[i]->uid, claims[i].uid);
                cr_assert_str_eq(c[i]->name, claims[i].name);
        }
}

Test(dra_proto, plugin_info) {
        Pluginregistration__PluginInfo *m = (Pluginregistration__PluginInfo *)decode(
                "plugin_info.bin", &pluginregistration__plugin_info__descriptor);
        cr_assert_str_eq(m->type, "DRAPlugin");
        cr_assert_str_eq(m->name, "cdiplug.example.com");
        cr_assert_str_eq(m->endpoint, "/var/lib/kubelet/plugins/cdiplug.example.com/dra.sock");
        cr_assert_eq(m->n_supported_versions, 2);
        cr_assert_str_eq(m->supported_versions[0], "v1.DRAPlugin");
        cr_assert_str_eq(m->supported_versions[1], "v1beta1.DRAPlugin");
        check_and_free("plugin_info.bin", &m->base);
}

Test(dra_proto, registration_status) {
        Pluginregistration__RegistrationStatus *m =
                (Pluginregistration__RegistrationStatus *)decode(
                        "registration_status.bin",
                        &pluginregistration__registration_status__descriptor);
        cr_assert_eq(m->plugin_registered, 0);
        cr_assert_str_eq(m->error, "plugin name cdiplug.example.com already registered");
        check_and_free("registration_status.bin", &m->base);
}

Test(dra_proto, node_prepare_request_v1) {
        V1PrepareRequest *m = (V1PrepareRequest *)decode(
                "node_prepare_request.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor);
        check_v1_claims(m->n_claims, m->claims, 2);
        check_and_free("node_prepare_request.bin", &m->base);
}

Test(dra_proto, node_prepare_request_v1beta1) {
        V1beta1PrepareRequest *m = (V1beta1PrepareRequest *)decode(
                "node_prepare_request_v1beta1.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor);
        cr_assert_eq(m->n_claims, 1);
        cr_assert_str_eq(m->claims[0]->namespace_, claims[0].ns);
        cr_assert_str_eq(m->claims[0]->uid, claims[0].uid);
        cr_assert_str_eq(m->claims[0]->name, claims[0].name);
        check_and_free("node_prepare_request_v1beta1.bin", &m->base);
}

Test(dra_proto, node_prepare_response_v1) {
        V1PrepareResponse *m = (V1PrepareResponse *)decode(
                "node_prepare_response.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor);
        cr_assert_eq(m->n_claims, 2);

        cr_assert_str_eq(m->claims[0]->key, claims[0].uid);
        V1PrepareClaim *ok = m->claims[0]->value;
        cr_assert_not_null(ok);
        cr_assert_str_eq(ok->error, "");
        cr_assert_eq(ok->n_devices, 1);
        V1Device *d = ok->devices[0];
        cr_assert_eq(d->n_request_names, 1);
        cr_assert_str_eq(d->request_names[0], "port");
        cr_assert_str_eq(d->pool_name, "node-1");
        cr_assert_str_eq(d->device_name, "ttyusb0");
        cr_assert_eq(d->n_cdi_device_ids, 1);
        cr_assert_str_eq(d->cdi_device_ids[0], "example.com/serial=ttyUSB0");
        cr_assert_eq(d->_share_id_case, V1_SHARE_ID_NOT_SET, "share_id is absent upstream");

        cr_assert_str_eq(m->claims[1]->key, claims[1].uid);
        V1PrepareClaim *bad = m->claims[1]->value;
        cr_assert_not_null(bad);
        cr_assert_eq(bad->n_devices, 0);
        cr_assert_str_eq(bad->error, "claim batch/job-7-ports: allocated device node-1/ttyusb9 "
                                     "is not served by this driver");
        check_and_free("node_prepare_response.bin", &m->base);
}

Test(dra_proto, node_prepare_response_v1_share_id) {
        V1PrepareResponse *m = (V1PrepareResponse *)decode(
                "node_prepare_response_share_id.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor);
        cr_assert_eq(m->n_claims, 1);
        cr_assert_str_eq(m->claims[0]->key, claims[0].uid);
        V1PrepareClaim *c = m->claims[0]->value;
        cr_assert_not_null(c);
        cr_assert_str_eq(c->error, "");
        cr_assert_eq(c->n_devices, 1);
        V1Device *d = c->devices[0];
        cr_assert_eq(d->n_request_names, 0);
        cr_assert_str_eq(d->pool_name, "node-1");
        cr_assert_str_eq(d->device_name, "fuse");
        cr_assert_eq(d->n_cdi_device_ids, 1);
        cr_assert_str_eq(d->cdi_device_ids[0], "example.com/fuse=fuse");
        cr_assert_eq(d->_share_id_case, V1_SHARE_ID_SET);
        cr_assert_str_eq(d->share_id, "5a6b7c8d");
        check_and_free("node_prepare_response_share_id.bin", &m->base);
}

Test(dra_proto, node_prepare_response_v1_share_id_set_but_empty) {
        /* Upstream's share_id is proto3 optional: set to "" it is still sent.
         * Our oneof stand-in must keep that presence both ways. */
        V1PrepareResponse *m = (V1PrepareResponse *)decode(
                "node_prepare_response_share_id_empty.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor);
        cr_assert_eq(m->n_claims, 1);
        cr_assert_str_eq(m->claims[0]->key, claims[0].uid);
        V1PrepareClaim *c = m->claims[0]->value;
        cr_assert_not_null(c);
        cr_assert_str_eq(c->error, "");
        cr_assert_eq(c->n_devices, 1);
        V1Device *d = c->devices[0];
        cr_assert_eq(d->n_request_names, 0);
        cr_assert_str_eq(d->pool_name, "node-1");
        cr_assert_str_eq(d->device_name, "fuse");
        cr_assert_eq(d->n_cdi_device_ids, 0);
        cr_assert_eq(d->_share_id_case, V1_SHARE_ID_SET, "an empty share_id is still present");
        cr_assert_str_eq(d->share_id, "");
        check_and_free("node_prepare_response_share_id_empty.bin", &m->base);
}

Test(dra_proto, node_unprepare_request_v1) {
        V1UnprepareRequest *m = (V1UnprepareRequest *)decode(
                "node_unprepare_request.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor);
        check_v1_claims(m->n_claims, m->claims, 1);
        check_and_free("node_unprepare_request.bin", &m->base);
}

Test(dra_proto, node_unprepare_response_v1) {
        V1UnprepareResponse *m = (V1UnprepareResponse *)decode(
                "node_unprepare_response.bin",
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor);
        cr_assert_eq(m->n_claims, 1);
        cr_assert_str_eq(m->claims[0]->key, claims[0].uid);
        /* An empty entry is on the wire (kubelet wants one per claim): it
         * must decode as present, not as a missing value. */
        cr_assert_not_null(m->claims[0]->value);
        cr_assert_str_eq(m->claims[0]->value->error, "");
        check_and_free("node_unprepare_response.bin", &m->base);
}

Test(dra_proto, node_watch_resources_response_v1alpha1) {
        V1alpha1__NodeWatchResourcesResponse *m = (V1alpha1__NodeWatchResourcesResponse *)decode(
                "node_watch_resources_response_v1alpha1.bin",
                &v1alpha1__node_watch_resources_response__descriptor);
        cr_assert_eq(m->n_devices, 2);
        V1alpha1__DeviceHealth *h = m->devices[0];
        cr_assert_not_null(h->device);
        cr_assert_str_eq(h->device->pool_name, "node-1");
        cr_assert_str_eq(h->device->device_name, "ttyusb0");
        cr_assert_eq(h->health, V1ALPHA1__HEALTH_STATUS__HEALTHY);
        cr_assert_eq(h->last_updated_time, 1764000000);
        cr_assert_eq(h->health_check_timeout_seconds, 30);
        cr_assert_str_eq(h->message, "");
        h = m->devices[1];
        cr_assert_not_null(h->device);
        cr_assert_str_eq(h->device->pool_name, "node-1");
        cr_assert_str_eq(h->device->device_name, "ttyusb1");
        cr_assert_eq(h->health, V1ALPHA1__HEALTH_STATUS__UNHEALTHY);
        cr_assert_eq(h->last_updated_time, 1764000005);
        cr_assert_eq(h->health_check_timeout_seconds, 30);
        cr_assert_str_eq(h->message, "device node /dev/ttyUSB1 is gone");
        check_and_free("node_watch_resources_response_v1alpha1.bin", &m->base);
}

Test(dra_proto, node_watch_resources_response_v1) {
        V1__NodeWatchResourcesResponse *m = (V1__NodeWatchResourcesResponse *)decode(
                "node_watch_resources_response_v1.bin",
                &v1__node_watch_resources_response__descriptor);
        cr_assert_eq(m->n_devices, 1);
        V1__DeviceHealth *h = m->devices[0];
        cr_assert_not_null(h->device);
        cr_assert_str_eq(h->device->pool_name, "node-1");
        cr_assert_str_eq(h->device->device_name, "ttyusb0");
        cr_assert_eq(h->health, V1__HEALTH_STATUS__HEALTHY);
        cr_assert_eq(h->last_updated_time, 1764000000);
        cr_assert_eq(h->health_check_timeout_seconds, 0);
        cr_assert_str_eq(h->message, "");
        check_and_free("node_watch_resources_response_v1.bin", &m->base);
}

/* The fixtures leave many fields at their defaults, which are not on the
 * wire, and some types share a wire form (bool and int32, int64 and
 * uint64). So the whole contract is also compared with schema.txt, rendered
 * from the upstream .proto files' descriptors: every message,
 * field (number, label, type), enum value and method path, rendered here
 * from our generated descriptors in the same form. protoc-c does not
 * record streaming, so NodeWatchResources being server-streaming is left to
 * proto/dra_health_*.proto. */
struct lines {
        char *v[256];
        size_t n;
};

__attribute__((format(printf, 2, 3))) static void add_line(struct lines *l, const char *fmt, ...) {
        cr_assert_lt(l->n, sizeof(l->v) / sizeof(l->v[0]), "schema has too many lines");
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        cr_assert(n > 0 && (size_t)n < sizeof(buf), "schema line too long");
        l->v[l->n] = strdup(buf);
        cr_assert_not_null(l->v[l->n]);
        l->n++;
}

static const char *type_name(ProtobufCType t) {
        switch (t) {
        case PROTOBUF_C_TYPE_INT32:
                return "int32";
        case PROTOBUF_C_TYPE_SINT32:
                return "sint32";
        case PROTOBUF_C_TYPE_SFIXED32:
                return "sfixed32";
        case PROTOBUF_C_TYPE_INT64:
                return "int64";
        case PROTOBUF_C_TYPE_SINT64:
                return "sint64";
        case PROTOBUF_C_TYPE_SFIXED64:
                return "sfixed64";
        case PROTOBUF_C_TYPE_UINT32:
                return "uint32";
        case PROTOBUF_C_TYPE_FIXED32:
                return "fixed32";
        case PROTOBUF_C_TYPE_UINT64:
                return "uint64";
        case PROTOBUF_C_TYPE_FIXED64:
                return "fixed64";
        case PROTOBUF_C_TYPE_FLOAT:
                return "float";
        case PROTOBUF_C_TYPE_DOUBLE:
                return "double";
        case PROTOBUF_C_TYPE_BOOL:
                return "bool";
        case PROTOBUF_C_TYPE_ENUM:
                return "enum";
        case PROTOBUF_C_TYPE_STRING:
                return "string";
        case PROTOBUF_C_TYPE_BYTES:
                return "bytes";
        case PROTOBUF_C_TYPE_MESSAGE:
                return "message";
        }
        return "?";
}

/* protoc-c has no proto3 optional; a oneof of one member is how protoc
 * itself represents one, so that is what "optional" means here. */
static const char *label_name(const ProtobufCMessageDescriptor *m,
                              const ProtobufCFieldDescriptor *f) {
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
                return "repeated";
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                unsigned members = 0;
                for (unsigned i = 0; i < m->n_fields; i++)
                        if ((m->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                            m->fields[i].quantifier_offset == f->quantifier_offset)
                                members++;
                return members == 1 ? "optional" : "oneof";
        }
        return f->label == PROTOBUF_C_LABEL_NONE ? "singular" : "proto2";
}

static void render_enum(struct lines *l, const ProtobufCEnumDescriptor *e) {
        add_line(l, "enum %s", e->name);
        for (unsigned i = 0; i < e->n_values; i++)
                add_line(l, "value %s.%s = %d", e->name, e->values[i].name, e->values[i].value);
}

/* protoc-c lists no nested types; the only ones here are map entries,
 * reached through their map field. */
static bool nested_in(const char *outer, const char *inner) {
        size_t n = strlen(outer);
        return strncmp(inner, outer, n) == 0 && inner[n] == '.';
}

/* NOLINTNEXTLINE(misc-no-recursion): as deep as the generated messages nest */
static void render_message(struct lines *l, const ProtobufCMessageDescriptor *m) {
        add_line(l, "message %s", m->name);
        for (unsigned i = 0; i < m->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &m->fields[i];
                const char *sub = NULL;
                if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                        sub = ((const ProtobufCMessageDescriptor *)f->descriptor)->name;
                else if (f->type == PROTOBUF_C_TYPE_ENUM)
                        sub = ((const ProtobufCEnumDescriptor *)f->descriptor)->name;
                add_line(l, "field %s.%s = %u %s %s%s%s", m->name, f->name, f->id, label_name(m, f),
                         type_name(f->type), sub ? " " : "", sub ? sub : "");
                if (f->type == PROTOBUF_C_TYPE_MESSAGE && nested_in(m->name, sub))
                        render_message(l, f->descriptor);
        }
}

static void render_service(struct lines *l, const ProtobufCServiceDescriptor *s) {
        for (unsigned i = 0; i < s->n_methods; i++)
                add_line(l, "rpc /%s/%s %s %s", s->name, s->methods[i].name,
                         s->methods[i].input->name, s->methods[i].output->name);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void render_ours(struct lines *l) {
        static const ProtobufCMessageDescriptor *const messages[] = {
                &pluginregistration__plugin_info__descriptor,
                &pluginregistration__registration_status__descriptor,
                &pluginregistration__registration_status_response__descriptor,
                &pluginregistration__info_request__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__device__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__claim__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resource_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__device__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_request__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resource_response__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__claim__descriptor,
                &v1alpha1__node_watch_resources_request__descriptor,
                &v1alpha1__device_identifier__descriptor,
                &v1alpha1__device_health__descriptor,
                &v1alpha1__node_watch_resources_response__descriptor,
                &v1__node_watch_resources_request__descriptor,
                &v1__device_identifier__descriptor,
                &v1__device_health__descriptor,
                &v1__node_watch_resources_response__descriptor,
        };
        static const ProtobufCServiceDescriptor *const services[] = {
                &pluginregistration__registration__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1__draplugin__descriptor,
                &k8s__io__kubelet__pkg__apis__dra__v1beta1__draplugin__descriptor,
                &v1alpha1__draresource_health__descriptor,
                &v1__draresource_health__descriptor,
        };
        for (size_t i = 0; i < sizeof(messages) / sizeof(messages[0]); i++)
                render_message(l, messages[i]);
        render_enum(l, &v1alpha1__health_status__descriptor);
        render_enum(l, &v1__health_status__descriptor);
        for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++)
                render_service(l, services[i]);
        qsort(l->v, l->n, sizeof(l->v[0]), cmp_str);
}

/* schema.txt, one entry per line; '#' lines are comments. */
static void read_upstream(struct lines *l) {
        size_t len;
        char *text = (char *)fixture("schema.txt", SCHEMA_MAX, &len);
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                if (line[0] != '#')
                        add_line(l, "%s", line);
        free(text);
        qsort(l->v, l->n, sizeof(l->v[0]), cmp_str);
}

Test(dra_proto, schema_matches_upstream) {
        struct lines ours = { .n = 0 }, up = { .n = 0 };
        render_ours(&ours);
        read_upstream(&up);
        size_t i = 0, j = 0, wrong = 0;
        while (i < ours.n || j < up.n) {
                int c = i == ours.n ? 1 : j == up.n ? -1 : strcmp(ours.v[i], up.v[j]);
                if (c < 0)
                        cr_log_error("ours only:     %s", ours.v[i++]);
                else if (c > 0)
                        cr_log_error("upstream only: %s", up.v[j++]);
                else
                        i++, j++;
                wrong += c != 0;
        }
        cr_assert_eq(wrong, 0, "%zu line(s) of the schema differ from upstream", wrong);
        for (i = 0; i < ours.n; i++)
                free(ours.v[i]);
        for (j = 0; j < up.n; j++)
                free(up.v[j]);
}
