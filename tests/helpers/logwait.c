/* SPDX-License-Identifier: Apache-2.0 */
#include "logwait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int file_has(const char *path, const char *needle) {
        FILE *f = fopen(path, "re");
        char *line = NULL;
        size_t cap = 0;
        int found = 0;

        if (!f)
                return 0;
        while (!found && getline(&line, &cap, f) >= 0)
                found = strstr(line, needle) != NULL;
        free(line);
        fclose(f);
        return found;
}

int log_wait(const char *path, const char *needle, int timeout_ms) {
        long long deadline = now_ms() + timeout_ms;
        int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        int r = -ETIMEDOUT;

        if (fd < 0)
                return -errno;
        /* Watched before the first look, so no write slips in between. */
        inotify_add_watch(fd, path, IN_MODIFY);
        for (;;) {
                char buf[4096];
                if (file_has(path, needle)) {
                        r = 0;
                        break;
                }
                long long left = deadline - now_ms();
                if (left <= 0)
                        break;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                /* Capped, in case the file was created after the watch. */
                poll(&p, 1, left < 100 ? (int)left : 100);
                while (read(fd, buf, sizeof(buf)) > 0)
                        ;
        }
        close(fd);
        return r;
}

unsigned log_count(const char *path, const char *needle) {
        FILE *f = fopen(path, "re");
        char *line = NULL;
        size_t cap = 0;
        unsigned n = 0;

        if (!f)
                return 0;
        while (getline(&line, &cap, f) >= 0)
                n += strstr(line, needle) != NULL;
        free(line);
        fclose(f);
        return n;
}

int log_wait_count(const char *path, const char *needle, unsigned n, int timeout_ms) {
        int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        long long deadline = now_ms() + timeout_ms;
        unsigned count;

        if (fd < 0)
                return -errno;
        /* Watched before the first count, so no write falls in between. */
        inotify_add_watch(fd, path, IN_MODIFY);
        for (;;) {
                char buf[4096];
                count = log_count(path, needle);
                if (count >= n)
                        break;
                long long left = deadline - now_ms();
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
                        count = log_count(path, needle);
                        break;
                }
                while (read(fd, buf, sizeof(buf)) > 0)
                        ;
        }
        close(fd);
        return count >= n ? (int)count : -ETIMEDOUT;
}
