#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build cdiplug twice with -Werror (release flags, and ASan+UBSan) and run the
# whole test suite on both, then once more with clang's UBSan, whose
# float-cast-overflow check gcc lacks, for the unit tests and fuzz corpora.
# Run as root for the sandbox tests (they skip otherwise). The build matrix
# (every build type, gcc and clang) is tests/build-matrix.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/deps.sh
jobs=$(nproc)
# The Go tiers' modules (hundreds of MB on a fresh machine) are fetched in
# the background while the C builds run; the tiers, last, find them in the
# cache.
# shellcheck source=SCRIPTDIR/lib/go.sh
. tests/lib/go.sh
gocache=${CDIPLUG_GO_CACHE:-$PWD/build/go}
mkdir -p "$gocache"
(go_prefetch "$PWD" "$gocache") >build/go-prefetch.log 2>&1 &
prefetch=$!
trap 'go_kill_tree "$prefetch"' EXIT
echo "== format (clang-format-14, .clang-format)"
find base cdi daemon proto resources sandbox tests -name '*.[ch]' -print0 |
        xargs -0 clang-format-14 --dry-run --Werror
echo "== shellcheck (every shell script)"
shellcheck tests/*.sh tests/*/*.sh packaging/*.sh packaging/*/*.sh packaging/debian/postrm deploy/*.sh .ci/run

# Paths (regular expressions, relative to the top) clang-tidy leaves out
# for now; none.
clang_tidy_todo=()

# clang-tidy-14 (.clang-tidy; tests/.clang-tidy) over every C file of the
# tree that the release build compiles, from its compile_commands.json; the
# generated protobuf-c files in the build directory are left out.
static_c() {
        local skip="build[^/]*/" top
        top=$(printf '%s' "$PWD" | sed 's/[][\\.^$*+?(){}|]/\\&/g')
        [ ${#clang_tidy_todo[@]} -eq 0 ] || skip+="|$(IFS='|'; echo "${clang_tidy_todo[*]}")"
        echo "== clang-tidy-14 (left out for now: ${clang_tidy_todo[*]:-nothing})"
        # run-clang-tidy-14 always asks for colour: strip it for the log.
        run-clang-tidy-14 -p build -j "$jobs" -quiet "^$top/(?!$skip)" 2>&1 |
                sed 's/\x1b\[[0-9;]*m//g' >build/clang-tidy.log || {
                grep -E -A8 ': (warning|error): ' build/clang-tidy.log || tail -n 40 build/clang-tidy.log
                echo "clang-tidy found the above (full output: build/clang-tidy.log)"
                return 1
        }
}

for variant in build:OFF build-asan:ON; do
        dir=${variant%%:*}
        san=${variant##*:}
        echo "== $dir (sanitizers $san)"
        cmake -S . -B "$dir" -DCDIPLUG_SANITIZE="$san" -DCDIPLUG_WERROR=ON \
                -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
        cmake --build "$dir" -j "$jobs" >/dev/null
        # Before the tests: the generated protobuf-c headers now exist.
        [ "$dir" != build ] || static_c
        (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
ubsan="-fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all"
echo "== build-ubsan (clang 14, $ubsan; unit tests and fuzz corpora)"
CC=clang-14 cmake -S . -B build-ubsan -DCDIPLUG_WERROR=ON \
        -DCMAKE_C_FLAGS="$ubsan -fno-omit-frame-pointer" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=undefined" >/dev/null
cmake --build build-ubsan -j "$jobs" >/dev/null
(cd build-ubsan && ctest --output-on-failure -j "$jobs" -L unit)
# The Go tiers: what takes longest to run first. Their builds (cold, about
# 25 minutes of both CPUs) go one after another in a lane of their own in
# the background, at nice 10; their runs, which mostly wait on the
# kubelet's and the cluster's timers (6-22% of the CPUs, measured), follow
# in the foreground, each once the lane has built its tier, so the later
# tiers build beside the earlier ones' runs instead of after them. The
# lane only warms the caches: each run builds again (up to date in
# seconds), so a build that failed in the lane fails again in its run,
# which reports it (the lane's own output: build/go-lane/TIER.log).
wait "$prefetch" || true
go_lane=build/go-lane
rm -rf "$go_lane"
mkdir -p "$go_lane"
(
        for tier in cluster k8s helm; do
                CDIPLUG_GO_STAGE=build nice -n 10 "tests/$tier/run.sh" >"$go_lane/$tier.log" 2>&1 || true
                : >"$go_lane/$tier.built"
        done
) &
lane=$!
trap 'go_kill_tree "$prefetch"; go_kill_tree "$lane"' EXIT
# go_tier WHAT TIER [SCRIPT]: a Go tier (tests/TIER/run.sh, or SCRIPT),
# against the release build, once the lane has built TIER. It needs Go
# and the Go module proxy; without them (exit 77) it is skipped and says
# why, except where CDIPLUG_REQUIRE_K8S=1 (.ci/run), where a skip fails.
go_tier() {
        local script=${3:-tests/$2/run.sh} rc=0
        while [ ! -e "$go_lane/$2.built" ] && kill -0 "$lane" 2>/dev/null; do
                sleep 1
        done
        echo "== $1 ($script)"
        "$script" build || rc=$?
        if [ "$rc" -eq 77 ]; then
                if [ "${CDIPLUG_REQUIRE_K8S:-0}" = 1 ]; then
                        echo "$1 is required here (CDIPLUG_REQUIRE_K8S=1)" >&2
                        exit 1
                fi
                echo "NOTE: $1 ($script) was skipped: see the reason above"
        elif [ "$rc" -ne 0 ]; then
                exit "$rc"
        fi
}
# A real one-node cluster built from the same Go modules as tests/k8s
# (kube-apiserver, etcd, controller-manager, scheduler, kubelet, kube-proxy,
# containerd): cdiplug as the printed DaemonSet and from the chart, pods
# getting devices by both APIs, the lifecycle (about 7 minutes after the
# build).
go_tier "a real cluster" cluster
# 100 DRA instances against the cluster's kube-apiserver and etcd (built
# above; about 2.5 minutes): restarts, a wipe, two instances that disagree.
go_tier "a fleet against a real API server" cluster tests/cluster/fleet.sh
# Real Kubernetes as the peer: the kubelet's device manager and DRA
# manager, the API server's validation, the CDI library, at the oldest and
# newest supported releases.
go_tier "real Kubernetes" k8s
# The Helm chart (deploy/helm/cdiplug) with real Helm, built from its Go
# module: lint, the renderings through the manifests' offline checks, and
# agreement with `cdiplug manifests` and deploy/base.
go_tier "the Helm chart" helm
