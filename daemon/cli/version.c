/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug version. */
#include <grpc/grpc.h>
#include <stdio.h>

#include "config.h"

#include "cli-internal.h"

int cli_version(const struct dp_options *o) {
        (void)o;
        printf("cdiplug %s (grpc %s, device plugin API v1beta1)\n", CDIPLUG_VERSION,
               grpc_version_string());
        return 0;
}
