# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The lifecycle cases, sourced by cases.sh: what pods and the API show when
# the kubelet restarts, cdiplug's pod is replaced or rolled, devices come,
# go and fail, and the config changes.

# cdiplug's pods on this node (a Node with no kubelet may have one too).
cdiplug_pods() {
        kubectl -n "$CDIPLUG_NS" get pods -l app.kubernetes.io/name=cdiplug --field-selector "spec.nodeName=$NODE" \
                -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}

# A claim pod, with its own claim: claim_pod NAME
claim_pod() {
        kubectl apply -f - <<EOY
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: $TEST_NS}
spec:
  devices:
    requests: [{name: dev, exactly: {deviceClassName: $(deviceclass)}}]
EOY
        pod_yaml "$1" "claim=$1" | kubectl apply -f -
}

delete_pod_and_claim() {
        kubectl -n "$TEST_NS" delete pod "$1" --grace-period=1 --wait=true
        kubectl -n "$TEST_NS" delete resourceclaim "$1" --ignore-not-found --wait=true
}

no_failed_prepare() {
        local ev
        ev=$(kubectl -n "$TEST_NS" get events --field-selector reason=FailedPrepareDynamicResources -o name)
        [ -z "$ev" ] || { kubectl -n "$TEST_NS" get events --field-selector reason=FailedPrepareDynamicResources >&2; return 1; }
}

# The kubelet's log (appended to across restarts) counts its
# registrations: the device plugin's, and the DRA driver's connection.
registered_lines() { grep -c 'Got registration request from device plugin with resource.*example.com/dp' "$DIR/log/kubelet.log" || true; }
registered_more() { [ "$(registered_lines)" -gt "$1" ]; }
dra_connected_lines() { grep -c "Connection changed.*driverName=\"$DRIVER\".*connected=true" "$DIR/log/kubelet.log" || true; }
dra_connected_more() { [ "$(dra_connected_lines)" -gt "$1" ]; }
# The kubelet serves exec (port 10250) again.
exec_works() { kubectl -n "$TEST_NS" exec "$1" -- true; }

# The kubelet restarts with pods running: they stay Running with their
# devices, cdiplug registers again through both APIs (the kubelet's log
# says so; the node's allocatable is stale until then and proves nothing)
# and a new pod of each API starts.
case_kubelet_restart() {
        local t0 dp dra
        cleanup_pods
        pod_yaml lr-dp example.com/dp | kubectl apply -f -
        claim_pod lr-dra
        wait_running lr-dp
        wait_running lr-dra
        dp=$(registered_lines)
        dra=$(dra_connected_lines)
        t0=$(date +%s.%N)
        restart_kubelet
        until_true 60 registered_more "$dp"
        echo "MEASURE kubelet restart -> example.com/dp registered again: $(echo "$(date +%s.%N) - $t0" | bc) s"
        until_true 60 dra_connected_more "$dra"
        echo "MEASURE kubelet restart -> DRA driver connected again: $(echo "$(date +%s.%N) - $t0" | bc) s"
        until_true 60 allocatable_is example.com/dp 2
        until_true 30 exec_works lr-dp
        expect_devices lr-dp dp 1
        expect_devices lr-dra dra 1
        pod_yaml lr-dp2 example.com/dp | kubectl apply -f -
        claim_pod lr-dra2
        wait_running lr-dp2
        wait_running lr-dra2
        no_failed_prepare
        cleanup_pods
}

restart_kubelet() {
        cp_stop "$DIR" kubelet
        node_kubelet "$BIN" "$DIR" "$NODE" "$NODE_IP"
}

# cdiplug's pod deleted: the DaemonSet makes another, which serves both
# APIs again; a pod holding a claim the old one prepared keeps running and
# is unprepared by the new one when it goes.
case_cdiplug_pod_recreated() {
        local old
        cleanup_pods
        claim_pod pr-dra
        wait_running pr-dra
        old=$(cdiplug_pods)
        kubectl -n "$CDIPLUG_NS" delete pod "$old" --wait=true
        kubectl -n "$CDIPLUG_NS" rollout status daemonset/cdiplug --timeout=120s
        [ "$(cdiplug_pods)" != "$old" ]
        until_true 60 allocatable_is example.com/dp 2
        expect_devices pr-dra dra 1
        delete_pod_and_claim pr-dra
        claim_pod pr-dra2
        pod_yaml pr-dp example.com/dp | kubectl apply -f -
        wait_running pr-dra2
        wait_running pr-dp
        no_failed_prepare
        cleanup_pods
}

# A rolling update (the DaemonSet's maxSurge 1) while claim pods start and
# stop: none fails to prepare.
case_rolling_update() {
        local i
        cleanup_pods
        kubectl -n "$TEST_NS" delete events --all >/dev/null
        claim_pod ru-0
        wait_running ru-0
        kubectl -n "$CDIPLUG_NS" rollout restart daemonset/cdiplug
        for i in 1 2 3 4; do
                claim_pod "ru-$i"
                wait_running "ru-$i"
                delete_pod_and_claim "ru-$((i - 1))"
        done
        kubectl -n "$CDIPLUG_NS" rollout status daemonset/cdiplug --timeout=120s
        claim_pod ru-5
        wait_running ru-5
        delete_pod_and_claim ru-4
        delete_pod_and_claim ru-5
        no_failed_prepare
        cleanup_pods
}

slice_devices() {
        kubectl get resourceslices -o jsonpath="{range .items[?(@.spec.driver==\"$DRIVER\")]}{.spec.devices[*].name}{\"\n\"}{end}" |
                tr ' ' '\n' | grep -c . || true
}

slice_has() { [ "$(slice_devices)" = "$1" ]; }

# Hotplug: a node made and removed, as the slice and allocatable show it.
case_hotplug() {
        cleanup_pods
        until_true 30 slice_has 3
        mkdev dp2 2
        mkdev dra3 13
        until_true 30 allocatable_is example.com/dp 3
        until_true 30 slice_has 4
        rm "$DEVDIR/dp2" "$DEVDIR/dra3"
        # an unplugged device stays listed unhealthy: allocatable counts
        # the healthy ones
        until_true 30 allocatable_is example.com/dp 2
        until_true 30 slice_has 3
}

health_of() {
        kubectl -n "$TEST_NS" get pod "$1" \
                -o jsonpath='{range .status.containerStatuses[*].allocatedResourcesStatus[*].resources[*]}{.health}{"\n"}{end}'
}

health_is() {
        local h
        h=$(health_of "$1")
        echo "$1: health ${h:-none}" >&2
        case $h in *Unknown*) echo "Unknown seen" >&2; return 2 ;; esac
        [ "$h" = "$2" ]
}

# Device health in the pod's status (ResourceHealthStatus): Unhealthy
# within 5 s of its node going, Healthy again when it comes back, never
# Unknown.
case_device_health() {
        local dev minor
        cleanup_pods
        claim_pod h-dra
        wait_running h-dra
        dev=$(expect_devices h-dra dra 1)
        until_true 30 health_is h-dra Healthy
        minor=$((0x$(stat -c %T "$DEVDIR/$dev")))
        rm "$DEVDIR/$dev"
        until_true 5 health_is h-dra Unhealthy
        mkdev "$dev" "$minor"
        until_true 30 health_is h-dra Healthy
        cleanup_pods
}

# A ConfigMap edit: a third resource appears on the node.
case_configmap_reload() {
        mkdev extra0 20
        kubectl -n "$CDIPLUG_NS" get configmap cdiplug-config -o json >"$DIR/cm.json"
        python3 - "$DIR/cm.json" "$DEVDIR" <<'EOP'
import json, sys
cm = json.load(open(sys.argv[1]))
cfg = json.loads(cm["data"]["config.json"])
cfg["resources"].append({"name": "example.com/extra", "match": [{"path": sys.argv[2] + "/extra*"}]})
cm["data"]["config.json"] = json.dumps(cfg)
json.dump(cm, open(sys.argv[1], "w"))
EOP
        kubectl replace -f "$DIR/cm.json"
        until_true 120 allocatable_is example.com/extra 1
}

# cdiplug doctor in the DaemonSet's pod (as cdiplug(8) says: --host-root
# /host) and on the node, each finding no problem where there is none.
# Depends on fix33's doctor fixes (issue 33, item 5: its /proc reads and
# the device-plugin dir under --kubelet-root).
case_doctor() {
        local pod rc=0
        pod=$(cdiplug_pods)
        kubectl -n "$CDIPLUG_NS" exec "$pod" -- cdiplug doctor --config /etc/cdiplug/config.json \
                --cdi-dir /etc/cdi --host-root /host --node-name "$NODE" || rc=1
        # on the node as well, whatever the pod's said: both verdicts in the log
        "$CDIPLUG" doctor --config "$DIR/cdiplug-config.json" --cdi-dir /etc/cdi --node-name "$NODE" \
                --kubeconfig "$DIR/admin.kubeconfig" || rc=1
        return "$rc"
}
