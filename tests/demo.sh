#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo: cdiplug serving three resources to the test kubelet, then one
# as a DRA driver to the test kubelet and the test API server; no cluster.
# Devices come from a fake host tree (--host-root), so it runs anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" --target cdiplug test-kubelet test-dra-demo >/dev/null

demo=$(mktemp -d /tmp/cdiplug-demo-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$demo"' EXIT
mkdir -p "$demo/host/dev" "$demo/cdi"
# Only character and block nodes are devices, and only root may make them.
# One node is one device, so each fake node gets numbers of its own, in
# character major 60, which is kept for local use: no driver answers it,
# so nothing reaches hardware.
if [ "$(id -u)" -ne 0 ]; then
        echo "the demo makes fake device nodes with mknod: run it as root" >&2
        exit 1
fi
minor=0
fake_node() {
        mknod -m 0666 "$demo/host/dev/$1" c 60 "$minor"
        minor=$((minor + 1))
}
for n in ttyUSB0 ttyUSB1 fuse kvm; do
        fake_node "$n"
done
cat > "$demo/config.json" <<'JSON'
{ "resources": [
    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ] },
    { "name": "example.com/fuse",   "match": [ { "path": "/dev/fuse" } ], "shares": 4 },
    { "name": "example.com/kvm",    "match": [ { "path": "/dev/kvm" } ],
      "allocate": [ "cdi-cri", "cdi-annotations" ] } ] }
JSON
echo "== cdiplug serve (log: $demo/daemon.log)"
# The metrics endpoint on a loopback port next to the packaged default
# (10391), so a cdiplug service running on this machine is left alone.
metrics=127.0.0.1:10392
build/cdiplug serve --config "$demo/config.json" --kubelet-dir "$demo/kubelet" \
        --cdi-dir "$demo/cdi" --host-root "$demo/host" \
        --metrics-address "$metrics" --pod-resources-socket "$demo/pod-resources.sock" \
        2>"$demo/daemon.log" &
pid=$!
build/test-kubelet --pod-resources "$demo/pod-resources.sock" --scrape "$metrics" \
        "$demo/kubelet" example.com/serial example.com/fuse example.com/kvm
echo
echo "== daemon log"
cat "$demo/daemon.log"
for f in "$demo"/cdi/*.json; do
        echo
        echo "== CDI spec $(basename "$f")"
        cat "$f"
done

echo
echo "== live reload: an editor saves a new config (write a temp file, rename it)"
echo "   serial also matches ttyACM*, kvm is removed, tun is added, fuse is unchanged"
mkdir -p "$demo/host/dev/net"
for n in ttyACM0 net/tun; do
        fake_node "$n"
done
cat > "$demo/config.json.tmp" <<'JSON'
{ "resources": [
    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" }, { "path": "/dev/ttyACM*" } ] },
    { "name": "example.com/fuse",   "match": [ { "path": "/dev/fuse" } ], "shares": 4 },
    { "name": "example.com/tun",    "match": [ { "path": "/dev/net/tun" } ] } ] }
JSON
mv "$demo/config.json.tmp" "$demo/config.json"
# The daemon sees the rename through inotify; wait (at most 10 s) for its
# summary line.
grep -m1 -q "reload:" < <(timeout 10 tail -n +1 -f "$demo/daemon.log") || true
sed -n '/config: reloading/,$p' "$demo/daemon.log"
echo
echo "== a kubelet now sees the new lists (same sockets for serial and fuse)"
build/test-kubelet "$demo/kubelet" example.com/serial example.com/tun
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
echo
echo "== cdiplug stopped with status $status; its sockets are gone:"
ls -A "$demo/kubelet"

echo
echo "== DRA: example.com/serial served as a DRA driver instead, to the test"
echo "   kubelet's DRA side and the test API server (HTTPS, a CA made now)"
mkdir -p "$demo/dra/cdi"
cat > "$demo/dra.json" <<'JSON'
{ "dra": { "driver": "cdiplug.example.com" },
  "resources": [
    { "name": "example.com/serial", "api": "dra", "match": [ { "path": "/dev/ttyUSB*" } ] } ] }
JSON
build/test-dra-demo "$demo/dra" cdiplug.example.com demo-node -- \
        "$PWD/build/cdiplug" serve --config "$demo/dra.json" \
        --kubelet-dir "$demo/dra/device-plugins" --cdi-dir "$demo/dra/cdi" \
        --host-root "$demo/host" --pod-resources-socket "$demo/dra/pod-resources.sock"
for f in "$demo"/dra/cdi/*.json; do
        echo
        echo "== CDI spec $(basename "$f") (the CDI names Prepare answered)"
        cat "$f"
done
