package k8stest

// cdiplug as a DRA driver, driven by the kubelet's own code: the plugin
// manager (pkg/kubelet/pluginmanager) watching <kubelet-root>/plugins_registry
// with the DRA manager's registration handler, and the DRA manager
// (pkg/kubelet/cm/dra) preparing a Pod's ResourceClaims, handing the
// container's CDI devices to the runtime, reporting device health and
// wiping the node's ResourceSlices when it starts. ResourceClaims and the
// Node live in the test API server's store (apiserver_test.go), which
// cdiplug reads over HTTPS and the kubelet through the fake clientset.
//
// Stand-ins, the smallest honest ones: the active pods are the test's
// pod, every config source is ready, events go nowhere.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	pluginregistration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

const (
	draDriver = "cdiplug.example.com"
	draNode   = "node1"
	// One DRA resource (two serial ports) beside a device-plugin one.
	draConfig = `{ "dra": { "driver": "` + draDriver + `" }, "resources": [
  { "name": "example.com/serial", "api": "dra", "match": [ { "path": "/dev/ttyS*" } ] },
  { "name": "example.com/usb", "match": [ { "path": "/dev/bus/usb/*/*" } ] } ] }`
)

// draKubelet is cdiplug serving one node, the test API server, and the
// kubelet's plugin manager and DRA manager for that node.
type draKubelet struct {
	t    *testing.T
	ctx  context.Context
	API  *testAPIServer
	D    *daemon
	Root string // --kubelet-root
	M    *dra.Manager
	mu   sync.Mutex
	pods []*corev1.Pod // the active pods
}

func (k *draKubelet) activePods() []*corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.pods)
}

// readySources stands in for the kubelet's config sources: all ready.
type readySources struct{}

func (readySources) AddSource(string) {}
func (readySources) AllReady() bool   { return true }

// startDRA starts the kubelet's managers as the kubelet does, runs cdiplug
// with two serial ports, waits until the plugin manager has
// registered the driver, then for its slices. cdiplug publishes them only
// once the kubelet has registered the driver: the scheduler allocates a
// published device at once, and a Prepare before the registration fails
// ("not registered") and backs the pod off for a minute. Nor may the
// kubelet's plugin watcher log an error about cdiplug's sockets (it stats
// every name it is told of: a temporary name renamed away did).
func startDRA(t *testing.T) *draKubelet {
	t.Helper()
	draFeatures()
	k := &draKubelet{t: t, API: newTestAPIServer(t, draNode)}
	k.D = newDaemon(t, draConfig)
	k.D.Mknod("dev/ttyS0", 0)
	k.D.Mknod("dev/ttyS1", 1)
	k.D.Mknod("dev/bus/usb/001/001", 2)
	// Short: a unix socket path holds at most 107 bytes, and t.TempDir's
	// names are long.
	root, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	k.Root = root
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	k.ctx = ctx
	m, err := dra.NewManager(logger, k.API.Client, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k.M = m
	getNode := func(ctx context.Context) (*corev1.Node, error) {
		return k.API.Client.CoreV1().Nodes().Get(ctx, draNode, metav1.GetOptions{})
	}
	if err := draStart(ctx, m, k.activePods, getNode, readySources{}); err != nil {
		t.Fatal(err)
	}
	pm := pluginmanager.NewPluginManager(filepath.Join(k.Root, "plugins_registry"), &record.FakeRecorder{})
	var once sync.Once
	created := -1 // slices created when the kubelet first registered the driver
	pm.AddHandler(pluginregistration.DRAPlugin, observedHandler{m.GetWatcherHandler(), func() {
		once.Do(func() { created = k.API.Store.SliceEvents(watch.Added) })
	}})
	go draRunPluginManager(ctx, pm, readySources{})
	t.Cleanup(func() {
		cancel()
		draStop(m)
	})
	// The kubelet runs first, as on a node where the driver's pod starts:
	// its plugin watcher sees each name cdiplug makes as it is made.
	eventually(t, 20*time.Second, "the plugin watcher", func() bool {
		_, err := os.Stat(filepath.Join(k.Root, "plugins_registry"))
		return err == nil
	})
	k.D.Start("--kubelet-root", k.Root, "--node-name", draNode, "--kubeconfig", k.API.Kubeconfig)
	eventually(t, 20*time.Second, "the kubelet to register "+draDriver, func() bool {
		_, err := m.GetWatcherHandler().(*draplugin.DRAPluginManager).GetPlugin(draDriver)
		return err == nil
	})
	k.waitDevices(2)
	if created != 0 {
		t.Errorf("cdiplug created %d ResourceSlices before the kubelet registered its driver", created)
	}
	u, ok := logger.GetSink().(ktesting.Underlier)
	if !ok {
		t.Fatal("the kubelet's log cannot be read back (no ktesting.Underlier)")
	}
	for _, line := range strings.Split(u.GetBuffer().String(), "\n") {
		if strings.HasPrefix(line, "ERROR") && strings.Contains(line, draDriver) {
			t.Errorf("the kubelet logged an error about cdiplug's sockets: %s", line)
		}
	}
	return k
}

// devices are the devices cdiplug's ResourceSlices publish for this node,
// by the device node they stand for.
type sliceDevice struct{ Pool, Name string }

func (k *draKubelet) devices() map[string]sliceDevice {
	sel := fields.Set{"spec.nodeName": draNode, "spec.driver": draDriver}.AsSelector()
	out := map[string]sliceDevice{}
	for _, sl := range k.API.Store.Slices(sel) {
		for _, d := range sl.Spec.Devices {
			if p := d.Attributes["path"].StringValue; p != nil {
				out[*p] = sliceDevice{sl.Spec.Pool.Name, d.Name}
			}
		}
	}
	return out
}

func (k *draKubelet) waitDevices(n int) map[string]sliceDevice {
	k.t.Helper()
	var devs map[string]sliceDevice
	eventually(k.t, 20*time.Second, fmt.Sprintf("%d devices in cdiplug's ResourceSlices", n), func() bool {
		devs = k.devices()
		return len(devs) == n
	})
	return devs
}

// claimFor stores a ResourceClaim allocated to the devices at the given
// paths, each through request (a subrequest when it holds a "/"), reserved
// for a new Pod whose one container uses the claim's base request, and
// returns the Pod.
func (k *draKubelet) claimFor(name, request string, paths ...string) *corev1.Pod {
	k.t.Helper()
	devs := k.devices()
	podUID := types.UID("a1b2c3d4-0000-4000-8000-0000000000" + fmt.Sprintf("%02d", len(k.pods)))
	base, sub, _ := strings.Cut(request, "/")
	req := resourcev1.DeviceRequest{Name: base, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "serial"}}
	if sub != "" {
		req = resourcev1.DeviceRequest{Name: base, FirstAvailable: []resourcev1.DeviceSubRequest{{Name: sub, DeviceClassName: "serial"}}}
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("c1a1b2c3-0000-4000-8000-0000000000" + fmt.Sprintf("%02d", len(k.pods)))},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation:  &resourcev1.AllocationResult{},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name + "-pod", UID: podUID}},
		},
	}
	for _, p := range paths {
		d, ok := devs[p]
		if !ok {
			k.t.Fatalf("cdiplug publishes no device for %s: %v", p, devs)
		}
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: request, Driver: draDriver, Pool: d.Pool, Device: d.Name})
	}
	if err := k.API.Store.Create(claimsGVR, claim, "default"); err != nil {
		k.t.Fatal(err)
	}
	claimName := name
	// The pod's entry is named as the claim: 1.34's kubelet finds a
	// container's claim for its health report by the ResourceClaim's name.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: "default", UID: podUID},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: name, ResourceClaimName: &claimName}},
			Containers: []corev1.Container{{Name: "ctr", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: name, Request: base}}}}},
		},
	}
	k.mu.Lock()
	k.pods = append(k.pods, pod)
	k.mu.Unlock()
	return pod
}

// containerDevices prepares the pod and returns the host paths of the
// device nodes the container gets: the CDI names the DRA manager hands to
// the runtime, resolved and applied to an OCI spec by the CDI library, as
// containerd and CRI-O do, from cdiplug's spec dir.
func (k *draKubelet) containerDevices(pod *corev1.Pod) []string {
	k.t.Helper()
	if err := k.M.PrepareResources(k.ctx, pod); err != nil {
		k.t.Fatalf("PrepareResources: %v", err)
	}
	info, err := k.M.GetResources(pod, &pod.Spec.Containers[0])
	if err != nil {
		k.t.Fatalf("GetResources: %v", err)
	}
	var names []string
	for _, d := range info.CDIDevices {
		names = append(names, d.Name)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(k.D.CDIDir), cdi.WithAutoRefresh(false))
	if err != nil {
		k.t.Fatalf("the CDI library refuses cdiplug's spec dir: %v", err)
	}
	// Resolved by name, the container paths read from the device's edits:
	// applying the edits stats each host path, and the host root here is a
	// scratch dir, not the test machine's /dev.
	var paths []string
	for _, n := range names {
		dev := cache.GetDevice(n)
		if dev == nil {
			k.t.Fatalf("CDI device %q does not resolve in cdiplug's specs (errors: %v)", n, cache.GetErrors())
		}
		for _, dn := range dev.ContainerEdits.DeviceNodes {
			paths = append(paths, dn.Path)
		}
	}
	slices.Sort(paths)
	return paths
}

// health is the health the kubelet reports for the one device of the
// pod's container, as it writes it into the pod's status (the ResourceID
// is the CDI device ID, in 1.34 as in 1.37).
func (k *draKubelet) health(pod *corev1.Pod) corev1.ResourceHealth {
	status := &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ctr"}}}
	draUpdateStatus(k.ctx, k.M, pod, status)
	var all []corev1.ResourceHealth
	for _, rs := range status.ContainerStatuses[0].AllocatedResourcesStatus {
		all = append(all, rs.Resources...)
	}
	if len(all) != 1 {
		k.t.Fatalf("the kubelet reports the health of %d devices for a container with one: %+v", len(all), all)
	}
	return all[0]
}

// waitHealth waits until the kubelet reports want for the container's device.
func (k *draKubelet) waitHealth(pod *corev1.Pod, want corev1.ResourceHealthStatus, within time.Duration) corev1.ResourceHealth {
	k.t.Helper()
	var got corev1.ResourceHealth
	eventually(k.t, within, fmt.Sprintf("the kubelet to report the device %s", want), func() bool {
		got = k.health(pod)
		return got.Health == want
	})
	return got
}

func (k *draKubelet) checkpointHolds(uid types.UID) bool {
	b, err := os.ReadFile(filepath.Join(k.Root, "plugins", draDriver, "checkpoint.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		k.t.Fatal(err)
	}
	return strings.Contains(string(b), string(uid))
}

func TestDRAPrepareAndUnprepare(t *testing.T) {
	t.Parallel()
	k := startDRA(t)
	pod := k.claimFor("serial-0", "port", "/dev/ttyS0")
	claimUID := k.claimUID("serial-0")
	if got := k.containerDevices(pod); !slices.Equal(got, []string{"/dev/ttyS0"}) {
		t.Fatalf("the container gets device nodes %q, want [/dev/ttyS0]", got)
	}
	if !k.checkpointHolds(claimUID) {
		t.Errorf("cdiplug's checkpoint does not name the prepared claim %s", claimUID)
	}
	if err := k.M.UnprepareResources(k.ctx, pod); err != nil {
		t.Fatalf("UnprepareResources: %v", err)
	}
	if k.M.PodMightNeedToUnprepareResources(pod.UID) {
		t.Errorf("the kubelet still holds the pod's claims after Unprepare")
	}
	if k.checkpointHolds(claimUID) {
		t.Errorf("cdiplug's checkpoint still names claim %s after Unprepare", claimUID)
	}
}

// With DRAPrioritizedList the scheduler allocates a subrequest and records
// "request/subrequest"; the kubelet matches the container's request against
// the base request cdiplug answers, so a driver that answers the full name
// leaves the container without its device and no error anywhere.
func TestDRASubrequest(t *testing.T) {
	t.Parallel()
	k := startDRA(t)
	pod := k.claimFor("serial-any", "port/any", "/dev/ttyS1")
	if got := k.containerDevices(pod); !slices.Equal(got, []string{"/dev/ttyS1"}) {
		t.Fatalf("a claim allocated through subrequest port/any gives the container %q, want [/dev/ttyS1]", got)
	}
}

func (k *draKubelet) claimUID(name string) types.UID {
	c, err := k.API.Client.ResourceV1().ResourceClaims("default").Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return c.UID
}

// The kubelet wipes the node's ResourceSlices when it starts: a kubelet
// restarting after cdiplug published (a second DRA manager, as the new
// kubelet makes) deletes them, and cdiplug publishes them again at once,
// without waiting for the new kubelet to register the driver.
func TestDRASlicesWipedAtKubeletStartArePublishedAgain(t *testing.T) {
	t.Parallel()
	k := startDRA(t)
	m, err := dra.NewManager(klog.FromContext(k.ctx), k.API.Client, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	getNode := func(ctx context.Context) (*corev1.Node, error) {
		return k.API.Client.CoreV1().Nodes().Get(ctx, draNode, metav1.GetOptions{})
	}
	ctx, cancel := context.WithCancel(k.ctx)
	if err := draStart(ctx, m, k.activePods, getNode, readySources{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		draStop(m)
	})
	eventually(t, 20*time.Second, "the restarted kubelet's wipe of the node's slices", func() bool {
		return k.API.Store.SliceEvents(watch.Deleted) > 0
	})
	devs := k.waitDevices(2)
	for _, p := range []string{"/dev/ttyS0", "/dev/ttyS1"} {
		if _, ok := devs[p]; !ok {
			t.Errorf("after the wipe cdiplug publishes no device for %s: %v", p, devs)
		}
	}
}

// The health the kubelet reads: registration chose a health service (1.37
// opens the stream only when GetInfo advertises one), the device reads
// Healthy, and Unhealthy with a message within 5 s of its node vanishing.
func TestDRAHealthAsTheKubeletReportsIt(t *testing.T) {
	t.Parallel()
	k := startDRA(t)
	pod := k.claimFor("serial-h", "port", "/dev/ttyS0")
	k.containerDevices(pod)
	k.waitHealth(pod, corev1.ResourceHealthStatusHealthy, 10*time.Second)
	if err := os.Remove(filepath.Join(k.D.Host, "dev/ttyS0")); err != nil {
		t.Fatal(err)
	}
	got := k.waitHealth(pod, corev1.ResourceHealthStatusUnhealthy, 5*time.Second)
	if msg, ok := draHealthMessage(got); ok && msg == "" {
		t.Errorf("the kubelet reports %s Unhealthy with no message", got.ResourceID)
	}
}

// A device whose health does not change stays Healthy in the kubelet's
// eyes: never Unknown over 75 s, two and a half times every release's
// health timeout (30 s unless the driver sets one; cdiplug sends 30 s and
// resends its list every 10 s): a list that is not resent, or stops being
// resent in the first 45 s, shows as Unknown within the window. (It was
// 3 minutes: the same findings, for 3.5 minutes more of CI.)
func TestDRAHealthNeverTurnsUnknown(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 75 s")
	}
	t.Parallel()
	k := startDRA(t)
	pod := k.claimFor("serial-long", "port", "/dev/ttyS1")
	k.containerDevices(pod)
	k.waitHealth(pod, corev1.ResourceHealthStatusHealthy, 10*time.Second)
	for end := time.Now().Add(75 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if got := k.health(pod); got.Health != corev1.ResourceHealthStatusHealthy {
			msg, _ := draHealthMessage(got)
			t.Fatalf("with nothing changed the kubelet reports %s %s (%q)", got.ResourceID, got.Health, msg)
		}
	}
}
