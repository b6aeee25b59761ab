# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Start and stop the test cluster's processes; sourced. The API server and
# its etcd stand apart from the rest so that a test that needs only an API
# server (many of them, say) can start just those:
#
#   . tests/cluster/pki.sh; . tests/cluster/controlplane.sh
#   pki_make DIR NODE NODE_IP SERVICE_IP
#   cp_etcd BIN DIR PORT                 etcd on 127.0.0.1:PORT (and PORT+1 for peers)
#   cp_apiserver BIN DIR ADDR PORT ETCD_PORT SERVICE_CIDR [FLAG...]
#   cp_wait_ready BIN DIR                until /readyz answers ok (60 s)
#   cp_stop_all DIR                      stop every process started here
#
# BIN holds the programs (build.sh), DIR the certificates, the logs
# (DIR/log/NAME.log), the data and the process ids (DIR/pid/NAME).

# cp_start DIR NAME CMD...: CMD in the background, its log and pid in DIR.
cp_start() {
        local dir=$1 name=$2
        shift 2
        mkdir -p "$dir/log" "$dir/pid"
        "$@" >>"$dir/log/$name.log" 2>&1 &
        echo $! >"$dir/pid/$name"
        echo "$name" >>"$dir/started"
}

# cp_stop DIR NAME: TERM, then KILL after 10 s; waits until it is gone.
cp_stop() {
        local dir=$1 name=$2 pid i
        [ -f "$dir/pid/$name" ] || return 0
        pid=$(cat "$dir/pid/$name")
        rm -f "$dir/pid/$name"
        kill -TERM "$pid" 2>/dev/null || return 0
        for i in $(seq 100); do
                kill -0 "$pid" 2>/dev/null || return 0
                [ "$i" -lt 100 ] || kill -KILL "$pid" 2>/dev/null
                sleep 0.1
        done
        wait "$pid" 2>/dev/null || true
}

# Stop in the reverse order of the start: the node before the control plane.
cp_stop_all() {
        local dir=$1 name
        [ -f "$dir/started" ] || return 0
        for name in $(tac "$dir/started"); do
                cp_stop "$dir" "$name"
        done
        rm -f "$dir/started"
}

cp_etcd() {
        local bin=$1 dir=$2 port=$3
        cp_start "$dir" etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
                --listen-client-urls "http://127.0.0.1:$port" \
                --advertise-client-urls "http://127.0.0.1:$port" \
                --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
                --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
                --initial-cluster "default=http://127.0.0.1:$((port + 1))" \
                --unsafe-no-fsync --log-level warn
}

# The API server with TLS, client certificates, service-account tokens and
# Node+RBAC authorization, as a real cluster has them. Every DRA feature
# the tests use (DRAExtendedResource, DRAPrioritizedList,
# ResourceHealthStatus) is on by default at 1.37.
cp_apiserver() {
        local bin=$1 dir=$2 addr=$3 port=$4 etcd_port=$5 cidr=$6
        shift 6
        cp_start "$dir" kube-apiserver "$bin/kube-apiserver" \
                --etcd-servers "http://127.0.0.1:$etcd_port" \
                --bind-address "$addr" --advertise-address "$addr" --secure-port "$port" \
                --tls-cert-file "$dir/apiserver.crt" --tls-private-key-file "$dir/apiserver.key" \
                --client-ca-file "$dir/ca.crt" \
                --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
                --service-account-issuer https://kubernetes.default.svc.cluster.local \
                --service-account-key-file "$dir/sa.pub" \
                --service-account-signing-key-file "$dir/sa.key" \
                --service-cluster-ip-range "$cidr" \
                --kubelet-client-certificate "$dir/apiserver-kubelet-client.crt" \
                --kubelet-client-key "$dir/apiserver-kubelet-client.key" \
                --kubelet-certificate-authority "$dir/ca.crt" \
                --kubelet-preferred-address-types InternalIP \
                --allow-privileged=true --profiling=false --anonymous-auth=false "$@"
}

cp_wait_ready() {
        local bin=$1 dir=$2 i
        for i in $(seq 600); do
                "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && return 0
                kill -0 "$(cat "$dir/pid/kube-apiserver")" 2>/dev/null || break
                sleep 0.1
        done
        echo "kube-apiserver not ready; its log ends:" >&2
        tail -n 30 "$dir/log/kube-apiserver.log" >&2
        return 1
}

# The controller manager (with the service-account token and root CA
# publishers the DaemonSet's in-cluster credentials need) and the scheduler.
cp_controllers() {
        local bin=$1 dir=$2
        cp_start "$dir" kube-controller-manager "$bin/kube-controller-manager" \
                --kubeconfig "$dir/kube-controller-manager.kubeconfig" \
                --authentication-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
                --authorization-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
                --use-service-account-credentials \
                --service-account-private-key-file "$dir/sa.key" \
                --root-ca-file "$dir/ca.crt" --bind-address 127.0.0.1 \
                --leader-elect=false --profiling=false
        cp_start "$dir" kube-scheduler "$bin/kube-scheduler" \
                --kubeconfig "$dir/kube-scheduler.kubeconfig" \
                --authentication-kubeconfig "$dir/kube-scheduler.kubeconfig" \
                --authorization-kubeconfig "$dir/kube-scheduler.kubeconfig" \
                --bind-address 127.0.0.1 --leader-elect=false --profiling=false
}
