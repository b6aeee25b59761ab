#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deploy/multiarch-image.sh [--test] OUTDIR [NAME]
#
# The container image for amd64 and arm64 as one manifest list, NAME
# (default localhost/cdiplug:VERSION), in podman's local storage; run as
# root on an amd64 Debian 12:
#
#   bash deploy/multiarch-image.sh out/
#   podman manifest push --all localhost/cdiplug:0.1.0 docker://REGISTRY/cdiplug:0.1.0
#
# Each architecture's root file system is made by packaging/cross.sh ARCH
# OUTDIR --image (its .deb's binary, collected by deploy/collect-runtime.sh
# in a clean Debian 12 root, cross-compiled for arm64), built FROM scratch
# with deploy/Containerfile.rootfs, and added to the manifest. The check:
# the manifest lists linux/amd64 and linux/arm64; pushed as an OCI layout
# (OUTDIR/image-oci), each architecture's pull from it is an image of that
# architecture whose cdiplug runs (`podman run`; arm64 under qemu through
# binfmt_misc). The packages land in OUTDIR too. --test also runs the unit tests on arm64
# (packaging/cross.sh arm64 --test; the amd64 ones run natively in
# tests/run-all.sh). Ends with "image: N passed, M failed".
# shellcheck disable=SC2317 # the check functions run through check "$@"; shellcheck 0.9 takes them for unreachable
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
arm64_test=()
if [ "${1:-}" = --test ]; then
	arm64_test=(--test)
	shift
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 [--test] OUTDIR [NAME]" >&2
	exit 2
fi
outdir=$1
# podman names an image pulled from an OCI layout after its path.
case $outdir in *[A-Z]*)
	echo "multiarch-image.sh: OUTDIR must be a lowercase path (podman names the pulled image after it): $outdir" >&2
	exit 2 ;;
esac
version=$(sed -n 's/^project(cdiplug VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
name=${2:-localhost/cdiplug:$version}
arches=(amd64 arm64)

# shellcheck source=packaging/lib/check.sh
. "$repo/packaging/lib/check.sh" || exit 1
passed=0
failed=0
logs=$(mktemp -d /tmp/cdiplug-image.XXXXXX)
check_logs=$logs
trap 'rm -rf "$logs"' EXIT
# cross ARCH ARGS...: packaging/cross.sh, its lines shown as they come.
cross() {
	local what="packaging/cross.sh $*"
	echo "== $what"
	if bash "$repo/packaging/cross.sh" "$1" "$outdir" "${@:2}" 2>&1 | sed 's/^/   /'; then
		passed=$((passed + 1))
		echo "ok    $what"
	else
		failed=$((failed + 1))
		echo "FAIL  $what"
	fi
}
cross amd64 --image
cross arm64 --image "${arm64_test[@]}"

manifest() {
	podman manifest rm "$name" >/dev/null 2>&1 || true
	podman manifest create "$name" || return 1
	local a
	for a in "${arches[@]}"; do
		podman manifest add --arch "$a" --os linux "$name" \
			"containers-storage:localhost/cdiplug:$version-$a" || return 1
	done
	podman manifest inspect "$name" | tee "$logs/manifest.json"
	python3 - "$logs/manifest.json" "${arches[@]}" <<-'EOF'
		import json, sys
		m = json.load(open(sys.argv[1]))
		got = sorted(f"{e['platform']['os']}/{e['platform']['architecture']}" for e in m["manifests"])
		want = sorted(f"linux/{a}" for a in sys.argv[2:])
		print("platforms:", got)
		sys.exit(0 if got == want else 1)
	EOF
}
check "manifest $name lists linux/amd64 and linux/arm64" manifest

# The manifest list as a registry would hold it, an OCI layout in
# OUTDIR/image-oci (push it with `podman manifest push --all` as above, or
# skopeo), and each architecture's image pulled from it as a node of that
# architecture pulls it: the pulled image is that architecture's and its
# cdiplug runs (arm64 under qemu through binfmt_misc, registered by
# packaging/cross.sh).
oci=$outdir/image-oci
push_oci() {
	rm -rf "$oci"
	podman manifest push --all "$name" "oci:$oci" && ls "$oci"
}
check "manifest pushed as an OCI layout to $oci" push_oci

pulled_runs() {
	local a=$1 id arch out
	id=$(podman pull -q --arch "$a" "oci:$oci") || return 1
	arch=$(podman image inspect --format '{{.Os}}/{{.Architecture}}' "$id") || return 1
	echo "pulled $id: $arch"
	[ "$arch" = "linux/$a" ] || return 1
	# As in tests/integration/test_podman.c: this sandbox's root lacks
	# CAP_SYS_RESOURCE, so the limits stay below the inherited hard ones.
	local opts=(--rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
	out=$(podman run "${opts[@]}" "$id" version) || return 1
	echo "$out"
	grep -q "^cdiplug $version " <<<"$out" || return 1
	podman run "${opts[@]}" "$id" check --config /etc/cdiplug/config.json
}
for a in "${arches[@]}"; do
	check "pulled for $a from the manifest, cdiplug version and check run" pulled_runs "$a"
done

echo "image: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
