# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The test cluster's certificates and kubeconfigs, sourced by run.sh and by
# whatever else starts a control plane (controlplane.sh):
#
#   pki_make DIR NODE NODE_IP SERVICE_IP
#
# makes, in DIR: ca.{crt,key}; apiserver.{crt,key} for "kubernetes*",
# 127.0.0.1, NODE_IP and SERVICE_IP; kubelet-serving.{crt,key} for NODE and
# NODE_IP; sa.{key,pub} (service-account tokens); the client certificates
# admin (system:masters), kubelet (system:node:NODE in system:nodes, as Node
# authorization needs), kube-controller-manager, kube-scheduler, kube-proxy
# and apiserver-kubelet-client; and NAME.kubeconfig for each client, at
# https://NODE_IP:6443. ECDSA P-256 keys: quick to make, accepted by all.

# pki_cert DIR NAME SUBJECT [SAN]: a key and a certificate signed by DIR/ca.
pki_cert() {
        local dir=$1 name=$2 subj=$3 san=${4:-} ext
        openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
        ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=${san:+serverAuth,}clientAuth"
        [ -z "$san" ] || ext+="
subjectAltName=$san"
        openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
        openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
                -CAcreateserial -days 2 -sha256 -extfile <(printf '%s\n' "$ext") \
                -out "$dir/$name.crt" 2>/dev/null
        rm -f "$dir/$name.csr"
}

# pki_kubeconfig DIR NAME SERVER: DIR/NAME.kubeconfig with NAME's certificate.
pki_kubeconfig() {
        local dir=$1 name=$2 server=$3
        cat >"$dir/$name.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "$server", certificate-authority: "$dir/ca.crt"}
users:
- name: $name
  user: {client-certificate: "$dir/$name.crt", client-key: "$dir/$name.key"}
contexts:
- name: test
  context: {cluster: test, user: $name}
current-context: test
EOK
}

pki_make() {
        local dir=$1 node=$2 node_ip=$3 service_ip=$4 c
        mkdir -p "$dir"
        openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
        openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=cdiplug-test-ca" -days 2 -sha256 \
                -addext "basicConstraints=critical,CA:TRUE" \
                -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
                -out "$dir/ca.crt" 2>/dev/null
        pki_cert "$dir" apiserver "/CN=kube-apiserver" \
                "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$node_ip,IP:$service_ip"
        pki_cert "$dir" kubelet-serving "/CN=system:node:$node/O=system:nodes" "DNS:$node,IP:$node_ip"
        openssl ecparam -name prime256v1 -genkey -noout -out "$dir/sa.key" 2>/dev/null
        openssl ec -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
        pki_cert "$dir" admin "/CN=admin/O=system:masters"
        pki_cert "$dir" apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters"
        pki_cert "$dir" kubelet "/CN=system:node:$node/O=system:nodes"
        for c in kube-controller-manager kube-scheduler kube-proxy; do
                pki_cert "$dir" "$c" "/CN=system:$c"
        done
        for c in admin kubelet kube-controller-manager kube-scheduler kube-proxy; do
                pki_kubeconfig "$dir" "$c" "https://$node_ip:6443"
        done
}
