/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: what Dynamic Resource Allocation needs, for a config with DRA
 * resources: the kubelet's plugin registry and plugin dirs (taken as
 * given, like the kubelet dir), and the API server credentials serve
 * would use. The credentials are the daemon's own, not the host's: they
 * are looked for in doctor's own file system and environment, never under
 * --host-root, and a token is opened and measured, never read. */
#include "doctor-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "dra.h"
#include "kube.h"
#include "log.h"

/* Where a pod's service account credentials are mounted (the kubelet's
 * projected volume; client-go's rest.InClusterConfig reads the same). */
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Whether uid/gid may read what st describes, with no capability (serve
 * holds none once it re-reads a rotated token): mode bits only. */
static bool can_read(const struct stat *st, uid_t uid, gid_t gid) {
        mode_t r = st->st_uid == uid ? S_IRUSR : st->st_gid == gid ? S_IRGRP : S_IROTH;
        return st->st_mode & r;
}

static bool has_dra_resources(const struct cfg_config *cfg) {
        for (size_t i = 0; i < cfg->n_resources; i++)
                if (cfg->resources[i].api == CFG_API_DRA)
                        return true;
        return false;
}

/* The plugin registry: the kubelet makes it when it starts and watches it
 * for registration sockets; serve puts <driver>-reg.sock there. */
static void check_registry(struct doc_ctx *c, const char *root) {
        _cleanup_free_ char *dir = NULL;
        struct stat st;

        if (xasprintf(&dir, "%s/plugins_registry", root) < 0) {
                c->oom = true;
                return;
        }
        if (stat(dir, &st) < 0)
                doc_add(c, "dra", DOC_PROBLEM,
                        "is the kubelet running on this node (1.34 or later for DRA)? Otherwise "
                        "pass its root dir (its --root-dir) with --kubelet-root",
                        "%s: %s: the kubelet's plugin registry is not there, cdiplug cannot "
                        "register its DRA driver",
                        dir, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
                doc_add(c, "dra", DOC_PROBLEM, "pass the kubelet's root dir with --kubelet-root",
                        "%s is not a directory", dir);
        else if (!doc_can_write(&st, c->uid, c->gid, true))
                doc_add(c, "dra", DOC_PROBLEM,
                        "serve as uid 0 (no \"user\"), or give the user write access to it",
                        "%s is not writable by uid %u gid %u without capabilities: cdiplug cannot "
                        "create its registration socket",
                        dir, (unsigned)c->uid, (unsigned)c->gid);
        else
                doc_add(c, "dra", DOC_OK, NULL, "%s: the kubelet's plugin registry, writable", dir);
}

/* <root>/plugins/<driver> holds the DRA socket and the checkpoint; serve
 * makes it when the plugins dir lets it. */
static void check_plugins(struct doc_ctx *c, const char *root) {
        _cleanup_free_ char *dir = NULL, *mine = NULL;
        struct stat st;

        if (xasprintf(&dir, "%s/plugins", root) < 0 ||
            xasprintf(&mine, "%s/%s", dir, c->cfg->dra_driver) < 0) {
                c->oom = true;
                return;
        }
        if (stat(mine, &st) == 0) {
                if (!S_ISDIR(st.st_mode))
                        doc_add(c, "dra", DOC_PROBLEM, "remove it; serve makes the directory",
                                "%s is not a directory", mine);
                else if (!doc_can_write(&st, c->uid, c->gid, true))
                        doc_add(c, "dra", DOC_PROBLEM,
                                "serve as uid 0 (no \"user\"), or chown it to the user",
                                "%s is not writable by uid %u gid %u without capabilities: "
                                "cdiplug cannot create its DRA socket and checkpoint there",
                                mine, (unsigned)c->uid, (unsigned)c->gid);
                else
                        doc_add(c, "dra", DOC_OK, NULL,
                                "%s: writable, for the DRA socket and the checkpoint", mine);
                return;
        }
        if (stat(dir, &st) < 0)
                doc_add(c, "dra", DOC_PROBLEM, "create it: mkdir -p the path, mode 0750",
                        "%s: %s: cdiplug cannot make %s for its DRA socket", dir, strerror(errno),
                        mine);
        else if (!S_ISDIR(st.st_mode))
                doc_add(c, "dra", DOC_PROBLEM, "pass the kubelet's root dir with --kubelet-root",
                        "%s is not a directory", dir);
        else if (!doc_can_write(&st, c->uid, c->gid, true))
                doc_add(c, "dra", DOC_PROBLEM,
                        "create it as root (mkdir, then chown it to the user), or serve as uid 0",
                        "%s is missing, and %s is not writable by uid %u gid %u: cdiplug cannot "
                        "make it",
                        mine, dir, (unsigned)c->uid, (unsigned)c->gid);
        else
                doc_add(c, "dra", DOC_OK, NULL, "%s: writable; serve makes %s in it", dir, mine);
}

/* The checkpoint of prepared claims, shared by the instances of a rolling
 * update: one that does not read stops every Prepare and Unprepare (serve
 * never writes over it: another instance may hold claims only it
 * records), so a person must decide. */
static void check_checkpoint(struct doc_ctx *c, const char *root) {
        _cleanup_free_ char *path = NULL, *text = NULL, *msg = NULL;
        struct dra_claim *claims = NULL;
        size_t len = 0, n = 0;
        int r;

        if (xasprintf(&path, "%s/plugins/%s/" DRA_CHECKPOINT_FILE, root, c->cfg->dra_driver) < 0) {
                c->oom = true;
                return;
        }
        r = base_read_file_at(AT_FDCWD, path, O_NOFOLLOW, DRA_CHECKPOINT_MAX_BYTES, &text, &len);
        if (r == -ENOENT) {
                doc_add(c, "dra", DOC_OK, NULL, "%s: none yet, no claim prepared", path);
                return;
        }
        if (r == -EACCES || r == -EPERM) {
                doc_add(c, "dra", DOC_WARN, "run doctor as root to read it", "%s: %s", path,
                        strerror(-r));
                return;
        }
        if (r >= 0)
                r = dra_checkpoint_decode(text, len, &claims, &n, &msg);
        if (r == -ENOMEM) {
                c->oom = true;
                return;
        }
        if (r < 0) {
                doc_add(c, "dra", DOC_PROBLEM,
                        "restore a good copy if there is one; otherwise move it aside (mv it to "
                        "checkpoint.json.bad), which forgets every prepared claim: the kubelet "
                        "prepares the claims of running pods again when it restarts, and an "
                        "Unprepare of a claim not in the file succeeds",
                        "%s is corrupt (%s): every cdiplug instance on this node fails each "
                        "Prepare and Unprepare until it reads again, and none writes over it",
                        path, msg ? msg : strerror(-r));
                return;
        }
        doc_add(c, "dra", DOC_OK, NULL, "%s: reads, %zu prepared claims", path, n);
        dra_claims_free(claims, n);
}

/* A credentials file: there, a regular file, not empty, readable by the
 * serving identity. Opened (so a permission doctor lacks shows) but never
 * read: it may hold a token. true when fine, having said so. */
static bool check_secret_file(struct doc_ctx *c, const char *path, const char *what,
                              const char *fix) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0) {
                doc_add(c, "dra", DOC_PROBLEM, fix, "%s %s cannot be read: %s", what, path,
                        strerror(errno));
                return false;
        }
        if (!S_ISREG(st.st_mode)) {
                doc_add(c, "dra", DOC_PROBLEM, fix, "%s %s is not a regular file", what, path);
                return false;
        }
        if (st.st_size == 0) {
                doc_add(c, "dra", DOC_PROBLEM, fix, "%s %s is empty", what, path);
                return false;
        }
        if (!can_read(&st, c->uid, c->gid)) {
                doc_add(c, "dra", DOC_PROBLEM,
                        "serve as its owner, or make it readable by the serving user's group",
                        "%s %s is not readable by uid %u gid %u without capabilities", what, path,
                        (unsigned)c->uid, (unsigned)c->gid);
                return false;
        }
        return true;
}

void doc_check_credentials(struct doc_ctx *c, const char *sa_dir) {
        const char *kubeconfig = c->o->kubeconfig;

        if (kubeconfig) {
                _cleanup_free_ char *server = NULL, *msg = NULL;
                if (!check_secret_file(c, kubeconfig, "--kubeconfig", "pass a readable kubeconfig"))
                        return;
                /* Read by serve's own parser: what it refuses, doctor
                 * names the same way. */
                int r = kube_kubeconfig_check(kubeconfig, &server, &msg);
                if (r == -ENOMEM)
                        c->oom = true;
                else if (r < 0)
                        doc_add(c, "dra", DOC_PROBLEM,
                                "fix the kubeconfig (kubectl config view --minify shows what its "
                                "current context uses)",
                                "%s", msg);
                else
                        doc_add(c, "dra", DOC_OK, NULL,
                                "--kubeconfig %s: readable by uid %u; API server %s", kubeconfig,
                                (unsigned)c->uid, server);
                return;
        }
        /* In a pod: the service's address from the environment the
         * kubelet sets, the token and CA from the service account. */
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        bool ok = true;
        if (!host || !*host || !port || !*port) {
                doc_add(c, "dra", DOC_PROBLEM,
                        "run cdiplug in a pod (cdiplug manifests prints the DaemonSet), or pass "
                        "--kubeconfig FILE",
                        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set: "
                        "not in a pod, so no API server is known for DRA");
                ok = false;
        }
        static const char *const files[][2] = {
                { "token", "the service account token" },
                { "ca.crt", "the cluster's CA certificate" },
        };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *path = NULL;
                if (xasprintf(&path, "%s/%s", sa_dir, files[i][0]) < 0) {
                        c->oom = true;
                        return;
                }
                if (!check_secret_file(c, path, files[i][1],
                                       "mount the service account token (the DaemonSet's "
                                       "automountServiceAccountToken: true), or pass "
                                       "--kubeconfig FILE"))
                        ok = false;
        }
        if (ok)
                doc_add(c, "dra", DOC_OK, NULL,
                        "in-cluster credentials: API server %s:%s, token and CA readable in %s",
                        host, port, sa_dir);
}

void doc_check_dra(struct doc_ctx *c) {
        const char *root = c->o->kubelet_root;

        if (!c->cfg || !has_dra_resources(c->cfg) || !root)
                return;
        check_registry(c, root);
        check_plugins(c, root);
        check_checkpoint(c, root);
        doc_check_credentials(c, SA_DIR);
}
