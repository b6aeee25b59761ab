#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check the Helm chart (deploy/helm/cdiplug) with real Helm, built from the
# Go module helm.sh/helm/v3 at the release go.mod pins: `helm lint
# --strict` and `helm template` for several value sets, each rendering
# through deploy/check_manifests.py or deploy/check_dra_manifests.py, and
# the chart held to what `cdiplug manifests` (BUILD_DIR/cdiplug) and
# deploy/base make.
#
#   tests/helm/run.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/cdiplug)
#
# Ends with one line: "helm <version>: N passed, F failed, S skipped".
# Exits 0 when all pass, 1 when a test or the build fails, 77 when the
# tests cannot run here (no Go new enough, or the modules cannot be
# fetched), with the reason on stderr. Module and build caches live under
# ${CDIPLUG_GO_CACHE:-BUILD_DIR/go}, as tests/k8s/run.sh keeps them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
# shellcheck source=SCRIPTDIR/../lib/go.sh
. "$top/tests/lib/go.sh"
go_tier_env "helm tests" "$build"
python3 -c 'import yaml' 2>/dev/null || { echo "python3 with yaml (python3-yaml) is needed: tests/deps.sh" >&2; exit 1; }
cd "$here"

unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
go mod download >/dev/null 2>"$cache/helm-download.log" ||
        { cat "$cache/helm-download.log" >&2; skip "the Go modules of tests/helm/go.mod cannot be fetched"; }

version=$(sed -nE 's/^\s*(require\s+)?helm\.sh\/helm\/v3 v([0-9.]+).*/\2/p' go.mod | head -n1)
bin="$cache/helm-$version.test"
log="$cache/helm-$version.log"
echo "== helm $version: build"
if ! go vet . || ! go test -c -o "$bin" .; then
        echo "helm $version: 0 passed, 1 failed, 0 skipped (build failed)"
        exit 1
fi
go_build_only && exit 0
echo "== helm $version: run"
rc=0
CDIPLUG="$build/cdiplug" CDIPLUG_TOP="$top" "$bin" -test.v -test.timeout 10m 2>&1 | tee "$log" || rc=$?
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        failed=1 # a panic or a time-out ends the binary before it says FAIL
fi
echo "helm $version: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
