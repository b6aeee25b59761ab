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

	corev1 "k8s.io/api/core/v1"
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

// A rolling update under the kubelet's own DRA manager (its health
// handling included, not a stand-in) and the test API server, which
// answers: the old instance (A) prepares half the pods' claims, the new
// one (B) starts beside it, and then, all at once, the kubelet unprepares
// what A prepared (those calls reach B, the newest), prepares the other
// half, and A gets SIGTERM. The one checkpoint must end up holding exactly
// the claims prepared and not unprepared. A failed call is retried, as
// the kubelet retries at a pod's next sync. The time the kubelet reports
// a device of a pod that stays prepared as not Healthy after A stops is
// measured: the 1.37 kubelet clears the health of a driver's devices when
// one of its instances' stream ends, until the next list comes.
func TestDRARolloverSharedCheckpoint(t *testing.T) {
	t.Setenv("POD_UID", "7e1f0a2b-0000-4000-8000-0000000000a1")
	k := startDRA(t)
	const n = 16
	watched := k.claimFor("watched", "port", "/dev/ttyS1")
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = k.claimFor(fmt.Sprintf("roll-%02d", i), "port", "/dev/ttyS0")
	}
	if err := k.M.PrepareResources(k.ctx, watched); err != nil {
		t.Fatalf("PrepareResources: %v", err)
	}
	for _, p := range pods[:n/2] {
		if err := k.M.PrepareResources(k.ctx, p); err != nil {
			t.Fatalf("PrepareResources on A: %v", err)
		}
	}
	k.waitHealth(watched, corev1.ResourceHealthStatusHealthy, 10*time.Second)

	b := newDaemon(t, draConfig)
	b.Mknod("dev/ttyS0", 0)
	b.Mknod("dev/ttyS1", 1)
	b.Mknod("dev/bus/usb/001/001", 2)
	t.Setenv("POD_UID", "7e1f0a2b-0000-4000-8000-0000000000b1")
	b.Start("--kubelet-root", k.Root, "--node-name", draNode, "--kubeconfig", k.API.Kubeconfig)
	b.WaitLog("the kubelet registered driver", 20*time.Second)

	// The watched device's health, sampled until the end.
	var hmu sync.Mutex
	var notHealthy time.Duration
	var stopped time.Time
	sample := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		last := time.Now()
		for {
			select {
			case <-sample:
				return
			case <-time.After(10 * time.Millisecond):
			}
			status := &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ctr"}}}
			draUpdateStatus(k.ctx, k.M, watched, status)
			healthy := false
			for _, rs := range status.ContainerStatuses[0].AllocatedResourcesStatus {
				for _, r := range rs.Resources {
					healthy = r.Health == corev1.ResourceHealthStatusHealthy
				}
			}
			now := time.Now()
			hmu.Lock()
			if !healthy {
				notHealthy += now.Sub(last)
			}
			hmu.Unlock()
			last = now
		}
	}()

	var wg sync.WaitGroup
	var fmu sync.Mutex
	failures := 0
	retry := func(what string, p *corev1.Pod, call func(context.Context, *corev1.Pod) error) {
		defer wg.Done()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := call(k.ctx, p)
			if err == nil {
				return
			}
			fmu.Lock()
			failures++
			fmu.Unlock()
			if time.Now().After(deadline) {
				t.Errorf("%s of %s: %v", what, p.Name, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := 0; i < n/2; i++ {
		wg.Add(2)
		go retry("UnprepareResources", pods[i], k.M.UnprepareResources)
		go retry("PrepareResources", pods[n/2+i], k.M.PrepareResources)
	}
	stopped = time.Now()
	k.D.Stop()
	wg.Wait()
	// Long enough for the kubelet's reaction to A's end to show.
	k.waitHealth(watched, corev1.ResourceHealthStatusHealthy, 20*time.Second)
	close(sample)
	<-sampled

	lost, back := 0, 0
	for i := range pods {
		uid := k.claimUID(fmt.Sprintf("roll-%02d", i))
		if held := k.checkpointHolds(uid); i < n/2 && held {
			back++
		} else if i >= n/2 && !held {
			lost++
		}
	}
	if !k.checkpointHolds(k.claimUID("watched")) {
		lost++
	}
	hmu.Lock()
	t.Logf("%d calls across the rollover (%d failed and retried): %d claims lost, %d unprepared ones kept; "+
		"the kubelet reported a prepared device not Healthy for %v after A stopped at %v",
		n+1, failures, lost, back, notHealthy, stopped.Format(time.RFC3339Nano))
	hmu.Unlock()
	if lost != 0 || back != 0 {
		t.Errorf("the checkpoint lost %d prepared claims and kept %d unprepared ones", lost, back)
	}
	// The new instance sends its list again once the old one's socket
	// goes (200 ms later); without that, the next list came with the 10 s
	// resend, and the device stayed without health that long.
	hmu.Lock()
	defer hmu.Unlock()
	if draHealthGapChecked && notHealthy > 5*time.Second {
		t.Errorf("the kubelet reported the device not Healthy for %v across the rollover; at most 5 s", notHealthy)
	}
}
