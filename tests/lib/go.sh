# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# What every Go tier shares (tests/k8s/run.sh, tests/helm/run.sh,
# tests/cluster/run.sh and fleet.sh), sourced:
#
#   go_tier_env WHAT BUILD
#                       Go on the PATH (/usr/local/go/bin first), the
#                       cdiplug binary in BUILD (exit 1 without it), Go
#                       1.26 or newer (else skip), and the module and
#                       build caches under ${CDIPLUG_GO_CACHE:-BUILD/go}
#                       (kept between the steps of one run, never shared
#                       with another checkout) exported, their top in
#                       $cache; builds without cgo.
#   skip REASON...      "WHAT skipped: REASON" on stderr, exit 77.
#   go_prefetch TOP CACHE
#                       the modules of every Go tier into CACHE/mod, for
#                       tests/run-all.sh to run in the background from its
#                       start, so the downloads happen while the C builds
#                       run. Quiet about failures, which each tier meets
#                       again (from the cache) and reports. (Compiling the
#                       tiers' packages there too, at nice 19, was tried
#                       and measured: on two hyperthreads it slowed the C
#                       tests by 20-40% for as much as it saved.)
#   go_kill_tree PID    PID and every process under it.
#   go_build_only       true when CDIPLUG_GO_STAGE=build: the tier builds
#                       what it would run (into the shared caches) and
#                       stops there, exit 0 once built. tests/run-all.sh's
#                       build lane runs the tiers so, ahead of their runs;
#                       a run after it finds everything built.
go_tier_what="Go tests"

skip() {
        echo "$go_tier_what skipped: $*" >&2
        exit 77
}

go_tier_env() {
        local build=$2 gov gomaj gomin
        go_tier_what=$1
        export PATH="/usr/local/go/bin:$PATH"
        [ -x "$build/cdiplug" ] || { echo "no cdiplug binary in $build: build it first" >&2; exit 1; }
        command -v go >/dev/null || skip "no Go toolchain (go 1.26 or newer at /usr/local/go/bin or on PATH)"
        gov=$(go env GOVERSION | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1 \2/')
        read -r gomaj gomin <<<"$gov"
        [ "$gomaj" -gt 1 ] || [ "$gomin" -ge 26 ] ||
                skip "Go $(go env GOVERSION) is older than 1.26, which the pinned modules need"
        cache=${CDIPLUG_GO_CACHE:-$build/go}
        go_cache_env "$cache"
}

# go_cache_env CACHE: the environment every Go command here runs in, the
# module and build caches under CACHE; the same for the tiers and the
# prefetch, so what one downloads the other finds.
go_cache_env() {
        mkdir -p "$1"
        export GOMODCACHE="$1/mod" GOCACHE="$1/build" GOFLAGS=-modcacherw GOTOOLCHAIN=local
        export CGO_ENABLED=0
}

go_prefetch() {
        local top=$1 cache=$2 m
        export PATH="/usr/local/go/bin:$PATH"
        command -v go >/dev/null || return 0
        go_cache_env "$cache"
        for m in k8s:go.1.34.mod k8s:go.mod helm:go.mod cluster:go.mod cluster/containerd:go.mod; do
                (cd "$top/tests/${m%%:*}" && go mod download -modfile="${m##*:}") || true
        done
}

go_build_only() {
        [ "${CDIPLUG_GO_STAGE:-}" = build ]
}

go_kill_tree() {
        local child
        for child in $(pgrep -P "$1" 2>/dev/null); do
                go_kill_tree "$child"
        done
        kill "$1" 2>/dev/null || true
}
