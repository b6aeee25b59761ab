/* SPDX-License-Identifier: Apache-2.0 */
/* faketree: build fake /dev and /sys trees in a temp dir, for tests that
 * pass the result as a host root.
 *
 * Paths are relative to the tree's root (a leading '/' is ignored); missing
 * parent directories are created. Functions return 0 or a negative errno.
 * Only char/block nodes are devices to cdiplug; ft_chrdev makes one where
 * the test may call mknod (root outside a user namespace).
 */
#pragma once

/* A fresh directory under $TMPDIR (or /tmp); malloc'd path, NULL on error. */
char *ft_new(void);
/* Remove the tree and free root; accepts NULL. */
void ft_free(char *root);

int ft_dir(const char *root, const char *path);
/* content may be NULL for an empty file. */
int ft_file(const char *root, const char *path, const char *content);
int ft_symlink(const char *root, const char *path, const char *target);
int ft_chrdev(const char *root, const char *path, unsigned major, unsigned minor);
/* Numbers for a fake node that is no other fake node made in this process:
 * one device node is one device to cdiplug, so fake devices need distinct
 * numbers. Char majors 60-63 are reserved for local/experimental use
 * (the kernel's devices.txt): no driver answers them, an open fails with
 * ENXIO, so nothing reaches hardware. */
void ft_next_devnum(unsigned *ret_major, unsigned *ret_minor);
int ft_fifo(const char *root, const char *path);
/* root + "/" + path, malloc'd; NULL on error. */
char *ft_path(const char *root, const char *path);
