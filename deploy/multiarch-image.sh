#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deploy/multiarch-image.sh OUTDIR [NAME]
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
# the manifest lists linux/amd64 and linux/arm64, each image's
# architecture is its own, and each image's cdiplug runs (`podman run`,
# arm64 under qemu through binfmt_misc) when podman can run containers here.
# The packages land in OUTDIR too. Ends with "image: N passed, M failed".
# shellcheck disable=SC2317 # the check functions run through check "$@"; shellcheck 0.9 takes them for unreachable
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [NAME]" >&2; exit 2; }
outdir=$1
version=$(sed -n 's/^project(cdiplug VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
name=${2:-localhost/cdiplug:$version}
arches=(amd64 arm64)

passed=0
failed=0
logs=$(mktemp -d /tmp/cdiplug-image.XXXXXX)
trap 'rm -rf "$logs"' EXIT
check() {
	local what=$1 log
	shift
	log="$logs/$(printf '%s' "$what" | tr -c 'A-Za-z0-9_.-' '_').log"
	local t0=$SECONDS
	if "$@" >"$log" 2>&1; then
		passed=$((passed + 1))
		echo "ok    $what ($((SECONDS - t0)) s)"
		return 0
	fi
	failed=$((failed + 1))
	echo "FAIL  $what"
	tail -n 60 "$log" | sed 's/^/      | /'
	return 1
}

for a in "${arches[@]}"; do
	check "packages and image for $a (packaging/cross.sh $a --image)" \
		bash "$repo/packaging/cross.sh" "$a" "$outdir" --image
done

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

# Each architecture's image, picked from the manifest by podman as a node
# of that architecture would pull it, runs its own binary.
runs() {
	local a=$1 out
	out=$(podman run --rm --arch "$a" --network none "$name" version) || return 1
	echo "$out"
	grep -q "^cdiplug $version " <<<"$out" || return 1
	podman run --rm --arch "$a" --network none --entrypoint /usr/bin/cdiplug "$name" \
		check --config /etc/cdiplug/config.json
}
for a in "${arches[@]}"; do
	check "podman run --arch $a $name version, check" runs "$a"
done

echo "image: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
