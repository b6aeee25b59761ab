package k8stest

// cdiplug's device plugins driven by the kubelet's own device manager
// (pkg/kubelet/cm/devicemanager): its registration server on the fixed
// kubelet.sock, its plugin client dialling cdiplug's sockets, its
// checkpoint, and its allocation logic, GetPreferredAllocation included.
//
// Collaborators: the topology store is topologymanager's own fake (the
// package's, with or without a NUMA hint); the checkpoint is the manager's
// real file in the device-plugin dir; the container map is containermap's;
// sourcesReady is the kubelet config package's, with a readiness function
// of ours, because the kubelet answers it from pod sources (API server,
// static files) that do not exist here. Active pods are a plain list this
// file keeps: the kubelet's pod manager is the smallest thing that would
// do it and would bring the whole kubelet along.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// dpDir is the kubelet's device-plugin dir: kubelet.sock, the plugins'
// sockets and the checkpoint. The manager has it built in.
var dpDir = filepath.Clean(pluginapi.DevicePluginPath)

const dpWait = 20 * time.Second

// Three resources: plain nodes (serial), one node shared four ways (fuse),
// and nodes on two NUMA nodes (accel: three on node 0, four on node 1).
const dpConfig = `{"resources": [
  {"name": "example.com/serial", "match": [{"path": "/dev/ttyS*"}]},
  {"name": "example.com/fuse", "match": [{"path": "/dev/fuse"}], "shares": 4},
  {"name": "example.com/accel", "match": [{"path": "/dev/accel/accel*"}]}
]}`

// dpNeedPrivateKubelet skips unless run.sh gave this process its own
// /var/lib/kubelet, then empties the device-plugin dir: a new node.
func dpNeedPrivateKubelet(t *testing.T) {
	t.Helper()
	if os.Getenv("CDIPLUG_K8S_PRIVATE_KUBELET") != "1" {
		t.Skip("the device manager's socket is fixed at " + pluginapi.KubeletSocket +
			": these tests run only under tests/k8s/run.sh as root, which mounts a private tmpfs there")
	}
	if err := os.RemoveAll(dpDir); err != nil {
		t.Fatal(err)
	}
}

// dpHost builds the three resources' devices under a new daemon's host root.
func dpHost(t *testing.T, config string) *daemon {
	t.Helper()
	d := newDaemon(t, config)
	d.Mknod("dev/ttyS0", 0)
	d.Mknod("dev/ttyS1", 1)
	d.Mknod("dev/fuse", 2)
	for i := uint32(0); i < 7; i++ {
		numa := 0
		if i >= 3 {
			numa = 1
		}
		d.NumaNode(fmt.Sprintf("dev/accel/accel%d", i), 16+i, numa)
	}
	return d
}

func dpStartDaemon(d *daemon) {
	d.Start("--kubelet-dir", dpDir, "--pod-resources-socket", "")
}

// dpKubelet is the device manager as the kubelet runs it, with the pods
// the kubelet has admitted.
type dpKubelet struct {
	t     *testing.T
	m     *devicemanager.ManagerImpl
	mu    sync.Mutex
	pods  []*v1.Pod
	ready atomic.Bool
}

// startDPKubelet starts a manager on the device-plugin dir, as the kubelet
// does at start: the containers the runtime reports (with those running)
// and the pods it already runs let it restore its checkpoint.
func startDPKubelet(t *testing.T, store topologymanager.Store, containers containermap.ContainerMap,
	running sets.Set[string], pods ...*v1.Pod) *dpKubelet {
	t.Helper()
	k := &dpKubelet{t: t, pods: pods}
	k.ready.Store(len(pods) == 0)
	// No machine topology: only the manager's topology hints read it, and
	// the hint comes from the store here.
	m, err := dpNewManager(store)
	if err != nil {
		t.Fatal(err)
	}
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return k.ready.Load() })
	if containers == nil {
		containers = containermap.NewContainerMap()
	}
	if err := dpStart(m, k.activePods, ready, containers, running); err != nil {
		t.Fatal(err)
	}
	k.m = m
	t.Cleanup(k.Stop)
	return k
}

func (k *dpKubelet) activePods() []*v1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*v1.Pod(nil), k.pods...)
}

// Stop stops the manager's registration server and plugin clients.
func (k *dpKubelet) Stop() {
	if err := dpStop(k.m); err != nil {
		k.t.Errorf("stopping the device manager: %v", err)
	}
}

// Admit allocates a pod's containers through the manager, as the kubelet's
// admission handler does (init containers first), and returns the first
// app container's run options.
func (k *dpKubelet) Admit(pod *v1.Pod) (*devicemanager.DeviceRunContainerOptions, error) {
	k.mu.Lock()
	k.pods = append(k.pods, pod)
	k.mu.Unlock()
	for i := range pod.Spec.InitContainers {
		if err := dpAllocate(k.m, pod, &pod.Spec.InitContainers[i]); err != nil {
			return nil, err
		}
	}
	for i := range pod.Spec.Containers {
		if err := dpAllocate(k.m, pod, &pod.Spec.Containers[i]); err != nil {
			return nil, err
		}
	}
	return dpRunOptions(k.m, pod, &pod.Spec.Containers[0])
}

// Forget ends a pod: the manager frees its devices on its next sweep.
func (k *dpKubelet) Forget(pod *v1.Pod) {
	k.mu.Lock()
	for i, p := range k.pods {
		if p.UID == pod.UID {
			k.pods = append(k.pods[:i], k.pods[i+1:]...)
			break
		}
	}
	k.mu.Unlock()
	dpUpdateAllocated(k.m)
}

// WaitAllocatable waits until the manager's capacity and allocatable
// both hold want for each resource named: every device healthy.
func (k *dpKubelet) WaitAllocatable(want map[string]int64) {
	k.t.Helper()
	k.WaitCounts(want, want)
}

// WaitCounts waits until the manager's capacity (every device listed) and
// allocatable (the healthy ones) hold what is asked for each resource.
func (k *dpKubelet) WaitCounts(capacity, allocatable map[string]int64) {
	k.t.Helper()
	var last string
	deadline := time.Now().Add(dpWait)
	for {
		c, a, _ := dpCapacity(k.m)
		ok := true
		var got []string
		for name := range capacity {
			rc, ra := c[v1.ResourceName(name)], a[v1.ResourceName(name)]
			got = append(got, fmt.Sprintf("%s capacity %d allocatable %d", name, rc.Value(), ra.Value()))
			ok = ok && rc.Value() == capacity[name] && ra.Value() == allocatable[name]
		}
		sort.Strings(got)
		last = strings.Join(got, ", ")
		if ok {
			return
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("after %v the device manager has %s; want capacity %v, allocatable %v",
				dpWait, last, capacity, allocatable)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Devices is what the manager recorded for a pod's first app container,
// per resource.
func (k *dpKubelet) Devices(pod *v1.Pod) map[string][]string {
	return k.ContainerDevices(pod, pod.Spec.Containers[0].Name)
}

// ContainerDevices is what the manager recorded for one container.
func (k *dpKubelet) ContainerDevices(pod *v1.Pod, container string) map[string][]string {
	out := map[string][]string{}
	for res, devs := range k.m.GetDevices(string(pod.UID), container) {
		for id := range devs {
			out[res] = append(out[res], id)
		}
		sort.Strings(out[res])
	}
	return out
}

func dpPod(uid string, limits map[string]int64) *v1.Pod {
	rl := v1.ResourceList{}
	for name, n := range limits {
		rl[v1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app",
			Resources: v1.ResourceRequirements{Limits: rl, Requests: rl}}}},
	}
}

var dpAll = map[string]int64{"example.com/serial": 2, "example.com/fuse": 4, "example.com/accel": 7}

func TestDevicePluginRegistration(t *testing.T) {
	cases := []struct {
		name    string
		mkdir   bool   // the device-plugin dir is there before the kubelet
		waitLog string // what cdiplug, started first, waits for ("": kubelet first)
	}{
		{name: "kubelet first"},
		{name: "cdiplug first", mkdir: true, waitLog: "kubelet.sock before serving"},
		{name: "cdiplug first on a new node", waitLog: "does not exist yet, waiting for it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dpNeedPrivateKubelet(t)
			if tc.mkdir {
				if err := os.MkdirAll(dpDir, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			d := dpHost(t, dpConfig)
			var k *dpKubelet
			if tc.waitLog == "" {
				k = startDPKubelet(t, dpTopologyStore(nil), nil, nil)
				dpStartDaemon(d)
			} else {
				dpStartDaemon(d)
				d.WaitLog(tc.waitLog, dpWait)
				k = startDPKubelet(t, dpTopologyStore(nil), nil, nil)
			}
			k.WaitAllocatable(dpAll)
			if _, _, gone := dpCapacity(k.m); len(gone) != 0 {
				t.Errorf("the manager lists removed resources %v", gone)
			}
			// The NUMA node of each accel device, as the manager keeps it
			// for the topology manager's hints; none for the others.
			all := dpAllocatableDevices(k.m)
			for res, devs := range all {
				for id, dev := range devs {
					want := -1
					if res == "example.com/accel" {
						want = 0
						if id >= "accel-accel3" {
							want = 1
						}
					}
					got := -1
					if dev.Topology != nil && len(dev.Topology.Nodes) == 1 {
						got = int(dev.Topology.Nodes[0].ID)
					} else if dev.Topology != nil {
						t.Errorf("%s %s: topology %v, want one node or none", res, id, dev.Topology)
					}
					if got != want {
						t.Errorf("%s %s: NUMA node %d, want %d (-1: none)", res, id, got, want)
					}
					if dev.Health != pluginapi.Healthy {
						t.Errorf("%s %s: health %q", res, id, dev.Health)
					}
				}
			}
		})
	}
}

// dpCDICache loads cdiplug's CDI dir with the reference library, failing
// on any spec it refuses.
func dpCDICache(t *testing.T, d *daemon) *cdi.Cache {
	t.Helper()
	c, err := cdi.NewCache(cdi.WithSpecDirs(d.CDIDir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(); err != nil {
		t.Fatalf("the CDI library refuses cdiplug's specs: %v", err)
	}
	for path, errs := range c.GetErrors() {
		t.Errorf("the CDI library refuses %s: %v", path, errs)
	}
	return c
}

// dpCDINames is the set of CDI names in run options (the manager gathers
// them from a map: their order means nothing).
func dpCDINames(opts *devicemanager.DeviceRunContainerOptions) sets.Set[string] {
	names := sets.New[string]()
	for _, c := range opts.CDIDevices {
		names.Insert(c.Name)
	}
	return names
}

// dpShareDevice is the device behind a share's ID ("fuse-2" -> "fuse").
func dpShareDevice(id string) string {
	return id[:strings.LastIndexByte(id, '-')]
}

func TestDevicePluginAllocate(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)

	pod := dpPod("pod-a", map[string]int64{"example.com/serial": 1, "example.com/fuse": 2,
		"example.com/accel": 2})
	opts, err := k.Admit(pod)
	if err != nil {
		t.Fatalf("the device manager could not allocate: %v", err)
	}
	got := k.Devices(pod)
	for res, n := range map[string]int{"example.com/serial": 1, "example.com/fuse": 2, "example.com/accel": 2} {
		if len(got[res]) != n {
			t.Fatalf("the manager recorded %v for %s, want %d IDs", got[res], res, n)
		}
	}
	// The names the runtime gets: one per device (two shares of /dev/fuse
	// are one device), each the resource's CDI kind and the device's name.
	want := sets.New[string]()
	for res, ids := range got {
		for _, id := range ids {
			if res == "example.com/fuse" {
				id = dpShareDevice(id)
			}
			want.Insert(res + "=" + id)
		}
	}
	names := dpCDINames(opts)
	if names.Len() != len(opts.CDIDevices) {
		t.Errorf("CDI devices handed to the runtime twice: %v", opts.CDIDevices)
	}
	if !names.Equal(want) {
		t.Errorf("the container's CDI devices are %v, want %v", sets.List(names), sets.List(want))
	}
	// cdi-cri only: nothing for the runtime to do besides CDI.
	if len(opts.Devices)+len(opts.Mounts)+len(opts.Envs)+len(opts.Annotations) != 0 {
		t.Errorf("run options carry more than CDI devices: %+v", opts)
	}
	cache := dpCDICache(t, d)
	for name := range names {
		dev := cache.GetDevice(name)
		if dev == nil {
			t.Errorf("CDI device %q does not resolve in %s (the library has %v)", name, d.CDIDir,
				cache.ListDevices())
			continue
		}
		id := name[strings.IndexByte(name, '=')+1:]
		wantNode := "/dev/" + strings.ReplaceAll(id, "-", "/")
		nodes := dev.ContainerEdits.DeviceNodes
		if len(nodes) != 1 || nodes[0].Path != wantNode {
			t.Errorf("CDI device %q has nodes %+v, want %s", name, nodes, wantNode)
		}
	}
}

// TestDevicePluginAllocateModes: the answers of the other allocate modes
// as the manager turns them into run options: plain devices, env and
// mounts (device-specs), or CDI annotations that the CDI library parses
// and resolves (cdi-annotations).
func TestDevicePluginAllocateModes(t *testing.T) {
	specs := `{"resources": [{"name": "example.com/serial", "allocate": ["device-specs"],
  "match": [{"path": "/dev/ttyS*", "permissions": "rw", "env": {"SERIAL_KIND": "uart"},
             "mounts": [{"hostPath": "/etc/serial", "containerPath": "/etc/serial", "readOnly": true}]}]}]}`
	annotations := `{"resources": [{"name": "example.com/fuse", "shares": 4,
  "allocate": ["cdi-annotations"], "match": [{"path": "/dev/fuse"}]}]}`
	cases := []struct {
		name, config, res string
		n                 int64
		check             func(t *testing.T, d *daemon, o *devicemanager.DeviceRunContainerOptions)
	}{{
		name: "device-specs", config: specs, res: "example.com/serial", n: 2,
		check: func(t *testing.T, d *daemon, o *devicemanager.DeviceRunContainerOptions) {
			devs := fmt.Sprint(o.Devices)
			if devs != "[{/dev/ttyS0 /dev/ttyS0 rw} {/dev/ttyS1 /dev/ttyS1 rw}]" &&
				devs != "[{/dev/ttyS1 /dev/ttyS1 rw} {/dev/ttyS0 /dev/ttyS0 rw}]" {
				t.Errorf("devices %s, want /dev/ttyS0 and /dev/ttyS1, host paths, rw", devs)
			}
			if fmt.Sprint(o.Envs) != "[{SERIAL_KIND uart}]" {
				t.Errorf("env %v, want SERIAL_KIND=uart once", o.Envs)
			}
			if len(o.Mounts) != 1 || o.Mounts[0].HostPath != "/etc/serial" ||
				o.Mounts[0].ContainerPath != "/etc/serial" || !o.Mounts[0].ReadOnly {
				t.Errorf("mounts %+v, want /etc/serial read-only once", o.Mounts)
			}
			if len(o.CDIDevices)+len(o.Annotations) != 0 {
				t.Errorf("CDI in a device-specs answer: %+v", o)
			}
		},
	}, {
		name: "cdi-annotations", config: annotations, res: "example.com/fuse", n: 2,
		check: func(t *testing.T, d *daemon, o *devicemanager.DeviceRunContainerOptions) {
			ann := map[string]string{}
			for _, a := range o.Annotations {
				ann[a.Name] = a.Value
			}
			_, names, err := cdi.ParseAnnotations(ann)
			if err != nil {
				t.Fatalf("the CDI library cannot parse %v: %v", ann, err)
			}
			if fmt.Sprint(names) != "[example.com/fuse=fuse]" {
				t.Errorf("annotations %v name %v, want example.com/fuse=fuse once", ann, names)
			}
			cache := dpCDICache(t, d)
			for _, n := range names {
				if cache.GetDevice(n) == nil {
					t.Errorf("%q does not resolve", n)
				}
			}
			if len(o.CDIDevices)+len(o.Devices)+len(o.Mounts)+len(o.Envs) != 0 {
				t.Errorf("more than annotations in a cdi-annotations answer: %+v", o)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dpNeedPrivateKubelet(t)
			d := dpHost(t, tc.config)
			k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
			dpStartDaemon(d)
			k.WaitAllocatable(map[string]int64{tc.res: dpAll[tc.res]})
			opts, err := k.Admit(dpPod("pod-"+tc.name, map[string]int64{tc.res: tc.n}))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d, opts)
		})
	}
}

// TestDevicePluginPreferredAllocation: the manager hands the choice among
// free devices to cdiplug's GetPreferredAllocation, whose packed policy
// keeps a container on one NUMA node (and on one shared device). Chance
// alone would pick the same set rarely (1 in 35 for four of seven); each
// case is run three times, freeing the pod between.
func TestDevicePluginPreferredAllocation(t *testing.T) {
	one := bitmask.NewEmptyBitMask()
	if err := one.Add(1); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		hint  *topologymanager.TopologyHint
		res   string
		n     int64
		check func(ids []string) string
	}{{
		// No hint: the manager offers all seven; only node 1 has room for four.
		name: "no hint, four of seven", res: "example.com/accel", n: 4,
		check: func(ids []string) string {
			if strings.Join(ids, ",") != "accel-accel3,accel-accel4,accel-accel5,accel-accel6" {
				return "not the four on NUMA node 1"
			}
			return ""
		},
	}, {
		// A hint for node 1: the manager offers node 1's four; two on it.
		name: "hint node 1, two", res: "example.com/accel", n: 2,
		hint: &topologymanager.TopologyHint{NUMANodeAffinity: one, Preferred: true},
		check: func(ids []string) string {
			for _, id := range ids {
				if id < "accel-accel3" {
					return "a device off NUMA node 1"
				}
			}
			return ""
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dpNeedPrivateKubelet(t)
			d := dpHost(t, dpConfig)
			k := startDPKubelet(t, dpTopologyStore(tc.hint), nil, nil)
			dpStartDaemon(d)
			k.WaitAllocatable(dpAll)
			for round := 0; round < 3; round++ {
				pod := dpPod(fmt.Sprintf("pod-%d", round), map[string]int64{tc.res: tc.n})
				if _, err := k.Admit(pod); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				ids := k.Devices(pod)[tc.res]
				if why := tc.check(ids); why != "" {
					t.Fatalf("round %d: the manager allocated %v: %s", round, ids, why)
				}
				k.Forget(pod)
			}
		})
	}
}

// TestDevicePluginPreferredWithInit: an init container's devices go on to
// the app container, and the manager asks cdiplug for the rest with those
// as must-include: packed keeps the rest beside them. An init container on
// NUMA node 1 (the roomier) and an app container of four must end with all
// four of node 1; chance would do that once in 20, three rounds in a row
// once in 8000.
func TestDevicePluginPreferredWithInit(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)
	for round := 0; round < 3; round++ {
		pod := dpPod(fmt.Sprintf("pod-%d", round), map[string]int64{"example.com/accel": 4})
		one := v1.ResourceList{"example.com/accel": *resource.NewQuantity(1, resource.DecimalSI)}
		pod.Spec.InitContainers = []v1.Container{{Name: "init",
			Resources: v1.ResourceRequirements{Limits: one, Requests: one}}}
		if _, err := k.Admit(pod); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		initIDs := k.ContainerDevices(pod, "init")["example.com/accel"]
		ids := k.Devices(pod)["example.com/accel"]
		if len(initIDs) != 1 || !cdiContains(ids, initIDs[0]) {
			t.Fatalf("round %d: init container got %v, app container %v: the init's device not reused",
				round, initIDs, ids)
		}
		if strings.Join(ids, ",") != "accel-accel3,accel-accel4,accel-accel5,accel-accel6" {
			t.Fatalf("round %d: init container got %v, app container %v: not all on NUMA node 1",
				round, initIDs, ids)
		}
		k.Forget(pod)
	}
}

// TestDevicePluginDaemonRestart: cdiplug stopped (SIGTERM) or killed
// (SIGKILL, its sockets left behind) while the kubelet runs, then started
// again: the manager marks its devices unhealthy, takes the new
// registration on the same sockets, and the running pod keeps its devices.
func TestDevicePluginDaemonRestart(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dpNeedPrivateKubelet(t)
			d := dpHost(t, dpConfig)
			k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
			dpStartDaemon(d)
			k.WaitAllocatable(dpAll)
			pod := dpPod("pod-kept", map[string]int64{"example.com/accel": 2})
			if _, err := k.Admit(pod); err != nil {
				t.Fatal(err)
			}
			held := k.Devices(pod)
			d.Signal(sig)
			_ = d.cmd.Wait()
			k.WaitCounts(dpAll, map[string]int64{"example.com/serial": 0, "example.com/fuse": 0,
				"example.com/accel": 0})
			dpStartDaemon(d)
			k.WaitAllocatable(dpAll)
			if got := k.Devices(pod); fmt.Sprint(got) != fmt.Sprint(held) {
				t.Errorf("after cdiplug's restart the pod holds %v, before %v", got, held)
			}
			pod2 := dpPod("pod-new", map[string]int64{"example.com/accel": 5})
			if _, err := k.Admit(pod2); err != nil {
				t.Fatalf("allocating after cdiplug's restart: %v", err)
			}
		})
	}
}

// TestDevicePluginReloadRemoveAndReturn: a resource a reload removes
// leaves the manager (its stream ends: its devices turn unhealthy); one a
// later reload brings back registers again on the same socket, which the
// 1.37 manager refuses while it still holds a connection to that socket.
func TestDevicePluginReloadRemoveAndReturn(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)
	d.WriteConfig(`{"resources": [
  {"name": "example.com/serial", "match": [{"path": "/dev/ttyS*"}]},
  {"name": "example.com/accel", "match": [{"path": "/dev/accel/accel*"}]}
]}`)
	k.WaitCounts(dpAll, map[string]int64{"example.com/serial": 2, "example.com/fuse": 0,
		"example.com/accel": 7})
	d.WriteConfig(dpConfig)
	k.WaitAllocatable(dpAll)
	pod := dpPod("pod-back", map[string]int64{"example.com/fuse": 1})
	if _, err := k.Admit(pod); err != nil {
		t.Fatalf("allocating from the returned resource: %v", err)
	}
}

func TestDevicePluginPreferredShares(t *testing.T) {
	dpNeedPrivateKubelet(t)
	// Two devices shared four ways: a container asking for two shares gets
	// both on one device under packed, on two under spread. Chance would
	// give one device 3 times in 7.
	for _, policy := range []string{"packed", "spread"} {
		t.Run(policy, func(t *testing.T) {
			dpNeedPrivateKubelet(t)
			d := newDaemon(t, `{"resources": [{"name": "example.com/vf", "shares": 4,
				"policy": "`+policy+`", "match": [{"path": "/dev/vf*"}]}]}`)
			d.Mknod("dev/vf0", 40)
			d.Mknod("dev/vf1", 41)
			k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
			dpStartDaemon(d)
			k.WaitAllocatable(map[string]int64{"example.com/vf": 8})
			for round := 0; round < 3; round++ {
				pod := dpPod(fmt.Sprintf("pod-%d", round), map[string]int64{"example.com/vf": 2})
				if _, err := k.Admit(pod); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				ids := k.Devices(pod)["example.com/vf"]
				same := len(ids) == 2 && dpShareDevice(ids[0]) == dpShareDevice(ids[1])
				if same != (policy == "packed") {
					t.Fatalf("round %d: %s allocated %v", round, policy, ids)
				}
				k.Forget(pod)
			}
		})
	}
}

// TestDevicePluginKubeletRestart restarts the kubelet as it restarts: the
// manager stops, the new one wipes the plugins' sockets from the dir at
// start and reads its checkpoint; cdiplug must notice kubelet.sock come
// back and register again, and the running pod keeps its devices.
func TestDevicePluginKubeletRestart(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)
	pod := dpPod("pod-running", map[string]int64{"example.com/serial": 1, "example.com/fuse": 1,
		"example.com/accel": 3})
	before, err := k.Admit(pod)
	if err != nil {
		t.Fatal(err)
	}
	held := k.Devices(pod)
	k.Stop()

	// The runtime still runs the pod's container across the restart.
	containers := containermap.NewContainerMap()
	containers.Add(string(pod.UID), pod.Spec.Containers[0].Name, "cid-1")
	k2 := startDPKubelet(t, dpTopologyStore(nil), containers, sets.New("cid-1"), pod)
	k2.WaitAllocatable(dpAll)
	if got := k2.Devices(pod); fmt.Sprint(got) != fmt.Sprint(held) {
		t.Errorf("after the restart the pod holds %v, before %v", got, held)
	}
	after, err := dpRunOptions(k2.m, pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if a, b := dpCDINames(after), dpCDINames(before); !a.Equal(b) {
		t.Errorf("after the restart the container's CDI devices are %v, before %v",
			sets.List(a), sets.List(b))
	}
	// Once the kubelet has all its pods, a new pod gets only what the
	// restored one does not hold, and the devices that are left work.
	k2.ready.Store(true)
	pod2 := dpPod("pod-new", map[string]int64{"example.com/serial": 1, "example.com/accel": 4})
	if _, err := k2.Admit(pod2); err != nil {
		t.Fatalf("allocating what the restored pod left: %v", err)
	}
	for res, ids := range k2.Devices(pod2) {
		if overlap := sets.New(ids...).Intersection(sets.New(held[res]...)); overlap.Len() != 0 {
			t.Errorf("%s: %v given to a new pod while the restored pod holds them", res, sets.List(overlap))
		}
	}
}

// TestDevicePluginHotplug: a node made and removed under the host root
// while both run shows in the manager's numbers.
func TestDevicePluginHotplug(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)

	d.Mknod("dev/ttyS2", 3)
	k.WaitAllocatable(map[string]int64{"example.com/serial": 3, "example.com/accel": 7})
	d.NumaNode("dev/accel/accel7", 23, 1)
	k.WaitAllocatable(map[string]int64{"example.com/serial": 3, "example.com/accel": 8})

	pod := dpPod("pod-hot", map[string]int64{"example.com/serial": 3})
	if _, err := k.Admit(pod); err != nil {
		t.Fatalf("allocating the plugged-in device: %v", err)
	}
	k.Forget(pod)

	// A vanished node stays listed, unhealthy: capacity holds, the
	// manager no longer offers it.
	d.Unlink("dev/ttyS0")
	d.Unlink("dev/accel/accel7")
	k.WaitCounts(map[string]int64{"example.com/serial": 3, "example.com/accel": 8},
		map[string]int64{"example.com/serial": 2, "example.com/accel": 7})
	for res, id := range map[string]string{"example.com/serial": "ttyS0", "example.com/accel": "accel-accel7"} {
		if dev := dpAllocatableDevices(k.m)[res][id]; dev != nil {
			t.Errorf("%s %s after its node went away: still allocatable (%+v)", res, id, dev)
		}
	}
	pod = dpPod("pod-after", map[string]int64{"example.com/serial": 2})
	if _, err := k.Admit(pod); err != nil {
		t.Fatal(err)
	}
	if ids := k.Devices(pod)["example.com/serial"]; strings.Join(ids, ",") != "ttyS1,ttyS2" {
		t.Errorf("after ttyS0 went away the pod got %v", ids)
	}

	// Plugged back: the same ID, healthy again.
	d.Mknod("dev/ttyS0", 0)
	k.WaitCounts(map[string]int64{"example.com/serial": 3}, map[string]int64{"example.com/serial": 3})
	if dpAllocatableDevices(k.m)["example.com/serial"]["ttyS0"] == nil {
		t.Errorf("ttyS0 plugged back is not allocatable again")
	}
}

// TestDevicePluginReload: a rewritten config (as a ConfigMap update, and
// by SIGHUP) changes what the manager sees, resource by resource.
func TestDevicePluginReload(t *testing.T) {
	dpNeedPrivateKubelet(t)
	d := dpHost(t, dpConfig)
	k := startDPKubelet(t, dpTopologyStore(nil), nil, nil)
	dpStartDaemon(d)
	k.WaitAllocatable(dpAll)

	// More shares of fuse, a new resource; serial and accel unchanged.
	d.WriteConfig(`{"resources": [
  {"name": "example.com/serial", "match": [{"path": "/dev/ttyS*"}]},
  {"name": "example.com/fuse", "match": [{"path": "/dev/fuse"}], "shares": 8},
  {"name": "example.com/accel", "match": [{"path": "/dev/accel/accel*"}]},
  {"name": "example.com/node0", "match": [{"path": "/dev/accel/accel[012]"}]}
]}`)
	k.WaitAllocatable(map[string]int64{"example.com/serial": 2, "example.com/fuse": 8,
		"example.com/accel": 7, "example.com/node0": 3})
	cache := dpCDICache(t, d)
	for _, name := range []string{"example.com/node0=accel-accel0", "example.com/fuse=fuse"} {
		if cache.GetDevice(name) == nil {
			t.Errorf("after the reload %q does not resolve (the library has %v)", name, cache.ListDevices())
		}
	}

	// Back to the first config with a narrower serial match, and SIGHUP as
	// an operator sends it (the file change alone would do too; a second
	// reload of the same file changes nothing).
	d.WriteConfig(strings.Replace(dpConfig, "/dev/ttyS*", "/dev/ttyS0", 1))
	d.Signal(syscall.SIGHUP)
	k.WaitAllocatable(map[string]int64{"example.com/serial": 1, "example.com/fuse": 4,
		"example.com/accel": 7})
}
