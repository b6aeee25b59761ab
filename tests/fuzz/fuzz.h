/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer harnesses in tests/fuzz/: the entry points and
 * a check that aborts (libFuzzer and fuzz-replay both report an abort as
 * a crash, with the input that caused it). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)
