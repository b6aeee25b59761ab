# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The node: containerd with its CRI plugin (CDI specs from /etc/cdi, the
# pause image built locally), the kubelet and kube-proxy; sourced by
# cluster.sh after controlplane.sh, inside the network and mount namespace
# run.sh made (the paths below are tmpfs there, never the host's).
#
#   node_containerd BIN DIR         containerd on /run/containerd/containerd.sock
#   node_kubelet BIN DIR NODE IP    the kubelet, registered as NODE at IP
#   node_kube_proxy BIN DIR NODE POD_CIDR
#
# This machine's quirks, each answered in the config: cgroup v1 only
# (failCgroupV1: false, the cgroupfs driver); root without CAP_SYS_RESOURCE
# (restrict_oom_score_adj, so runc never lowers oom_score_adj).

node_containerd() {
        local bin=$1 dir=$2
        mkdir -p "$dir/containerd" "$dir/cni/net.d"
        cat >"$dir/cni/net.d/10-bridge.conflist" <<EOC
{"cniVersion": "1.0.0", "name": "cdiplug-test", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
            "ranges": [[{"subnet": "${POD_CIDR:?}"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOC
        cat >"$dir/containerd/config.toml" <<EOC
version = 3
root = "$dir/containerd/root"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["/etc/cdi"]
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$dir/cni/net.d"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
# ctr's import unpacks through the transfer service: for the CRI's snapshotter.
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/$(dpkg --print-architecture)"
  snapshotter = "native"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
EOC
        cp_start "$dir" containerd env PATH="$bin:$PATH" "$bin/containerd" --config "$dir/containerd/config.toml"
        for _ in $(seq 300); do
                "$bin/ctr" --address /run/containerd/containerd.sock version >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        echo "containerd did not start; its log ends:" >&2
        tail -n 30 "$dir/log/containerd.log" >&2
        return 1
}

# node_import BIN TARBALL...: images into the namespace the CRI plugin reads.
node_import() {
        local bin=$1 t
        shift
        for t in "$@"; do
                "$bin/ctr" --address /run/containerd/containerd.sock -n k8s.io images import \
                        --snapshotter native --platform "linux/$(dpkg --print-architecture)" "$t" >/dev/null || return 1
        done
}

node_kubelet() {
        local bin=$1 dir=$2 node=$3 ip=$4
        mkdir -p "$dir/kubelet"
        cat >"$dir/kubelet/config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: $ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $dir/kubelet-serving.crt
tlsPrivateKeyFile: $dir/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/ca.crt}
authorization: {mode: Webhook}
failSwapOn: false
resolvConf: ""
nodeStatusUpdateFrequency: 1s
syncFrequency: 10s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
        cp_start "$dir" kubelet "$bin/kubelet" --config "$dir/kubelet/config.yaml" \
                --kubeconfig "$dir/kubelet.kubeconfig" --hostname-override "$node" --node-ip "$ip" \
                --v 2
}

node_kube_proxy() {
        local bin=$1 dir=$2 node=$3 pod_cidr=$4
        mkdir -p "$dir/kube-proxy"
        cat >"$dir/kube-proxy/config.yaml" <<EOC
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $node
clusterCIDR: $pod_cidr
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOC
        cp_start "$dir" kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy/config.yaml"
}
