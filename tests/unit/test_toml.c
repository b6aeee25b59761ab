/* SPDX-License-Identifier: Apache-2.0 */
/* toml: the runtime configs the doctor reads, as operators write them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "doctor-internal.h"

static struct toml_doc parse_ok(const char *text) {
        struct toml_doc doc = { 0 };
        unsigned line = 0;
        int r = toml_parse(text, strlen(text), &doc, &line);
        cr_assert_eq(r, 0, "parse failed (%d) at line %u", r, line);
        return doc;
}

#define GET(doc, ...) toml_get(&(doc), (const char *const[]){ __VA_ARGS__, NULL })

Test(toml, containerd_v2_cri_section) {
        struct toml_doc d = parse_ok(
                "# containerd 1.7\n"
                "version = 2\n"
                "root = \"/var/lib/containerd\"\n"
                "\n"
                "[plugins]\n"
                "  [plugins.\"io.containerd.grpc.v1.cri\"]  # the CRI plugin\n"
                "    enable_cdi = true\n"
                "    cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"
                "    device_ownership_from_security_context = false\n"
                "    [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
                "      SystemdCgroup = true\n");
        const struct toml_value *v = GET(d, "version");
        cr_assert(v && v->type == TOML_INT && v->i == 2);
        v = GET(d, "plugins", "io.containerd.grpc.v1.cri", "enable_cdi");
        cr_assert(v && v->type == TOML_BOOL && v->b);
        cr_assert_eq(v->line, 7);
        v = GET(d, "plugins", "io.containerd.grpc.v1.cri", "cdi_spec_dirs");
        cr_assert(v && v->type == TOML_STRV);
        cr_assert_str_eq(v->strv[0], "/etc/cdi");
        cr_assert_str_eq(v->strv[1], "/var/run/cdi");
        cr_assert_null(v->strv[2]);
        v = GET(d, "plugins", "io.containerd.grpc.v1.cri",
                "device_ownership_from_security_context");
        cr_assert(v && v->type == TOML_BOOL && !v->b);
        v = GET(d, "plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc",
                "options", "SystemdCgroup");
        cr_assert(v && v->b);
        cr_assert_null(GET(d, "plugins", "io.containerd.grpc.v1.cri", "missing"));
        toml_doc_free(&d);
}

Test(toml, dotted_keys_inline_tables_and_every_string_kind) {
        struct toml_doc d = parse_ok("version = 3\n"
                                     "plugins.'io.containerd.cri.v1.runtime'.enable_cdi = false\n"
                                     "[plugins.\"io.containerd.cri.v1.runtime\"]\n"
                                     "cdi_spec_dirs = [\n"
                                     "  '/etc/cdi',   # system\n"
                                     "  \"/run/c\\u0064i\",\n"
                                     "]\n"
                                     "inline = { a = 1, b.c = \"x\", d = { e = true } }\n"
                                     "ml = \"\"\"\n"
                                     "one \\\n"
                                     "   two\"\"\"\n"
                                     "lit = '''\n"
                                     "C:\\path'''\n"
                                     "mixed = [1, \"a\", [2, 3], { k = 1 }]\n"
                                     "when = 1979-05-27T07:32:00Z\n"
                                     "f = 6.5e-3\n"
                                     "[[plugins.\"io.containerd.cri.v1.runtime\".hooks]]\n"
                                     "name = \"first\"\n"
                                     "[[plugins.\"io.containerd.cri.v1.runtime\".hooks]]\n"
                                     "name = \"second\"\n");
        const char *rt = "io.containerd.cri.v1.runtime";
        const struct toml_value *v = GET(d, "plugins", rt, "enable_cdi");
        cr_assert(v && v->type == TOML_BOOL && !v->b);
        v = GET(d, "plugins", rt, "cdi_spec_dirs");
        cr_assert(v && v->type == TOML_STRV);
        cr_assert_str_eq(v->strv[0], "/etc/cdi");
        cr_assert_str_eq(v->strv[1], "/run/cdi", "\\u escapes decode");
        cr_assert_null(v->strv[2]);
        v = GET(d, "plugins", rt, "inline", "b", "c");
        cr_assert(v && v->type == TOML_STRING);
        cr_assert_str_eq(v->str, "x");
        v = GET(d, "plugins", rt, "inline", "d", "e");
        cr_assert(v && v->b);
        v = GET(d, "plugins", rt, "ml");
        cr_assert_str_eq(v->str, "one two", "a line-ending backslash joins lines");
        v = GET(d, "plugins", rt, "lit");
        cr_assert_str_eq(v->str, "C:\\path", "literal strings keep backslashes");
        cr_assert_eq(GET(d, "plugins", rt, "mixed")->type, TOML_OTHER);
        cr_assert_eq(GET(d, "plugins", rt, "when")->type, TOML_OTHER);
        cr_assert_eq(GET(d, "plugins", rt, "f")->type, TOML_OTHER);
        cr_assert_str_eq(GET(d, "plugins", rt, "hooks", "name")->str, "second",
                         "the last one wins");
        toml_doc_free(&d);
}

Test(toml, crio_conf_with_empty_array) {
        struct toml_doc d = parse_ok("[crio]\n[crio.runtime]\ncdi_spec_dirs = []\n"
                                     "device_ownership_from_security_context = true\r\n");
        const struct toml_value *v = GET(d, "crio", "runtime", "cdi_spec_dirs");
        cr_assert(v && v->type == TOML_STRV && v->strv && !v->strv[0]);
        cr_assert(GET(d, "crio", "runtime", "device_ownership_from_security_context")->b);
        toml_doc_free(&d);
}

Test(toml, malformed_documents_name_their_line) {
        static const struct {
                const char *text;
                unsigned line;
        } bad[] = {
                { "a = 1\nb = \"unterminated\n", 2 },
                { "a = 1\n\n[table\n", 3 },
                { "a = [1, 2\n", 2 },
                { "= 3\n", 1 },
                { "a = 1 b = 2\n", 1 },
                { "a = \"\\q\"\n", 1 },
                { "a = tru\xff\n", 1 },
                { "a = {x = 1\n", 1 },
                { "a = '''never closed\n\n", 3 },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct toml_doc d = { 0 };
                unsigned line = 0;
                int r = toml_parse(bad[i].text, strlen(bad[i].text), &d, &line);
                cr_assert_eq(r, -EBADMSG, "case %zu: %d", i, r);
                cr_assert_eq(line, bad[i].line, "case %zu: line %u", i, line);
        }
}

Test(toml, bounded) {
        /* Nesting deeper than the limit fails cleanly instead of recursing on. */
        char deep[200];
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof(deep), "a = ");
        for (int i = 0; i < 60; i++)
                deep[n++] = '[';
        deep[n] = '\0';
        struct toml_doc d = { 0 };
        cr_assert_eq(toml_parse(deep, n, &d, NULL), -E2BIG);
        cr_assert_eq(toml_parse("a = 1", TOML_MAX_BYTES + 1, &d, NULL), -E2BIG);
        cr_assert_eq(toml_load("/nonexistent/config.toml", &d, NULL), -ENOENT);
}

Test(toml, mangled_input_fails_cleanly) {
        /* Every prefix and thousands of byte-flipped copies of a real
         * config parse or fail with -EBADMSG/-E2BIG, never past the buffer
         * (run under ASan to see it). */
        static const char sample[] =
                "version = 3\nimports = ['/etc/containerd/conf.d/*.toml']\n"
                "[plugins.\"io.containerd.cri.v1.runtime\"]\n  enable_cdi = true\n"
                "  cdi_spec_dirs = [\"/etc/cdi\", '/var/run/cdi', ]\n  x = { a = [1, {b = \"\"\"q\\u00e9\"\"\"}], c.d = 'e' }\n"
                "[[plugins.\"io.containerd.cri.v1.runtime\".list]]\n  s = '''multi\nline'''\n";
        size_t len = sizeof(sample) - 1;
        char buf[sizeof(sample)];
        unsigned long long seed = 0x9e3779b97f4a7c15ull;

        for (size_t n = 0; n <= len; n++) {
                struct toml_doc d = { 0 };
                int r = toml_parse(sample, n, &d, NULL);
                cr_assert(r == 0 || r == -EBADMSG, "prefix %zu: %d", n, r);
                toml_doc_free(&d);
        }
        for (int i = 0; i < 20000; i++) {
                memcpy(buf, sample, len);
                for (int k = 0; k < 3; k++) {
                        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                        buf[(seed >> 33) % len] = "[]{}\"'=,.\\\n#x1 "[(seed >> 20) % 16];
                }
                struct toml_doc d = { 0 };
                int r = toml_parse(buf, len, &d, NULL);
                cr_assert(r == 0 || r == -EBADMSG || r == -E2BIG, "case %d: %d", i, r);
                toml_doc_free(&d);
        }
}
