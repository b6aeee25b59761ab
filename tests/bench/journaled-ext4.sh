#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run cdiplug-bench with its kubelet, CDI and device dirs on a fresh
# journaled ext4 (a loop-mounted image), the kind of file system a node's
# /var/lib/kubelet is on. An ext4 without a journal (some VM images' root)
# makes each new socket inode skip every inode freed in the last 5 minutes,
# so there the restart figures measure the file system's recent history.
# Needs root (mount) and a loop device; arguments go to cdiplug-bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
        echo "journaled-ext4.sh: needs root to mount the image" >&2
        exit 1
fi
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" --target cdiplug cdiplug-bench >/dev/null
img=$(mktemp /tmp/cdiplug-bench-ext4-XXXXXX.img)
mnt=$(mktemp -d /tmp/cdiplug-bench-mnt-XXXXXX)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"; rm -f "$img"' EXIT
truncate -s 256M "$img"
mkfs.ext4 -q -F "$img"
mount -o loop "$img" "$mnt"
TMPDIR=$mnt build/cdiplug-bench "$@"
