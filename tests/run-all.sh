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
echo "== format (clang-format-14, .clang-format)"
find base cdi daemon proto resources sandbox tests -name '*.[ch]' -print0 |
        xargs -0 clang-format-14 --dry-run --Werror
for variant in build:OFF build-asan:ON; do
        dir=${variant%%:*}
        san=${variant##*:}
        echo "== $dir (sanitizers $san)"
        cmake -S . -B "$dir" -DCDIPLUG_SANITIZE="$san" -DCDIPLUG_WERROR=ON >/dev/null
        cmake --build "$dir" -j "$jobs" >/dev/null
        (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
ubsan="-fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all"
echo "== build-ubsan (clang 14, $ubsan; unit tests and fuzz corpora)"
CC=clang-14 cmake -S . -B build-ubsan -DCDIPLUG_WERROR=ON \
        -DCMAKE_C_FLAGS="$ubsan -fno-omit-frame-pointer" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=undefined" >/dev/null
cmake --build build-ubsan -j "$jobs" >/dev/null
(cd build-ubsan && ctest --output-on-failure -j "$jobs" -L unit)
