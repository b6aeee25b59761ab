# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The second pass, sourced by cases.sh: cdiplug installed from the Helm
# chart's render (deploy/helm/cdiplug, rendered by the real Helm in
# tests/helm's module, cmd/render) in place of the printed manifests, with
# the same config and image; pods of both APIs get their devices again.

case_install_helm() {
        [ -x "$BIN/helm-render" ] || { echo "no helm-render: tests/helm's module did not build" >&2; return 1; }
        cleanup_pods
        kubectl delete -f "$DIR/manifests.yaml" --wait=true
        python3 - "$DIR/cdiplug-config.json" >"$DIR/helm-values.yaml" <<'EOP'
import json, sys
print(json.dumps({"config": json.load(open(sys.argv[1])),
                  "image": {"repository": "localhost/cdiplug", "tag": "test"}}))
EOP
        "$BIN/helm-render" "$TOP/deploy/helm/cdiplug" "$DIR/helm-values.yaml" default "v$K8S_VERSION" \
                >"$DIR/helm.yaml"
        kubectl apply -f "$DIR/helm.yaml"
        kubectl -n "$CDIPLUG_NS" rollout status daemonset/cdiplug --timeout=120s
        until_true 60 allocatable_is example.com/dp 2
        until_true 60 slice_has 3
        pod_yaml helm-dp example.com/dp | kubectl apply -f -
        claim_pod helm-dra
        wait_running helm-dp
        wait_running helm-dra
        expect_devices helm-dp dp 1
        expect_devices helm-dra dra 1
        no_failed_prepare
        cleanup_pods
}
