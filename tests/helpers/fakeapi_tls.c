/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi's certificates: a CA and a server certificate for 127.0.0.1 and
 * localhost (and fakeapi.test, for a test that maps that name itself),
 * made in memory with OpenSSL at test time (P-256 keys: quick
 * to make) and written as PEM files for the client under test. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakeapi.h"
#include "fakeapi_tls.h"

#define MUST(c)                                                                                    \
        do {                                                                                       \
                if (!(c)) {                                                                        \
                        fprintf(stderr, "fakeapi_tls: %s failed (%s:%d)\n", #c, __FILE__,          \
                                __LINE__);                                                         \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;

        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        MUST(ext);
        MUST(X509_add_ext(cert, ext, -1) == 1);
        X509_EXTENSION_free(ext);
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       long serial) {
        X509 *c = X509_new();
        X509_NAME *name;

        MUST(c);
        MUST(X509_set_version(c, 2) == 1);
        MUST(ASN1_INTEGER_set(X509_get_serialNumber(c), serial) == 1);
        MUST(X509_gmtime_adj(X509_getm_notBefore(c), -3600));
        MUST(X509_gmtime_adj(X509_getm_notAfter(c), 86400));
        MUST(X509_set_pubkey(c, key) == 1);
        name = X509_get_subject_name(c);
        MUST(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                        0) == 1);
        MUST(X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) == 1);
        if (!issuer) {
                add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE");
                add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign");
                add_ext(c, c, NID_subject_key_identifier, "hash");
        } else {
                add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE");
                add_ext(c, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
                add_ext(c, issuer, NID_ext_key_usage, "serverAuth");
                add_ext(c, issuer, NID_subject_alt_name,
                        "IP:127.0.0.1,DNS:localhost,DNS:fakeapi.test");
                add_ext(c, issuer, NID_authority_key_identifier, "keyid");
        }
        MUST(X509_sign(c, issuer_key, EVP_sha256()) > 0);
        return c;
}

static void write_cert(const char *path, X509 *c) {
        FILE *fp = fopen(path, "we");

        MUST(fp);
        MUST(PEM_write_X509(fp, c) == 1);
        MUST(fclose(fp) == 0);
}

SSL_CTX *fakeapi_tls_make(const char *ca_path) {
        EVP_PKEY *ca_key = EVP_EC_gen("P-256");
        EVP_PKEY *srv_key = EVP_EC_gen("P-256");
        X509 *ca, *srv;
        SSL_CTX *ctx;

        MUST(ca_key && srv_key);
        ca = make_cert(ca_key, "fakeapi-ca", NULL, ca_key, 1);
        srv = make_cert(srv_key, "fakeapi", ca, ca_key, 2);
        write_cert(ca_path, ca);

        ctx = SSL_CTX_new(TLS_server_method());
        MUST(ctx);
        MUST(SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1);
        MUST(SSL_CTX_use_certificate(ctx, srv) == 1);
        MUST(SSL_CTX_use_PrivateKey(ctx, srv_key) == 1);
        MUST(SSL_CTX_add_extra_chain_cert(ctx, X509_dup(ca)) == 1);
        X509_free(ca);
        X509_free(srv);
        EVP_PKEY_free(ca_key);
        EVP_PKEY_free(srv_key);
        return ctx;
}

char *fakeapi_write_kubeconfig(const struct fakeapi *f, const char *dir, const char *token) {
        char *path = NULL, *token_path = NULL, *text = NULL;
        FILE *fp;
        bool ok;

        if (asprintf(&token_path, "%s/token", dir) < 0)
                return NULL;
        fp = fopen(token_path, "we");
        free(token_path);
        if (!fp)
                return NULL;
        ok = fprintf(fp, "%s\n", token) > 0;
        ok = fclose(fp) == 0 && ok;
        if (!ok || asprintf(&path, "%s/kubeconfig", dir) < 0)
                return NULL;
        if (asprintf(&text,
                     "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                     "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                     "clusters:\n- name: c\n  cluster:\n    server: %s\n"
                     "    certificate-authority: %s\n"
                     "users:\n- name: u\n  user:\n    tokenFile: token\n",
                     fakeapi_url(f), fakeapi_ca_file(f)) < 0) {
                free(path);
                return NULL;
        }
        fp = fopen(path, "we");
        ok = fp && fputs(text, fp) >= 0;
        ok = fp && fclose(fp) == 0 && ok;
        free(text);
        if (!ok) {
                free(path);
                return NULL;
        }
        return path;
}
