/* SPDX-License-Identifier: Apache-2.0 */
/* resources: every way a "match" entry can be wrong names the key. */
#include <errno.h>

#include "../resources/res_test.h"

struct bad {
        const char *json;
        const char *field;
        const char *msg_part; /* substring of the message */
};

static const struct bad bad_entries[] = {
        { "[]", "", "object" },
        { "\"/dev/x\"", "", "object" },
        { "{}", "", "needs one of" },
        { "{\"env\": {\"A\": \"b\"}}", "", "needs one of" },
        { "{\"path\": \"/dev/x\", \"bogus\": 1}", "bogus", "unknown key" },
        { "{\"path\": \"/dev/x\", \"path\": \"/dev/y\"}", "path", "duplicate" },
        /* A duplicate is found before any value is read, as in the config:
         * the one check (res_json_duplicate_key) for every object. */
        { "{\"path\": 5, \"path\": \"/dev/y\"}", "path", "duplicate" },
        { "{\"usb\": {\"vendor\": \"zz\", \"vendor\": \"046d\"}}", "usb.vendor", "duplicate" },
        { "{\"pci\": {\"class\": \"03\", \"class\": 3}}", "pci.class", "duplicate" },
        { "{\"path\": \"/dev/x\", \"env\": {\"A\": 1, \"A\": \"b\"}}", "env.A", "duplicate" },
        { "{\"path\": \"/dev/x\", \"attrs\": {\"a\": \"\", \"a\": \"b\"}}", "attrs.a",
          "duplicate" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": 5, \"hostPath\": \"/a\", "
          "\"containerPath\": \"/b\"}]}",
          "mounts[0].hostPath", "duplicate" },
        { "{\"path\": \"/dev/x\", \"usb\": {\"vendor\": \"1\"}}", "usb", "only one" },
        { "{\"path\": 5}", "path", "string" },
        { "{\"path\": \"\"}", "path", "empty" },
        { "{\"path\": \"dev/x\"}", "path", "absolute" },
        { "{\"path\": \"/dev/../etc/x\"}", "path", ".." },
        { "{\"path\": \"/dev/./x\"}", "path", ".." },
        { "{\"path\": \"/\"}", "path", "not end in" },
        { "{\"path\": \"/dev/dri/\"}", "path", "not end in" },
        { "{\"paths\": \"/dev/x\"}", "paths", "array" },
        { "{\"paths\": []}", "paths", "empty" },
        { "{\"paths\": [\"/dev/a\", 3]}", "paths[1]", "string" },
        { "{\"paths\": [\"/dev/a\", \"rel\"]}", "paths[1]", "absolute" },
        { "{\"usb\": \"046d\"}", "usb", "object" },
        { "{\"usb\": {}}", "usb.vendor", "required" },
        { "{\"usb\": {\"product\": \"0825\"}}", "usb.vendor", "required" },
        { "{\"usb\": {\"vendor\": \"zz\"}}", "usb.vendor", "hex" },
        { "{\"usb\": {\"vendor\": \"12345\"}}", "usb.vendor", "hex" },
        { "{\"usb\": {\"vendor\": \"\"}}", "usb.vendor", "hex" },
        { "{\"usb\": {\"vendor\": 1133}}", "usb.vendor", "string" },
        { "{\"usb\": {\"vendor\": \"046d\", \"product\": \"08 5\"}}", "usb.product", "hex" },
        { "{\"usb\": {\"vendor\": \"046d\", \"serial\": \"\"}}", "usb.serial", "empty" },
        { "{\"usb\": {\"vendor\": \"046d\", \"serial\": 7}}", "usb.serial", "string" },
        { "{\"usb\": {\"vendor\": \"046d\", \"bus\": 1}}", "usb.bus", "unknown key" },
        { "{\"pci\": {}}", "pci", "at least one" },
        { "{\"pci\": []}", "pci", "object" },
        { "{\"pci\": {\"vendor\": 4318}}", "pci.vendor", "string" },
        { "{\"pci\": {\"device\": \"0xg0\"}}", "pci.device", "hex" },
        { "{\"pci\": {\"class\": \"0x1030000\"}}", "pci.class", "hex" },
        { "{\"pci\": {\"class_mask\": \"ff0000\"}}", "pci.class_mask", "class" },
        { "{\"pci\": {\"class\": \"03\", \"class_mask\": \"x\"}}", "pci.class_mask", "hex" },
        { "{\"pci\": {\"driver\": \"\"}}", "pci.driver", "empty" },
        { "{\"pci\": {\"driver\": \"../vfio-pci\"}}", "pci.driver", "driver name" },
        { "{\"pci\": {\"vendor\": \"10de\", \"slot\": \"1\"}}", "pci.slot", "unknown key" },
        { "{\"path\": \"/dev/x\", \"env\": []}", "env", "object" },
        { "{\"path\": \"/dev/x\", \"env\": {\"A\": 1}}", "env.A", "string" },
        { "{\"path\": \"/dev/x\", \"env\": {\"A=B\": \"c\"}}", "env.A=B", "name" },
        { "{\"path\": \"/dev/x\", \"env\": {\"\": \"c\"}}", "env.", "name" },
        { "{\"path\": \"/dev/x\", \"mounts\": {}}", "mounts", "array" },
        { "{\"path\": \"/dev/x\", \"mounts\": [\"/a\"]}", "mounts[0]", "object" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": \"/a\"}]}", "mounts[0]",
          "containerPath" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"containerPath\": \"/a\"}]}", "mounts[0]",
          "hostPath" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": \"/a\", \"containerPath\": \"/b\"},"
          " {\"hostPath\": \"a\", \"containerPath\": \"/b\"}]}",
          "mounts[1].hostPath", "absolute" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": \"/a\", \"containerPath\": 1}]}",
          "mounts[0].containerPath", "string" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": \"/a\", \"containerPath\": \"/b\","
          " \"readOnly\": \"yes\"}]}",
          "mounts[0].readOnly", "true or false" },
        { "{\"path\": \"/dev/x\", \"mounts\": [{\"hostPath\": \"/a\", \"containerPath\": \"/b\","
          " \"type\": \"bind\"}]}",
          "mounts[0].type", "unknown key" },
        { "{\"path\": \"/dev/x\", \"permissions\": 7}", "permissions", "string" },
        { "{\"path\": \"/dev/x\", \"permissions\": \"\"}", "permissions", "empty" },
        { "{\"path\": \"/dev/x\", \"permissions\": \"rx\"}", "permissions", "rwm" },
        { "{\"path\": \"/dev/x\", \"permissions\": \"rr\"}", "permissions", "rwm" },
};

Test(resources_selectors, each_error_names_its_field) {
        for (size_t i = 0; i < sizeof(bad_entries) / sizeof(bad_entries[0]); i++) {
                const struct bad *b = &bad_entries[i];
                cJSON *j = cJSON_Parse(b->json);
                cr_assert_not_null(j, "test JSON %s", b->json);
                struct res_selector *sel = (struct res_selector *)(uintptr_t)0x1;
                struct base_field_error e = { 0 };
                int r = res_selector_parse(j, &sel, &e);
                const char *field = e.field, *msg = e.msg;
                cr_expect_eq(r, -EINVAL, "%s: want -EINVAL, got %d", b->json, r);
                cr_expect(sel == (struct res_selector *)(uintptr_t)0x1, "%s: ret written", b->json);
                if (r == -EINVAL) {
                        cr_assert_not_null(field, "%s", b->json);
                        cr_assert_not_null(msg, "%s", b->json);
                        cr_expect_str_eq(field, b->field, "%s: field", b->json);
                        cr_expect(strstr(msg, b->msg_part), "%s: message \"%s\" lacks \"%s\"",
                                  b->json, msg, b->msg_part);
                }
                base_field_error_clear(&e);
                cJSON_Delete(j);
        }
}

Test(resources_selectors, valid_entries_parse) {
        const char *good[] = {
                "{\"path\": \"/dev/ttyUSB*\"}",
                "{\"path\": \"/dev/serial/by-id/usb-[A-Z]*\", \"permissions\": \"rwm\"}",
                "{\"paths\": [\"/dev/dri/card*\", \"/dev/dri/renderD*\"]}",
                "{\"usb\": {\"vendor\": \"046d\"}}",
                "{\"usb\": {\"vendor\": \"0x046D\", \"product\": \"0825\", \"serial\": \"A1\"}}",
                "{\"pci\": {\"vendor\": \"10de\", \"device\": \"1db6\"}}",
                "{\"pci\": {\"class\": \"0x030000\", \"class_mask\": \"0xff0000\"}}",
                "{\"pci\": {\"driver\": \"vfio-pci\"}, \"env\": {}, \"mounts\": []}",
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                cJSON *j = cJSON_Parse(good[i]);
                cr_assert_not_null(j);
                struct res_selector *sel = NULL;
                struct base_field_error e = { 0 };
                int r = res_selector_parse(j, &sel, &e);
                cr_expect_eq(r, 0, "%s: %d %s: %s", good[i], r, e.field ? e.field : "",
                             e.msg ? e.msg : "");
                cr_expect_not_null(sel);
                res_selector_free(sel);
                cJSON_Delete(j);
        }
        res_selector_free(NULL);
}
