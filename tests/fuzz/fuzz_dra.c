/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the DRA model's parsing and naming: the input as checkpoint text
 * (what decodes must encode, decode back to the same claims and encode to
 * the same text; what does not must say why), as a device ID (its name is
 * a DNS label, the same twice, and a valid label stays itself) and as a
 * resource name (its pool name is '/'-separated DNS subdomains within 253
 * bytes). Names stop at a NUL. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "dra.h"
#include "fuzz.h"

static bool alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The API's rules, written again here so the harness does not trust the
 * code it checks. */
static bool label(const char *s, size_t len) {
        if (len == 0 || len > 63 || !alnum(s[0]) || !alnum(s[len - 1]))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

static bool subdomains(const char *s) {
        size_t len = strlen(s), start = 0;
        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i <= len; i++)
                if (i == len || s[i] == '.' || s[i] == '/') {
                        if (!label(s + start, i - start))
                                return false;
                        start = i + 1;
                }
        return true;
}

static void checkpoint(const uint8_t *data, size_t size) {
        struct dra_claim *c = NULL, *back = NULL;
        size_t n = 0, n_back = 0, len, len2;
        char *msg = NULL, *text = NULL, *text2 = NULL;
        int r = dra_checkpoint_decode((const char *)data, size, &c, &n, &msg);

        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL || r == -ENOMEM);
                FUZZ_CHECK(r == -ENOMEM || (msg && *msg));
                free(msg);
                return;
        }
        FUZZ_CHECK(n <= DRA_CHECKPOINT_MAX_CLAIMS);
        FUZZ_CHECK(dra_checkpoint_encode(c, n, &text, &len, &msg) == 0);
        FUZZ_CHECK(dra_checkpoint_decode(text, len, &back, &n_back, &msg) == 0);
        FUZZ_CHECK(n_back == n);
        FUZZ_CHECK(dra_checkpoint_encode(back, n_back, &text2, &len2, &msg) == 0);
        FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0);
        free(text);
        free(text2);
        dra_claims_free(c, n);
        dra_claims_free(back, n_back);
}

static void device_name(const char *s) {
        char *name = NULL, *again = NULL;
        int r = dra_device_name(s, &name);

        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL && !*s);
                return;
        }
        FUZZ_CHECK(label(name, strlen(name)));
        FUZZ_CHECK(dra_device_name(s, &again) == 0 && strcmp(name, again) == 0);
        if (label(s, strlen(s)))
                FUZZ_CHECK(strcmp(s, name) == 0);
        free(again);
        free(name);
}

static void pool_name(const char *s) {
        char *pool = NULL;
        int r = dra_pool_name("node-1", s, &pool);

        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL || r == -ENAMETOOLONG);
                return;
        }
        FUZZ_CHECK(subdomains(pool));
        FUZZ_CHECK(strncmp(pool, "node-1/", 7) == 0);
        free(pool);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        checkpoint(data, size);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        device_name(s);
        pool_name(s);
        free(s);
        return 0;
}
