/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi internals: the certificates. */
#pragma once

#include <openssl/ssl.h>

/* A new CA (written to ca_path as PEM) and a server certificate signed by
 * it for 127.0.0.1 and localhost, loaded into a new server SSL_CTX.
 * Aborts on failure. */
SSL_CTX *fakeapi_tls_make(const char *ca_path);
