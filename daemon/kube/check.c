/* SPDX-License-Identifier: Apache-2.0 */
/* kube_kubeconfig_check: the kubeconfig read for doctor, by the same
 * parser serve uses, so the two can never disagree on what is valid. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"

int kube_kubeconfig_check(const char *kubeconfig, char **ret_server, char **err_msg) {
        struct kube_creds c = { 0 };
        struct kube_error e = { { 0 } };
        char *server;
        int r;

        r = kube_creds_kubeconfig(kubeconfig, &c, &e);
        if (r < 0) {
                *err_msg = strdup(e.msg[0] ? e.msg : strerror(-r));
                kube_creds_clear(&c);
                return *err_msg ? r : -ENOMEM;
        }
        server = strdup(c.server);
        kube_creds_clear(&c);
        if (!server)
                return -ENOMEM;
        *ret_server = server;
        return 0;
}
