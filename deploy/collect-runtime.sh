#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# collect-runtime.sh BINARY ROOTFS [CONFIG]
#
# Build a minimal root file system for a FROM-scratch image: BINARY as
# /usr/bin/cdiplug, every shared library ldd says it loads (and libcurl,
# which it dlopen()s), the dynamic
# loader, an ld.so.cache for exactly those libraries, and CONFIG (if given)
# as /etc/cdiplug/config.json. Used by deploy/Containerfile's build stage;
# packaging/ci-check.sh runs the result with chroot to prove it complete.
#
# For a BINARY of another architecture (packaging/cross.sh, on a Debian
# with that architecture's libraries installed by multiarch), set
#   CDIPLUG_MULTIARCH  its multiarch triplet, e.g. aarch64-linux-gnu
#   CDIPLUG_LDSO       its dynamic loader, e.g. /lib/ld-linux-aarch64.so.1
# (run through qemu's binfmt_misc entry): ldd and ldconfig only know the
# build machine's architecture.
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 BINARY ROOTFS [CONFIG]" >&2
	exit 2
fi
bin=$1
root=$2
config=${3:-}

mkdir -p "$root/usr/bin" "$root/etc"

# Debian 12 has a merged /usr: /lib, /lib64, /bin, /sbin are symlinks into
# /usr, and ldd and the ELF interpreter name the short paths. Recreate the
# same links so those paths resolve inside the image too.
for d in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then
		target=$(readlink "/$d")
		case "$target" in
		/*) mkdir -p "$root$target" ;;
		*) mkdir -p "$root/$target" ;;
		esac
		ln -sfn "$target" "$root/$d"
	fi
done

install -m 0755 "$bin" "$root/usr/bin/cdiplug"

ldso=${CDIPLUG_LDSO:-}
multiarch=${CDIPLUG_MULTIARCH:-$(gcc -print-multiarch 2>/dev/null || true)}

# The libraries FILE loads, as ldd lists them; the loader's --list prints
# the same lines.
list_libs() {
	if [ -n "$ldso" ]; then
		"$ldso" --list "$1"
	else
		ldd "$1"
	fi
}

# ldd lines: "libfoo.so.1 => /lib/.../libfoo.so.1 (0x...)" and, for the
# loader, "/lib64/ld-linux-x86-64.so.2 (0x...)". A "not found" is fatal.
libs=$(list_libs "$bin") || { echo "ldd $bin failed" >&2; exit 1; }
# Libraries the binary dlopen()s, which ldd cannot see: libcurl.so.4, loaded
# by the DRA API client (daemon/kube/curl-dl.c), and what it needs. It is
# looked up in the multiarch directories first: ldconfig's cache on a
# multiarch system also lists other architectures' copies.
so=libcurl.so.4
path=
for d in "/usr/lib/$multiarch" "/lib/$multiarch"; do
	if [ -n "$multiarch" ] && [ -e "$d/$so" ]; then
		path=$d/$so
		break
	fi
done
if [ -z "$path" ] && [ -z "$ldso" ]; then
	path=$(ldconfig -p | awk -v so="$so" '$1 == so { print $NF; exit }')
fi
if [ -z "$path" ]; then
	echo "$so is not installed (cdiplug dlopen()s it for DRA)" >&2
	exit 1
fi
more=$(list_libs "$path") || { echo "ldd $path failed" >&2; exit 1; }
libs=$(printf '%s\n%s => %s (0x0)\n%s\n' "$libs" "$so" "$path" "$more")
if printf '%s\n' "$libs" | grep -q 'not found'; then
	printf '%s\n' "$libs" >&2
	echo "missing shared libraries" >&2
	exit 1
fi
printf '%s\n' "$libs" | awk '
	$2 == "=>" && $3 ~ /^\// { print $3; next }
	$1 ~ /^\// { print $1 }
' | sort -u | while IFS= read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	# -L: copy the file a SONAME symlink points to, under the SONAME.
	cp -L "$lib" "$root$lib"
done

# The loader finds the libraries in Debian's multiarch directories through
# the cache; build one that lists only what the image holds. The build
# machine's ldconfig skips another architecture's libraries, so a cross
# build's image has no cache: Debian's loader searches /lib/<multiarch> and
# /usr/lib/<multiarch> without one ("ld.so --help" lists them).
: > "$root/etc/ld.so.conf"
if [ -n "$multiarch" ]; then
	echo "/usr/lib/$multiarch" > "$root/etc/ld.so.conf"
fi
if [ -z "$ldso" ]; then
	ldconfig -r "$root"
fi

if [ -n "$config" ]; then
	mkdir -p "$root/etc/cdiplug"
	install -m 0644 "$config" "$root/etc/cdiplug/config.json"
fi
