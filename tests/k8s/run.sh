#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run cdiplug against real Kubernetes code: the kubelet's device manager,
# plugin manager and DRA manager, the API server's validation and the CDI
# reference library, built from the Go modules at the releases pinned in
# go.1.34.mod (the oldest release cdiplug supports) and go.mod (the newest).
#
#   tests/k8s/run.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/cdiplug)
#
# Ends with one line per release: "k8s <version>: N passed, F failed, S skipped".
# Exits 0 when all pass, 1 when a test or a build fails (with
# CDIPLUG_REQUIRE_K8S=1, as in .ci/run, a skipped test counts as failed),
# 77 when the tests cannot run here (no Go new enough, or the modules
# cannot be fetched), with the reason on stderr. Module and build caches live under
# ${CDIPLUG_GO_CACHE:-BUILD_DIR/go}, kept between the steps of one run and
# never shared with another checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
# shellcheck source=SCRIPTDIR/../lib/go.sh
. "$top/tests/lib/go.sh"
go_tier_env "k8s tests" "$build"
cd "$here"

# modfile:build tag, oldest release first.
releases=("go.1.34.mod:k8s_1_34" "go.mod:k8s_1_37")

unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }

for r in "${releases[@]}"; do
        modfile=${r%%:*}
        go mod download -modfile="$modfile" >/dev/null 2>"$cache/download.log" ||
                { cat "$cache/download.log" >&2; skip "the Go modules of $modfile cannot be fetched"; }
done

# The device manager's registration socket is fixed at
# /var/lib/kubelet/device-plugins/kubelet.sock: as root, each release runs
# in a mount namespace of its own with a tmpfs there, so the host's kubelet
# (if any) is never touched; otherwise those tests skip.
private_kubelet=()
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
        mkdir -p /var/lib/kubelet
        private_kubelet=(unshare --mount --propagation private)
fi

status=0
summary=()
for r in "${releases[@]}"; do
        modfile=${r%%:*}
        tag=${r##*:}
        version=$(sed -nE 's/^\s*k8s.io\/kubernetes v([0-9.]+).*/\1/p' "$modfile" | head -n1)
        bin="$cache/k8s-$version.test"
        log="$cache/k8s-$version.log"
        echo "== k8s $version ($modfile): build"
        if ! go test -c -modfile="$modfile" -tags "$tag" -o "$bin" .; then
                summary+=("k8s $version: 0 passed, 1 failed, 0 skipped (build failed)")
                status=1
                continue
        fi
        go_build_only && continue
        # vet after the build (it reads the compiled packages from the build
        # cache instead of compiling Kubernetes again), beside the run: it
        # first analyses every package under test, a minute of CPU, while
        # the tests mostly wait on the kubelet's timers. At nice 10: below
        # the tests, so their timing is theirs, and above the build matrix
        # CI runs at 19 beside everything, which would otherwise keep the
        # tests' result waiting.
        nice -n 10 go vet -modfile="$modfile" -tags "$tag" . >"$cache/vet-$version.log" 2>&1 &
        vet=$!
        echo "== k8s $version: run"
        run=("$bin" -test.v -test.timeout 20m)
        if [ ${#private_kubelet[@]} -gt 0 ]; then
                run=("${private_kubelet[@]}" sh -c 'mount -t tmpfs -o mode=0755 k8s-test /var/lib/kubelet && export CDIPLUG_K8S_PRIVATE_KUBELET=1 && exec "$@"' sh "${run[@]}")
        fi
        rc=0
        CDIPLUG="$build/cdiplug" K8S_VERSION="$version" "${run[@]}" 2>&1 | tee "$log" || rc=$?
        passed=$(grep -cE '^\s*--- PASS' "$log" || true)
        failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
        skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
        if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
                failed=1 # a panic or a time-out ends the binary before it says FAIL
        fi
        # Where the tests are required (.ci/run), a skipped one (a refused
        # mknod skips every daemon test) is a test that did not run.
        if [ "${CDIPLUG_REQUIRE_K8S:-0}" = 1 ] && [ "$skipped" -gt 0 ]; then
                grep -E '^\s*--- SKIP' "$log" >&2
                echo "k8s $version: CDIPLUG_REQUIRE_K8S=1: the $skipped skipped test(s) count as failed" >&2
                failed=$((failed + skipped))
        fi
        if ! wait "$vet"; then
                cat "$cache/vet-$version.log" >&2
                echo "k8s $version: go vet found the above" >&2
                failed=$((failed + 1))
        fi
        [ "$failed" -eq 0 ] || status=1
        summary+=("k8s $version: $passed passed, $failed failed, $skipped skipped")
done
go_build_only && exit "$status"
printf '%s\n' "${summary[@]}"
exit "$status"
