#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build cdiplug twice (release flags, and ASan+UBSan) and run the whole test
# suite on both. Run as root for the sandbox tests (they skip otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
tests/deps.sh
jobs=$(nproc)
for variant in build:OFF build-asan:ON; do
        dir=${variant%%:*}
        san=${variant##*:}
        echo "== $dir (sanitizers $san)"
        cmake -S . -B "$dir" -DCDIPLUG_SANITIZE="$san" >/dev/null
        cmake --build "$dir" -j "$jobs" >/dev/null
        (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
