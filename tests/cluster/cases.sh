# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The cases, sourced by cluster.sh once the node is Ready; each is a
# function case_NAME run in a subshell with errexit, its output in
# DIR/log/case-NAME.log, its outcome in RESULTS ("ok", "FAIL" or "SKIP"
# when it exits 77). The fake devices are character nodes of the
# local-use major 60 under /dev/cdiplug-test (a tmpfs of this namespace):
# no driver serves them, so an open a container's device cgroup allows
# fails with ENXIO ("No such device or address") and one it denies with
# EPERM, which tells the two apart without real hardware.
TEST_NS=cdiplug-test
CDIPLUG_NS=cdiplug
DEVDIR=/dev/cdiplug-test
DRIVER=cdiplug.test.example.com

# mkdev NAME MINOR
mkdev() { mknod -m 0666 "$DEVDIR/$1" c 60 "$2"; }

write_config() {
        cat >"$DIR/cdiplug-config.json" <<EOC
{
  "dra": {"driver": "$DRIVER"},
  "resources": [
    {"name": "example.com/dp", "match": [{"path": "$DEVDIR/dp*"}]},
    {"name": "example.com/dra", "match": [{"path": "$DEVDIR/dra*"}], "api": "dra"}
  ]
}
EOC
}

# pod_yaml NAME [RESOURCE [CLAIM_TEMPLATE|CLAIM]]: a busybox pod that sleeps.
pod_yaml() {
        local name=$1 limits="" claims="" refs=""
        case ${2:-} in
        "") ;;
        claim=*)
                refs="      claims: [{name: dev}]"
                claims="  resourceClaims: [{name: dev, resourceClaimName: ${2#claim=}}]" ;;
        *) limits="      limits: {$2: 1}" ;;
        esac
        cat <<EOY
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $TEST_NS, labels: {cdiplug-test: "yes"}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources:
$limits
$refs
$claims
EOY
}

# wait_running POD [TIMEOUT]
wait_running() { kubectl -n "$TEST_NS" wait --for=condition=Ready "pod/$1" --timeout="${2:-120s}"; }

# seen POD: "NAME MAJOR:MINOR" for each node under DEVDIR in POD's container,
# and whether it opens past the device cgroup.
seen() {
        # shellcheck disable=SC2016 # expanded in the container
        kubectl -n "$TEST_NS" exec "$1" -- sh -c '
for f in '"$DEVDIR"'/*; do
        [ -e "$f" ] || continue
        err=$(cat "$f" 2>&1 >/dev/null)
        case $err in *"No such device or address"*) o=opens ;; *"not permitted"*) o=denied ;; *) o="?$err" ;; esac
        echo "$(basename "$f") $(stat -c %t:%T "$f") $o"
done'
}

host_node() { stat -c %t:%T "$DEVDIR/$1"; }

# expect_devices POD PREFIX N: POD sees exactly N devices of PREFIX, each
# with the host node's numbers and opening; prints their names.
expect_devices() {
        local pod=$1 prefix=$2 n=$3 lines name mm o got=0
        lines=$(seen "$pod")
        echo "$pod sees: $lines" >&2
        while read -r name mm o; do
                [ -n "$name" ] || continue
                case $name in "$prefix"*) ;; *) continue ;; esac
                got=$((got + 1))
                [ "$mm" = "$(host_node "$name")" ] || { echo "$pod: $name is $mm, the host's is $(host_node "$name")" >&2; return 1; }
                [ "$o" = opens ] || { echo "$pod: $name: $o (the device cgroup should let it open)" >&2; return 1; }
                echo "$name"
        done <<<"$lines"
        [ "$got" -eq "$n" ] || { echo "$pod sees $got devices $prefix*, wants $n" >&2; return 1; }
}

allocatable() { kubectl get node "$NODE" -o "jsonpath={.status.allocatable.${1//./\\.}}"; }

# until_true TIMEOUT_S CMD...: CMD until it succeeds, every 0.2 s.
until_true() {
        local end=$((SECONDS + $1))
        shift
        until "$@"; do
                [ "$SECONDS" -lt "$end" ] || { echo "timed out after waiting for: $*" >&2; return 1; }
                sleep 0.2
        done
}

allocatable_is() { [ "$(allocatable "$1")" = "$2" ]; }

cleanup_pods() {
        kubectl -n "$TEST_NS" delete pods,resourceclaims --all --grace-period=1 --wait=true >/dev/null 2>&1 || true
}

# The DaemonSet and the rest, as `cdiplug manifests` prints them, only the
# image named (--image); the pod then runs from the image built here.
case_install_manifests() {
        mkdev dp0 0
        mkdev dp1 1
        mkdev dra0 10
        mkdev dra1 11
        mkdev dra2 12
        write_config
        "$CDIPLUG" manifests --config "$DIR/cdiplug-config.json" --image localhost/cdiplug:test \
                >"$DIR/manifests.yaml"
        kubectl apply -f "$DIR/manifests.yaml"
        kubectl -n "$CDIPLUG_NS" rollout status daemonset/cdiplug --timeout=120s
        until_true 60 allocatable_is example.com/dp 2
        until_true 60 kubectl get resourceslices -o name
        kubectl get resourceslices -o yaml
        kubectl get deviceclasses -o yaml
}

case_devplugin_pod() {
        pod_yaml dp-1 example.com/dp | kubectl apply -f -
        wait_running dp-1
        expect_devices dp-1 dp 1
        expect_devices dp-1 dra 0
}

# The DeviceClass the manifests made for example.com/dra.
deviceclass() {
        kubectl get deviceclasses -o jsonpath='{range .items[*]}{.metadata.name} {.spec.extendedResourceName}{"\n"}{end}' |
                awk '$2 == "example.com/dra" {print $1}'
}

case_dra_claim() {
        local class dev result
        class=$(deviceclass)
        [ -n "$class" ] || { echo "no DeviceClass for example.com/dra" >&2; return 1; }
        kubectl apply -f - <<EOY
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: claim-1, namespace: $TEST_NS}
spec:
  devices:
    requests:
    - name: dev
      exactly: {deviceClassName: $class}
EOY
        pod_yaml dra-1 claim=claim-1 | kubectl apply -f -
        wait_running dra-1
        dev=$(expect_devices dra-1 dra 1)
        expect_devices dra-1 dp 0
        result=$(kubectl -n "$TEST_NS" get resourceclaim claim-1 \
                -o jsonpath='{.status.allocation.devices.results[*].driver}/{.status.allocation.devices.results[*].device}')
        echo "claim-1 allocated $result, the container sees $dev"
        [ "${result%%/*}" = "$DRIVER" ] || return 1
        # The slice names the device; its CDI node is the one the pod sees.
        kubectl get resourceslices -o json | grep -q "\"name\": \"${result#*/}\"" || return 1
        case ${result#*/} in *"$dev"*) ;; *) echo "allocated ${result#*/} but the pod sees $dev" >&2; return 1 ;; esac
}

# A pod that asks for example.com/dra by name: the DeviceClass's
# extendedResourceName has the scheduler make the claim (DRAExtendedResource).
case_dra_extended_resource() {
        local claim
        pod_yaml ext-1 example.com/dra | kubectl apply -f -
        wait_running ext-1
        expect_devices ext-1 dra 1
        claim=$(kubectl -n "$TEST_NS" get pod ext-1 -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
        echo "the scheduler's claim: $claim"
        [ -n "$claim" ]
        kubectl -n "$TEST_NS" get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[*].driver}' |
                grep -qx "$DRIVER"
}

# A prioritized list: the first subrequest (more devices than there are)
# cannot be met, the second can; the result names the second.
case_dra_prioritized_list() {
        local class request
        class=$(deviceclass)
        kubectl apply -f - <<EOY
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: claim-pl, namespace: $TEST_NS}
spec:
  devices:
    requests:
    - name: dev
      firstAvailable:
      - {name: many, deviceClassName: $class, allocationMode: ExactCount, count: 9}
      - {name: one, deviceClassName: $class}
EOY
        pod_yaml pl-1 claim=claim-pl | kubectl apply -f -
        wait_running pl-1
        expect_devices pl-1 dra 1
        request=$(kubectl -n "$TEST_NS" get resourceclaim claim-pl -o jsonpath='{.status.allocation.devices.results[*].request}')
        echo "allocated for request $request"
        [ "$request" = dev/one ]
}

# reason POD: the scheduler's condition on a pod it could not place.
unschedulable() {
        local cond
        cond=$(kubectl -n "$TEST_NS" get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}:{.status.conditions[?(@.type=="PodScheduled")].message}')
        echo "$1: $cond" >&2
        case $cond in Unschedulable:*"$2"*) return 0 ;; esac
        return 1
}

# Every device held, the next pod waits with the scheduler's reason, for
# each API; allocatable and the held count agree.
case_all_held_pending() {
        [ "$(allocatable example.com/dp)" = 2 ] || return 1
        pod_yaml dp-2 example.com/dp | kubectl apply -f -
        wait_running dp-2
        pod_yaml dp-3 example.com/dp | kubectl apply -f -
        until_true 30 unschedulable dp-3 "Insufficient example.com/dp"
        # dra: 3 devices, ext-1 / dra-1 / pl-1 hold them all
        pod_yaml ext-2 example.com/dra | kubectl apply -f -
        until_true 30 unschedulable ext-2 ""
        [ "$(kubectl -n "$TEST_NS" get pod dp-3 -o jsonpath='{.spec.nodeName}')" = "" ]
}

# The node fence: a token bound to cdiplug's pod (as its projected token
# is) may write its own node's slices, and not a second Node's (a Node
# object with no kubelet); dry-run writes, admitted or denied exactly as
# real ones, so nothing of the driver's changes.
slice_yaml() {
        cat <<EOY
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fence-$1}
spec:
  driver: $DRIVER
  nodeName: $1
  pool: {name: $1, generation: 1, resourceSliceCount: 1}
  devices: [{name: x}]
EOY
}

fence_denies() {
        local out
        out=$(slice_yaml node-2 | "$BIN/kubectl" --server "https://$NODE_IP:6443" \
                --certificate-authority "$DIR/ca.crt" --token "$TOKEN" create --dry-run=server -f - 2>&1) && return 1
        echo "$out" >&2
        case $out in *ValidatingAdmissionPolicy*cdiplug*) return 0 ;; esac
        return 1
}

case_node_fence() {
        local pod
        # cdiplug's own pod, bound to this node: a pod-bound token names
        # the node only once the pod has one.
        pod=$(kubectl -n "$CDIPLUG_NS" get pods -l app.kubernetes.io/name=cdiplug \
                --field-selector "spec.nodeName=$NODE,status.phase=Running" -o jsonpath='{.items[0].metadata.name}')
        # Without the kubernetes.io/os label the DaemonSet's nodeSelector
        # passes node-2 over (its pod would stay Pending and hold up every
        # later rollout); gone at the end, whatever the outcome.
        trap 'kubectl delete node node-2 --ignore-not-found --wait=false' EXIT
        kubectl apply -f - <<EOY
apiVersion: v1
kind: Node
metadata: {name: node-2}
EOY
        TOKEN=$(kubectl -n "$CDIPLUG_NS" create token cdiplug --bound-object-kind Pod --bound-object-name "$pod" \
                --bound-object-uid "$(kubectl -n "$CDIPLUG_NS" get pod "$pod" -o jsonpath='{.metadata.uid}')")
        # RBAC alone would let this through: the denial is the policy's,
        # in force about a second after it was applied.
        until_true 30 fence_denies
        slice_yaml "$NODE" | "$BIN/kubectl" --server "https://$NODE_IP:6443" \
                --certificate-authority "$DIR/ca.crt" --token "$TOKEN" create --dry-run=server -f -
}

# shellcheck source=SCRIPTDIR/lifecycle.sh
. "$(dirname "${BASH_SOURCE[0]}")/lifecycle.sh"
# shellcheck source=SCRIPTDIR/measure.sh
. "$(dirname "${BASH_SOURCE[0]}")/measure.sh"
# shellcheck source=SCRIPTDIR/helm.sh
. "$(dirname "${BASH_SOURCE[0]}")/helm.sh"

# In this order: each starts from what the one before left. A developer
# can run some with CDIPLUG_CLUSTER_CASES="install_manifests dra_claim".
ALL_CASES="install_manifests devplugin_pod dra_claim dra_extended_resource dra_prioritized_list
all_held_pending node_fence kubelet_restart cdiplug_pod_recreated rolling_update hotplug
device_health doctor configmap_reload measure_pod_start measure_restarts install_helm"

cases_run() {
        local results=$1 c rc log
        kubectl create namespace "$TEST_NS"
        # Pods need the namespace's default ServiceAccount, which the
        # controller manager makes a moment later.
        until_true 60 kubectl -n "$TEST_NS" get serviceaccount default
        for c in ${CDIPLUG_CLUSTER_CASES:-$ALL_CASES}; do
                log="$DIR/log/case-$c.log"
                set +e
                (set -e; "case_$c") >"$log" 2>&1
                rc=$?
                set -e
                grep '^MEASURE' "$log" || true # the figures, for docs/performance.md
                if [ "$rc" -eq 0 ]; then
                        echo "ok $c" | tee -a "$results"
                elif [ "$rc" -eq 77 ]; then
                        echo "SKIP $c" | tee -a "$results"
                else
                        echo "FAIL $c" | tee -a "$results"
                        tail -n 40 "$log" | sed 's/^/      | /'
                fi
        done
        cleanup_pods
}
