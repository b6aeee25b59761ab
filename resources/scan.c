/* SPDX-License-Identifier: Apache-2.0 */
/* One selector's scan: which file finds the devices of each kind. Both
 * res_discover (for the devices) and the explanations (for the misses)
 * come here, so they run the same rules. */
#include <errno.h>

#include "res-internal.h"

int res_discover_one(int rootfd, const struct res_selector *sel, size_t idx, struct res_devvec *out,
                     struct base_strvec *notes, struct res_misses *misses) {
        switch (sel->kind) {
        case RES_SEL_PATH:
        case RES_SEL_PATHS:
                return res_discover_paths(rootfd, sel, idx, out, notes, misses);
        case RES_SEL_USB:
                return res_discover_usb(rootfd, sel, idx, out, notes, misses);
        case RES_SEL_PCI:
                return res_discover_pci(rootfd, sel, idx, out, notes, misses);
        }
        return -EINVAL;
}
