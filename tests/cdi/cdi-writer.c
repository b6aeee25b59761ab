/* SPDX-License-Identifier: Apache-2.0 */
/* Rewrites one spec forever, for test_cdi_crash to SIGKILL at random
 * moments. After each completed write it sends one byte on stdout, so the
 * test knows a complete spec must exist from then on.
 *
 * Each generation has a different device count (and so file size), and
 * records that count in the spec's env: a file mixing two generations, or
 * cut short, is caught by the test even when it happens to parse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdi.h"

#define WRITER_KIND "example.com/crash"
#define MAX_DEVICES 300

int main(int argc, char **argv) {
        static struct cdi_device devs[MAX_DEVICES];
        static char names[MAX_DEVICES][16];
        static struct cdi_node node = { .path = "/dev/null", .access.permissions = "rw" };
        char count_env[64], gen_env[64];
        char *env[] = { count_env, gen_env, NULL };
        struct cdi_spec spec = { .kind = WRITER_KIND, .devices = devs, .edits = { .env = env } };

        if (argc != 2) {
                fprintf(stderr, "usage: %s DIR\n", argv[0]);
                return 2;
        }
        for (size_t i = 0; i < MAX_DEVICES; i++) {
                if (snprintf(names[i], sizeof(names[i]), "dev%zu", i) >= (int)sizeof(names[i]))
                        return 1;
                devs[i].name = names[i];
                devs[i].edits.nodes = &node;
                devs[i].edits.n_nodes = 1;
        }
        for (unsigned long gen = 1;; gen++) {
                int r;

                spec.n_devices = 1 + (size_t)(gen * 7919 % MAX_DEVICES);
                if (snprintf(count_env, sizeof(count_env), "CDI_TEST_DEVICES=%zu",
                             spec.n_devices) >= (int)sizeof(count_env) ||
                    snprintf(gen_env, sizeof(gen_env), "CDI_TEST_GEN=%lu", gen) >=
                            (int)sizeof(gen_env))
                        return 1;
                r = cdi_spec_write(argv[1], &spec);
                if (r < 0) {
                        fprintf(stderr, "cdi-writer: write failed: %s\n", strerror(-r));
                        return 1;
                }
                if (write(STDOUT_FILENO, "w", 1) != 1 && errno != EINTR)
                        return 1;
        }
}
