package k8stest

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	pluginregistration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// A rolling update of the DRA driver as the kubelet's own plugin watcher
// and DRA plugin manager see it: the new instance (its own POD_UID, so
// its own registration and DRA sockets) registers beside the old one,
// which then gets SIGTERM. Calls made back to back through the manager
// the whole time, as the kubelet makes them, must not fail for more than
// 1 s in all. The calls are NodeUnprepareResources of a claim never
// prepared, which needs no API server and succeeds on any live instance.

const draRollDriver = "cdiplug.example.com"

func TestDRARollover(t *testing.T) {
	root := t.TempDir()
	registry := filepath.Join(root, "plugins_registry")
	config := `{ "dra": { "driver": "` + draRollDriver + `" }, "resources": [
 { "name": "example.com/serial", "api": "dra", "match": [ { "path": "/dev/ttyS*" } ] } ] }`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pm := newDRAManager(ctx, fake.NewClientset())
	t.Cleanup(pm.Stop)
	startPluginWatcher(t, ctx, registry, pluginregistration.DRAPlugin, pm)

	call := func() error {
		p, err := pm.GetPlugin(draRollDriver)
		if err != nil {
			return err
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = p.NodeUnprepareResources(cctx, &drapbv1.NodeUnprepareResourcesRequest{
			Claims: []*drapbv1.Claim{neverPrepared()}})
		return err
	}

	kubeconfig := unavailableAPIServer(t)
	args := []string{"--kubelet-root", root, "--node-name", "node-1", "--kubeconfig", kubeconfig}
	a := newDaemon(t, config)
	a.Mknod("dev/ttyS0", 0)
	t.Setenv("POD_UID", "7e1f0a2b-0000-4000-8000-00000000000a")
	a.Start(args...)
	eventually(t, 10*time.Second, "the old instance to answer", func() bool { return call() == nil })

	var mu sync.Mutex
	var calls, failed int
	var first, last time.Time
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			err := call()
			mu.Lock()
			calls++
			mu.Unlock()
			if err != nil {
				mu.Lock()
				if failed == 0 {
					first = t0
				}
				failed++
				last = time.Now()
				mu.Unlock()
			}
		}
	}()

	b := newDaemon(t, config)
	b.Mknod("dev/ttyS0", 0)
	t.Setenv("POD_UID", "7e1f0a2b-0000-4000-8000-00000000000b")
	b.Start(args...)
	b.WaitLog("the kubelet registered driver", 10*time.Second)
	a.Stop()
	time.Sleep(time.Second)
	close(stop)
	<-done
	if err := call(); err != nil {
		t.Fatalf("after the rollover: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	window := time.Duration(0)
	if failed > 0 {
		window = last.Sub(first)
	}
	t.Logf("%d of %d calls failed across the rollover, within %v", failed, calls, window)
	if calls < 10 {
		t.Errorf("only %d calls across the rollover", calls)
	}
	if window > time.Second {
		t.Errorf("calls failed for %v across the rollover; at most 1 s", window)
	}
	if b.Log() == "" || a.Log() == "" {
		t.Errorf("a daemon logged nothing")
	}
}

// unavailableAPIServer is an API server that answers 503 to everything
// (over TLS, its certificate in the kubeconfig): the daemons keep retrying
// their slices, which this test does not look at, while their kubelet side
// serves. The kubeconfig's path.
func unavailableAPIServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := filepath.Join(dir, "kubeconfig")
	text := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: t\n"+
		"contexts:\n- name: t\n  context: {cluster: c, user: u}\n"+
		"clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: %s\n"+
		"users:\n- name: u\n  user: {token: test}\n", srv.URL, ca)
	if os.WriteFile(ca, pemCA, 0o644) != nil || os.WriteFile(kc, []byte(text), 0o600) != nil {
		t.Fatal("cannot write the kubeconfig")
	}
	return kc
}
