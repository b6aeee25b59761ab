package main

// One client certificate per node, signed by the test cluster's CA
// (pki.sh): CN system:node:NAME in O system:nodes, the identity a kubelet
// has, so that the Node authorizer and NodeRestriction let each cdiplug
// write its own node's ResourceSlices and nothing else. Made here rather
// than with openssl: a hundred of them take milliseconds in Go.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

type ca struct {
	dir  string // pki.sh's directory: ca.crt, ca.key
	cert *x509.Certificate
	key  any
}

func loadCA(dir string) (*ca, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s: ca.crt or ca.key holds no PEM block", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s/ca.crt: %w", dir, err)
	}
	// openssl ecparam -genkey writes SEC 1; a PKCS #8 key is taken too.
	var key any
	if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
		if key, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
			return nil, fmt.Errorf("%s/ca.key: %w", dir, err)
		}
	}
	return &ca{dir: dir, cert: cert, key: key}, nil
}

// nodeKubeconfig writes DIR/kubeconfig (with DIR/node.crt and node.key)
// for node's identity, at server.
func (c *ca) nodeKubeconfig(dir, node, server string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	crt, kf := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	kc := filepath.Join(dir, "kubeconfig")
	err = errors.Join(
		os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644),
		os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600),
		os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "%s", certificate-authority: "%s"}
users:
- name: %s
  user: {client-certificate: "%s", client-key: "%s"}
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, server, filepath.Join(c.dir, "ca.crt"), node, crt, kf, node)), 0o600))
	return kc, err
}
