/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz-replay: run a libFuzzer harness's LLVMFuzzerTestOneInput over files
 * and directories of corpus files, without libFuzzer, so every committed
 * corpus entry is a regression test in the normal (gcc) build. A crash or
 * a failed check in the harness aborts, which fails the test. Files are
 * replayed in name order so a failure is reproducible. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Corpus entries are small by design; a bigger file is a mistake. */
#define REPLAY_MAX_INPUT (1024 * 1024)

static int replay_file(const char *path) {
        FILE *f = fopen(path, "rbe");
        if (!f) {
                fprintf(stderr, "fuzz-replay: cannot open %s: %s\n", path, strerror(errno));
                return -1;
        }
        uint8_t *buf = malloc(REPLAY_MAX_INPUT + 1);
        size_t n = buf ? fread(buf, 1, REPLAY_MAX_INPUT + 1, f) : 0;
        int bad = !buf || ferror(f) || n > REPLAY_MAX_INPUT;
        fclose(f);
        if (bad) {
                fprintf(stderr, "fuzz-replay: cannot read %s (or larger than %d bytes)\n", path,
                        REPLAY_MAX_INPUT);
                free(buf);
                return -1;
        }
        /* An exact-size copy, so ASan sees reads past the input's end. */
        uint8_t *exact = malloc(n ? n : 1);
        if (!exact) {
                free(buf);
                return -1;
        }
        memcpy(exact, buf, n);
        free(buf);
        LLVMFuzzerTestOneInput(exact, n);
        free(exact);
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, size_t *count) {
        DIR *d = opendir(dir);
        if (!d) {
                fprintf(stderr, "fuzz-replay: cannot open %s: %s\n", dir, strerror(errno));
                return -1;
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char **nn = realloc(names, (n + 1) * sizeof(*names));
                if (!nn || !(nn[n] = strdup(de->d_name))) {
                        names = nn ? nn : names;
                        r = -1;
                        break;
                }
                names = nn;
                n++;
        }
        closedir(d);
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_str);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(dir) + strlen(names[i]) + 2;
                char *path = malloc(len);
                if (!path) {
                        r = -1;
                        break;
                }
                snprintf(path, len, "%s/%s", dir, names[i]);
                if (r == 0)
                        r = replay_file(path);
                if (r == 0)
                        (*count)++;
                free(path);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

int main(int argc, char **argv) {
        size_t count = 0;
        if (argc < 2) {
                fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
                return 2;
        }
        if (LLVMFuzzerInitialize)
                LLVMFuzzerInitialize(&argc, &argv);
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "fuzz-replay: %s: %s\n", argv[i], strerror(errno));
                        return 1;
                }
                int r = S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count)
                                            : (replay_file(argv[i]) < 0 ? -1 : (count++, 0));
                if (r < 0)
                        return 1;
        }
        /* An empty corpus would make this test pass without testing. */
        if (count == 0) {
                fprintf(stderr, "fuzz-replay: no corpus files in the arguments\n");
                return 1;
        }
        printf("fuzz-replay: %zu inputs replayed\n", count);
        return 0;
}
