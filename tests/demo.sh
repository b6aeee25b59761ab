#!/usr/bin/env bash
# The demo: cdiplug serving three resources to the test kubelet, no cluster.
# Devices come from a fake host tree (--host-root), so it runs anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" --target cdiplug test-kubelet >/dev/null

demo=$(mktemp -d /tmp/cdiplug-demo-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$demo"' EXIT
mkdir -p "$demo/host/dev" "$demo/cdi"
touch "$demo/host/dev/ttyUSB0" "$demo/host/dev/ttyUSB1" "$demo/host/dev/fuse" "$demo/host/dev/kvm"
cat > "$demo/config.json" <<'JSON'
{ "resources": [
    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ] },
    { "name": "example.com/fuse",   "match": [ { "path": "/dev/fuse" } ], "shares": 4 },
    { "name": "example.com/kvm",    "match": [ { "path": "/dev/kvm" } ],
      "allocate": [ "cdi-cri", "cdi-annotations" ] } ] }
JSON
sandbox=()
if [ "$(id -u)" -ne 0 ]; then
        echo "(not root: running with --no-sandbox; as root the daemon locks itself down)"
        sandbox=(--no-sandbox)
fi
echo "== cdiplug serve (log: $demo/daemon.log)"
build/cdiplug serve --config "$demo/config.json" --kubelet-dir "$demo/kubelet" \
        --cdi-dir "$demo/cdi" --host-root "$demo/host" "${sandbox[@]}" 2>"$demo/daemon.log" &
pid=$!
build/test-kubelet "$demo/kubelet" example.com/serial example.com/fuse example.com/kvm
echo
echo "== daemon log"
cat "$demo/daemon.log"
for f in "$demo"/cdi/*.json; do
        echo
        echo "== CDI spec $(basename "$f")"
        cat "$f"
done
kill -TERM "$pid"
wait "$pid"
echo
echo "== cdiplug stopped with status $?; its sockets are gone:"
ls -A "$demo/kubelet"
