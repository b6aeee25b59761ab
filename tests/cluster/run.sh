#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cdiplug in a real one-node Kubernetes cluster: kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler, the kubelet, kube-proxy and
# containerd with its CRI plugin, built from the Go modules at the release
# tests/k8s pins (go.mod here, containerd/go.mod for containerd), with
# Debian's runc and CNI plugins. cdiplug runs as the DaemonSet that
# `cdiplug manifests` prints; pods get its devices through both APIs.
#
#   tests/cluster/run.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/cdiplug)
#
# Ends with "cluster <version>: N passed, F failed, S skipped". Exits 0
# when all pass, 1 when a case or a build fails, 77 when the cluster cannot
# run here (not root, no Go 1.26, modules unreachable, no cgroups, no
# namespaces), with the reason on stderr. With CDIPLUG_REQUIRE_K8S=1 a
# skipped case counts as a failure. Module and build caches live under
# ${CDIPLUG_GO_CACHE:-BUILD_DIR/go}, as in tests/k8s; the run's logs under
# BUILD_DIR/cluster (kept until the next run). Everything the run starts or
# changes is undone at its end: processes, mounts, network (all in
# namespaces of its own), cgroups, the global sysctls the kubelet sets.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
# shellcheck source=SCRIPTDIR/../lib/go.sh
. "$top/tests/lib/go.sh"
go_tier_env "cluster tests" "$build"
[ "$(id -u)" -eq 0 ] || skip "not root (the kubelet, containerd and the namespaces need root)"
[ -d /sys/fs/cgroup/devices ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || skip "no cgroup file system at /sys/fs/cgroup"
for tool in unshare ip iptables runc openssl; do
        command -v "$tool" >/dev/null || skip "no $tool (Debian: util-linux, iproute2, iptables, runc, openssl)"
done
[ -x /usr/lib/cni/bridge ] || skip "no CNI plugins in /usr/lib/cni (Debian: containernetworking-plugins)"
[ -x /bin/busybox ] || skip "no /bin/busybox (Debian: busybox-static)"
unshare --net --mount --pid --fork true 2>/dev/null || skip "cannot make network, mount and PID namespaces"
cd "$here"
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
for m in . containerd; do
        (cd "$m" && go mod download) >/dev/null 2>"$cache/cluster-download.log" ||
                { cat "$cache/cluster-download.log" >&2; skip "the Go modules of tests/cluster/$m cannot be fetched"; }
done

version=$(sed -nE 's/^\s*k8s.io\/kubernetes v([0-9.]+).*/\1/p' go.mod | head -n1)
bin="$cache/cluster-$version"
t0=$SECONDS
if ! ./build.sh "$bin"; then
        echo "cluster $version: 0 passed, 1 failed, 0 skipped (build failed)"
        exit 1
fi
echo "== cluster: built in $((SECONDS - t0)) s"
go_build_only && exit 0

run="$build/cluster"
rm -rf "$run"
mkdir -p "$run/images" "$run/state"
# shellcheck source=SCRIPTDIR/images.sh
. "$here/images.sh"
images_make "$bin" "$build/cdiplug" "$top" "$run/images"

# The global state the run touches, put back by restore(): the sysctls the
# kubelet sets outside any namespace, the mount points made on the host,
# the cgroups the kubelet makes (cgroupfs).
sysctls=(vm/overcommit_memory kernel/panic kernel/panic_on_oops)
declare -A saved
for s in "${sysctls[@]}"; do saved[$s]=$(cat "/proc/sys/$s"); done
made=()
for d in /var/lib/kubelet /run/containerd /etc/cdi /var/log/pods /var/log/containers /dev/cdiplug-test; do
        [ -d "$d" ] || { mkdir -p "$d" && made+=("$d"); }
done
restore() {
        local s d
        for s in "${sysctls[@]}"; do echo "${saved[$s]}" >"/proc/sys/$s"; done
        # Deepest first; a cgroup goes once its last task has exited.
        for d in /sys/fs/cgroup/*/kubepods; do
                [ -d "$d" ] || continue
                find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
                for _ in $(seq 50); do
                        [ -d "$d" ] || break
                        find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
                        sleep 0.1
                done
                [ ! -d "$d" ] || echo "cluster: could not remove $d" >&2
        done
        for d in "${made[@]}"; do rmdir "$d" 2>/dev/null || true; done
}
trap restore EXIT

rc=0
: >"$run/results"
unshare --net --mount --pid --fork --mount-proc --propagation private \
        "$here/cluster.sh" "$bin" "$run/state" "$build/cdiplug" "$run/images" "$run/results" || rc=$?
passed=$(grep -c '^ok ' "$run/results" || true)
failed=$(grep -c '^FAIL ' "$run/results" || true)
skipped=$(grep -c '^SKIP ' "$run/results" || true)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        failed=1 # the cluster did not come up, or the script died before a case said FAIL
        echo "cluster: cluster.sh exited $rc; logs in $run/state/log" >&2
fi
if [ "${CDIPLUG_REQUIRE_K8S:-0}" = 1 ] && [ "$skipped" -gt 0 ]; then
        echo "cluster: CDIPLUG_REQUIRE_K8S=1: $skipped skipped case(s) count as failed" >&2
        failed=$((failed + skipped))
fi
echo "cluster $version: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
