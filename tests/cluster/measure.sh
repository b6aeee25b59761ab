# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The figures run.sh prints (and docs/performance.md records); timings are
# measured and printed, never asserted: a loaded machine's stall is not a
# defect. The claim pods' p99 against the device-plugin pods' (no more
# than a second apart, docs/performance.md) is printed with whether it
# holds.
MEASURE_PODS=${CDIPLUG_CLUSTER_PODS:-20}

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

# stats FILE [NOUN]: "p50 X s, p99 Y s, max Z s (N NOUN)" of the numbers
# in FILE (NOUN: pods unless given).
stats() {
        sort -n "$1" | awk -v noun="${2:-pods}" '{v[NR] = $1} END {
                p50 = v[int((NR + 1) * 0.50)]; p99 = v[int(NR * 0.99 + 0.999)]
                if (p99 == "") p99 = v[NR]
                printf "p50 %.2f s, p99 %.2f s, max %.2f s (%d %s)\n", p50, p99, v[NR], NR, noun }'
}

p99() { sort -n "$1" | awk '{v[NR] = $1} END {i = int(NR * 0.99 + 0.999); print v[i]}'; }

# Creation -> Ready for MEASURE_PODS pods in turn, one API each.
case_measure_pod_start() {
        local i t
        cleanup_pods
        : >"$DIR/dp-times"
        : >"$DIR/claim-times"
        for i in $(seq "$MEASURE_PODS"); do
                t=$(now)
                pod_yaml "m-dp-$i" example.com/dp | kubectl apply -f - >/dev/null
                wait_running "m-dp-$i" >/dev/null
                since "$t" >>"$DIR/dp-times"
                kubectl -n "$TEST_NS" delete pod "m-dp-$i" --grace-period=1 --wait=true >/dev/null
                t=$(now)
                claim_pod "m-dra-$i" >/dev/null
                wait_running "m-dra-$i" >/dev/null
                since "$t" >>"$DIR/claim-times"
                delete_pod_and_claim "m-dra-$i" >/dev/null
        done
        echo "MEASURE device-plugin pod creation -> Ready: $(stats "$DIR/dp-times")"
        echo "MEASURE claim pod creation -> Ready: $(stats "$DIR/claim-times")"
        awk -v c="$(p99 "$DIR/claim-times")" -v d="$(p99 "$DIR/dp-times")" 'BEGIN {
                printf "MEASURE claim pods p99 - device-plugin pods p99: %+.2f s (at most +1 s: %s)\n",
                        c - d, c - d <= 1 ? "holds" : "DOES NOT HOLD on this run" }'
        # What is asserted: every pod started, and no Prepare failed.
        no_failed_prepare
}

allocatable_not() { ! allocatable_is "$1" "$2"; }

# kubelet restart -> cdiplug registered again (the kubelet's log says so);
# cdiplug's pod replaced -> the node's allocatable showing its devices.
case_measure_restarts() {
        local before t i
        : >"$DIR/reg-times"
        : >"$DIR/alloc-times"
        for i in $(seq 5); do
                before=$(registered_lines)
                t=$(now)
                restart_kubelet
                until_true 60 registered_more "$before"
                since "$t" >>"$DIR/reg-times"
                until_true 60 allocatable_is example.com/dp 2
        done
        for i in $(seq 3); do
                t=$(now)
                kubectl -n "$CDIPLUG_NS" delete pod "$(cdiplug_pods)" --wait=false >/dev/null
                until_true 60 allocatable_not example.com/dp 2
                until_true 120 allocatable_is example.com/dp 2
                since "$t" >>"$DIR/alloc-times"
        done
        echo "MEASURE kubelet restart -> cdiplug registered again: $(stats "$DIR/reg-times" restarts)"
        echo "MEASURE cdiplug pod deleted -> allocatable showing its devices again: $(stats "$DIR/alloc-times" restarts)"
}
