package k8stest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A rolling update of the device-plugin DaemonSet (maxSurge 1) as the
// kubelet's own device manager sees it: the new pod's instance (its own
// POD_UID, so its own socket) registers beside the old one, the old one
// gets SIGTERM, and the resource keeps its allocatable device. The 1.34
// manager holds one endpoint per resource and, when the old instance's
// stream ends, drops the new one's connection: the new instance must
// register again by itself.

const (
	dpRollRes    = "example.com/serial"
	dpRollConfig = `{ "resources": [ { "name": "` + dpRollRes + `",
 "match": [ { "path": "/dev/ttyS*" } ] } ] }`
	// The device manager's registration socket dir, fixed in the kubelet;
	// run.sh gives each release a tmpfs there.
	dpRollDir = "/var/lib/kubelet/device-plugins"
)

func TestDevicePluginRollover(t *testing.T) {
	if os.Getenv("CDIPLUG_K8S_PRIVATE_KUBELET") != "1" {
		t.Skip("the device manager's socket path is fixed: run.sh runs this as root " +
			"in a mount namespace of its own, with a tmpfs on /var/lib/kubelet")
	}
	if err := os.MkdirAll(dpRollDir, 0o755); err != nil {
		t.Fatal(err)
	}
	allocatable := startDeviceManager(t)
	holds := func(n int64) func() bool {
		return func() bool { return allocatable(dpRollRes) == n }
	}

	a := newDaemon(t, dpRollConfig)
	a.Mknod("dev/ttyS0", 0)
	t.Setenv("POD_UID", "3d0c1a2b-0000-4000-8000-00000000000a")
	a.Start("--kubelet-dir", dpRollDir)
	eventually(t, 10*time.Second, "the old instance's device allocatable", holds(1))

	b := newDaemon(t, dpRollConfig)
	b.Mknod("dev/ttyS0", 0)
	t.Setenv("POD_UID", "3d0c1a2b-0000-4000-8000-00000000000b")
	b.Start("--kubelet-dir", dpRollDir)
	b.WaitLog("registered with the kubelet", 10*time.Second)
	if !holds(1)() {
		t.Fatalf("allocatable %d with both instances registered", allocatable(dpRollRes))
	}

	a.Stop()
	eventually(t, time.Second, "the device allocatable again after the old instance stopped", holds(1))
	// And it stays: nothing is left to take it away.
	time.Sleep(500 * time.Millisecond)
	if !holds(1)() {
		t.Fatalf("allocatable %d half a second after the old instance stopped", allocatable(dpRollRes))
	}
	socks, _ := filepath.Glob(filepath.Join(dpRollDir, "cdiplug-example.com-serial-*.sock"))
	if len(socks) != 1 {
		t.Errorf("instance sockets after the rollover: %v; want the new instance's only", socks)
	}
}
