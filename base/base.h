/* SPDX-License-Identifier: Apache-2.0 */
/* base: what every module of cdiplug shares, and nothing else. Ownership by
 * cleanup attributes, after systemd's alloc-util.h: a variable marked
 * _cleanup_free_ is freed when it goes out of scope, TAKE_PTR hands it over.
 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(base_freep)
#define _cleanup_close_ _cleanup_(base_closep)
#define _cleanup_closedir_ _cleanup_(base_closedirp)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand ownership over: returns the value and leaves NULL or -1 behind. */
#define TAKE_PTR(p) ({ __typeof__(p) _base_p = (p); (p) = NULL; _base_p; })
#define TAKE_FD(fd) ({ int _base_fd = (fd); (fd) = -1; _base_fd; })

static inline void base_freep(void *p)
{
        free(*(void **)p);
}

/* Cleanup runs on error paths after errno was set for the caller: keep it. */
static inline void base_closep(const int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void base_closedirp(DIR **d)
{
        if (*d) {
                int saved = errno;
                closedir(*d);
                errno = saved;
        }
}

/* Read the regular file path (relative to dfd; flags adds e.g. O_NOFOLLOW)
 * whole into a NUL-terminated buffer. -EINVAL when it is not a regular
 * file, -EFBIG past max bytes, else 0 or the errno of open/read. */
int base_read_file_at(int dfd, const char *path, int flags, size_t max, char **ret_buf,
                      size_t *ret_len);

/* FNV-1a of a string (hash.c): fixed forever, names are made from it. */
uint32_t base_fnv1a32(const char *s);
uint64_t base_fnv1a64(const char *s);
