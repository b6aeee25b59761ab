#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Render deploy/base like `kubectl kustomize` and check its security fields.

Debian 12 packages no kustomize, so this renders the subset of a
kustomization that deploy/base uses (resources, namespace, commonLabels) and
refuses anything else rather than rendering it wrongly. When a `kubectl` is
on PATH and can render the base, its output must equal ours.

Usage: deploy/check_manifests.py [BASE_DIR]   (default: deploy/base)
       deploy/check_manifests.py --render [BASE_DIR]   (print the YAML)
       deploy/check_manifests.py --rendered FILE   (check a rendered YAML stream)
Exit status 0 when every check passes.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

SUPPORTED_KEYS = {"apiVersion", "kind", "namespace", "resources", "commonLabels"}
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "RuntimeClass"}
KUBELET_DIR = "/var/lib/kubelet/device-plugins"
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
CDI_DIR = "/etc/cdi"
HOST_ROOT = "/host"


class RenderError(Exception):
    pass


def render(base):
    with open(os.path.join(base, "kustomization.yaml"), encoding="utf-8") as f:
        kust = yaml.safe_load(f)
    unknown = set(kust) - SUPPORTED_KEYS
    if unknown:
        raise RenderError("kustomization.yaml uses %s, which this renderer does not "
                          "implement (extend deploy/check_manifests.py)" % sorted(unknown))
    namespace = kust.get("namespace")
    labels = kust.get("commonLabels") or {}
    docs = []
    for res in kust.get("resources") or []:
        path = os.path.join(base, res)
        if os.path.isdir(path):
            raise RenderError("%s: nested kustomizations are not supported" % res)
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                meta = doc.setdefault("metadata", {})
                if namespace:
                    if doc["kind"] == "Namespace":
                        # kustomize renames the one Namespace object too.
                        meta["name"] = namespace
                    elif doc["kind"] not in CLUSTER_SCOPED:
                        meta["namespace"] = namespace
                if labels:
                    meta.setdefault("labels", {}).update(labels)
                    if doc["kind"] in ("DaemonSet", "Deployment", "StatefulSet"):
                        spec = doc["spec"]
                        spec.setdefault("selector", {}).setdefault("matchLabels", {}).update(labels)
                        tmeta = spec["template"].setdefault("metadata", {})
                        tmeta.setdefault("labels", {}).update(labels)
                docs.append(doc)
    return docs


def canonical(docs):
    return sorted(json.dumps(d, sort_keys=True) for d in docs)


def kubectl_render(base):
    """Render with kubectl's bundled kustomize, or None when there is none."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None, "no kubectl on PATH"
    try:
        out = subprocess.run([kubectl, "kustomize", base], capture_output=True, text=True,
                             timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "kubectl kustomize did not run: %s" % e
    if out.returncode != 0:
        return None, "kubectl kustomize failed: %s" % out.stderr.strip()[:300]
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None], None


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*cdiplug\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


def quantity(q):
    """CPU in millicores or memory in bytes, for the suffixes used here."""
    q = str(q)
    units = {"m": 1, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}
    for suffix, mult in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * mult
    return float(q) * 1000  # whole CPUs


def arg_value(args, name):
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print("  ok    %s" % what)
        else:
            self.failed += 1
            print("  FAIL  %s" % what)


def check_rollout(ds, c):
    """A rolling update without an outage (issue 29): the new pod starts
    beside the old one (maxSurge 1, maxUnavailable 0), and each names its
    sockets after its own pod UID (POD_UID from the downward API), so the
    old one's stop removes nothing the new one serves."""
    spec = ds["spec"]
    strategy = spec.get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    c.check(strategy.get("type", "RollingUpdate") == "RollingUpdate"
            and rolling.get("maxSurge") == 1 and rolling.get("maxUnavailable") == 0,
            "rolls with maxSurge 1, maxUnavailable 0 (got %r)" % strategy)
    ctrs = (spec["template"].get("spec") or {}).get("containers") or [{}]
    env = {e.get("name"): e for e in ctrs[0].get("env", [])}
    field = ((env.get("POD_UID") or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
    c.check(field == "metadata.uid",
            "POD_UID comes from the downward API's metadata.uid (per-pod socket names)")
    c.check(not any(p.get("hostPort") for p in ctrs[0].get("ports", [])),
            "no hostPort (two pods of one node could not both bind it during a surge)")


def check_docs(docs, c):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    c.check(sorted(by_kind) == ["ConfigMap", "DaemonSet", "Namespace"]
            and all(len(v) == 1 for v in by_kind.values()),
            "one Namespace, one ConfigMap, one DaemonSet (got %s)"
            % {k: len(v) for k, v in by_kind.items()})
    if "DaemonSet" not in by_kind or "Namespace" not in by_kind:
        return
    ns = by_kind["Namespace"][0]["metadata"]["name"]
    c.check(all(d["metadata"].get("namespace") == ns for d in docs if d["kind"] != "Namespace"),
            "every namespaced object is in namespace %r" % ns)

    ds = by_kind["DaemonSet"][0]
    check_rollout(ds, c)
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    tlabels = spec["template"]["metadata"].get("labels", {})
    sel = spec["selector"].get("matchLabels", {})
    c.check(sel and all(tlabels.get(k) == v for k, v in sel.items()),
            "selector matches the pod template's labels")
    c.check(pod.get("priorityClassName") == "system-node-critical",
            "priorityClassName is system-node-critical")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        c.check(not pod.get(key), "%s is not set" % key)
    c.check(pod.get("automountServiceAccountToken") is False,
            "no service account token is mounted")
    psc = pod.get("securityContext", {})

    containers = pod.get("containers", [])
    c.check(len(containers) == 1 and not pod.get("initContainers"),
            "exactly one container, no init containers")
    if not containers:
        return
    ctr = containers[0]
    sc = ctr.get("securityContext", {})
    c.check(sc.get("privileged") is False, "privileged: false")
    c.check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
    c.check(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true")
    caps = sc.get("capabilities", {})
    c.check(caps.get("drop") == ["ALL"] and not caps.get("add"),
            "capabilities: drop [ALL], add nothing")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    c.check(seccomp == "RuntimeDefault", "seccompProfile RuntimeDefault (got %r)" % seccomp)
    c.check(sc.get("procMount") in (None, "Default"), "procMount is the default")

    res = ctr.get("resources", {})
    req, lim = res.get("requests", {}), res.get("limits", {})
    have_all = all(k in d for d in (req, lim) for k in ("cpu", "memory"))
    c.check(have_all, "cpu and memory requests and limits are set")
    if have_all:
        c.check(all(quantity(req[k]) <= quantity(lim[k]) for k in ("cpu", "memory")),
                "requests do not exceed limits")
        c.check(quantity(lim["memory"]) <= 128 * 1024 ** 2 and quantity(lim["cpu"]) <= 500,
                "limits stay small (memory <= 128Mi, cpu <= 500m)")

    args = ctr.get("args", [])
    c.check(args[:1] == ["serve"], "container runs 'cdiplug serve'")
    c.check(arg_value(args, "--host-root") == HOST_ROOT, "--host-root %s" % HOST_ROOT)
    c.check("--no-sandbox" not in args, "--no-sandbox is not given")
    c.check(arg_value(args, "--log-format") == "json", "--log-format json, for the log pipeline")

    version = project_version()
    image = ctr.get("image", "")
    c.check(version is not None and image.endswith(":" + version),
            "image tag %r is the project version %r" % (image, version))

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in ctr.get("volumeMounts", [])}
    host_paths = {v["hostPath"]["path"]: n for n, v in volumes.items() if "hostPath" in v}
    want_paths = {KUBELET_DIR, CDI_DIR, POD_RESOURCES_DIR, "/dev", "/sys"}
    nfd = arg_value(args, "--nfd-features-dir")
    if nfd is not None:
        want_paths.add(nfd)
    c.check(set(host_paths) == want_paths, "hostPath volumes are exactly %s (got %s)"
            % (sorted(want_paths), sorted(host_paths)))

    def mount_of(host_path):
        name = host_paths.get(host_path)
        return next((m for m in mounts.values() if m["name"] == name), None)

    if nfd is not None:
        m = mount_of(nfd)
        c.check(nfd.startswith("/") and m is not None and m["mountPath"] == nfd
                and not m.get("readOnly"),
                "--nfd-features-dir %s is mounted writable at the same path" % nfd)
    for host, flag in ((KUBELET_DIR, "--kubelet-dir"), (CDI_DIR, "--cdi-dir")):
        m = mount_of(host)
        want = arg_value(args, flag) or host
        c.check(m is not None and m["mountPath"] == want and not m.get("readOnly"),
                "%s is mounted writable at %s (%s)" % (host, want, flag))
    for host in ("/dev", "/sys"):
        m = mount_of(host)
        c.check(m is not None and m["mountPath"] == HOST_ROOT + host and m.get("readOnly") is True,
                "host %s is mounted read-only at %s%s" % (host, HOST_ROOT, host))
    m = mount_of(POD_RESOURCES_DIR)
    c.check(m is not None and m["mountPath"] == POD_RESOURCES_DIR and m.get("readOnly") is True,
            "the PodResources directory is mounted read-only at %s" % POD_RESOURCES_DIR)
    sock = arg_value(args, "--pod-resources-socket")
    c.check(sock is None or os.path.dirname(sock) == POD_RESOURCES_DIR,
            "--pod-resources-socket is in the mounted directory")
    ports = {p.get("name"): p for p in ctr.get("ports", [])}
    metrics_port = ports.get("metrics", {}).get("containerPort")
    addr = arg_value(args, "--metrics-address") or ""
    c.check(metrics_port is not None and addr.endswith(":%d" % metrics_port),
            "--metrics-address listens on the named container port 'metrics'")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (ctr.get(probe) or {}).get("httpGet") or {}
        c.check(get.get("path") == path and get.get("port") == "metrics",
                "%s is an httpGet of %s on port 'metrics'" % (probe, path))
    c.check(all(m.get("mountPropagation") in (None, "None") for m in mounts.values()),
            "no mount propagation from the container to the host")

    cfg_path = arg_value(args, "--config") or "/etc/cdiplug/config.json"
    cfg_dir, cfg_file = os.path.split(cfg_path)
    cm_mount = mounts.get(cfg_dir)
    cm_vol = volumes.get(cm_mount["name"]) if cm_mount else None
    cm_name = (cm_vol or {}).get("configMap", {}).get("name")
    c.check(cm_name is not None and cm_mount.get("readOnly") is True,
            "--config %s comes read-only from a ConfigMap" % cfg_path)
    cms = {d["metadata"]["name"]: d for d in by_kind.get("ConfigMap", [])}
    cm = cms.get(cm_name)
    c.check(cm is not None and cfg_file in cm.get("data", {}),
            "ConfigMap %r holds %s" % (cm_name, cfg_file))
    if cm is not None and cfg_file in cm.get("data", {}):
        try:
            cfg = json.loads(cm["data"][cfg_file])
        except ValueError as e:
            cfg = None
            print("        %s" % e)
        with open(os.path.join(REPO, "packaging", "config.json"), encoding="utf-8") as f:
            example = json.load(f)
        c.check(cfg is not None, "the ConfigMap's %s is valid JSON" % cfg_file)
        c.check(cfg == example, "the ConfigMap's %s equals packaging/config.json" % cfg_file)


def check_rendered(path):
    """Check a YAML stream rendered by another tool (the Helm chart's
    device-plugin objects), without the kustomize cross-check."""
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        print("manifests: cannot read %s: %s" % (path, e))
        print("manifests: 0 passed, 1 failed")
        return 1
    c = Checker()
    print("read %s: %d objects" % (path, len(docs)))
    check_docs(docs, c)
    print("manifests: %d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


def main(argv):
    if argv[:1] == ["--rendered"] and len(argv) == 2:
        return check_rendered(argv[1])
    render_only = "--render" in argv
    argv = [a for a in argv if a != "--render"]
    base = argv[0] if argv else os.path.join(HERE, "base")
    try:
        docs = render(base)
    except (RenderError, OSError, yaml.YAMLError, KeyError) as e:
        print("manifests: cannot render %s: %s" % (base, e))
        print("manifests: 0 passed, 1 failed")
        return 1
    if render_only:
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=True))
        return 0

    c = Checker()
    print("rendered %s: %d objects" % (base, len(docs)))
    check_docs(docs, c)
    theirs, why = kubectl_render(base)
    if theirs is None:
        print("  skip  cross-check with kubectl kustomize (%s)" % why)
    else:
        c.check(canonical(theirs) == canonical(docs),
                "kubectl kustomize renders the same objects")
    print("manifests: %d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
