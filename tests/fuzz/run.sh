#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fuzz/run.sh [SECONDS [HARNESS...]]: build the libFuzzer harnesses
# with clang 14 (-fsanitize=fuzzer,address,undefined) in build-fuzz/ and run
# each for SECONDS (default 60), starting from its committed seed corpus in
# tests/fuzz/corpus/<name>/. Any crash, sanitizer report, leak, or input
# slower than 10 s fails the run; the input is left in build-fuzz/artifacts/.
# New inputs go to build-fuzz/corpus/<name>/ (kept between runs), never into
# the repository: to commit a regression input, copy it there by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
        for f in tests/fuzz/fuzz_*.c; do
                n=${f##*/fuzz_}
                harnesses+=("${n%.c}")
        done
fi
dir=build-fuzz
jobs=$(nproc)

# float-cast-overflow is in clang's "undefined" already; named so the intent
# (config numbers) is visible. fuzzer-no-link instruments the libraries,
# the harness executables link libFuzzer itself (tests/fuzz/extra.cmake).
CC=clang-14 cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIPLUG_SANITIZE=ON \
        -DCDIPLUG_WERROR=ON -DCDIPLUG_FUZZ=ON \
        -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,float-cast-overflow" >/dev/null
targets=()
for h in "${harnesses[@]}"; do
        targets+=(--target "fuzz-$h")
done
cmake --build "$dir" -j "$jobs" "${targets[@]}" >/dev/null

mkdir -p "$dir/artifacts"
failed=()
for h in "${harnesses[@]}"; do
        mkdir -p "$dir/corpus/$h"
        echo "== fuzz-$h for $seconds s"
        if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
             "$dir/fuzz/fuzz-$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
                -max_len=4096 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$h-" \
                "$dir/corpus/$h" "tests/fuzz/corpus/$h" >"$dir/fuzz-$h.log" 2>&1; then
                tail -50 "$dir/fuzz-$h.log"
                failed+=("$h")
        else
                grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added)' \
                        "$dir/fuzz-$h.log" || true
        fi
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "fuzz: failed: ${failed[*]} (inputs in $dir/artifacts/)"
        exit 1
fi
echo "fuzz: ${#harnesses[@]} harnesses ran $seconds s each without a finding"
