#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one-node cluster and its cases, run by run.sh inside new network,
# mount and PID namespaces: the node's address, the bridge, kube-proxy's
# rules and every mount vanish with them, and every process (containerd's
# shims and the containers too) ends when this script does.
#
#   cluster.sh BIN DIR CDIPLUG IMAGES_DIR RESULTS
#
# BIN holds the cluster's programs, DIR the run's state and logs, CDIPLUG
# the binary under test (for `cdiplug manifests`), IMAGES_DIR the image
# tarballs; each case's outcome goes to RESULTS as "ok|FAIL|SKIP NAME".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=$1 DIR=$2 CDIPLUG=$3 IMAGES=$4 RESULTS=$5
NODE="node-1"
NODE_IP=10.210.0.1
SERVICE_CIDR=10.211.0.0/24
SERVICE_IP=10.211.0.1
POD_CIDR=10.212.0.0/24
PAUSE_IMAGE=localhost/pause:test
TOP=$(cd "$here/../.." && pwd)
K8S_VERSION=$(sed -nE 's/^\s*k8s.io\/kubernetes v([0-9.]+).*/\1/p' "$here/go.mod" | head -n1)
export BIN DIR CDIPLUG NODE NODE_IP POD_CIDR PAUSE_IMAGE TOP K8S_VERSION
# shellcheck source=SCRIPTDIR/pki.sh
. "$here/pki.sh"
# shellcheck source=SCRIPTDIR/controlplane.sh
. "$here/controlplane.sh"
# shellcheck source=SCRIPTDIR/node.sh
. "$here/node.sh"

# The node's own network: a veth pair (this kernel has no dummy links),
# one end with the node's address and the default route, so the kubelet
# has a non-loopback address and nothing can reach past this namespace.
ip link set lo up
ip link add cdiplug-node type veth peer name cdiplug-peer
ip addr add "$NODE_IP/24" dev cdiplug-node
ip link set cdiplug-peer up
ip link set cdiplug-node up
ip route add default via 10.210.0.254 dev cdiplug-node onlink

# The paths the kubelet, containerd and cdiplug's DaemonSet fix, private
# to this mount namespace (run.sh made the mount points).
for d in /var/lib/kubelet /run/containerd /etc/cdi /var/log/pods /var/log/containers /dev/cdiplug-test; do
        mount -t tmpfs -o mode=0755 cdiplug-cluster "$d"
done

cleanup() {
        cp_stop_all "$DIR"
}
trap cleanup EXIT

t0=$(date +%s.%N)
pki_make "$DIR" "$NODE" "$NODE_IP" "$SERVICE_IP"
cp_etcd "$BIN" "$DIR" 2379
cp_apiserver "$BIN" "$DIR" "$NODE_IP" 6443 2379 "$SERVICE_CIDR"
cp_wait_ready "$BIN" "$DIR"
cp_controllers "$BIN" "$DIR"
node_containerd "$BIN" "$DIR"
node_import "$BIN" "$IMAGES"/*.tar
node_kubelet "$BIN" "$DIR" "$NODE" "$NODE_IP"
node_kube_proxy "$BIN" "$DIR" "$NODE" "$POD_CIDR"
kubectl() { "$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }
export -f kubectl
if ! kubectl wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null 2>&1; then
        # wait fails at once while the node does not exist yet
        for _ in $(seq 1200); do
                kubectl wait --for=condition=Ready "node/$NODE" --timeout=1s >/dev/null 2>&1 && break
                sleep 0.1
        done
fi
kubectl wait --for=condition=Ready "node/$NODE" --timeout=1s >/dev/null
echo "== cluster: node $NODE Ready after $(echo "$(date +%s.%N) - $t0" | bc) s"

# shellcheck source=SCRIPTDIR/cases.sh
. "$here/cases.sh"
cases_run "$RESULTS"
