#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/build-matrix.sh [BUILD_TYPE...]: build (no tests run) every
# CMAKE_BUILD_TYPE with gcc 12 and clang 14, each with the flags Debian's
# dh passes (dpkg-buildflags, hardening=+all as packaging/debian/rules sets
# it, CPPFLAGS folded into CFLAGS because CMake ignores CPPFLAGS), with
# CDIPLUG_WERROR=ON. A warning anywhere, even in code -Werror does not
# cover, fails the run. Build dirs are made fresh under a temp dir and
# removed, so nothing stale is reused. What is built is what the packages
# build (-DCDIPLUG_TESTS=OFF: the daemon and its libraries): the
# tests are built with -Werror by tests/run-all.sh, with gcc, gcc's
# sanitizers and clang, and building them ten times more was half of this
# script's time in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Debug Release RelWithDebInfo MinSizeRel None)
# CDIPLUG_MATRIX_CC="gcc" limits the run to some compilers.
read -r -a compilers <<<"${CDIPLUG_MATRIX_CC:-gcc clang-14}"
jobs=$(nproc)

eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
export CFLAGS="$CFLAGS $CPPFLAGS"
export LDFLAGS

work=$(mktemp -d /tmp/cdiplug-matrix.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=()
for cc in "${compilers[@]}"; do
        for type in "${types[@]}"; do
                dir="$work/$cc-$type"
                log="$dir.log"
                printf '== %-8s %-15s ' "$cc" "$type"
                start=$SECONDS
                if CC=$cc cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE="$type" \
                                -DCDIPLUG_WERROR=ON -DCDIPLUG_TESTS=OFF >"$log" 2>&1 &&
                   cmake --build "$dir" -j "$jobs" -- -k >>"$log" 2>&1 &&
                   ! grep -q 'warning:' "$log"; then
                        echo "ok ($((SECONDS - start)) s)"
                else
                        echo "FAILED ($((SECONDS - start)) s)"
                        grep -E -A5 'warning:|error:|Error' "$log" | head -60 || tail -30 "$log"
                        failed+=("$cc/$type")
                fi
                rm -rf "$dir"
        done
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "build matrix: failed: ${failed[*]}"
        exit 1
fi
echo "build matrix: all ${#compilers[@]}x${#types[@]} builds clean"
