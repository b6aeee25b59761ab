#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A fleet of cdiplug DRA instances against a real kube-apiserver and etcd
# (the control plane of run.sh, built from this module): one instance per
# Node object, each with a node's client certificate (system:node:NAME, so
# the Node authorizer and NodeRestriction hold it to its own node's
# ResourceSlices) and its own kubelet root, where cmd/fleet plays the
# kubelet's plugin registration. cmd/fleet checks that two disagreeing
# instances on one node do not fight over its slices, then that every
# node's slices are published, come back after each API server restart
# (down for 10 s, every slice deleted as it becomes ready, as kubelets do
# when they start) and after a wipe, and that no instance exits; it prints
# the figures (docs/performance.md, "Fleet"): the time to publish, the
# idle requests per node (from the API server's audit log), the spread of
# the reconnects, the time until the slices and the watches are back.
#
#   tests/cluster/fleet.sh [BUILD_DIR]   (default: build; needs BUILD_DIR/cdiplug)
#
# FLEET_NODES (default 100) sets the number of instances, FLEET_IDLE
# (default 60s) the idle window. Ends with
# "fleet: N passed, F failed, S skipped"; exits 0 when all pass, 1 when a
# check or a build fails, 77 when it cannot run here (not root, no Go 1.26,
# modules unreachable, no namespaces), with the reason on stderr. The
# Kubernetes programs are those of run.sh (BIN below, built by build.sh
# when absent; CLUSTER_BIN names another directory holding them). All of
# it runs in network, PID and mount namespaces of its own: the API server
# on 127.0.0.1:6443 there, and nothing outlives the run; its scratch
# directory is removed at the end (FLEET_KEEP=1 keeps it and says where).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

# fleet_apiserver CP: the API server, with an audit log of the nodes'
# requests (the idle rate and the reconnects are read from it); no
# endpoint reconciler, which refuses a loopback address (and no pod needs
# the kubernetes Service here).
fleet_apiserver() {
        local cp=$1
        cp_apiserver "$bin" "$cp" 127.0.0.1 6443 2379 10.0.0.0/24 \
                --audit-policy-file "$cp/audit-policy.yaml" --audit-log-path "$cp/audit.log" \
                --audit-log-maxsize 0 --endpoint-reconciler-type none
}

# fleet_stop CP: cp_stop for an API server this shell did not start: it
# is the namespaces' first process's child, a zombie once it has exited
# until that shell (busy running cmd/fleet) reaps it, and kill -0 cannot
# tell a zombie from a live process.
fleet_stop() {
        local cp=$1 pid state i
        pid=$(cat "$cp/pid/kube-apiserver")
        rm -f "$cp/pid/kube-apiserver"
        kill -TERM "$pid" 2>/dev/null || return 0
        for i in $(seq 200); do
                state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 0
                [ "$state" != Z ] || return 0
                [ "$i" -lt 200 ] || kill -KILL "$pid" 2>/dev/null
                sleep 0.05
        done
}

# Inside the namespaces: the hook cmd/fleet calls to stop and start the
# API server, and the run itself.
case "${1:-}" in
--hook)
        cp=$2 bin=$3
        # shellcheck source=SCRIPTDIR/controlplane.sh
        . "$here/controlplane.sh"
        case $4 in
        stop) fleet_stop "$cp" ;;
        start) fleet_apiserver "$cp" ;;
        *) exit 2 ;;
        esac
        exit 0
        ;;
--inner)
        run=$2 bin=$3 cdiplug=$4
        cp=$run/cp
        # shellcheck source=SCRIPTDIR/pki.sh
        . "$here/pki.sh"
        # shellcheck source=SCRIPTDIR/controlplane.sh
        . "$here/controlplane.sh"
        trap 'cp_stop_all "$cp"' EXIT
        ip link set lo up
        pki_make "$cp" fleet 127.0.0.1 10.0.0.1
        cat >"$cp/audit-policy.yaml" <<'EOP'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
EOP
        cp_etcd "$bin" "$cp" 2379
        fleet_apiserver "$cp"
        ulimit -n 65536 2>/dev/null || true
        rc=0
        "$run/fleet" -cdiplug "$cdiplug" -pki "$cp" -dir "$run" -audit "$cp/audit.log" \
                -nodes "${FLEET_NODES:-100}" -idle "${FLEET_IDLE:-60s}" -- "$0" --hook "$cp" "$bin" || rc=$?
        if [ "$rc" -ne 0 ]; then
                echo "== fleet: the API server's log ends:" >&2
                tail -n 20 "$cp/log/kube-apiserver.log" >&2
        fi
        exit "$rc"
        ;;
esac

build=$(cd "${1:-$top/build}" && pwd)
# shellcheck source=SCRIPTDIR/../lib/go.sh
. "$top/tests/lib/go.sh"
go_tier_env "fleet tests" "$build"
[ "$(id -u)" -eq 0 ] || skip "not root (the fake device nodes need mknod, the namespaces need root)"
for tool in unshare ip openssl; do
        command -v "$tool" >/dev/null || skip "no $tool (Debian: util-linux, iproute2, openssl)"
done
unshare --net --mount --pid --fork true 2>/dev/null || skip "cannot make network, mount and PID namespaces"
cd "$here"
unformatted=$(gofmt -l cmd/fleet)
[ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
go mod download >/dev/null 2>"$cache/fleet-download.log" ||
        { cat "$cache/fleet-download.log" >&2; skip "the Go modules of tests/cluster cannot be fetched"; }

version=$(sed -nE 's/^\s*k8s.io\/kubernetes v([0-9.]+).*/\1/p' go.mod | head -n1)
bin=${CLUSTER_BIN:-$cache/cluster-$version}
t0=$SECONDS
if ! [ -x "$bin/kube-apiserver" ] || ! [ -x "$bin/etcd" ]; then
        ./build.sh "$bin" control-plane || { echo "fleet: 0 passed, 1 failed, 0 skipped (build failed)"; exit 1; }
fi
run=$(mktemp -d /tmp/fleet.XXXXXX)
trap 'if [ "${FLEET_KEEP:-0}" = 1 ]; then echo "== fleet: kept $run" >&2; else rm -rf "$run"; fi' EXIT
go build -o "$run/fleet" ./cmd/fleet || { echo "fleet: 0 passed, 1 failed, 0 skipped (build failed)"; exit 1; }
echo "== fleet: built in $((SECONDS - t0)) s"

# --kill-child: should this script die, the namespaces' first process
# dies, and with it every process in them.
t0=$SECONDS
rc=0
unshare --net --mount --pid --fork --mount-proc --kill-child \
        "$here/fleet.sh" --inner "$run" "$bin" "$build/cdiplug" || rc=$?
echo "== fleet: ran in $((SECONDS - t0)) s"
exit "$rc"
