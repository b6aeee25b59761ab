#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/fuzz/run.sh [SECONDS [HARNESS...]]: build the libFuzzer harnesses
# with clang 14 (-fsanitize=fuzzer,address,undefined) in build-fuzz/ and run
# each for SECONDS (default 60; as many at once as there are CPUs),
# starting from its committed seed corpus in tests/fuzz/corpus/<name>/. Any
# crash, sanitizer report, leak, or input slower than 10 s fails the run;
# the input is left in build-fuzz/artifacts/.
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
# fuzz_one H: one harness for $seconds s; its exit status in fuzz-H.rc.
fuzz_one() {
        local h=$1 rc=0
        mkdir -p "$dir/corpus/$h"
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
                "$dir/fuzz/fuzz-$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
                -max_len=4096 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$h-" \
                "$dir/corpus/$h" "tests/fuzz/corpus/$h" >"$dir/fuzz-$h.log" 2>&1 || rc=$?
        echo "$rc" >"$dir/fuzz-$h.rc"
}
# One harness per CPU at a time: each is single-threaded, so every one
# still gets its $seconds s of a whole CPU, in less wall time.
running=0
for h in "${harnesses[@]}"; do
        echo "== fuzz-$h for $seconds s"
        rm -f "$dir/fuzz-$h.rc"
        fuzz_one "$h" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
                wait -n || true
                running=$((running - 1))
        fi
done
wait
failed=()
for h in "${harnesses[@]}"; do
        if [ "$(cat "$dir/fuzz-$h.rc" 2>/dev/null)" != 0 ]; then
                echo "== fuzz-$h failed:"
                tail -50 "$dir/fuzz-$h.log"
                failed+=("$h")
        else
                echo "== fuzz-$h:"
                grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added)' \
                        "$dir/fuzz-$h.log" || true
        fi
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "fuzz: failed: ${failed[*]} (inputs in $dir/artifacts/)"
        exit 1
fi
echo "fuzz: ${#harnesses[@]} harnesses ran $seconds s each without a finding"
