#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the test cluster's programs into OUT_DIR: the Kubernetes commands
# and etcd from this module (pinned by go.mod at the release of tests/k8s),
# containerd and ctr from containerd/ (a module of its own), the pause
# program of the pause image, the image writer (cmd/ociimage) and, from
# tests/helm's module, the chart renderer (helm-render).
#
#   tests/cluster/build.sh OUT_DIR [control-plane]
#
# With "control-plane", only kube-apiserver and etcd (what fleet.sh needs):
# the rest, containerd above all, is minutes of a CI run's budget.
#
# Expects GOMODCACHE, GOCACHE and the rest of the Go environment set by
# run.sh; prints each step and exits non-zero when a build fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
cd "$here"

version=$(sed -nE 's/^\s*k8s.io\/kubernetes v([0-9]+)\.([0-9]+)\.([0-9]+).*/\1 \2 \3/p' go.mod | head -n1)
read -r major minor patch <<<"$version"
# Without these the programs call themselves v0.0.0, which clients and the
# kubelet's version checks cannot parse as a release.
ldv=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldv+=" -X $pkg.gitVersion=v$major.$minor.$patch -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldv+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

if [ "${2:-}" = control-plane ]; then
        echo "== cluster: build kube-apiserver v$major.$minor.$patch and etcd"
        exec go build -ldflags "-s -w$ldv" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver ./cmd/etcd
fi
echo "== cluster: build Kubernetes v$major.$minor.$patch and etcd"
go build -ldflags "-s -w$ldv" -o "$out/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kube-proxy \
        k8s.io/kubernetes/cmd/kubelet \
        k8s.io/kubernetes/cmd/kubectl \
        ./cmd/etcd ./cmd/pause ./cmd/ociimage
echo "== cluster: build containerd"
(cd containerd && go build -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w" -o "$out/" \
        github.com/containerd/containerd/v2/cmd/containerd \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
        github.com/containerd/containerd/v2/cmd/ctr)
echo "== cluster: build the Helm chart renderer (tests/helm)"
(cd ../helm && go build -ldflags "-s -w" -o "$out/helm-render" ./cmd/render)
