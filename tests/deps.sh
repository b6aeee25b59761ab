#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install cdiplug's build and test dependencies from Debian 12 packages.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
      libcjson-dev libseccomp-dev libcap-ng-dev libcriterion-dev
      libevent-dev
      podman runc busybox-static prometheus groff-base)
# The Kubernetes API client for DRA (daemon/kube: libcurl, libyaml for
# kubeconfig files); OpenSSL for the tests' fake API server only.
pkgs+=(libcurl4-openssl-dev libyaml-dev libssl-dev)
# The clang builds (tests/build-matrix.sh, the UBSan run in tests/run-all.sh)
# and the fuzzers (tests/fuzz/run.sh); dpkg-buildflags for the matrix.
pkgs+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev dpkg-dev)
# deploy/check_dra_manifests.py, which tests/integration/test_manifests.c runs.
pkgs+=(python3 python3-yaml)
# The format check in tests/run-all.sh (.clang-format).
pkgs+=(clang-format-14)
# The static checks in tests/run-all.sh (.clang-tidy; every shell script).
pkgs+=(clang-tidy-14 shellcheck)
# The real cluster (tests/cluster): kube-proxy's iptables, the CNI bridge,
# the namespaces' veth, the PKI, the figures' arithmetic.
pkgs+=(iptables containernetworking-plugins iproute2 openssl bc)
missing=()
for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
