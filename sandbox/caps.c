/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities: the daemon keeps none after start-up, in any set. The
 * table of capabilities kept while serving is empty on purpose: everything
 * that needs a capability (opening kubelet's directory, /dev, /sys) is
 * opened before sbx_lockdown().
 */
#include <cap-ng.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sbx-internal.h"

int sbx_keep_caps_across_setuid(bool on) {
        /* Leaving uid 0 clears the permitted set unless KEEPCAPS is on, and
         * only a permitted CAP_SETPCAP lets us empty the bounding set
         * afterwards. The flag itself is reset by the kernel on execve and
         * by us right after the drop. */
        if (prctl(PR_SET_KEEPCAPS, on ? 1 : 0, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* Make CAP_SETPCAP effective again if it is still permitted: a uid change
 * empties the effective set even with KEEPCAPS. */
static int raise_setpcap(void) {
        capng_get_caps_process();
        if (!capng_have_capability(CAPNG_PERMITTED, CAP_SETPCAP))
                return 0;
        if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE, CAP_SETPCAP) < 0)
                return -EINVAL;
        if (capng_apply(CAPNG_SELECT_CAPS) < 0)
                return -EPERM;
        return 0;
}

/* Re-read every set from the kernel, not from libcap-ng's cached state:
 * libcap-ng skips the bounding set quietly when CAP_SETPCAP is missing. */
static int verify_no_caps(const char **err_step) {
        struct __user_cap_header_struct hdr = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

        if (syscall(SYS_capget, &hdr, data) < 0) {
                *err_step = "verify capabilities (capget)";
                return -errno;
        }
        for (size_t i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
                if (data[i].effective || data[i].permitted || data[i].inheritable) {
                        *err_step = "verify capabilities (effective/permitted/inheritable)";
                        return -EPERM;
                }

        /* Walk up until the kernel says the number is past its last cap. */
        for (unsigned long cap = 0; cap < 64; cap++) {
                int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

                if (r < 0 && errno == EINVAL)
                        break;
                if (r != 0) {
                        *err_step = "verify capabilities (bounding)";
                        return r < 0 ? -errno : -EPERM;
                }
                r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
                /* EINVAL: a kernel before 4.3 has no ambient set at all. */
                if (r < 0 && errno == EINVAL)
                        continue;
                if (r != 0) {
                        *err_step = "verify capabilities (ambient)";
                        return r < 0 ? -errno : -EPERM;
                }
        }
        return 0;
}

int sbx_drop_caps(const char **err_step) {
        int r;

        r = raise_setpcap();
        if (r < 0) {
                *err_step = "raise CAP_SETPCAP";
                return r;
        }

        /* One set per capng_apply(), in this order: the bounding set needs
         * CAP_SETPCAP, which the last step takes away, and libcap-ng does
         * not promise an order within CAPNG_SELECT_ALL. */
        capng_clear(CAPNG_SELECT_ALL);
        if (capng_apply(CAPNG_SELECT_BOUNDS) < 0) {
                *err_step = "drop bounding capabilities";
                return -EPERM;
        }
        if (capng_apply(CAPNG_SELECT_AMBIENT) < 0) {
                *err_step = "drop ambient capabilities";
                return -EPERM;
        }
        /* Belt and braces for libcap-ng builds without ambient support;
         * EINVAL means a kernel with no ambient set. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
                *err_step = "drop ambient capabilities";
                return -errno;
        }
        if (capng_apply(CAPNG_SELECT_CAPS) < 0) {
                *err_step = "drop capabilities";
                return -EPERM;
        }

        r = sbx_keep_caps_across_setuid(false);
        if (r < 0) {
                *err_step = "clear keepcaps";
                return r;
        }
        return verify_no_caps(err_step);
}
