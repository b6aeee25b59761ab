#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# packaging/cross.sh ARCH OUTDIR [--test] [--image] [--root-only]
#
# Build cdiplug's .deb and .rpm for ARCH (arm64, or amd64) from this source
# tree and leave them in OUTDIR, on an amd64 Debian 12 as root:
#
#   bash packaging/cross.sh arm64 out/
#
# The build runs in a clean Debian 12 root made with mmdebstrap and kept in
# $CDIPLUG_CROSS_ROOTS/bookworm-ARCH (default /var/cache/cdiplug-cross):
# amd64 tools (cmake, protoc-c, debhelper, rpm, gcc-aarch64-linux-gnu) and
# ARCH's build dependencies installed by multiarch, so the host's own build
# dependencies are never touched (libevent-dev is not Multi-Arch: same in
# Debian 12, so the arm64 one cannot sit beside the host's amd64 one).
# Nothing runs under emulation but the checks: the compiler is Debian's
# cross compiler. The root is made again when its package list changes or
# when it is older than a week (about 40 s).
#
# Checked every time: the packages' architecture, the binary's ELF machine,
# the .deb installed into the root (dpkg -i, then `cdiplug version` and
# `cdiplug check` of the shipped configuration, then dpkg -P), and the
# .rpm's binary run the same way. For arm64 these run under qemu user-mode
# emulation (qemu-user-static, through binfmt_misc, registered here when it
# is not).
#
#   --test   also build the unit tests for ARCH and run them (ctest -L unit,
#            plus the golden-file generate test) under emulation, and run
#            `cdiplug version`, `check` and `generate` on a fake host tree.
#   --image  also make the container image's root file system from the
#            .deb's binary (deploy/collect-runtime.sh), run it with chroot,
#            and build the image cdiplug:VERSION-ARCH with podman
#            (deploy/Containerfile.rootfs); deploy/multiarch-image.sh puts
#            both architectures into one manifest.
#   --root-only  make the build root (or find it made) and stop: .ci/run
#            makes both roots in the background while the tests run, as
#            the download they mostly are needs little CPU.
#
# Environment:
#   CDIPLUG_CROSS_ROOTS=DIR   where the build roots live (CI: a fresh one per run)
#   CDIPLUG_CROSS_MIRROR=URL  Debian mirror (default: the first one this
#                             machine's own apt sources name)
#   CDIPLUG_CROSS_NO_APT=1    do not apt-get install mmdebstrap/qemu-user-static
# Ends with "cross ARCH: N passed, M failed"; exits non-zero on any failure,
# 2 on bad arguments.
# shellcheck disable=SC2317 # the check functions run through check "$@"; shellcheck 0.9 takes them for unreachable
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
export LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive

usage() {
	echo "usage: $0 arm64|amd64 OUTDIR [--test] [--image] [--root-only]" >&2
	exit 2
}
[ $# -ge 2 ] || usage
arch=$1
outdir=$2
shift 2
run_tests=0
make_image=0
root_only=0
for a in "$@"; do
	case "$a" in
	--test) run_tests=1 ;;
	--image) make_image=1 ;;
	--root-only) root_only=1 ;;
	*) usage ;;
	esac
done

# Per architecture: the GNU triplet, rpm's name for it, the dynamic loader
# and the ELF machine as file(1) prints it.
case "$arch" in
arm64)
	triplet=aarch64-linux-gnu rpm_arch=aarch64 ldso=/lib/ld-linux-aarch64.so.1
	elf_machine="ARM aarch64"
	;;
amd64)
	triplet=x86_64-linux-gnu rpm_arch=x86_64 ldso=/lib64/ld-linux-x86-64.so.2
	elf_machine="x86-64"
	;;
*)
	echo "cross.sh: unknown architecture \"$arch\" (arm64 or amd64)" >&2
	exit 2
	;;
esac
[ "$(id -u)" -eq 0 ] || { echo "cross.sh: run as root (mmdebstrap, chroot)" >&2; exit 2; }
[ "$(dpkg --print-architecture)" = amd64 ] ||
	{ echo "cross.sh: the build machine must be amd64" >&2; exit 2; }

version=$(sed -n 's/^project(cdiplug VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
root=${CDIPLUG_CROSS_ROOTS:-/var/cache/cdiplug-cross}/bookworm-$arch
# The mirror apt already uses here, so the build reaches what this
# machine's package manager reaches.
host_mirror() {
	cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
		sed -nE 's#^(URIs:|deb)[[:space:]]+(\[[^]]*\][[:space:]]+)?([a-z]+://[^[:space:]]*/debian)/?([[:space:]].*)?$#\3#p' |
		head -n1
}
mirror=${CDIPLUG_CROSS_MIRROR:-$(host_mirror)}
[ -n "$mirror" ] || { echo "cross.sh: no Debian mirror in /etc/apt sources; set CDIPLUG_CROSS_MIRROR" >&2; exit 2; }
security=${mirror%/debian}/debian-security
mkdir -p "$outdir" || exit 1
outdir=$(cd "$outdir" && pwd)

# shellcheck source=packaging/lib/check.sh
. "$here/lib/check.sh" || exit 1
passed=0
failed=0
logs=$(mktemp -d /tmp/cdiplug-cross.XXXXXX)
check_logs=$logs
trap 'rm -rf "$logs"' EXIT

finish() {
	echo "cross $arch: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

# ---------------------------------------------------------------- root --

# The build dependencies (debian/control, plus Criterion and OpenSSL for
# the tests), for ARCH; the tools, for the build machine.
arch_pkgs=(libgrpc-dev libprotobuf-c-dev libcjson-dev libseccomp-dev libcap-ng-dev
	libevent-dev libcurl4-openssl-dev libyaml-dev pkgconf libcriterion-dev libssl-dev)
tools=(cmake protobuf-c-compiler debhelper dpkg-dev fakeroot rpm file cpio)
if [ "$arch" = amd64 ]; then
	include=("${tools[@]}" "${arch_pkgs[@]}")
	arches=amd64
else
	include=("${tools[@]}" crossbuild-essential-"$arch" qemu-user-static
		"${arch_pkgs[@]/%/:$arch}")
	arches=amd64,$arch
fi
stamp="bookworm $arches $mirror ${include[*]}"

host_tools() {
	local missing=() p
	for p in mmdebstrap qemu-user-static; do
		[ "$p" = qemu-user-static ] && [ "$arch" = amd64 ] && continue
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "${CDIPLUG_CROSS_NO_APT:-}" = 1 ]; then
		echo "missing: ${missing[*]}"
		return 1
	fi
	apt-get install -y --no-install-recommends "${missing[@]}"
}

make_root() {
	if [ -f "$root/.cdiplug-root" ] && [ "$(cat "$root/.cdiplug-root")" = "$stamp" ] &&
		[ -z "$(find "$root/.cdiplug-root" -mtime +7)" ]; then
		echo "reusing $root"
		return 0
	fi
	# Only ever delete a root this script made.
	if [ -e "$root" ] && [ ! -f "$root/.cdiplug-root" ] && [ -n "$(ls -A "$root")" ]; then
		echo "$root exists and is no build root of this script; not replacing it"
		return 1
	fi
	rm -rf "$root" "$root.new"
	mkdir -p "$(dirname "$root")" || return 1
	# /etc/hosts: the tests' servers listen on "localhost". The hook's $1
	# is mmdebstrap's, the new root.
	# shellcheck disable=SC2016
	mmdebstrap --mode=root --variant=buildd --architectures="$arches" \
		--include="$(IFS=,; echo "${include[*]}")" \
		--customize-hook='printf "127.0.0.1 localhost\n::1 localhost\n" >"$1/etc/hosts"' \
		bookworm "$root.new" "deb $mirror bookworm main" \
		"deb $mirror bookworm-updates main" "deb $security bookworm-security main" || return 1
	printf '%s\n' "$stamp" >"$root.new/.cdiplug-root"
	mv "$root.new" "$root"
}

# Another architecture's programs run through binfmt_misc and qemu. The
# "F" flag in Debian's entry opens the interpreter now, so it also works
# inside the root.
binfmt() {
	local dir=/proc/sys/fs/binfmt_misc name conf
	name=qemu-${triplet%%-*}
	conf=/usr/lib/binfmt.d/$name.conf
	if [ ! -e "$dir/register" ]; then
		mount -t binfmt_misc binfmt_misc "$dir" || return 1
	fi
	if [ -e "$dir/$name" ]; then
		cat "$dir/$name"
		grep -qx enabled "$dir/$name" || echo 1 >"$dir/$name"
	else
		[ -f "$conf" ] || { echo "$conf missing (qemu-user-static)"; return 1; }
		grep -v '^#' "$conf" >"$dir/register" || return 1
		cat "$dir/$name"
	fi
	# The proof: the root's loader runs.
	chroot "$root" "$ldso" --version | head -1
}

check "host tools (mmdebstrap, qemu-user-static)" host_tools || finish
check "build root $root" make_root || finish
[ "$root_only" = 0 ] || finish
if [ "$arch" != amd64 ]; then
	check "binfmt_misc runs $arch programs (qemu)" binfmt || finish
fi

# in_root CMD...: run CMD in the root with its own /proc and an empty /tmp,
# in a private mount namespace, so nothing stays mounted if this dies.
# shellcheck disable=SC2016 # the inner script's variables are its own
in_root() {
	unshare --mount --propagation private --fork -- sh -c '
		r=$1; shift
		mount -t proc proc "$r/proc" && mount -t tmpfs tmpfs "$r/tmp" &&
			mount -t tmpfs tmpfs "$r/dev/shm" && exec chroot "$r" "$@"' \
		sh "$root" "$@"
}

# ------------------------------------------------------------- sources --

# The tree as it would be committed (git's view when there is one), with
# debian/ where dpkg-buildpackage wants it.
copy_source() {
	local dest=$root/src/cdiplug-$version
	rm -rf "$root/src" && mkdir -p "$dest" || return 1
	if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$repo" && git ls-files -co --exclude-standard -z |
			while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
			tar --null -T - -cf -) | tar -C "$dest" -xf - || return 1
	else
		tar -C "$repo" --exclude=.git --exclude='./build*' -cf - . | tar -C "$dest" -xf - || return 1
	fi
	cp -a "$dest/packaging/debian" "$dest/debian"
}
check "source tree copied into the root" copy_source || finish

# The rest runs inside the root (packaging/cross/in-root.sh); its "check"
# lines join ours.
steps=(deb rpm)
[ "$run_tests" = 1 ] && steps+=(test)
[ "$make_image" = 1 ] && steps+=(rootfs)
in_root env ARCH="$arch" TRIPLET="$triplet" RPM_ARCH="$rpm_arch" LDSO="$ldso" \
	ELF_MACHINE="$elf_machine" VERSION="$version" \
	bash "/src/cdiplug-$version/packaging/cross/in-root.sh" "${steps[@]}" | tee "$logs/in-root.out"
while read -r p f; do
	passed=$((passed + p))
	failed=$((failed + f))
done < <(sed -n 's/^in-root: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$logs/in-root.out")
grep -q '^in-root: ' "$logs/in-root.out" || fail_in_root=1
if [ "${fail_in_root:-0}" = 1 ]; then
	failed=$((failed + 1))
	echo "FAIL  the build in the root ended early"
fi

collect() {
	local f
	rm -rf "$outdir/rootfs-$arch"
	for f in "$root"/src/out/*; do
		[ -e "$f" ] || continue
		cp -a "$f" "$outdir/" || return 1
	done
	ls -l "$outdir"
	[ -e "$outdir/cdiplug_${version}_$arch.deb" ] && [ -e "$outdir/cdiplug-$version-1.$rpm_arch.rpm" ]
}
check "packages copied to $outdir" collect

# lintian reads any architecture's .deb; packaging/ci-check.sh installs it
# (CI runs that first), and this check is only left out where it is absent.
deb_lintian() {
	lintian --fail-on error --display-info "$outdir/cdiplug_${version}_$arch.deb"
}
if command -v lintian >/dev/null; then
	check "deb: lintian reports no errors ($arch)" deb_lintian
else
	echo "note  lintian is not installed: the $arch .deb was not linted"
fi

if [ "$make_image" = 1 ] && [ -d "$outdir/rootfs-$arch" ]; then
	image() {
		local ctx=$logs/image
		mkdir -p "$ctx" || return 1
		cp -a "$outdir/rootfs-$arch" "$ctx/rootfs" || return 1
		podman rmi "localhost/cdiplug:$version-$arch" >/dev/null 2>&1 || true
		podman build --arch "$arch" -f "$repo/deploy/Containerfile.rootfs" \
			-t "localhost/cdiplug:$version-$arch" "$ctx" || return 1
		podman image inspect --format '{{.Os}}/{{.Architecture}}' \
			"localhost/cdiplug:$version-$arch" | tee "$logs/image-arch"
		grep -qx "linux/$arch" "$logs/image-arch"
	}
	check "image localhost/cdiplug:$version-$arch (podman build)" image
fi
finish
